/*
 * Internal declarations of CLegacySDK (not part of the public header).
 *
 * Layout of the implementation:
 *   util.c      mutex/condvar helpers, clock, allocation, random numbers, status strings
 *   behavior.c  behaviour defaults, chaos draws, validation
 *   counters.c  per-client and process-wide counters (C11 atomics)
 *   handles.c   process-wide handle table (slot + generation)
 *   client.c    client shell, worker pool, timer thread, fresh threads, loop thread and posted
 *               jobs, affinity, destroy, session token
 *   ops.c       operations: start, delivery, cancel, pause/resume, context release; listeners
 *   rpc.c       RPC connections: one reply callback per connection, requests matched by id
 *
 * Lifetime rules (the heart of the SDK):
 *  - An operation (lsdk_op) is "in flight" while op->inflight > 0. Every task that can still make a
 *    callback holds one inflight reference, so do the start function while it runs and an idle
 *    operation that still owes work (a request that never completes, a parked or silent stream:
 *    op->hold). When inflight drops to 0 the operation is finished: release_context is called once,
 *    and nothing can ever add work again (additions happen under op->mu and check op->finished).
 *  - Memory of an operation is reference counted separately (op->refs): the client's live list and
 *    the handle table slot each own one, lookups take a temporary one.
 *  - The client shell (struct lsdk_client) is never freed, not even at process exit (other threads
 *    and exit handlers may still call in); its runtime (threads, queues) is freed by destroy once no
 *    operation is live and no API call is inside the client.
 */
#ifndef LSDK_INTERNAL_H
#define LSDK_INTERNAL_H

#include "CLegacySDK.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Utilities (util.c)                                                       */
/* ------------------------------------------------------------------------ */

/** Prints `what` and aborts. Used for broken invariants and failed pthread calls. */
_Noreturn void lsdk_fatal(const char *what, int code);

#define LSDK_CHECK(expr)                                                                           \
    do {                                                                                           \
        int lsdk_check_rc_ = (expr);                                                               \
        if (lsdk_check_rc_ != 0) lsdk_fatal(#expr, lsdk_check_rc_);                                \
    } while (0)

#define LSDK_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) lsdk_fatal("assertion failed: " #cond, 0);                                    \
    } while (0)

/** Error-checking mutex when LSDK_DEBUG is defined, a normal one otherwise. */
void lsdk_mutex_init(pthread_mutex_t *mutex);
void lsdk_mutex_destroy(pthread_mutex_t *mutex);
static inline void lsdk_lock(pthread_mutex_t *mutex) { LSDK_CHECK(pthread_mutex_lock(mutex)); }
static inline void lsdk_unlock(pthread_mutex_t *mutex) { LSDK_CHECK(pthread_mutex_unlock(mutex)); }

/** A condition variable whose timed waits use CLOCK_MONOTONIC. */
void lsdk_cond_init(pthread_cond_t *cond);
void lsdk_cond_destroy(pthread_cond_t *cond);
/** Waits until `deadline_ns` (CLOCK_MONOTONIC) at the latest. */
void lsdk_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns);

uint64_t lsdk_now_ns(void);

/** malloc/calloc that abort on failure (only used after a start succeeded, where no error can be
    reported any more). */
void *lsdk_xmalloc(size_t size);

/** Copies at most 255 bytes of `src` (NULL = "") into `dst[256]`. */
void lsdk_copy_string(char dst[256], const char *src);

/* Random numbers: splitmix64. */
uint64_t lsdk_mix64(uint64_t x);
uint64_t lsdk_rng_next(uint64_t *state);
/** Uniform in [0, bound); bound 0 returns 0. */
uint32_t lsdk_rng_below(uint64_t *state, uint32_t bound);

static inline uint8_t lsdk_content_byte_inline(uint64_t request_id, uint64_t offset) {
    uint64_t x = offset + request_id * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 8));
}

/* ------------------------------------------------------------------------ */
/* Behaviour (behavior.c)                                                   */
/* ------------------------------------------------------------------------ */

