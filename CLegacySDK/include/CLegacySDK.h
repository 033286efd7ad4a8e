/*
 * CLegacySDK — a deliberately hostile callback SDK, for testing adapters.
 *
 * Plain C11 + pthreads. Every behaviour that real callback SDKs exhibit in
 * production (synchronous callbacks, repeated callbacks, callbacks from
 * arbitrary threads, callbacks that never come, re-entrant cancellation,
 * late callbacks after cancel, out-of-order streams) can be switched on per
 * operation, reproducibly from a seed, and counters prove what happened.
 *
 * Threading: every function is thread-safe unless its comment says
 * otherwise. No SDK lock is held while a callback runs, so a callback may
 * call any SDK function, including lsdk_cancel on its own operation (but not
 * lsdk_client_destroy of its own client: LSDK_ERR_WRONG_THREAD). Callbacks of
 * one operation may overlap: a CALLBACK_SYNC cancel delivers on the
 * cancelling thread while another callback of the operation may be running,
 * and concurrent streams deliver from several threads at once.
 *
 * Thread affinity (lsdk_client_config_t.affinity): a client can demand that
 * every call naming it or one of its operations comes from one thread (the
 * thread that created it, or its loop thread), as libcurl, c-ares, sqlite
 * connections and GUI toolkits do. The SDK counts each call from another
 * thread in affinity_violations and still performs it, memory-safely, so a
 * test can prove an adapter never breaks the rule. See "Loop thread and
 * affinity" below.
 *
 * Ownership: on any status other than LSDK_OK a start function makes no
 * callback and does not call release_context: the context is still yours.
 * On LSDK_OK, release_context (if not NULL) is called exactly once, after
 * the last callback the SDK will ever make for that operation (late and
 * repeated ones included); with synchronous delivery that can be before the
 * start function returns.
 */
#ifndef CLEGACYSDK_H
#define CLEGACYSDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef int32_t lsdk_status_t;

enum {
    LSDK_OK = 0,
    /** A required pointer argument (client, callback, out parameter) was NULL. */
    LSDK_ERR_NULL_ARGUMENT = 1,
    /** A numeric field of a behaviour, request or config is outside its documented range. */
    LSDK_ERR_OUT_OF_RANGE = 2,
    /** An enum-valued field holds a value that is not one of its constants. */
    LSDK_ERR_UNKNOWN_ENUM = 3,
    /** The client was destroyed (or is being destroyed). */
    LSDK_ERR_CLIENT_DESTROYED = 4,
    /** The handle is 0, was never issued, or was already released. */
    LSDK_ERR_INVALID_HANDLE = 5,
    /** Delivered to the callbacks of an operation that was cancelled. */
    LSDK_ERR_CANCELLED = 6,
    /** The default injected failure: the simulated remote end refused. */
    LSDK_ERR_REMOTE = 7,
    /** A call documented as not thread-safe was entered concurrently. */
    LSDK_ERR_BUSY = 8,
    /** lsdk_client_destroy was called from one of the client's own threads. */
    LSDK_ERR_WRONG_THREAD = 9,
    /** Memory or thread creation failed. */
    LSDK_ERR_RESOURCES = 10,
    /** pause/resume on a handle that is not a stream. */
    LSDK_ERR_NOT_A_STREAM = 11,
    /** lsdk_client_post or LSDK_DELIVERY_LOOP on a client created without a loop thread
        (lsdk_client_config_t.loop_thread false). */
    LSDK_ERR_NO_LOOP_THREAD = 12,
    /** A blocking call was ended early by lsdk_interrupt (or by lsdk_client_destroy). */
    LSDK_ERR_INTERRUPTED = 13,
    /** lsdk_interrupt found no call blocked with that key (nothing was changed). */
    LSDK_ERR_NOT_BLOCKED = 14,
    /** Delivered to the reply callback for every request a disconnect dropped (lsdk_rpc_*). */
    LSDK_ERR_DISCONNECTED = 15,
    /** lsdk_rpc_send with a caller-chosen id that is still pending on the connection. */
    LSDK_ERR_DUPLICATE_ID = 16,
    /** lsdk_rpc_cancel found no pending request with that id (nothing was changed). */
    LSDK_ERR_UNKNOWN_ID = 17,
    /** lsdk_listen_start on a topic that already has a listener on the client. */
    LSDK_ERR_ALREADY_LISTENING = 18,
};

/** A readable, static, never-NULL description of any status (unknown ones included). */
const char *lsdk_status_string(lsdk_status_t status);

/* ------------------------------------------------------------------------ */
/* Behaviour                                                                */
/* ------------------------------------------------------------------------ */

/** Where callbacks are delivered (lsdk_behavior_t.delivery). */
enum {
    /** On the caller's thread, inside the start function, before it returns. Delays and
        intervals are ignored. Callbacks that cannot happen inside start (an asynchronous
        cancellation, a late callback) come from a worker. */
    LSDK_DELIVERY_SYNC = 0,
    /** On one of the client's pool worker threads. */
    LSDK_DELIVERY_WORKER = 1,
    /** On a freshly created pthread, one per callback. */
    LSDK_DELIVERY_FRESH_THREAD = 2,
    /** Each callback draws one of SYNC, WORKER and FRESH_THREAD from the operation's seed
        (synchronous only for callbacks that can still happen inside start, and never for the
        events of a stream with stream_concurrency > 1). Never LOOP. */
    LSDK_DELIVERY_MIXED = 3,
    /** On the client's loop thread (lsdk_client_config_t.loop_thread; a start on a client without
        one fails with LSDK_ERR_NO_LOOP_THREAD). Every callback of the operation runs there,
        asynchronous cancellations and late callbacks included, one at a time and never inside the
        start function, interleaved in FIFO order with posted jobs (lsdk_client_post). Two
        exceptions, as documented on them: a CALLBACK_SYNC cancellation runs on the cancelling
        thread (the loop thread when the client's affinity is respected), and one made by
        lsdk_client_destroy runs on the destroying thread. A stream goes back to the queue after
        every event, so jobs posted meanwhile run between its events. With stream_concurrency > 1
        the events of a batch are still shuffled (they arrive out of order, within
        stream_concurrency), but one thread delivers them, so they never run concurrently. */
    LSDK_DELIVERY_LOOP = 4,
};

/** Outcome of the i-th completion of a request (lsdk_behavior_t.outcomes). */
enum {
    LSDK_OUTCOME_SUCCESS = 0,
    LSDK_OUTCOME_ERROR = 1,
};

/** What lsdk_cancel does to an operation that has not finished (lsdk_behavior_t.cancel_mode).
    A cancel takes effect only while the operation still has normal callbacks to make (a request
    with completions not yet started, one with completion_count 0, a stream whose events are not
    all produced, a silent stream); afterwards it is harmless and changes nothing. Once a cancel
    took effect, normal callbacks not yet started are dropped (a stream's sequence numbers may then
    have gaps); a callback already running finishes. */
enum {
    /** Delivers an LSDK_ERR_CANCELLED completion synchronously inside lsdk_cancel, on the
        cancelling thread (re-entrant when cancel is called from a callback). */
    LSDK_CANCEL_CALLBACK_SYNC = 0,
    /** Delivers an LSDK_ERR_CANCELLED completion later, from a worker thread. */
    LSDK_CANCEL_CALLBACK_ASYNC = 1,
    /** Stops the operation and delivers nothing more. */
    LSDK_CANCEL_SILENT = 2,
    /** Cancel is ignored: the operation goes on and completes normally (its callbacks count as
        callbacks_after_cancel; no late callback). An operation that never completes by itself
        then only ends when its client is destroyed. */
    LSDK_CANCEL_IGNORED = 3,
    /** The common strict contract "after cancel returns, no callback runs": the operation stops and
        delivers nothing more (not even a callback already claimed but not yet started: it is
        dropped; late_callback_after_cancel does not apply), and lsdk_cancel blocks until no callback
        of the operation is running on any thread, then returns. Every call waits, not only the one
        that took effect (a second cancel also returns only once the callbacks have returned).
        Called from inside one of the operation's own callbacks it deadlocks, as a real SDK would:
        the call is counted in cancel_deadlocks and blocks until the client's destroy begins
        (lsdk_client_destroy wakes every waiting cancel on a thread that is inside one of its
        callbacks, so it can finish the operation and join its threads; it then returns LSDK_OK).
        A waiting cancel on a thread outside the client's callbacks keeps waiting until the
        callbacks have returned, also during destroy. lsdk_behavior_init_chaos never draws it: a
        chaos run would otherwise deadlock whenever an adapter cancels from a callback. */
    LSDK_CANCEL_WAITS = 4,
};

/** How a stream ends (lsdk_behavior_t.stream_end). */
enum {
    LSDK_STREAM_END_SUCCESS = 0,
    LSDK_STREAM_END_ERROR = 1,
    /** No terminal event: the stream delivers its data and then goes silent. The operation stays
        in flight (its context is not released) until it is cancelled or its client destroyed;
        duplicate_terminal and events_after_terminal do not apply. */
    LSDK_STREAM_END_NONE = 2,
};

/** What a stream does while paused (lsdk_behavior_t.pause_mode). */
enum {
    /** No new events are produced while paused (events already being delivered may arrive). */
    LSDK_PAUSE_STOPS = 0,
    /** A live source: events keep being generated on schedule and are dropped while paused
        (counted in stream_events_dropped_paused; their sequence numbers are used up). Only data
        and progress events before the terminal are dropped: the END and what follows it are
        always delivered. */
    LSDK_PAUSE_DROPS = 1,
};

#define LSDK_MAX_COMPLETIONS 8
#define LSDK_MAX_DELAY_US 10000000u       /* 10 s */
#define LSDK_MAX_CHUNK_SIZE (1u << 20)    /* 1 MiB */
#define LSDK_MAX_STREAM_CONCURRENCY 8u
#define LSDK_MAX_EVENTS_AFTER_TERMINAL 16u
#define LSDK_MAX_WORKER_THREADS 64u
#define LSDK_MAX_BLOCKING_US 60000000u    /* 60 s */

/**
 * Per-operation behaviour. Always start from lsdk_behavior_init (or
 * lsdk_behavior_init_chaos) and then change fields: that keeps code working
 * when fields are added. Every field is validated by the start functions.
 */
typedef struct lsdk_behavior {
    /** LSDK_DELIVERY_*. Default LSDK_DELIVERY_WORKER. */
    int32_t delivery;
    /** Delay before each delivery, microseconds, 0...LSDK_MAX_DELAY_US. Default 0.
        Requests: before each completion. Streams: before the first event (interval_us spaces the
        others). Also before an asynchronous cancellation and a late callback. */
    uint32_t delay_us;
    /** Extra random delay 0...jitter_us drawn per delivery, 0...LSDK_MAX_DELAY_US. Default 0. */
    uint32_t jitter_us;

    /** Requests: how many completions, 0 (never calls back) ... LSDK_MAX_COMPLETIONS. Default 1.
        With 0 the operation stays in flight (its context is not released) until it is cancelled
        or its client destroyed. Each completion is scheduled after the previous one returned. */
    uint32_t completion_count;
    /** Requests: LSDK_OUTCOME_* of the i-th completion, for i < completion_count. Default all SUCCESS.
        Each success carries a response whose `attempt` is i + 1, so repeats are distinguishable. */
    int32_t outcomes[LSDK_MAX_COMPLETIONS];

    /** LSDK_CANCEL_*. Default LSDK_CANCEL_CALLBACK_ASYNC. */
    int32_t cancel_mode;
    /** After a cancel takes effect, one more callback arrives later from a worker thread
        (requests: a success completion, after the cancellation completion if any, with the next
        attempt number; streams: a data event with the next sequence number). Not with
        LSDK_CANCEL_IGNORED. Default false. */
    bool late_callback_after_cancel;

    /** Streams: bytes per data event, 1...LSDK_MAX_CHUNK_SIZE. Default 4096. */
    uint32_t chunk_size;
    /** Streams: a progress event after every n-th data event; 0 = no progress events. Default 1. */
    uint32_t progress_every;
    /** Streams: pause between producing consecutive events (between batches when
        stream_concurrency > 1), microseconds, 0...LSDK_MAX_DELAY_US. Default 0. */
    uint32_t interval_us;
    /** Streams: 1 = events delivered in order from one thread at a time; 2...LSDK_MAX_STREAM_CONCURRENCY =
        up to that many events of the stream are delivered at once from different threads, so they
        can arrive out of order (never more than this many sequence numbers apart). Default 1.
        Events are produced in batches of up to this many, handed out in a seeded shuffled order;
        a batch starts once every event of the previous one was delivered. So when the event with
        sequence s arrives, every event with a sequence <= s - stream_concurrency has arrived
        (or was dropped). An END (the terminal and its duplicate) is always a batch of its own:
        every event produced before it was delivered or dropped before it is, and every event
        after it comes after it. Only the cancellation END of a CALLBACK_SYNC cancel can overlap
        events still being delivered. */
    uint32_t stream_concurrency;
    /** Streams: LSDK_STREAM_END_*. Default LSDK_STREAM_END_SUCCESS. */
    int32_t stream_end;
    /** Streams: deliver the terminal event twice. Default false. */
    bool duplicate_terminal;
    /** Streams: data events delivered after the terminal, 0...LSDK_MAX_EVENTS_AFTER_TERMINAL. Default 0.
        Their bytes continue past the end of the content (offset total_bytes, total_bytes +
        chunk_size, ...). */
    uint32_t events_after_terminal;
    /** Streams: LSDK_PAUSE_*. Default LSDK_PAUSE_STOPS. */
    int32_t pause_mode;

    /** Status carried by ERROR outcomes and error stream ends: any value except LSDK_OK and
        LSDK_ERR_CANCELLED (OUT_OF_RANGE), unknown ones included. Default LSDK_ERR_REMOTE. */
    lsdk_status_t error_status;
    /** Message carried by errors (copied by the start function; at most 255 bytes are kept).
        NULL = a default message. */
    const char *error_message;

    /** Seed for every random choice of the operation; 0 = derived from the client's seed and
        the operation's number, so a whole run is reproducible from the client's seed. */
    uint64_t seed;

    /* Hostile sequence numbers (streams). Every event of a stream (every kind, dropped ones, the
       cancellation END and the late callback included) has a production index i = 1, 2, 3, ...
       Its sequence number is
           (first_sequence + (i - 1) + (sequence_jump_at != 0 && i > sequence_jump_at ? sequence_jump : 0))
           modulo 2^sequence_bits,
       except the corrupted data event below. The defaults give today's 0, 1, 2, ... Offsets
       (bytes_done) and data always stay truthful, so a consumer can still verify every byte.
       lsdk_behavior_init_chaos leaves all of these at their defaults: a consumer has to opt in to
       a numbering rule, and chaos runs are shared by adapters that assume plain numbering. */
    /** Number of the first event; must be < 2^sequence_bits (OUT_OF_RANGE, checked after
        sequence_bits itself). Default 0. A start near
        the top wraps through the largest value to 0 (UINT64_MAX, then 0 with 64 bits). */
    uint64_t first_sequence;
    /** Width of the sender's counter, 8...64 (OUT_OF_RANGE). Default 64. A 32-bit counter carried
        in the 64-bit field wraps to 0 after 2^32 - 1. */
    uint32_t sequence_bits;
    /** After the event with index sequence_jump_at (1-based; 0 = never), numbering jumps ahead by
        sequence_jump (modulo 2^sequence_bits): a real discontinuity, later events continue from
        there. Any values. Defaults 0. */
    uint64_t sequence_jump_at;
    uint64_t sequence_jump;
    /** The sequence_corrupt_at-th data chunk (1-based, counting the content's data events in
        production order; not after-terminal or late data; 0 = none) carries
        sequence_corrupt_value instead of its number, as it is (not reduced to sequence_bits), e.g.
        UINT64_MAX (the usual (uint64_t)-1 sentinel) or a far-ahead number. It still uses up its
        index: numbering continues normally after it. If it is dropped (PAUSE_DROPS) the garbage is
        dropped with it. Any values. Defaults 0. */
    uint64_t sequence_corrupt_at;
    uint64_t sequence_corrupt_value;
} lsdk_behavior_t;