/** 2^bits - 1 (all ones for 64 and above; bits below 8 are treated as 8 here, validation rejects them). */
static inline uint64_t lsdk_sequence_mask(uint32_t bits) {
    if (bits >= 64) return UINT64_MAX;
    if (bits < 8) bits = 8;
    return (UINT64_C(1) << bits) - 1;
}

/** LSDK_OK or the first OUT_OF_RANGE / UNKNOWN_ENUM / NO_LOOP_THREAD found, in field order.
    `has_loop`: whether the client has a loop thread (LSDK_DELIVERY_LOOP needs one). */
lsdk_status_t lsdk_behavior_validate(const lsdk_behavior_t *behavior, bool has_loop);

/* ------------------------------------------------------------------------ */
/* Counters (counters.c)                                                    */
/* ------------------------------------------------------------------------ */

/* Every stored counter (handles_outstanding, rpc_requests_pending, rpc_requests_live and
   listener_live are derived when read). */
#define LSDK_COUNTER_LIST(X)                                                                       \
    X(operations_started)                                                                          \
    X(operations_finished)                                                                         \
    X(callbacks_sync)                                                                              \
    X(callbacks_worker)                                                                            \
    X(callbacks_fresh_thread)                                                                      \
    X(callbacks_repeated)                                                                          \
    X(callbacks_after_cancel)                                                                      \
    X(callbacks_reentrant_cancel)                                                                  \
    X(cancels)                                                                                     \
    X(stream_events)                                                                               \
    X(stream_events_dropped_paused)                                                                \
    X(stream_events_after_terminal)                                                                \
    X(stream_pauses)                                                                               \
    X(stream_resumes)                                                                              \
    X(contexts_created)                                                                            \
    X(contexts_released)                                                                           \
    X(handles_created)                                                                             \
    X(handles_released)                                                                            \
    X(threads_created)                                                                             \
    X(bad_calls)                                                                                   \
    X(callbacks_loop)                                                                              \
    X(loop_jobs)                                                                                   \
    X(affinity_violations)                                                                         \
    X(cancels_inside_callback)                                                                     \
    X(cancel_deadlocks)                                                                            \
    X(stream_pauses_by_callback)                                                                   \
    X(blocking_calls)                                                                              \
    X(blocking_calls_interrupted)                                                                  \
    X(blocking_in_flight)                                                                          \
    X(blocking_in_flight_peak)                                                                     \
    X(rpc_connections_created)                                                                     \
    X(rpc_connections_finished)                                                                    \
    X(rpc_requests_sent)                                                                           \
    X(rpc_requests_settled)                                                                        \
    X(rpc_requests_finished)                                                                       \
    X(rpc_replies)                                                                                 \
    X(rpc_replies_out_of_order)                                                                    \
    X(rpc_replies_duplicate)                                                                       \
    X(rpc_replies_unknown_id)                                                                      \
    X(rpc_replies_after_disconnect)                                                                \
    X(rpc_replies_after_cancel)                                                                    \
    X(rpc_replies_discarded)                                                                       \
    X(rpc_cancels)                                                                                 \
    X(rpc_disconnects)                                                                             \
    X(rpc_disconnects_spontaneous)                                                                 \
    X(rpc_dropped_at_disconnect)                                                                   \
    X(listener_starts)                                                                             \
    X(listener_finished)                                                                           \
    X(listener_stops)                                                                              \
    X(listener_ends)                                                                               \
    X(listener_busy)                                                                               \
    X(listener_events)                                                                             \
    X(listener_events_while_paused)                                                                \
    X(listener_pauses)                                                                             \
    X(listener_resumes)

typedef enum lsdk_counter_id {
#define LSDK_COUNTER_ENUM(name) LSDK_COUNTER_##name,
    LSDK_COUNTER_LIST(LSDK_COUNTER_ENUM)
#undef LSDK_COUNTER_ENUM
        LSDK_COUNTER_COUNT
} lsdk_counter_id_t;

typedef struct lsdk_atomic_counters {
    _Atomic uint64_t value[LSDK_COUNTER_COUNT];
} lsdk_atomic_counters_t;

struct lsdk_client;

/** Adds `amount` to a counter of `client` (may be NULL) and to the process-wide one. */
void lsdk_count(struct lsdk_client *client, lsdk_counter_id_t id, uint64_t amount);
/** blocking_in_flight up by one (and its peak) / down by one, per client and process-wide. */
void lsdk_gauge_up(struct lsdk_client *client);
void lsdk_gauge_down(struct lsdk_client *client);
/** Counts a bad call and returns `status` (for `return lsdk_bad_call(client, status);`). */
lsdk_status_t lsdk_bad_call(struct lsdk_client *client, lsdk_status_t status);
void lsdk_counters_read(const lsdk_atomic_counters_t *counters, lsdk_counters_t *out);

/* ------------------------------------------------------------------------ */
/* Tasks, modes and threads                                                 */
/* ------------------------------------------------------------------------ */

/** Where a piece of work is sent. */
typedef enum lsdk_mode {
    LSDK_MODE_SYNC = 0,   /* inline, on the thread that is inside the start function */
    LSDK_MODE_WORKER = 1, /* the client's worker pool */
    LSDK_MODE_FRESH = 2,  /* a freshly created pthread */
    LSDK_MODE_LOOP = 3,   /* the client's loop thread */
} lsdk_mode_t;

/** Where a callback actually runs (decides which counter it moves). */
typedef enum lsdk_where {
    LSDK_WHERE_SYNC = 0,   /* caller's thread inside a start function */
    LSDK_WHERE_WORKER = 1, /* pool worker */
    LSDK_WHERE_FRESH = 2,  /* fresh thread */
    LSDK_WHERE_CANCEL = 3, /* cancelling thread inside lsdk_cancel (or lsdk_client_destroy) */
    LSDK_WHERE_LOOP = 4,   /* the client's loop thread */
} lsdk_where_t;

typedef enum lsdk_task_kind {
    LSDK_TASK_REQUEST = 1, /* deliver the next completion of a request */
    LSDK_TASK_CANCEL,      /* deliver the cancellation completion / END */
    LSDK_TASK_LATE,        /* deliver the late callback after a cancel */
    LSDK_TASK_PRODUCE,     /* run a stream's producer */
    LSDK_TASK_EVENT,       /* deliver one already produced event of a concurrent stream */
    LSDK_TASK_JOB,         /* a job posted with lsdk_client_post (allocated; op is NULL) */
    /* RPC connections (rpc.c; op is NULL, owner names the request or the connection). */
    LSDK_TASK_RPC_REPLY,      /* deliver the next normal reply of a request */
    LSDK_TASK_RPC_REPORT,     /* deliver an asynchronous cancellation or disconnect report */
    LSDK_TASK_RPC_LATE,       /* deliver the late reply after a cancel or a disconnect */
    LSDK_TASK_RPC_DISCONNECT, /* a spontaneous disconnect (allocated; owner is the connection) */
} lsdk_task_kind_t;

/* Flags of an event or completion, decided when it is claimed. */
enum {
    LSDK_EV_AFTER_CANCEL = 1u << 0,   /* made after a cancel took effect (or was ignored) */
    LSDK_EV_AFTER_TERMINAL = 1u << 1, /* produced after the stream's first END */
};

/** A stream event as produced (data bytes are generated when it is delivered). */
typedef struct lsdk_ev {
    int32_t kind;
    lsdk_status_t status;
    /** Production index (0, 1, 2, ... over every numbered event); orders refused pull events. */
    uint64_t index;
    uint64_t sequence;
    uint64_t bytes_done; /* DATA: offset */
    uint64_t bytes_total;
    uint32_t length;
    uint32_t flags;
} lsdk_ev_t;

struct lsdk_op;

/** A unit of work. Tasks are embedded in their operation (at most one of each kind is ever
    outstanding, event tasks at most stream_concurrency), so scheduling never allocates. */