/** Fills `behavior` with the defaults documented on each field. NULL is ignored. */
void lsdk_behavior_init(lsdk_behavior_t *behavior);

/** Fills `behavior` with every knob drawn from `seed` (delivery, delays up to 2 ms, repeats,
    outcomes, cancel mode, late callbacks, stream shape and concurrency). Always valid input for
    both start functions on any client: delivery is never LOOP, cancel_mode never WAITS. The same seed gives the same behaviour. NULL is ignored.
    Chaos keeps operations short: delay + jitter <= 2 ms, intervals <= 100 us, chunks of
    1...16 KiB (so a 64 KiB download is at most 64 data events), and an operation that never ends
    by itself (completion_count 0 or STREAM_END_NONE) never has LSDK_CANCEL_IGNORED, so a cancel
    always ends it. error_message is NULL; seed is set (non-zero) from `seed`. */
void lsdk_behavior_init_chaos(lsdk_behavior_t *behavior, uint64_t seed);

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct lsdk_client lsdk_client_t;

/** A reference-counted operation handle. 0 is never a valid handle. A handle value is never
    issued twice in a process, so a stale one (released, or of a finished operation) can never name
    another operation: it is rejected with LSDK_ERR_INVALID_HANDLE. */
typedef uint64_t lsdk_handle_t;
#define LSDK_INVALID_HANDLE ((lsdk_handle_t)0)

/** Which threads may call a client (lsdk_client_config_t.affinity).
 *
 * Calls covered: lsdk_request_start, lsdk_download_start, lsdk_download_start_pull,
 * lsdk_listen_start, lsdk_cancel, lsdk_pause, lsdk_resume (on handles of the client's operations),
 * lsdk_client_set_session_token, lsdk_client_get_session_token, lsdk_blocking_call, and every
 * lsdk_rpc_* call on the client's connections. A covered call from another thread is
 * counted in affinity_violations (per client and process-wide), whatever it then returns, and is
 * still performed as if it came from the right thread.
 *
 * Not covered, on purpose:
 *  - lsdk_client_post: it is how other threads reach the loop thread (like a GUI toolkit's
 *    "invoke later" or curl_multi_wakeup);
 *  - lsdk_interrupt: the thread it must reach is the one blocked in the call;
 *  - lsdk_client_destroy: it is refused on the client's own threads (WRONG_THREAD), and the
 *    loop thread is one of them;
 *  - lsdk_handle_release, lsdk_client_counters, lsdk_global_counters, lsdk_content_byte,
 *    lsdk_blocking_result, lsdk_client_is_loop_thread: they touch no client state a single-threaded
 *    SDK would guard (reference counts and atomics), so a wrapper may drop references and read
 *    statistics from wherever it is (a Swift deinit runs on whatever thread drops the last
 *    reference). */
enum {
    /** Any thread may call (default). */
    LSDK_AFFINITY_ANY = 0,
    /** Only the thread that called lsdk_client_create. Threads are told apart by an identity the
        SDK gives each thread the first time it calls in, so a new thread that happens to reuse an
        exited creator's pthread_t is still another thread. */
    LSDK_AFFINITY_CREATOR = 1,
    /** Only the client's loop thread (requires loop_thread; otherwise lsdk_client_create fails
        with LSDK_ERR_OUT_OF_RANGE). Reach it with lsdk_client_post. */
    LSDK_AFFINITY_LOOP = 2,
};

typedef struct lsdk_client_config {
    /** Pool worker threads, 1...LSDK_MAX_WORKER_THREADS. Default 4. */
    uint32_t worker_threads;
    /** Seed from which per-operation seeds are derived. Default 0. */
    uint64_t seed;
    /** Test probe: called (if not NULL) inside lsdk_client_set_session_token while it is entered,
        so a test can prove concurrent entry is detected without guessing a schedule. */
    void (*session_token_probe)(void *probe_context);
    void *probe_context;
    /** The client runs one dedicated loop thread (like libcurl multi's or a GUI main loop):
        jobs posted with lsdk_client_post and callbacks of LSDK_DELIVERY_LOOP operations run
        there, in FIFO order. Default false. */
    bool loop_thread;
    /** LSDK_AFFINITY_*. Default LSDK_AFFINITY_ANY. */
    int32_t affinity;
    /** Test probe: called (if not NULL, with probe_context) on the starting thread inside every
        successful start function, right after the new handle became valid and before any work of
        the operation is scheduled, so a test can act on the handle at the earliest moment another
        thread could (for example release or cancel it) without guessing a schedule. */
    void (*handle_probe)(void *probe_context, lsdk_handle_t handle);
} lsdk_client_config_t;

/** Fills `config` with the defaults. NULL is ignored. */
void lsdk_client_config_init(lsdk_client_config_t *config);

/**
 * Creates a client with its worker pool, timer thread and (if configured) loop thread. The calling
 * thread becomes the client's creator (LSDK_AFFINITY_CREATOR).
 * `config` may be NULL (defaults). Errors: NULL_ARGUMENT (out_client), OUT_OF_RANGE (worker_threads,
 * or LSDK_AFFINITY_LOOP without loop_thread), UNKNOWN_ENUM (affinity), RESOURCES.
 */
lsdk_status_t lsdk_client_create(const lsdk_client_config_t *config, lsdk_client_t **out_client);

/**
 * Destroys a client. Operations in flight are cancelled as by lsdk_cancel, except that a cancel
 * that would be IGNORED is treated as CALLBACK_ASYNC, one that WAITS as SILENT (destroy waits for
 * everything anyway), and all remaining delays are skipped; every callback their behaviour
 * prescribes (late ones included) is made and every context released before this returns. Every
 * blocked lsdk_blocking_call returns LSDK_ERR_INTERRUPTED at once, and every LSDK_CANCEL_WAITS
 * cancel waiting on a thread that is inside one of the client's callbacks returns (the deadlock
 * of a cancel that waits for its own callback ends here; see LSDK_CANCEL_WAITS). Jobs posted to
 * the loop thread and still queued are run before this returns (a job posted while they run is
 * refused with CLIENT_DESTROYED). Every RPC connection not yet destroyed is destroyed as by
 * lsdk_rpc_destroy, and this waits until each finished (its set released). Threads are joined. A
 * CALLBACK_SYNC cancellation, and a SYNC disconnect report of a connection, is delivered on the
 * calling thread, inside this function.
 * The pointer stays safe to pass afterwards: every call then returns LSDK_ERR_CLIENT_DESTROYED,
 * except lsdk_client_counters, which keeps working. Handles of its operations stay valid until
 * released (and must still be released); cancel/pause/resume on them are harmless no-ops.
 * Errors: NULL_ARGUMENT, CLIENT_DESTROYED (second destroy), WRONG_THREAD (called from one of the
 * client's own threads, e.g. inside a callback: nothing is done).
 */
lsdk_status_t lsdk_client_destroy(lsdk_client_t *client);

/**
 * Sets the client-wide session token (copied; at most 255 bytes kept; NULL clears it).
 * NOT THREAD-SAFE: callers must serialise every call for a client. Concurrent entry is detected
 * and the losing call returns LSDK_ERR_BUSY without changing anything.
 * The config's session_token_probe (if set) is called on the calling thread while it is entered.
 * Errors: NULL_ARGUMENT, BUSY, CLIENT_DESTROYED.
 */
lsdk_status_t lsdk_client_set_session_token(lsdk_client_t *client, const char *token);

/** Copies the current session token (NUL-terminated, truncated to capacity; "" when none) into
    `buffer`. Thread-safe. Errors: NULL_ARGUMENT (client, buffer), OUT_OF_RANGE (capacity 0),
    CLIENT_DESTROYED. */
lsdk_status_t lsdk_client_get_session_token(lsdk_client_t *client, char *buffer, size_t capacity);

/* ------------------------------------------------------------------------ */
/* Loop thread and affinity                                                 */
/* ------------------------------------------------------------------------ */

/**
 * Runs job(job_context) on the client's loop thread, after every job and LOOP callback queued
 * before it (FIFO), and never inside this call, also when it is called on the loop thread itself.
 * Callable from any thread (not covered by affinity), inside callbacks and jobs included. On
 * LSDK_OK the job runs exactly once: jobs still queued when the client is destroyed are run before
 * lsdk_client_destroy returns, so a context a job holds is always released by it. Jobs are
 * accepted until destroy has finished every operation; after that (and inside the jobs destroy
 * drains) the call fails with CLIENT_DESTROYED. Counted in loop_jobs when the job starts.
 * On any error the job is not run and job_context is still yours.
 * Errors, in this order: NULL_ARGUMENT (client), CLIENT_DESTROYED, NULL_ARGUMENT (job), NO_LOOP_THREAD,
 * RESOURCES.
 */
lsdk_status_t lsdk_client_post(lsdk_client_t *client, void (*job)(void *job_context), void *job_context);

/** Whether the calling thread is `client`'s loop thread. False for NULL, for a client without a
    loop thread, and after destroy returned. Not covered by affinity. */
bool lsdk_client_is_loop_thread(const lsdk_client_t *client);

/* ------------------------------------------------------------------------ */
/* Blocking calls                                                           */
/* ------------------------------------------------------------------------ */

/**
 * A call that blocks the calling thread, like a connect, an open, a flush or a synchronous query.
 * Blocks for duration_us (0...LSDK_MAX_BLOCKING_US; 0 returns at once), then writes
 * lsdk_blocking_result(call_key) to *out_result and returns LSDK_OK. lsdk_interrupt with the same
 * key makes it return at once with LSDK_ERR_INTERRUPTED, and so does lsdk_client_destroy; then
 * *out_result is not written. Keys need not be unique: an interrupt ends every call blocked with
 * its key. Callable from any thread, inside callbacks and jobs included (it then blocks that SDK
 * thread, as a real SDK would). Covered by affinity. Counted in blocking_calls (when it starts
 * blocking), blocking_in_flight / blocking_in_flight_peak while it blocks, and
 * blocking_calls_interrupted.
 * Errors, in this order: NULL_ARGUMENT (client), CLIENT_DESTROYED (also when destroy began before
 * the call could block), NULL_ARGUMENT (out_result), OUT_OF_RANGE (duration), INTERRUPTED.
 */
lsdk_status_t lsdk_blocking_call(lsdk_client_t *client, uint64_t call_key, uint32_t duration_us,
                                 uint64_t *out_result);

/**
 * Makes every lsdk_blocking_call currently blocked on `client` with `call_key` return at once with
 * LSDK_ERR_INTERRUPTED. Not covered by affinity (the thread it must reach is the blocked one).
 * An interrupt is not remembered: one that finds no call blocked with its key (the call has not
 * started blocking yet, or already returned) changes nothing and returns LSDK_ERR_NOT_BLOCKED,
 * which is not counted as a bad call (it is the ordinary race of an interrupt with the end of the
 * call). A call that was already interrupted but has not yet returned still counts as blocked.
 * Errors: NULL_ARGUMENT, CLIENT_DESTROYED (destroy began: it interrupts every call itself),
 * NOT_BLOCKED.
 */
lsdk_status_t lsdk_interrupt(lsdk_client_t *client, uint64_t call_key);

/** The result of a completed blocking call with `call_key`: the splitmix64 finaliser of
    (call_key XOR 0x424C4F434B494E47), that is, with x = call_key ^ 0x424C4F434B494E47:
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9; x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31. */
uint64_t lsdk_blocking_result(uint64_t call_key);

/* ------------------------------------------------------------------------ */
/* Handles                                                                  */
/* ------------------------------------------------------------------------ */

/* lsdk_handle_t is declared with the client, which refers to it. */

/**
 * Cancels the operation. Idempotent (only the first call takes effect), thread-safe, callable from
 * inside any callback of the same operation (counted in cancels_inside_callback; with
 * LSDK_CANCEL_WAITS that deadlocks, see there); harmless after the operation finished (returns
 * LSDK_OK). What happens depends on the behaviour's cancel_mode. Errors: INVALID_HANDLE.
 * Bad calls on handles (INVALID_HANDLE) are counted in the process-wide bad_calls only.
 */