typedef struct lsdk_task {
    struct lsdk_task *next; /* worker queue link */
    struct lsdk_op *op;
    lsdk_task_kind_t kind;
    lsdk_mode_t mode;
    uint64_t due_ns;  /* timer heap key */
    uint64_t order;   /* timer heap tie break (FIFO) */
    lsdk_ev_t ev;     /* LSDK_TASK_EVENT only */
    void (*job)(void *); /* LSDK_TASK_JOB only */
    void *job_context;
    void *owner;      /* LSDK_TASK_RPC_* only */
} lsdk_task_t;

/** Runs a task on the current thread (ops.c). */
void lsdk_task_run(lsdk_task_t *task, lsdk_where_t where);
/** Runs an LSDK_TASK_RPC_* task (rpc.c). */
void lsdk_rpc_task_run(lsdk_task_t *task, lsdk_where_t where);
/** Counts a callback about to be made where `where` says (the thread-kind counters). */
void lsdk_count_where(struct lsdk_client *client, lsdk_where_t where);

/* ------------------------------------------------------------------------ */
/* Client (client.c)                                                        */
/* ------------------------------------------------------------------------ */

#define LSDK_CLIENT_MAGIC 0x4C53444B434C4E54ull /* "LSDKCLNT" */

enum {
    LSDK_CLIENT_ALIVE = 0,
    LSDK_CLIENT_DESTROYING = 1,
    LSDK_CLIENT_DESTROYED = 2, /* a tombstone: only magic, state and counters are used */
};

struct lsdk_runtime;

struct lsdk_client {
    uint64_t magic;
    _Atomic int state;
    lsdk_atomic_counters_t counters;
    _Atomic uint64_t next_request_id;
    /** API calls currently inside the client (start, cancel, pause, resume); destroy waits for 0. */
    _Atomic uint32_t active_calls;
    /** Set while lsdk_client_set_session_token is entered. */
    atomic_flag token_busy;
    uint64_t seed;
    void (*probe)(void *);
    void *probe_context;
    void (*handle_probe)(void *, lsdk_handle_t);
    /** Immutable configuration kept in the shell (readable after destroy). */
    bool has_loop;
    int32_t affinity;
    /** lsdk_thread_id() of the creating thread. */
    uint64_t creator_id;

    /** Guards token, the live lists and the destroy handshake. Never destroyed. */
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    /** LSDK_CANCEL_WAITS cancels wait here (with mutex) for their operation's callbacks to return,
        or for destroy to begin. */
    pthread_cond_t wait_cond;
    /** Blocking calls wait here (with mutex) until their deadline or an interrupt. */
    pthread_cond_t blocking_cond;
    /** Blocking calls blocked now (stack nodes, guarded by mutex). */
    struct lsdk_blocked *blocked;
    char token[256];
    /** Unfinished operations not yet cancelled by destroy / already cancelled by destroy. */
    struct lsdk_op *live;
    struct lsdk_op *swept;
    /** Unfinished operations and RPC connections (destroy waits for 0). */
    size_t live_count;
    /** RPC connections not yet destroyed (rpc.c; linked under mutex). */
    struct lsdk_rpc *rpcs;
    /** Guards `listeners` only: a leaf lock, taken under an operation's mutex. Never destroyed. */
    pthread_mutex_t listen_mutex;
    /** Listeners holding their topic (ops.c). */
    struct lsdk_op *listeners;
    /** Set by destroy (under mutex) once every operation finished and no call is inside: from then
        on lsdk_client_post refuses jobs, and the runtime may be freed. */
    bool closed;

    /** Threads and queues; valid while the client is not DESTROYED. */
    struct lsdk_runtime *runtime;
    /** Tombstone list link (the list keeps destroyed shells reachable, never freed). */
    struct lsdk_client *tombstone_next;
};

/** Enters the client for an API call that may schedule work; false (not entered) when it is not
    alive. */