lsdk_status_t lsdk_cancel(lsdk_handle_t handle);

/** Stops producing new events of a stream (see lsdk_behavior_t.pause_mode). Idempotent; a no-op
    on a finished or cancelled stream. Errors: INVALID_HANDLE, NOT_A_STREAM. */
lsdk_status_t lsdk_pause(lsdk_handle_t handle);

/** Resumes a paused stream. Idempotent; a no-op on a finished stream.
    Errors: INVALID_HANDLE, NOT_A_STREAM. */
lsdk_status_t lsdk_resume(lsdk_handle_t handle);

/** Drops the caller's reference. Every handle returned by a start function must be released
    exactly once; a second release returns LSDK_ERR_INVALID_HANDLE and does nothing. */
lsdk_status_t lsdk_handle_release(lsdk_handle_t handle);

/** Called once per operation, after the SDK's last use of the context. */
typedef void (*lsdk_release_fn)(void *context);

/* ------------------------------------------------------------------------ */
/* One-shot requests                                                        */
/* ------------------------------------------------------------------------ */

typedef struct lsdk_request {
    /** Resource name, copied (at most 255 bytes kept). May be NULL. */
    const char *path;
    /** Size of the response body, 0...LSDK_MAX_CHUNK_SIZE. */
    uint32_t response_size;
} lsdk_request_t;

/** Valid only during the callback: the SDK overwrites and frees it afterwards. */
typedef struct lsdk_response {
    /** The operation's number within its client, starting at 1. */
    uint64_t request_id;
    /** Which completion this is (1 for the first; repeats count up). The cancellation and the
        late completion continue the count. */
    uint32_t attempt;
    /** Body bytes: body[i] == lsdk_content_byte(request_id, i). NULL when body_length is 0. */
    const uint8_t *body;
    size_t body_length;
    /** For errors: the message; for success: the request path. Never NULL. */
    const char *message;
} lsdk_response_t;

/** status is LSDK_OK for a success; `response` is never NULL. */
typedef void (*lsdk_completion_fn)(void *context, lsdk_status_t status, const lsdk_response_t *response);

/**
 * Starts a request. `request` and `behavior` may be NULL (defaults); both are copied.
 * `release_context` may be NULL. `out_handle` may be NULL (then the SDK releases the handle itself);
 * otherwise the handle is written there when this returns (after any synchronous callbacks ran) and
 * must be released with lsdk_handle_release.
 * Errors (no callback, no release_context call): NULL_ARGUMENT (client, completion), OUT_OF_RANGE,
 * UNKNOWN_ENUM, CLIENT_DESTROYED, RESOURCES. Checked in this order: client NULL, client destroyed,
 * callback NULL, behaviour fields in declaration order, request fields.
 */
lsdk_status_t lsdk_request_start(lsdk_client_t *client, const lsdk_request_t *request,
                                 const lsdk_behavior_t *behavior, lsdk_completion_fn completion,
                                 void *context, lsdk_release_fn release_context,
                                 lsdk_handle_t *out_handle);

/* ------------------------------------------------------------------------ */
/* Streaming downloads                                                      */
/* ------------------------------------------------------------------------ */

enum {
    /** bytes_done / bytes_total; sequence numbered like data. */
    LSDK_EVENT_PROGRESS = 1,
    /** data / length: bytes [offset, offset + length) of the content. */
    LSDK_EVENT_DATA = 2,
    /** Terminal: status LSDK_OK (success), an error, or LSDK_ERR_CANCELLED. */
    LSDK_EVENT_END = 3,
};

/** Valid only during the callback. */
typedef struct lsdk_event {
    int32_t kind;
    /** Per-operation sequence number: 0, 1, 2, ... in production order, over every kind (unless the
        behaviour's sequence knobs make it start elsewhere, wrap, jump or carry garbage). */
    uint64_t sequence;
    /** PROGRESS: bytes produced so far (dropped ones included); DATA: offset of the first byte;
        END: bytes produced before it. */
    uint64_t bytes_done;
    uint64_t bytes_total;
    /** DATA only: data[i] == lsdk_content_byte(request_id, offset + i). */
    const uint8_t *data;
    size_t length;
    /** END only. */
    lsdk_status_t status;
    /** END with an error: the message; otherwise "". Never NULL. */
    const char *message;
    /** The operation's number within its client. */
    uint64_t request_id;
} lsdk_event_t;

typedef void (*lsdk_event_fn)(void *context, const lsdk_event_t *event);

typedef struct lsdk_download_request {
    /** Resource name, copied (at most 255 bytes kept). May be NULL. */
    const char *path;
    /** Content size, 0...2^40. Data events = ceil(total_bytes / chunk_size). */
    uint64_t total_bytes;
} lsdk_download_request_t;

/**
 * Starts a download: DATA and PROGRESS events, then one END unless the behaviour says otherwise.
 * Same ownership and error rules as lsdk_request_start.
 */
lsdk_status_t lsdk_download_start(lsdk_client_t *client, const lsdk_download_request_t *request,
                                  const lsdk_behavior_t *behavior, lsdk_event_fn on_event,
                                  void *context, lsdk_release_fn release_context,
                                  lsdk_handle_t *out_handle);

/** What a pull-style event callback answers (lsdk_download_start_pull), like libcurl's write
    callback returning CURL_WRITEFUNC_PAUSE. */
enum {
    /** The event was taken; the stream goes on. */
    LSDK_PULL_CONTINUE = 0,
    /** The event was NOT taken: the stream pauses (as by lsdk_pause; counted in
        stream_pauses_by_callback, not in stream_pauses), and the same event (same sequence
        number, same data) is delivered again as the first event after lsdk_resume. */
    LSDK_PULL_PAUSE = 1,
};

/** A pull-style event callback: returns LSDK_PULL_CONTINUE or LSDK_PULL_PAUSE. */
typedef int32_t (*lsdk_pull_event_fn)(void *context, const lsdk_event_t *event);

/**
 * Starts a pull-style download: the same as lsdk_download_start, except that the event callback
 * answers whether it took the event (see LSDK_PULL_*). lsdk_pause and lsdk_resume keep working.
 *
 * The answer is honoured for data and progress events (after-terminal data included) of a stream
 * that is not cancelled. It is ignored for an END (the stream has ended), for the late callback
 * after a cancel, and for any event of a cancelled stream (a cancel made while the event was being
 * delivered included). Any value other than CONTINUE and PAUSE is treated as CONTINUE and counted
 * in the client's bad_calls.
 *
 * While a refused event waits, the stream produces nothing else, whatever its pause_mode (a live
 * source's events must not overtake it; its END could otherwise come first). Each delivery calls
 * the callback and counts in stream_events, so a refused event counts again when redelivered.
 * With stream_concurrency > 1 every refused event of a batch is kept; after the resume they are
 * redelivered first, in production order, in the next batch (shuffled with it, as batches are).
 * A cancel discards refused events. Same ownership and error rules as lsdk_request_start.
 */