bool lsdk_client_enter(struct lsdk_client *client);
/** Enters the client whatever its state (cancel/pause/resume on a handle of any client). */
void lsdk_client_enter_any(struct lsdk_client *client);
void lsdk_client_leave(struct lsdk_client *client);

void lsdk_client_live_add(struct lsdk_client *client, struct lsdk_op *op);
void lsdk_client_live_remove(struct lsdk_client *client, struct lsdk_op *op);
/** One more / one less unfinished thing that is not an operation (an RPC connection), under the
    client's mutex, waking destroy as live_add / live_remove do. */
void lsdk_client_live_hold(struct lsdk_client *client);
void lsdk_client_live_release(struct lsdk_client *client);

/** Takes one RPC connection of `client` not yet destroyed off its list (client->mutex held), or
    returns NULL; the caller must then close it with lsdk_rpc_close (rpc.c). */
struct lsdk_rpc *lsdk_rpc_take_open(struct lsdk_client *client);
/** Destroys a connection taken off its client's list, on the destroying thread. */
void lsdk_rpc_close(struct lsdk_rpc *rpc);

/** Sends a task to a worker or a fresh thread, after `delay_us` unless the client is being
    destroyed (then delays are skipped). The task's inflight reference travels with it. */
void lsdk_dispatch(struct lsdk_client *client, lsdk_task_t *task, lsdk_mode_t mode, uint64_t delay_us);

/* Callback frames: which clients' callbacks (and of which operations) the current thread is
   inside of. `op` is NULL for calls into user code that are not operation callbacks
   (release_context, the session-token probe). */
typedef struct lsdk_frame {
    const struct lsdk_client *client;
    const struct lsdk_op *op;
    struct lsdk_frame *previous;
} lsdk_frame_t;

void lsdk_frame_push(lsdk_frame_t *frame, const struct lsdk_client *client, const struct lsdk_op *op);
void lsdk_frame_pop(lsdk_frame_t *frame);
/** Whether the current thread is inside a callback of `op`. */
bool lsdk_in_callback_of(const struct lsdk_op *op);
/** Whether the current thread is inside any call into user code made for `client`. */
bool lsdk_in_client_frame(const struct lsdk_client *client);

/** A small number naming the calling thread for the whole process lifetime (never reused, never 0). */
uint64_t lsdk_thread_id(void);
/** Counts an affinity violation if the calling thread may not call `client` (see LSDK_AFFINITY_*). */
void lsdk_affinity_check(struct lsdk_client *client);

/* ------------------------------------------------------------------------ */
/* Operations (ops.c)                                                       */
/* ------------------------------------------------------------------------ */

void lsdk_op_ref(struct lsdk_op *op);
void lsdk_op_unref(struct lsdk_op *op);
struct lsdk_client *lsdk_op_client(const struct lsdk_op *op);
/** Cancels as lsdk_cancel does; `from_destroy` turns IGNORED into CALLBACK_ASYNC and bypasses the
    once-only rule of user cancels. */
lsdk_status_t lsdk_op_cancel(struct lsdk_op *op, bool from_destroy);

/* Live-list links, used by client.c under client->mutex. */
struct lsdk_op_links {
    struct lsdk_op *previous;
    struct lsdk_op *next;
    bool swept;
};
struct lsdk_op_links *lsdk_op_links(struct lsdk_op *op);

/* ------------------------------------------------------------------------ */
/* Handles (handles.c)                                                      */
/* ------------------------------------------------------------------------ */

/** Allocates a slot owning one memory reference of `op`. RESOURCES on allocation failure. */
lsdk_status_t lsdk_handle_create(struct lsdk_op *op, lsdk_handle_t *out_handle);
/** The operation of a live handle with a new memory reference, or NULL. */
struct lsdk_op *lsdk_handle_acquire(lsdk_handle_t handle);
/** Frees the slot; returns the operation whose reference the caller now owns, or NULL. */
struct lsdk_op *lsdk_handle_remove(lsdk_handle_t handle);

#endif /* LSDK_INTERNAL_H */