lsdk_status_t lsdk_download_start_pull(lsdk_client_t *client, const lsdk_download_request_t *request,
                                       const lsdk_behavior_t *behavior, lsdk_pull_event_fn on_event,
                                       void *context, lsdk_release_fn release_context,
                                       lsdk_handle_t *out_handle);

/** The content byte at `offset` of the request numbered `request_id` (for verifying data). Defined
    for every offset, including those past the end of a download. */
uint8_t lsdk_content_byte(uint64_t request_id, uint64_t offset);

/* ------------------------------------------------------------------------ */
/* Requests matched by id: one reply callback per connection                */
/* ------------------------------------------------------------------------ */

/*
 * An RPC connection (lsdk_rpc_t) on a client has the shape of MQTT's message ids and JSON-RPC: ONE
 * reply callback serves every request of the connection, each request is named by an id (chosen
 * by the caller or assigned by the SDK), and each reply names the id it answers. Replies come on
 * the client's threads.
 *
 * Per request, the lsdk_behavior_t fields apply as to lsdk_request_start: delivery (SYNC: the first
 * reply comes inside lsdk_rpc_send, before an SDK-assigned id is written to *out_id), delay_us and
 * jitter_us (requests are answered out of order), completion_count (0: never answered; 2 or more:
 * duplicate replies with the same id after the first), outcomes (LSDK_OK or error_status),
 * cancel_mode (what lsdk_rpc_cancel does; LSDK_CANCEL_WAITS is refused with OUT_OF_RANGE),
 * late_callback_after_cancel (one more success reply with the request's id after a cancel or a
 * disconnect dropped it: by then the id may name another request), error_status, error_message
 * and seed. The stream fields are validated and otherwise unused.
 *
 * A request is:
 *  - pending from a successful lsdk_rpc_send until its first reply is claimed, a cancel takes
 *    effect, or a disconnect drops it; from then on its id is free and may be sent again;
 *  - live until the SDK has made its last callback for it (duplicates, a cancellation or
 *    disconnect report, a late reply).
 * Replies of one request come one at a time, each after the previous one returned, in attempt
 * order; replies of different requests may run at the same time on different threads. After a
 * cancel took effect or a disconnect dropped a request, its normal replies not yet started are
 * dropped; a reply already running finishes.
 *
 * Callbacks (lsdk_rpc_callbacks_t): a set is installed by lsdk_rpc_create or lsdk_rpc_set_callbacks
 * and replaced by the next lsdk_rpc_set_callbacks. Its release_context (if not NULL) is called
 * exactly once, after the last callback made with that set: once it was replaced and its running
 * callbacks returned, or when the connection finished. A reply that arrives while no set, or a set
 * without on_reply, is installed is discarded (counted in rpc_replies_discarded), as a real SDK
 * drops a message nobody listens for. Every callback runs with no SDK lock held and may call any
 * SDK function, lsdk_rpc_destroy of its own connection included.
 *
 * A connection is never freed: after lsdk_rpc_destroy (or its client's destroy) every call on it
 * returns LSDK_ERR_CLIENT_DESTROYED, so a stale pointer stays safe to pass.
 */
typedef struct lsdk_rpc lsdk_rpc_t;

/** How a disconnect reports the requests it drops (lsdk_rpc_config_t.disconnect_report). */
enum {
    /** Each dropped request gets a reply with LSDK_ERR_DISCONNECTED, in send order, on the thread
        that disconnects (inside lsdk_rpc_disconnect, lsdk_rpc_destroy or lsdk_client_destroy; the
        worker of a spontaneous disconnect), before on_disconnect. */
    LSDK_DISCONNECT_REPORT_SYNC = 0,
    /** Each dropped request gets its LSDK_ERR_DISCONNECTED reply later, from a worker (the loop
        thread for LOOP delivery), in any order, possibly after on_disconnect. */
    LSDK_DISCONNECT_REPORT_ASYNC = 1,
    /** Dropped requests are never answered: only on_disconnect tells, as some SDKs just go silent. */
    LSDK_DISCONNECT_SILENT = 2,
};

#define LSDK_MAX_PER_MILLE 1000u

typedef struct lsdk_rpc_config {
    /** Width of the ids, 8...64 bits: SDK-assigned ids count up from 1, wrap back to 1 after
        2^id_bits - 1 and skip ids still pending (MQTT's are 16 bits); a caller-chosen id must be at
        most 2^id_bits - 1. Default 32. */
    uint32_t id_bits;
    /** LSDK_DISCONNECT_*. Default LSDK_DISCONNECT_REPORT_SYNC. */
    int32_t disconnect_report;
    /** After each reply it delivers while open, the connection delivers a reply for an id that is
        not pending with this chance, per mille (0...1000): status LSDK_OK, request_id 0, attempt 1,
        no body. Default 0. */
    uint32_t unknown_reply_per_mille;
    /** Each accepted send schedules a spontaneous disconnect with this chance, per mille
        (0...1000), after a delay drawn from the request's delay_us and jitter_us, on a worker (the
        loop thread for LOOP delivery). Default 0. */
    uint32_t disconnect_per_mille;
    /** Seed of the connection's own draws (unknown ids, spontaneous disconnects); 0 = derived from
        the client's seed. Requests draw from their behaviour's seed as operations do. */
    uint64_t seed;
} lsdk_rpc_config_t;

/** Fills `config` with the defaults. NULL is ignored. */
void lsdk_rpc_config_init(lsdk_rpc_config_t *config);

/**
 * The connection's reply callback. `id` is the id the reply names; `status` is LSDK_OK for a
 * success, the behaviour's error_status for a failure, LSDK_ERR_CANCELLED for a cancellation report
 * and LSDK_ERR_DISCONNECTED for a disconnect report. `response` is never NULL and valid only during
 * the call: request_id is the request's number within its client (0 for a reply to an id that was
 * not pending), attempt numbers the request's callbacks from 1 (duplicates, reports and the late
 * reply continue the count), body is filled as for lsdk_request_start on success.
 */
typedef void (*lsdk_reply_fn)(void *context, uint64_t id, lsdk_status_t status, const lsdk_response_t *response);

/** Called once per disconnect, after its SYNC reports: `dropped` requests were pending;
    `spontaneous` is true for a disconnect the SDK made by itself (disconnect_per_mille). */
typedef void (*lsdk_disconnect_fn)(void *context, bool spontaneous, uint64_t dropped);

typedef struct lsdk_rpc_callbacks {
    /** May be NULL: replies are then discarded. */
    lsdk_reply_fn on_reply;
    /** May be NULL. */
    lsdk_disconnect_fn on_disconnect;
    void *context;
    /** May be NULL. Called once, after the last callback made with this set (see above). */
    lsdk_release_fn release_context;
} lsdk_rpc_callbacks_t;

/**
 * Creates an RPC connection on `client`. `config` may be NULL (defaults). `callbacks` may be NULL
 * (no set installed yet: replies are discarded until lsdk_rpc_set_callbacks); otherwise it is
 * copied and installed. Release the connection with lsdk_rpc_destroy; lsdk_client_destroy destroys
 * the connections of the client still open.
 * Errors, in this order (nothing is called, the context is still yours): NULL_ARGUMENT (client),
 * CLIENT_DESTROYED, NULL_ARGUMENT (out_rpc), OUT_OF_RANGE (id_bits), UNKNOWN_ENUM
 * (disconnect_report), OUT_OF_RANGE (unknown_reply_per_mille, disconnect_per_mille), RESOURCES.
 */
lsdk_status_t lsdk_rpc_create(lsdk_client_t *client, const lsdk_rpc_config_t *config,
                              const lsdk_rpc_callbacks_t *callbacks, lsdk_rpc_t **out_rpc);

/**
 * Installs `callbacks` (copied; NULL installs none) in place of the current set, whose
 * release_context is called once its running callbacks have returned (here, if none runs).
 * Errors (the new set is not installed, its release_context never called): NULL_ARGUMENT (rpc),
 * CLIENT_DESTROYED, RESOURCES.
 */
lsdk_status_t lsdk_rpc_set_callbacks(lsdk_rpc_t *rpc, const lsdk_rpc_callbacks_t *callbacks);

/**
 * Sends a request. `request` and `behavior` may be NULL (defaults); both are copied.
 * `id` 0 asks the SDK to assign one: it is written to *out_id when this returns (after any
 * synchronous reply ran, so that reply names an id the caller does not know yet). A non-zero `id`
 * is the caller's choice (register it before the call: its reply may come first); it is written
 * to *out_id too if out_id is not NULL.
 * Errors, in this order (no callback): NULL_ARGUMENT (rpc), CLIENT_DESTROYED, behaviour fields as
 * for lsdk_request_start, OUT_OF_RANGE (cancel_mode LSDK_CANCEL_WAITS), OUT_OF_RANGE (response_size),
 * NULL_ARGUMENT (id 0 with out_id NULL), OUT_OF_RANGE (id above 2^id_bits - 1), DUPLICATE_ID (id
 * pending), RESOURCES (every id is pending).
 */
lsdk_status_t lsdk_rpc_send(lsdk_rpc_t *rpc, const lsdk_request_t *request, const lsdk_behavior_t *behavior,
                            uint64_t id, uint64_t *out_id);

/**
 * Cancels the pending request with `id`, as its behaviour's cancel_mode says: CALLBACK_SYNC
 * replies LSDK_ERR_CANCELLED inside this call, CALLBACK_ASYNC later from a worker, SILENT not at
 * all, and IGNORED leaves the request pending (it is answered normally; counted once per request in
 * rpc_cancels like the others). Callable from inside any callback.
 * Errors: NULL_ARGUMENT, CLIENT_DESTROYED, UNKNOWN_ID (no request with that id is pending: never
 * sent, answered, cancelled or dropped; not counted as a bad call, it is the ordinary race of a
 * cancel with a reply).
 */
lsdk_status_t lsdk_rpc_cancel(lsdk_rpc_t *rpc, uint64_t id);

/**
 * The connection drops and comes back at once: every pending request is dropped and reported as
 * disconnect_report says, then on_disconnect is called, on this thread. Later sends work as before.
 * Errors: NULL_ARGUMENT, CLIENT_DESTROYED.
 */
lsdk_status_t lsdk_rpc_disconnect(lsdk_rpc_t *rpc);

/**
 * Destroys the connection: it disconnects as lsdk_rpc_disconnect does, then refuses every call
 * with CLIENT_DESTROYED, and returns without waiting. Replies scheduled and not yet started are
 * dropped, except ASYNC reports and late replies, which still come. When the last of them has
 * returned the connection finishes and its installed set is released. Callable from inside the
 * connection's own callbacks. lsdk_client_destroy destroys every connection of its client still
 * open and waits until each finished.
 * Errors: NULL_ARGUMENT, CLIENT_DESTROYED (destroyed already, or its client is being destroyed).
 */
lsdk_status_t lsdk_rpc_destroy(lsdk_rpc_t *rpc);

/* ------------------------------------------------------------------------ */
/* Listeners: one subscription per topic                                    */
/* ------------------------------------------------------------------------ */

typedef struct lsdk_listen_request {
    /** Any value. A client has at most one listener per topic at a time (see lsdk_listen_start). */
    uint64_t topic;
    /** Data events before the terminal; 0 = endless (until cancelled or the client destroyed). */
    uint64_t event_count;
} lsdk_listen_request_t;

/**
 * Starts a listener: a live source of DATA events on the client's threads, like an MQTT
 * subscription's on_message, which many consumers have to share because the SDK takes ONE
 * listener per topic. It is a stream: lsdk_cancel, lsdk_pause, lsdk_resume and lsdk_handle_release
 * work on its handle, and every behaviour field applies as to a download, except progress_every
 * (listeners send data events only). Each event carries chunk_size bytes: event i (from 0) has
 * offset i * chunk_size; bytes_total is event_count * chunk_size, UINT64_MAX when endless.
 * After event_count events the terminal comes as stream_end says (NONE: silent until cancelled).
 *
 * Pause is honoured after the events in flight: with PAUSE_STOPS, events already produced (the one
 * being delivered, the rest of a batch with stream_concurrency > 1) still arrive after lsdk_pause
 * returned (counted in listener_events_while_paused), then nothing until lsdk_resume; with
 * PAUSE_DROPS events keep being generated and are dropped while paused.
 *
 * The topic is taken from a successful start until the listener's cancel takes effect (an IGNORED
 * cancel does not free it), its first terminal is produced, or its client's destroy cancels it.
 * Events of the old listener may still arrive after that (in flight, duplicates, late callbacks).
 * Same ownership rules as lsdk_request_start. `request` may be NULL (topic 0, endless).
 * Errors, in this order: NULL_ARGUMENT (client), CLIENT_DESTROYED, NULL_ARGUMENT (on_event),
 * behaviour fields as for lsdk_download_start, ALREADY_LISTENING (topic taken; counted in
 * listener_busy and bad_calls), RESOURCES.
 */
lsdk_status_t lsdk_listen_start(lsdk_client_t *client, const lsdk_listen_request_t *request,
                                const lsdk_behavior_t *behavior, lsdk_event_fn on_event, void *context,
                                lsdk_release_fn release_context, lsdk_handle_t *out_handle);

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct lsdk_counters {
    uint64_t operations_started;
    /** Operations whose context was released (the SDK is done with them). */
    uint64_t operations_finished;
    /* Every callback (release_context excluded) moves exactly one of callbacks_sync,
       callbacks_worker, callbacks_fresh_thread, callbacks_loop and callbacks_reentrant_cancel.
       Counters move before the callback is called. */
    uint64_t callbacks_sync;          /* delivered on the caller's thread inside start */
    uint64_t callbacks_worker;        /* delivered on a pool worker */
    uint64_t callbacks_fresh_thread;  /* delivered on a freshly created pthread */
    /** Request completions after the first one of their operation. */
    uint64_t callbacks_repeated;
    /** Callbacks made after a cancel took effect, other than the cancellation completion itself. */
    uint64_t callbacks_after_cancel;
    /** Callbacks delivered synchronously inside lsdk_cancel (or lsdk_client_destroy, or the RPC
        calls listed below). */
    uint64_t callbacks_reentrant_cancel;
    /** Cancels that took effect (first call per unfinished operation, any mode). */
    uint64_t cancels;
    uint64_t stream_events;                /* delivered stream events of every kind */
    uint64_t stream_events_dropped_paused; /* generated and dropped while paused (PAUSE_DROPS) */
    uint64_t stream_events_after_terminal; /* delivered, produced after the stream's first END */
    uint64_t stream_pauses;                /* pause calls that changed state */
    uint64_t stream_resumes;               /* resume calls that changed state */
    uint64_t contexts_created;             /* successful starts, RPC callback sets installed */
    uint64_t contexts_released;            /* release points reached (callback called if not NULL) */
    uint64_t handles_created;
    uint64_t handles_released;
    /** handles_created - handles_released, for convenience. */
    uint64_t handles_outstanding;
    uint64_t threads_created;              /* fresh callback threads */
    /** Calls that returned an argument/handle/state error (per client when the client is known:
        a NULL client and an invalid handle count process-wide only). */
    uint64_t bad_calls;
    /** Callbacks delivered on the client's loop thread (LSDK_DELIVERY_LOOP). */
    uint64_t callbacks_loop;
    /** Jobs posted with lsdk_client_post that started running. */
    uint64_t loop_jobs;
    /** Covered calls made from a thread the client's affinity forbids (see LSDK_AFFINITY_*). */
    uint64_t affinity_violations;
    /** lsdk_cancel calls made on a thread that was running a callback of the same operation
       (any cancel mode, repeated calls included). */
    uint64_t cancels_inside_callback;
    /** LSDK_CANCEL_WAITS cancels made from inside a callback of their own operation: each blocks
        until the client's destroy begins. */
    uint64_t cancel_deadlocks;
    /** Events refused by a pull-style callback (LSDK_PULL_PAUSE honoured): each paused its stream. */
    uint64_t stream_pauses_by_callback;
    /** Blocking calls that started blocking. */
    uint64_t blocking_calls;
    /** Blocking calls ended early by lsdk_interrupt or by destroy. */
    uint64_t blocking_calls_interrupted;
    /** Blocking calls blocked right now (a gauge, not a running total). */
    uint64_t blocking_in_flight;
    /** The most blocking calls ever blocked at once. */
    uint64_t blocking_in_flight_peak;

    /* RPC connections (lsdk_rpc_*). Their callbacks move the thread-kind counters above like any
       other callback (callbacks_reentrant_cancel for those inside lsdk_rpc_cancel,
       lsdk_rpc_disconnect, lsdk_rpc_destroy and lsdk_client_destroy), and each installed callback
       set counts in contexts_created and, once released, contexts_released. */
    uint64_t rpc_connections_created;
    /** Connections destroyed that finished: no callback will come, their set was released. */
    uint64_t rpc_connections_finished;
    /** Accepted sends. */
    uint64_t rpc_requests_sent;
    /** Requests no longer pending: answered, cancelled or dropped by a disconnect. */
    uint64_t rpc_requests_settled;
    /** Requests the SDK is done with: no callback for them will come. */
    uint64_t rpc_requests_finished;
    /** rpc_requests_sent - rpc_requests_settled: ids pending now. */
    uint64_t rpc_requests_pending;
    /** rpc_requests_sent - rpc_requests_finished: requests the SDK still owes a callback or an id. */
    uint64_t rpc_requests_live;
    /** Calls of on_reply, every kind. */
    uint64_t rpc_replies;
    /** First replies delivered while a request sent earlier on the same connection was pending. */
    uint64_t rpc_replies_out_of_order;
    /** Normal replies after the first one of their request (completion_count > 1). */
    uint64_t rpc_replies_duplicate;
    /** Replies for an id that was not pending (unknown_reply_per_mille). */
    uint64_t rpc_replies_unknown_id;
    /** Late replies of requests a disconnect dropped. */
    uint64_t rpc_replies_after_disconnect;
    /** Late replies of cancelled requests, and replies of requests whose cancel was IGNORED. */
    uint64_t rpc_replies_after_cancel;
    /** Replies discarded because no on_reply was installed. */
    uint64_t rpc_replies_discarded;
    /** lsdk_rpc_cancel calls that found their id pending (once per request, IGNORED included). */
    uint64_t rpc_cancels;
    /** Disconnects: lsdk_rpc_disconnect, spontaneous ones, and those of destroys. */
    uint64_t rpc_disconnects;
    uint64_t rpc_disconnects_spontaneous;
    /** Pending requests dropped by disconnects (reported or not). */
    uint64_t rpc_dropped_at_disconnect;

    /* Listeners (lsdk_listen_start). They are streams, so the stream counters count them too. */
    uint64_t listener_starts;
    /** Listeners the SDK is done with (context released). */
    uint64_t listener_finished;
    /** listener_starts - listener_finished. */
    uint64_t listener_live;
    /** lsdk_cancel calls that stopped a listener (first per listener, not IGNORED; destroy's not). */
    uint64_t listener_stops;
    /** Listeners that produced their own terminal (end or error, not a cancellation). */
    uint64_t listener_ends;
    /** Starts refused with LSDK_ERR_ALREADY_LISTENING. */
    uint64_t listener_busy;
    /** Listener events delivered, every kind. */
    uint64_t listener_events;
    /** Listener events delivered while the listener was paused (in flight when pause was called). */
    uint64_t listener_events_while_paused;
    /** Pauses and resumes that changed a listener's state. */
    uint64_t listener_pauses;
    uint64_t listener_resumes;
} lsdk_counters_t;

/** Counters of one client (valid also after destroy). Errors: NULL_ARGUMENT. */
lsdk_status_t lsdk_client_counters(const lsdk_client_t *client, lsdk_counters_t *out);

/** Process-wide counters: every client ever created, destroyed ones included. NULL is ignored. */
void lsdk_global_counters(lsdk_counters_t *out);

/** Clients created and not yet destroyed, process-wide (a test's end check: a client nobody
    destroys keeps its threads running for the rest of the process). Any thread. */
size_t lsdk_live_clients(void);

/** The SDK's threads running now, process-wide: every client's workers, timer and loop thread,
    and the fresh callback threads still running. Zero when every client is destroyed and its
    last fresh thread has ended. Any thread. */
size_t lsdk_live_threads(void);

/* ------------------------------------------------------------------------ */
/* Test hooks                                                               */
/* ------------------------------------------------------------------------ */

/* For the simulator's own white-box tests; an adapter never needs them. */

/** Gives the live handle's slot the generation `generation` (1...0xFFFFFFFF), as if the slot had
    been reused that often, and writes the handle's new value to *out_handle (the old value is
    stale from then on). Lets a test reach the last generation without 4 billion reuses.
    Errors: NULL_ARGUMENT (out_handle), OUT_OF_RANGE (generation 0), INVALID_HANDLE. */
lsdk_status_t lsdk_test_handle_set_generation(lsdk_handle_t handle, uint32_t generation,
                                              lsdk_handle_t *out_handle);

/** Slots retired so far because their generation was used up (process-wide). */
uint64_t lsdk_test_handle_slots_retired(void);

#ifdef __cplusplus
}
#endif

#endif /* CLEGACYSDK_H */
