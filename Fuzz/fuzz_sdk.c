/*
 * libFuzzer target for the whole C API of CLegacySDK (issue 14).
 *
 * Each input is a program: a sequence of steps, decoded from the bytes, run against up to three
 * clients. Steps create and destroy clients (any config, out-of-range included), start requests,
 * downloads and pull downloads with arbitrary behaviour structs (every field, out-of-range values
 * included), cancel, pause, resume and release handles (live, stale, released, forged, from a
 * destroyed client), post jobs to loop threads, make blocking calls and interrupt them, set and
 * read the session token, read counters, and spawn helper threads that do the same from foreign
 * threads (affinity violations, concurrent token setters, interrupts racing the call). Callbacks
 * themselves call back into the SDK (cancel, pause, resume, post, blocking calls, destroy of their
 * own client) as the input says. RPC connections are created (any config), sent to (caller-chosen,
 * assigned and out-of-range ids, any behaviour), cancelled by id, disconnected, given new callback
 * sets and destroyed, from the harness, helpers and their own reply callbacks; listeners are
 * started on a few topics, taken ones included.
 *
 * Invariants, checked after every step (and inside every callback), abort() on violation:
 *  - a call's status is the one the header documents for its arguments (an independent model of
 *    the validation rules here); a failed start never calls back nor releases its context;
 *  - no callback of a context after its release, and none after its client's destroy returned;
 *  - every context is released at most once, and exactly once by the end of the input; every RPC
 *    callback set likewise (never while one of its callbacks runs, and by its client's destroy);
 *  - counters are consistent at every read (nothing finished/released/run beyond what was
 *    started/created/accepted), and exact once every client is destroyed (contexts, operations,
 *    callbacks by thread kind, stream events, loop jobs, handles outstanding 0).
 *
 * Built with the SDK's sources compiled in (see Fuzz/run.sh):
 *   clang -fuse-ld=lld -fsanitize=fuzzer,address,undefined ...
 */
#include "CLegacySDK.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_CLIENTS 3
#define FZ_RPCS 4
#define FZ_SETS 32
#define FZ_TOPICS 4
#define FZ_OPS 48
#define FZ_HELPERS 6
#define FZ_STEPS 96
#define FZ_RECORD 16
#define FZ_START_RECORD 96

#define FZ_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) fz_fail(#cond, __FILE__, __LINE__);                                           \
    } while (0)

static _Noreturn void fz_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "fuzz invariant violated: %s (%s:%d)\n", what, file, line);
    abort();
}

/* ------------------------------------------------------------------------ */
/* Input decoding                                                           */
/* ------------------------------------------------------------------------ */

typedef struct fz_input {
    const uint8_t *data;
    size_t size;
    size_t at;
} fz_input_t;

static uint8_t take8(fz_input_t *in) { return in->at < in->size ? in->data[in->at++] : 0; }
static uint32_t take32(fz_input_t *in) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = (v << 8) | take8(in);
    return v;
}
static uint64_t take64(fz_input_t *in) { return ((uint64_t)take32(in) << 32) | take32(in); }
static bool more(const fz_input_t *in) { return in->at < in->size; }

/* ------------------------------------------------------------------------ */
/* Harness state                                                            */
/* ------------------------------------------------------------------------ */

enum { FZ_NONE = 0, FZ_ALIVE, FZ_DESTROYED };

typedef struct fz_client {
    lsdk_client_t *client;
    int state;
    bool loop;
    int32_t affinity;
    /* Set (release) when lsdk_client_destroy returned: a callback of this client after it is a bug. */
    _Atomic bool destroy_returned;
    /* Expected totals (exact once destroyed). */
    uint64_t started;            /* successful starts */
    uint64_t sets;               /* RPC callback sets installed (contexts too) */
    bool topic_used[FZ_TOPICS];  /* a listener was ever started on the topic */
    _Atomic uint64_t jobs_posted; /* incremented before posting, decremented on refusal */
    _Atomic uint64_t jobs_accepted; /* incremented once a post returned LSDK_OK */
    _Atomic uint64_t jobs_run;
} fz_client_t;

enum {
    FZ_ACT_NONE = 0,
    FZ_ACT_CANCEL,
    FZ_ACT_PAUSE,
    FZ_ACT_RESUME,
    FZ_ACT_POST,
    FZ_ACT_BLOCK,
    FZ_ACT_DESTROY_OWN,
    FZ_ACT_TOKEN,
    FZ_ACT_COUNT
};

typedef struct fz_ctx {
    int client_index;
    bool started;  /* the start returned LSDK_OK */
    bool is_stream;
    bool pull;
    int32_t cancel_mode;
    uint8_t action;         /* what callbacks do (FZ_ACT_*) */
    uint8_t action_every;   /* ... on every n-th callback */
    uint8_t pull_refuse;    /* pull: refuse every n-th event (0 = never) */
    _Atomic lsdk_handle_t handle; /* published after start returned */
    _Atomic int callbacks;
    _Atomic int events;
    _Atomic int releases;
    _Atomic int running;
} fz_ctx_t;

typedef struct fz_op {
    fz_ctx_t *ctx;
    lsdk_handle_t handle; /* 0 when none (failed start, or out_handle NULL) */
    bool handle_released;
} fz_op_t;

typedef struct fz_helper {
    pthread_t thread;
    bool used;
} fz_helper_t;

static fz_client_t clients[FZ_CLIENTS];
static fz_op_t ops[FZ_OPS];
static int op_count;
static fz_helper_t helpers[FZ_HELPERS];
/* Handles whose release already returned OK, and handles of destroyed clients: stale or still to
   be released. Kept to be used again as stale input. */
static lsdk_handle_t stale[64];
static int stale_count;

static const char fz_message[] = "fuzzed failure";

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                */
/* ------------------------------------------------------------------------ */

static void job_run(void *context) {
    fz_client_t *c = context;
    atomic_fetch_add(&c->jobs_run, 1);
}

static void post_job(fz_client_t *c) {
    atomic_fetch_add(&c->jobs_posted, 1);
    lsdk_status_t status = lsdk_client_post(c->client, job_run, c);
    if (status != LSDK_OK) {
        atomic_fetch_sub(&c->jobs_posted, 1);
        FZ_CHECK(status == LSDK_ERR_NO_LOOP_THREAD || status == LSDK_ERR_CLIENT_DESTROYED);
        FZ_CHECK(status != LSDK_ERR_NO_LOOP_THREAD || !c->loop);
    } else {
        atomic_fetch_add(&c->jobs_accepted, 1);
        FZ_CHECK(c->loop);
    }
}

/** Everything a callback does, for every kind of callback. */
static void on_callback(fz_ctx_t *ctx, bool is_event) {
    fz_client_t *c = &clients[ctx->client_index];
    FZ_CHECK(atomic_load(&ctx->releases) == 0);
    FZ_CHECK(!atomic_load_explicit(&c->destroy_returned, memory_order_acquire));
    atomic_fetch_add(&ctx->running, 1);
    int n = atomic_fetch_add(&ctx->callbacks, 1) + 1;
    if (is_event) atomic_fetch_add(&ctx->events, 1);
    lsdk_handle_t handle = atomic_load(&ctx->handle);
    if (ctx->action != FZ_ACT_NONE && ctx->action_every != 0 && n % ctx->action_every == 0) {
        switch (ctx->action) {
        case FZ_ACT_CANCEL:
            /* A WAITS cancel from its own callback deadlocks until destroy: only worth it off the
               harness thread, and the harness never waits for such an operation itself. */
            if (handle != 0 && ctx->cancel_mode != LSDK_CANCEL_WAITS) {
                lsdk_status_t status = lsdk_cancel(handle);
                FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INVALID_HANDLE);
            }
            break;
        case FZ_ACT_PAUSE:
            if (handle != 0) {
                lsdk_status_t status = lsdk_pause(handle);
                FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INVALID_HANDLE ||
                         (status == LSDK_ERR_NOT_A_STREAM && !ctx->is_stream));
            }
            break;
        case FZ_ACT_RESUME:
            if (handle != 0) {
                lsdk_status_t status = lsdk_resume(handle);
                FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INVALID_HANDLE ||
                         (status == LSDK_ERR_NOT_A_STREAM && !ctx->is_stream));
            }
            break;
        case FZ_ACT_POST: post_job(c); break;
        case FZ_ACT_BLOCK: {
            uint64_t result = 0;
            lsdk_status_t status = lsdk_blocking_call(c->client, 0xCA11BAC4, 200, &result);
            FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INTERRUPTED ||
                     status == LSDK_ERR_CLIENT_DESTROYED);
            FZ_CHECK(status != LSDK_OK || result == lsdk_blocking_result(0xCA11BAC4));
            break;
        }
        case FZ_ACT_DESTROY_OWN: {
            lsdk_status_t status = lsdk_client_destroy(c->client);
            FZ_CHECK(status == LSDK_ERR_WRONG_THREAD || status == LSDK_ERR_CLIENT_DESTROYED);
            break;
        }
        case FZ_ACT_TOKEN: {
            char buffer[8];
            lsdk_status_t status = lsdk_client_get_session_token(c->client, buffer, sizeof buffer);
            FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_CLIENT_DESTROYED);
            break;
        }
        default: break;
        }
    }
    atomic_fetch_sub(&ctx->running, 1);
    FZ_CHECK(atomic_load(&ctx->releases) == 0);
}

static void fz_completion(void *context, lsdk_status_t status, const lsdk_response_t *response) {
    fz_ctx_t *ctx = context;
    FZ_CHECK(response != NULL && response->message != NULL);
    FZ_CHECK(status != LSDK_OK || response->body_length == 0 || response->body != NULL);
    for (size_t i = 0; status == LSDK_OK && i < response->body_length; i += 1 + i / 64) {
        FZ_CHECK(response->body[i] == lsdk_content_byte(response->request_id, i));
    }
    on_callback(ctx, false);
}

static void check_event(const lsdk_event_t *event) {
    FZ_CHECK(event != NULL && event->message != NULL);
    FZ_CHECK(event->kind >= LSDK_EVENT_PROGRESS && event->kind <= LSDK_EVENT_END);
    if (event->kind == LSDK_EVENT_DATA) {
        FZ_CHECK(event->length > 0 && event->data != NULL);
        /* Every byte of small chunks; a spread sample (and the last byte) of big ones. */
        for (size_t i = 0; i < event->length; i += 1 + i / 64) {
            FZ_CHECK(event->data[i] == lsdk_content_byte(event->request_id, event->bytes_done + i));
        }
        size_t last = event->length - 1;
        FZ_CHECK(event->data[last] == lsdk_content_byte(event->request_id, event->bytes_done + last));
    }
}

static void fz_event(void *context, const lsdk_event_t *event) {
    check_event(event);
    on_callback(context, true);
}

static int32_t fz_pull_event(void *context, const lsdk_event_t *event) {
    fz_ctx_t *ctx = context;
    check_event(event);
    on_callback(ctx, true);
    int n = atomic_load(&ctx->events);
    if (ctx->pull_refuse == 0) return LSDK_PULL_CONTINUE;
    if (ctx->pull_refuse == 255) return 7; /* an answer the header does not know: CONTINUE + bad call */
    return n % ctx->pull_refuse == 0 ? LSDK_PULL_PAUSE : LSDK_PULL_CONTINUE;
}

static void fz_release(void *context) {
    fz_ctx_t *ctx = context;
    FZ_CHECK(atomic_load(&ctx->running) == 0);
    FZ_CHECK(atomic_fetch_add(&ctx->releases, 1) == 0);
    FZ_CHECK(!atomic_load_explicit(&clients[ctx->client_index].destroy_returned, memory_order_acquire));
}

/* RPC connections. A slot's connection pointer stays valid for good (destroyed connections are
   tombstones), so helpers and callbacks may use whatever the slot holds. */
enum { FZ_RPC_NONE = 0, FZ_RPC_OPEN, FZ_RPC_DESTROYED };

enum {
    FZ_RACT_NONE = 0,
    FZ_RACT_CANCEL_SELF, /* cancel the id just answered (usually UNKNOWN_ID by then) */
    FZ_RACT_CANCEL_RECENT,
    FZ_RACT_DISCONNECT,
    FZ_RACT_SEND, /* a new request, within a budget */
    FZ_RACT_DESTROY_RPC,
    FZ_RACT_COUNTERS,
    FZ_RACT_DESTROY_CLIENT,
    FZ_RACT_COUNT
};

typedef struct fz_rpc {
    _Atomic(lsdk_rpc_t *) rpc;
    int client_index;
    int state;
    uint64_t id_mask;
    /* Set by a callback that destroyed the connection: the harness then accepts CLIENT_DESTROYED. */
    _Atomic bool maybe_destroyed;
    _Atomic uint64_t recent[8];
    _Atomic uint32_t recent_at;
} fz_rpc_t;

typedef struct fz_set {
    int rpc_index;
    bool installed; /* the SDK took it: released exactly once by the end */
    uint8_t action;
    uint8_t action_every;
    _Atomic int budget;
    _Atomic int replies;
    _Atomic int disconnects;
    _Atomic int releases;
    _Atomic int running;
} fz_set_t;

static fz_rpc_t rpcs[FZ_RPCS];
static fz_set_t *sets[FZ_SETS];
static int set_count;

static void remember_id(fz_rpc_t *r, uint64_t id) {
    uint32_t at = atomic_fetch_add(&r->recent_at, 1);
    atomic_store(&r->recent[at % 8], id);
}

static void on_rpc_callback_begin(fz_set_t *set) {
    fz_rpc_t *r = &rpcs[set->rpc_index];
    FZ_CHECK(atomic_load(&set->releases) == 0);
    FZ_CHECK(!atomic_load_explicit(&clients[r->client_index].destroy_returned, memory_order_acquire));
    atomic_fetch_add(&set->running, 1);
}

static void fz_reply(void *context, uint64_t id, lsdk_status_t status, const lsdk_response_t *response) {
    fz_set_t *set = context;
    fz_rpc_t *r = &rpcs[set->rpc_index];
    fz_client_t *c = &clients[r->client_index];
    on_rpc_callback_begin(set);
    FZ_CHECK(response != NULL && response->message != NULL);
    FZ_CHECK(id != 0 && id <= r->id_mask);
    FZ_CHECK(response->attempt >= 1);
    FZ_CHECK(status != LSDK_OK || response->body_length == 0 || response->body != NULL);
    for (size_t i = 0; status == LSDK_OK && i < response->body_length; i += 1 + i / 64) {
        FZ_CHECK(response->body[i] == lsdk_content_byte(response->request_id, i));
    }
    int n = atomic_fetch_add(&set->replies, 1) + 1;
    lsdk_rpc_t *rpc = atomic_load(&r->rpc);
    if (set->action != FZ_RACT_NONE && n % set->action_every == 0) {
        lsdk_status_t result;
        switch (set->action) {
        case FZ_RACT_CANCEL_SELF:
        case FZ_RACT_CANCEL_RECENT:
            result = lsdk_rpc_cancel(rpc, set->action == FZ_RACT_CANCEL_SELF ? id : atomic_load(&r->recent[n % 8]));
            FZ_CHECK(result == LSDK_OK || result == LSDK_ERR_UNKNOWN_ID || result == LSDK_ERR_CLIENT_DESTROYED);
            break;
        case FZ_RACT_DISCONNECT:
            result = lsdk_rpc_disconnect(rpc);
            FZ_CHECK(result == LSDK_OK || result == LSDK_ERR_CLIENT_DESTROYED);
            break;
        case FZ_RACT_SEND:
            if (atomic_fetch_sub(&set->budget, 1) > 0) {
                uint64_t out = 0;
                result = lsdk_rpc_send(rpc, NULL, NULL, 0, &out);
                FZ_CHECK(result == LSDK_OK || result == LSDK_ERR_CLIENT_DESTROYED || result == LSDK_ERR_RESOURCES);
                if (result == LSDK_OK) remember_id(r, out);
            }
            break;
        case FZ_RACT_DESTROY_RPC:
            atomic_store(&r->maybe_destroyed, true);
            result = lsdk_rpc_destroy(rpc);
            FZ_CHECK(result == LSDK_OK || result == LSDK_ERR_CLIENT_DESTROYED);
            break;
        case FZ_RACT_COUNTERS: {
            lsdk_counters_t k;
            FZ_CHECK(lsdk_client_counters(c->client, &k) == LSDK_OK);
            FZ_CHECK(k.rpc_requests_settled <= k.rpc_requests_sent);
            break;
        }
        default:
            result = lsdk_client_destroy(c->client);
            FZ_CHECK(result == LSDK_ERR_WRONG_THREAD || result == LSDK_ERR_CLIENT_DESTROYED);
            break;
        }
    }
    atomic_fetch_sub(&set->running, 1);
}

static void fz_disconnected(void *context, bool spontaneous, uint64_t dropped) {
    fz_set_t *set = context;
    (void)spontaneous;
    on_rpc_callback_begin(set);
    FZ_CHECK(dropped <= rpcs[set->rpc_index].id_mask);
    atomic_fetch_add(&set->disconnects, 1);
    atomic_fetch_sub(&set->running, 1);
}

static void fz_set_release(void *context) {
    fz_set_t *set = context;
    FZ_CHECK(atomic_load(&set->running) == 0);
    FZ_CHECK(atomic_fetch_add(&set->releases, 1) == 0);
    FZ_CHECK(set->installed);
    FZ_CHECK(!atomic_load_explicit(&clients[rpcs[set->rpc_index].client_index].destroy_returned,
                                   memory_order_acquire));
}

/** A new callback set from `shape` (0: none, 1: no callbacks at all, 2: no on_reply, else full),
    or NULL (no set) when there is no room. */
static fz_set_t *make_set(int rpc_index, uint8_t shape, uint8_t action, uint8_t every, lsdk_rpc_callbacks_t *out) {
    if (shape % 4 == 0 || set_count == FZ_SETS) return NULL;
    fz_set_t *set = calloc(1, sizeof *set);
    FZ_CHECK(set != NULL);
    set->rpc_index = rpc_index;
    set->action = action % FZ_RACT_COUNT;
    set->action_every = 1 + every % 8;
    atomic_init(&set->budget, 8);
    sets[set_count++] = set;
    out->on_reply = shape % 4 == 1 ? NULL : shape % 4 == 2 ? NULL : fz_reply;
    out->on_disconnect = shape % 4 == 1 ? NULL : fz_disconnected;
    out->context = set;
    out->release_context = fz_set_release;
    return set;
}

/* ------------------------------------------------------------------------ */
/* The documented rules, modelled independently                             */
/* ------------------------------------------------------------------------ */

static uint64_t mask_for(uint32_t bits) { return bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1; }

/** What the header says the behaviour fields make a start return (NULL: the defaults). */
static lsdk_status_t expected_behavior(const fz_client_t *c, const lsdk_behavior_t *b) {
    if (b != NULL) {
        if (b->delivery < LSDK_DELIVERY_SYNC || b->delivery > LSDK_DELIVERY_LOOP) return LSDK_ERR_UNKNOWN_ENUM;
        if (b->delivery == LSDK_DELIVERY_LOOP && !c->loop) return LSDK_ERR_NO_LOOP_THREAD;
        if (b->delay_us > LSDK_MAX_DELAY_US || b->jitter_us > LSDK_MAX_DELAY_US) return LSDK_ERR_OUT_OF_RANGE;
        if (b->completion_count > LSDK_MAX_COMPLETIONS) return LSDK_ERR_OUT_OF_RANGE;
        for (uint32_t i = 0; i < b->completion_count; i++) {
            if (b->outcomes[i] != LSDK_OUTCOME_SUCCESS && b->outcomes[i] != LSDK_OUTCOME_ERROR) {
                return LSDK_ERR_UNKNOWN_ENUM;
            }
        }
        if (b->cancel_mode < LSDK_CANCEL_CALLBACK_SYNC || b->cancel_mode > LSDK_CANCEL_WAITS) {
            return LSDK_ERR_UNKNOWN_ENUM;
        }
        if (b->chunk_size == 0 || b->chunk_size > LSDK_MAX_CHUNK_SIZE) return LSDK_ERR_OUT_OF_RANGE;
        if (b->interval_us > LSDK_MAX_DELAY_US) return LSDK_ERR_OUT_OF_RANGE;
        if (b->stream_concurrency == 0 || b->stream_concurrency > LSDK_MAX_STREAM_CONCURRENCY) {
            return LSDK_ERR_OUT_OF_RANGE;
        }
        if (b->stream_end < LSDK_STREAM_END_SUCCESS || b->stream_end > LSDK_STREAM_END_NONE) {
            return LSDK_ERR_UNKNOWN_ENUM;
        }
        if (b->events_after_terminal > LSDK_MAX_EVENTS_AFTER_TERMINAL) return LSDK_ERR_OUT_OF_RANGE;
        if (b->pause_mode != LSDK_PAUSE_STOPS && b->pause_mode != LSDK_PAUSE_DROPS) return LSDK_ERR_UNKNOWN_ENUM;
        if (b->error_status == LSDK_OK || b->error_status == LSDK_ERR_CANCELLED) return LSDK_ERR_OUT_OF_RANGE;
        if (b->sequence_bits < 8 || b->sequence_bits > 64) return LSDK_ERR_OUT_OF_RANGE;
        if (b->first_sequence > mask_for(b->sequence_bits)) return LSDK_ERR_OUT_OF_RANGE;
    }
    return LSDK_OK;
}

/** What the header says a start returns for these arguments (RESOURCES aside). */
static lsdk_status_t expected_start(const fz_client_t *c, bool callback_null, const lsdk_behavior_t *b,
                                    bool is_stream, uint32_t response_size, uint64_t total_bytes) {
    if (c->state != FZ_ALIVE) return LSDK_ERR_CLIENT_DESTROYED;
    if (callback_null) return LSDK_ERR_NULL_ARGUMENT;
    lsdk_status_t status = expected_behavior(c, b);
    if (status != LSDK_OK) return status;
    if (!is_stream && response_size > LSDK_MAX_CHUNK_SIZE) return LSDK_ERR_OUT_OF_RANGE;
    if (is_stream && total_bytes > (1ull << 40)) return LSDK_ERR_OUT_OF_RANGE;
    return LSDK_OK;
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                    */
/* ------------------------------------------------------------------------ */

static fz_client_t *pick_client(fz_input_t *in) { return &clients[take8(in) % FZ_CLIENTS]; }

static void step_create(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    /* One client per slot and input: helpers and callbacks keep pointing at the slot. */
    if (c->state != FZ_NONE) return;
    lsdk_client_config_t config;
    lsdk_client_config_init(&config);
    uint8_t shape = take8(in);
    config.worker_threads = 1 + (shape & 1);
    if ((shape & 0x30) == 0x30) config.worker_threads = (shape & 0x40) ? 0 : LSDK_MAX_WORKER_THREADS + 1;
    config.loop_thread = (shape >> 1) & 1;
    config.affinity = (int32_t)((shape >> 2) & 3); /* 3 is unknown */
    config.seed = take32(in);
    lsdk_status_t expected = LSDK_OK;
    if (config.worker_threads == 0 || config.worker_threads > LSDK_MAX_WORKER_THREADS) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    } else if (config.affinity > LSDK_AFFINITY_LOOP) {
        expected = LSDK_ERR_UNKNOWN_ENUM;
    } else if (config.affinity == LSDK_AFFINITY_LOOP && !config.loop_thread) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    }
    lsdk_client_t *made = NULL;
    lsdk_status_t status = lsdk_client_create(&config, &made);
    FZ_CHECK(status == expected);
    if (status != LSDK_OK) {
        FZ_CHECK(made == NULL);
        return;
    }
    c->client = made;
    c->state = FZ_ALIVE;
    c->loop = config.loop_thread;
    c->affinity = config.affinity;
    FZ_CHECK(lsdk_client_create(&config, NULL) == LSDK_ERR_NULL_ARGUMENT);
}

/** A raw value for a field documented as 0...max: mostly the boundaries (where validation bugs
    live), sometimes anything. */
static uint32_t edge32(uint32_t raw, uint32_t max) {
    switch (raw & 7) {
    case 0: return 0;
    case 1: return max;
    case 2: return max + 1;
    case 3: return max - 1;
    case 4: return UINT32_MAX;
    case 5: return max + 1 + ((raw >> 3) & 0xFF);
    default: return raw >> 3;
    }
}

static uint64_t edge64(uint64_t raw, uint64_t max) {
    switch (raw & 7) {
    case 0: return 0;
    case 1: return max;
    case 2: return max + 1;
    case 3: return max - 1;
    case 4: return UINT64_MAX;
    default: return raw >> 3;
    }
}

/* Every field takes a fixed number of bytes (see Fuzz/README.md for the layout), so a mutation
   changes one field and the seed generator can place every field. 77 bytes. */
static void fill_behavior(fz_input_t *in, lsdk_behavior_t *b) {
    lsdk_behavior_init(b);
    uint32_t knobs = take32(in); /* bit n set: field n gets raw (often out-of-range) bytes */
    uint8_t delivery = take8(in);
    b->delivery = knobs & (1u << 0) ? (int32_t)(delivery % 7) - 1 : (int32_t)(delivery % 5);
    uint32_t delay = take32(in);
    b->delay_us = knobs & (1u << 1) ? edge32(delay, LSDK_MAX_DELAY_US)
                                    : ((delay & 3) == 0 ? ((delay >> 8) & 0xFF) * 4u : 0);
    uint32_t jitter = take32(in);
    b->jitter_us = knobs & (1u << 2) ? edge32(jitter, LSDK_MAX_DELAY_US)
                                     : ((jitter & 3) == 0 ? (jitter >> 8) & 0xFF : 0);
    uint8_t count = take8(in);
    b->completion_count = knobs & (1u << 3) ? edge32(count, LSDK_MAX_COMPLETIONS) : count % 4;
    for (int i = 0; i < LSDK_MAX_COMPLETIONS; i++) {
        uint8_t outcome = take8(in);
        b->outcomes[i] = (knobs & (1u << 4)) && i == 0 ? (int32_t)outcome : (int32_t)(outcome & 1);
    }
    uint8_t cancel = take8(in);
    b->cancel_mode = knobs & (1u << 5) ? (int32_t)cancel - 2 : (int32_t)(cancel % 5);
    b->late_callback_after_cancel = take8(in) & 1;
    uint32_t chunk = take32(in);
    b->chunk_size = knobs & (1u << 6) ? edge32(chunk, LSDK_MAX_CHUNK_SIZE) : 1 + (chunk & 0xFF) * 16u;
    b->progress_every = take8(in) % 4;
    uint32_t interval = take32(in);
    b->interval_us = knobs & (1u << 7) ? edge32(interval, LSDK_MAX_DELAY_US)
                                       : ((interval & 7) == 0 ? (interval >> 8) & 0xFF : 0);
    uint8_t concurrency = take8(in);
    b->stream_concurrency = knobs & (1u << 8) ? edge32(concurrency, LSDK_MAX_STREAM_CONCURRENCY)
                                              : 1 + concurrency % 4;
    uint8_t end = take8(in);
    b->stream_end = knobs & (1u << 9) ? (int32_t)(end % 5) : (int32_t)(end % 3);
    b->duplicate_terminal = take8(in) & 1;
    uint8_t after = take8(in);
    b->events_after_terminal = knobs & (1u << 10) ? edge32(after, LSDK_MAX_EVENTS_AFTER_TERMINAL) : after % 3;
    uint8_t pause = take8(in);
    b->pause_mode = knobs & (1u << 11) ? (int32_t)(pause % 4) : (int32_t)(pause & 1);
    uint32_t error = take32(in);
    b->error_status = knobs & (1u << 12) ? (int32_t)error : ((error & 1) ? LSDK_ERR_REMOTE : LSDK_ERR_RESOURCES);
    b->error_message = knobs & (1u << 13) ? fz_message : NULL;
    b->seed = take64(in);
    uint8_t bits = take8(in);
    uint64_t first = take64(in);
    uint8_t jump_at = take8(in);
    uint64_t jump = take64(in);
    uint8_t corrupt_at = take8(in);
    uint64_t corrupt_value = take64(in);
    if (knobs & (1u << 14)) {
        static const uint32_t widths[] = {0, 1, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 255, UINT32_MAX};
        b->sequence_bits = bits < 128 ? widths[bits % (sizeof widths / sizeof widths[0])] : bits;
        b->first_sequence = edge64(first, mask_for(b->sequence_bits > 64 ? 64 : b->sequence_bits));
        b->sequence_jump_at = jump_at;
        b->sequence_jump = jump;
        b->sequence_corrupt_at = corrupt_at % 8;
        b->sequence_corrupt_value = corrupt_value;
    } else if (knobs & (1u << 15)) {
        b->sequence_bits = 8 + bits % 57;
        b->first_sequence = mask_for(b->sequence_bits) - first % 4; /* wraps soon */
    }
}

/** A valid stream must be bounded when events can be delivered inside start (SYNC, MIXED). */
static uint64_t pick_total(fz_input_t *in, const lsdk_behavior_t *b) {
    uint8_t kind = take8(in);
    uint8_t chunks = take8(in);
    uint8_t extra = take8(in);
    if (kind % 16 == 0) return (1ull << 40) + 1 + extra; /* out of range */
    uint64_t chunk = b->chunk_size == 0 ? 1 : b->chunk_size;
    bool inline_possible = b->delivery == LSDK_DELIVERY_SYNC || b->delivery == LSDK_DELIVERY_MIXED;
    if (kind % 16 == 1 && !inline_possible) return 1ull << 40; /* endless until cancelled */
    return (uint64_t)(chunks % 64) * chunk + extra % 16;
}

static void step_start(fz_input_t *in) {
    if (op_count == FZ_OPS) return;
    fz_client_t *c = pick_client(in);
    if (c->state == FZ_NONE) return;
    uint8_t shape = take8(in);
    int kind = shape % 3; /* request, download, pull download */
    bool null_callback = (shape & 0xF0) == 0xF0;
    bool null_behavior = (shape & 0x0C) == 0x0C;
    bool keep_handle = (shape & 0x08) == 0 || null_behavior;
    lsdk_behavior_t behavior;
    fill_behavior(in, &behavior);
    fz_ctx_t *ctx = calloc(1, sizeof *ctx);
    FZ_CHECK(ctx != NULL);
    ctx->client_index = (int)(c - clients);
    ctx->is_stream = kind != 0;
    ctx->pull = kind == 2;
    ctx->cancel_mode = null_behavior ? LSDK_CANCEL_CALLBACK_ASYNC : behavior.cancel_mode;
    ctx->action = take8(in) % FZ_ACT_COUNT;
    ctx->action_every = 1 + take8(in) % 8;
    ctx->pull_refuse = take8(in);
    if (ctx->pull_refuse > 8 && ctx->pull_refuse != 255) ctx->pull_refuse = 0;
    uint8_t response_kind = take8(in);
    uint32_t response_raw = take32(in);
    uint32_t response_size = response_kind % 8 == 0 ? response_raw : (response_raw & 0xFF) * 4u;
    uint64_t total = pick_total(in, &behavior);
    const lsdk_behavior_t *b = null_behavior ? NULL : &behavior;

    lsdk_status_t expected = expected_start(c, null_callback, b, kind != 0, response_size, total);
    lsdk_handle_t handle = 0;
    lsdk_status_t status;
    char path[32];
    snprintf(path, sizeof path, "/fuzz/%d", op_count);
    if (kind == 0) {
        lsdk_request_t request = {.path = path, .response_size = response_size};
        status = lsdk_request_start(c->client, &request, b, null_callback ? NULL : fz_completion, ctx,
                                    fz_release, keep_handle ? &handle : NULL);
    } else {
        lsdk_download_request_t request = {.path = path, .total_bytes = total};
        if (kind == 1) {
            status = lsdk_download_start(c->client, &request, b, null_callback ? NULL : fz_event, ctx,
                                         fz_release, keep_handle ? &handle : NULL);
        } else {
            status = lsdk_download_start_pull(c->client, &request, b, null_callback ? NULL : fz_pull_event,
                                              ctx, fz_release, keep_handle ? &handle : NULL);
        }
    }
    FZ_CHECK(status == expected);
    if (status != LSDK_OK) {
        /* No callback, no release: the context is still ours. */
        FZ_CHECK(atomic_load(&ctx->callbacks) == 0 && atomic_load(&ctx->releases) == 0);
        FZ_CHECK(handle == 0);
    } else {
        ctx->started = true;
        c->started++;
        atomic_store(&ctx->handle, handle);
    }
    ops[op_count].ctx = ctx;
    ops[op_count].handle = status == LSDK_OK ? handle : 0;
    ops[op_count].handle_released = false;
    op_count++;
}

/** A handle to use: live, released (stale), forged, 0, or one of a destroyed client. */
static lsdk_handle_t pick_handle(fz_input_t *in, fz_op_t **out_op) {
    *out_op = NULL;
    uint8_t how = take8(in);
    uint64_t value = take64(in);
    uint8_t index = take8(in);
    switch (how % 6) {
    case 0: return 0;
    case 1: return value | 0x8000000000000000ull; /* forged: a generation never reached */
    case 2: return stale_count > 0 ? stale[index % stale_count] : 0;
    default:
        if (op_count == 0) return 0;
        fz_op_t *op = &ops[index % op_count];
        *out_op = op;
        return op->handle;
    }
}

static bool handle_live(const fz_op_t *op) { return op != NULL && op->handle != 0 && !op->handle_released; }

static void remember_stale(lsdk_handle_t handle) {
    if (handle != 0 && stale_count < 64) stale[stale_count++] = handle;
}

static void step_handle_call(fz_input_t *in) {
    fz_op_t *op;
    lsdk_handle_t handle = pick_handle(in, &op);
    bool live = handle_live(op);
    uint8_t which = take8(in) % 4;
    lsdk_status_t status;
    switch (which) {
    case 0:
        /* A WAITS cancel waits for running callbacks; never from the harness for an operation
           whose callbacks might be blocked in a deadlock of their own (they never are: callbacks
           do not cancel their own WAITS operation). */
        status = lsdk_cancel(handle);
        FZ_CHECK(live ? status == LSDK_OK : status == LSDK_ERR_INVALID_HANDLE);
        break;
    case 1:
    case 2:
        status = which == 1 ? lsdk_pause(handle) : lsdk_resume(handle);
        if (!live) {
            FZ_CHECK(status == LSDK_ERR_INVALID_HANDLE);
        } else {
            FZ_CHECK(op->ctx->is_stream ? status == LSDK_OK : status == LSDK_ERR_NOT_A_STREAM);
        }
        break;
    default:
        status = lsdk_handle_release(handle);
        FZ_CHECK(live ? status == LSDK_OK : status == LSDK_ERR_INVALID_HANDLE);
        if (live) {
            op->handle_released = true;
            remember_stale(handle);
        }
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* RPC connections and listeners                                            */
/* ------------------------------------------------------------------------ */

static uint16_t take16(fz_input_t *in) {
    uint16_t high = take8(in);
    return (uint16_t)((high << 8) | take8(in));
}

/** The harness's model of "the connection is gone": CLIENT_DESTROYED is then the answer. */
static bool rpc_gone(const fz_rpc_t *r) {
    return r->state == FZ_RPC_DESTROYED || clients[r->client_index].state != FZ_ALIVE;
}

/** Checks `status` against `expected`; a connection a callback may have destroyed may also answer
    CLIENT_DESTROYED (that check comes first in every call). */
static void check_rpc_status(const fz_rpc_t *r, lsdk_status_t status, lsdk_status_t expected) {
    if (status == LSDK_ERR_CLIENT_DESTROYED && atomic_load(&r->maybe_destroyed)) return;
    FZ_CHECK(status == expected);
}

static void step_rpc_create(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    int index = take8(in) % FZ_RPCS;
    fz_rpc_t *r = &rpcs[index];
    uint8_t bits = take8(in);
    uint8_t report = take8(in);
    uint16_t unknown = take16(in);
    uint16_t disconnect = take16(in);
    uint8_t shape = take8(in);
    uint8_t action = take8(in);
    uint8_t every = take8(in);
    uint8_t flags = take8(in);
    if (c->state == FZ_NONE) {
        FZ_CHECK(lsdk_rpc_create(NULL, NULL, NULL, NULL) == LSDK_ERR_NULL_ARGUMENT);
        return;
    }
    /* One connection per slot and input: callbacks and helpers keep pointing at the slot. */
    if (r->state != FZ_RPC_NONE) return;
    static const uint32_t widths[] = {8, 12, 16, 32, 64, 0, 7, 9, 63, 65};
    lsdk_rpc_config_t config;
    lsdk_rpc_config_init(&config);
    config.id_bits = widths[bits % (sizeof widths / sizeof widths[0])];
    config.disconnect_report = (int32_t)(report % 5) - 1; /* -1 and 3 are unknown */
    config.unknown_reply_per_mille = unknown % 1100;
    config.disconnect_per_mille = disconnect % 8 == 0 ? disconnect % 1100 : disconnect % 40;
    config.seed = unknown ^ ((uint64_t)disconnect << 16);
    bool null_out = flags % 8 == 1;

    lsdk_status_t expected = LSDK_OK;
    if (c->state != FZ_ALIVE) {
        expected = LSDK_ERR_CLIENT_DESTROYED;
    } else if (null_out) {
        expected = LSDK_ERR_NULL_ARGUMENT;
    } else if (config.id_bits < 8 || config.id_bits > 64) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    } else if (config.disconnect_report < 0 || config.disconnect_report > LSDK_DISCONNECT_SILENT) {
        expected = LSDK_ERR_UNKNOWN_ENUM;
    } else if (config.unknown_reply_per_mille > LSDK_MAX_PER_MILLE || config.disconnect_per_mille > LSDK_MAX_PER_MILLE) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    }
    /* Callbacks read these; no callback comes before the first send. */
    r->client_index = (int)(c - clients);
    r->id_mask = mask_for(config.id_bits > 64 ? 64 : config.id_bits);
    lsdk_rpc_callbacks_t callbacks;
    fz_set_t *set = make_set(index, shape, action, every, &callbacks);
    if (set != NULL) set->installed = true;
    lsdk_rpc_t *made = NULL;
    lsdk_status_t status = lsdk_rpc_create(c->client, &config, set != NULL ? &callbacks : NULL, null_out ? NULL : &made);
    FZ_CHECK(status == expected);
    if (status != LSDK_OK) {
        FZ_CHECK(made == NULL);
        if (set != NULL) set->installed = false; /* refused: never called, never released */
        return;
    }
    if (set != NULL) c->sets++;
    atomic_store(&r->rpc, made);
    r->state = FZ_RPC_OPEN;
}

static void step_rpc_send(fz_input_t *in) {
    fz_rpc_t *r = &rpcs[take8(in) % FZ_RPCS];
    uint8_t shape = take8(in);
    uint64_t id_raw = take64(in);
    lsdk_behavior_t behavior;
    fill_behavior(in, &behavior);
    uint32_t response_raw = take32(in);
    if (r->state == FZ_RPC_NONE) return;
    fz_client_t *c = &clients[r->client_index];
    lsdk_rpc_t *rpc = atomic_load(&r->rpc);
    bool null_behavior = (shape & 0x10) != 0;
    bool null_request = (shape & 0x20) != 0;
    uint64_t id;
    bool want_out = true;
    switch (shape % 4) {
    case 0: id = 0; break;
    case 1: id = 1 + id_raw % 16; break;
    case 2: id = edge64(id_raw, r->id_mask); break;
    default:
        id = 0;
        want_out = false;
        break;
    }
    uint32_t response_size = response_raw % 8 == 0 ? response_raw : (response_raw & 0xFF) * 4u;
    const lsdk_behavior_t *b = null_behavior ? NULL : &behavior;

    lsdk_status_t expected = rpc_gone(r) ? LSDK_ERR_CLIENT_DESTROYED : expected_behavior(c, b);
    if (expected != LSDK_OK) {
        /* decided */
    } else if (b != NULL && b->cancel_mode == LSDK_CANCEL_WAITS) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    } else if (!null_request && response_size > LSDK_MAX_CHUNK_SIZE) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    } else if (id == 0 && !want_out) {
        expected = LSDK_ERR_NULL_ARGUMENT;
    } else if (id > r->id_mask) {
        expected = LSDK_ERR_OUT_OF_RANGE;
    }
    lsdk_request_t request = {.path = "/fuzz/rpc", .response_size = response_size};
    uint64_t out = 0;
    lsdk_status_t status = lsdk_rpc_send(rpc, null_request ? NULL : &request, b, id, want_out ? &out : NULL);
    if (expected == LSDK_OK && status != LSDK_OK) {
        /* What the harness cannot model: which ids are pending right now. */
        bool pending_state = id != 0 ? status == LSDK_ERR_DUPLICATE_ID : status == LSDK_ERR_RESOURCES;
        if (!pending_state) check_rpc_status(r, status, expected);
    } else {
        check_rpc_status(r, status, expected);
    }
    if (status == LSDK_OK) {
        FZ_CHECK(out != 0 || !want_out);
        FZ_CHECK(id == 0 ? out <= r->id_mask : (!want_out || out == id));
        remember_id(r, id != 0 ? id : out);
    } else {
        FZ_CHECK(out == 0);
    }
}

static void step_rpc_call(fz_input_t *in) {
    int index = take8(in) % FZ_RPCS;
    fz_rpc_t *r = &rpcs[index];
    uint8_t which = take8(in);
    uint64_t id_raw = take64(in);
    uint8_t shape = take8(in);
    uint8_t action = take8(in);
    uint8_t every = take8(in);
    if (which % 5 == 4 || r->state == FZ_RPC_NONE) {
        /* NULL and foreign pointers (a client is not a connection). */
        FZ_CHECK(lsdk_rpc_cancel(NULL, id_raw) == LSDK_ERR_NULL_ARGUMENT);
        FZ_CHECK(lsdk_rpc_disconnect(NULL) == LSDK_ERR_NULL_ARGUMENT);
        FZ_CHECK(lsdk_rpc_destroy(NULL) == LSDK_ERR_NULL_ARGUMENT);
        FZ_CHECK(lsdk_rpc_set_callbacks(NULL, NULL) == LSDK_ERR_NULL_ARGUMENT);
        FZ_CHECK(lsdk_rpc_send(NULL, NULL, NULL, 1, NULL) == LSDK_ERR_NULL_ARGUMENT);
        fz_client_t *c = &clients[index % FZ_CLIENTS];
        if (c->state != FZ_NONE) FZ_CHECK(lsdk_rpc_disconnect((lsdk_rpc_t *)c->client) == LSDK_ERR_NULL_ARGUMENT);
        return;
    }
    fz_client_t *c = &clients[r->client_index];
    lsdk_rpc_t *rpc = atomic_load(&r->rpc);
    lsdk_status_t status;
    switch (which % 5) {
    case 0: {
        uint64_t id = id_raw % 2 ? atomic_load(&r->recent[id_raw % 8]) : id_raw % 32;
        status = lsdk_rpc_cancel(rpc, id);
        if (rpc_gone(r)) {
            FZ_CHECK(status == LSDK_ERR_CLIENT_DESTROYED);
        } else if (status != LSDK_ERR_UNKNOWN_ID) {
            check_rpc_status(r, status, LSDK_OK);
        }
        break;
    }
    case 1:
        status = lsdk_rpc_disconnect(rpc);
        check_rpc_status(r, status, rpc_gone(r) ? LSDK_ERR_CLIENT_DESTROYED : LSDK_OK);
        break;
    case 2:
        status = lsdk_rpc_destroy(rpc);
        check_rpc_status(r, status, rpc_gone(r) ? LSDK_ERR_CLIENT_DESTROYED : LSDK_OK);
        if (r->state == FZ_RPC_OPEN) r->state = FZ_RPC_DESTROYED;
        break;
    default: {
        lsdk_rpc_callbacks_t callbacks;
        fz_set_t *set = make_set(index, shape, action, every, &callbacks);
        if (set != NULL) set->installed = true;
        status = lsdk_rpc_set_callbacks(rpc, set != NULL ? &callbacks : NULL);
        check_rpc_status(r, status, rpc_gone(r) ? LSDK_ERR_CLIENT_DESTROYED : LSDK_OK);
        if (status != LSDK_OK) {
            if (set != NULL) set->installed = false;
        } else if (set != NULL) {
            c->sets++;
        }
        break;
    }
    }
}

static void step_listen(fz_input_t *in) {
    if (op_count == FZ_OPS) return;
    fz_client_t *c = pick_client(in);
    uint8_t topic = take8(in) % FZ_TOPICS;
    uint64_t count_raw = take64(in);
    uint8_t shape = take8(in);
    lsdk_behavior_t behavior;
    fill_behavior(in, &behavior);
    uint8_t action = take8(in);
    uint8_t every = take8(in);
    if (c->state == FZ_NONE) return;
    bool null_callback = (shape & 0xF0) == 0xF0;
    bool null_behavior = (shape & 0x0C) == 0x0C;
    const lsdk_behavior_t *b = null_behavior ? NULL : &behavior;
    /* Delivered inside start, an endless listener would never return: bounded there. */
    bool inline_possible = b == NULL ? false
                                     : behavior.delivery == LSDK_DELIVERY_SYNC || behavior.delivery == LSDK_DELIVERY_MIXED;
    uint64_t count = inline_possible ? 1 + count_raw % 64 : (count_raw % 4 == 0 ? 0 : count_raw % 64);
    fz_ctx_t *ctx = calloc(1, sizeof *ctx);
    FZ_CHECK(ctx != NULL);
    ctx->client_index = (int)(c - clients);
    ctx->is_stream = true;
    ctx->cancel_mode = b == NULL ? LSDK_CANCEL_CALLBACK_ASYNC : behavior.cancel_mode;
    ctx->action = action % FZ_ACT_COUNT;
    ctx->action_every = 1 + every % 8;

    lsdk_status_t expected = expected_start(c, null_callback, b, true, 0, 0);
    lsdk_listen_request_t request = {.topic = topic, .event_count = count};
    lsdk_handle_t handle = 0;
    /* A NULL request is topic 0, endless: never where events may come inside start. */
    bool null_request = (shape & 2) != 0 && !inline_possible;
    if (null_request) topic = 0;
    lsdk_status_t status = lsdk_listen_start(c->client, null_request ? NULL : &request, b,
                                             null_callback ? NULL : fz_event, ctx, fz_release, &handle);
    bool topic_used = c->topic_used[topic];
    if (expected == LSDK_OK && status == LSDK_ERR_ALREADY_LISTENING) {
        FZ_CHECK(topic_used); /* the topic is taken only by an earlier listener */
    } else {
        FZ_CHECK(status == expected);
    }
    if (status == LSDK_OK) {
        c->topic_used[topic] = true;
        ctx->started = true;
        c->started++;
        atomic_store(&ctx->handle, handle);
    } else {
        FZ_CHECK(atomic_load(&ctx->callbacks) == 0 && atomic_load(&ctx->releases) == 0 && handle == 0);
    }
    ops[op_count].ctx = ctx;
    ops[op_count].handle = status == LSDK_OK ? handle : 0;
    ops[op_count].handle_released = false;
    op_count++;
}

/** After a client's destroy returned: every job whose post returned LSDK_OK before now has run. A
    helper may be inside a post right now (counted in jobs_posted, refused in a moment), so the
    exact count (posted == run) is checked once helpers are joined, in check_end. */
static void check_jobs_ran(fz_client_t *c) {
    uint64_t accepted = atomic_load(&c->jobs_accepted);
    FZ_CHECK(atomic_load(&c->jobs_run) >= accepted);
}

/** After a client's destroy returned: its connections are destroyed and every set they were
    given is released. */
static void check_rpcs_closed(const fz_client_t *c) {
    for (int i = 0; i < FZ_RPCS; i++) {
        fz_rpc_t *r = &rpcs[i];
        if (r->state == FZ_RPC_NONE || &clients[r->client_index] != c) continue;
        r->state = FZ_RPC_DESTROYED;
        for (int j = 0; j < set_count; j++) {
            if (sets[j]->rpc_index == i && sets[j]->installed) FZ_CHECK(atomic_load(&sets[j]->releases) == 1);
        }
    }
}

static void step_destroy(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    if (c->state == FZ_NONE) {
        FZ_CHECK(lsdk_client_destroy(NULL) == LSDK_ERR_NULL_ARGUMENT);
        return;
    }
    lsdk_status_t status = lsdk_client_destroy(c->client);
    if (c->state == FZ_DESTROYED) {
        FZ_CHECK(status == LSDK_ERR_CLIENT_DESTROYED);
        return;
    }
    FZ_CHECK(status == LSDK_OK);
    atomic_store_explicit(&c->destroy_returned, true, memory_order_release);
    c->state = FZ_DESTROYED;
    check_jobs_ran(c);
    check_rpcs_closed(c);
}

static void step_post(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    if (c->state == FZ_NONE) {
        FZ_CHECK(lsdk_client_post(NULL, job_run, c) == LSDK_ERR_NULL_ARGUMENT);
        return;
    }
    uint8_t how = take8(in);
    if (how % 8 == 0) {
        FZ_CHECK(lsdk_client_post(c->client, NULL, NULL) ==
                 (c->state == FZ_DESTROYED ? LSDK_ERR_CLIENT_DESTROYED : LSDK_ERR_NULL_ARGUMENT));
        return;
    }
    atomic_fetch_add(&c->jobs_posted, 1);
    lsdk_status_t status = lsdk_client_post(c->client, job_run, c);
    lsdk_status_t expected = c->state == FZ_DESTROYED ? LSDK_ERR_CLIENT_DESTROYED
                             : !c->loop              ? LSDK_ERR_NO_LOOP_THREAD
                                                     : LSDK_OK;
    FZ_CHECK(status == expected);
    if (status != LSDK_OK) {
        atomic_fetch_sub(&c->jobs_posted, 1);
    } else {
        atomic_fetch_add(&c->jobs_accepted, 1);
    }
    FZ_CHECK(!lsdk_client_is_loop_thread(c->client));
}

static void step_blocking(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    if (c->state == FZ_NONE) return;
    uint64_t key = take8(in);
    uint8_t how = take8(in);
    uint32_t raw = take32(in);
    if (how % 4 == 0) {
        lsdk_status_t status = lsdk_interrupt(c->client, key);
        if (c->state == FZ_DESTROYED) {
            FZ_CHECK(status == LSDK_ERR_CLIENT_DESTROYED);
        } else {
            FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_NOT_BLOCKED);
        }
        return;
    }
    uint32_t duration = how % 4 == 1 ? raw : (raw & 0xFF) * 4u;
    bool null_out = how % 16 == 2;
    uint64_t result = 0;
    if (duration > 2000 && duration <= LSDK_MAX_BLOCKING_US) duration = 2000; /* the harness must not stall */
    lsdk_status_t status = lsdk_blocking_call(c->client, key, duration, null_out ? NULL : &result);
    lsdk_status_t expected = c->state == FZ_DESTROYED        ? LSDK_ERR_CLIENT_DESTROYED
                             : null_out                      ? LSDK_ERR_NULL_ARGUMENT
                             : duration > LSDK_MAX_BLOCKING_US ? LSDK_ERR_OUT_OF_RANGE
                                                             : LSDK_OK;
    /* Helper threads interrupt keys too, so a valid call may come back interrupted. */
    if (expected == LSDK_OK) {
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INTERRUPTED);
        FZ_CHECK(status != LSDK_OK || result == lsdk_blocking_result(key));
    } else {
        FZ_CHECK(status == expected);
    }
}

static void step_token(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    if (c->state == FZ_NONE) {
        FZ_CHECK(lsdk_client_set_session_token(NULL, "x") == LSDK_ERR_NULL_ARGUMENT);
        return;
    }
    uint8_t how = take8(in);
    char token[300];
    size_t length = how % 2 ? 280 : how % 7;
    memset(token, 'a' + how % 26, length);
    token[length] = '\0';
    lsdk_status_t status = lsdk_client_set_session_token(c->client, how % 5 == 0 ? NULL : token);
    if (c->state == FZ_DESTROYED) {
        FZ_CHECK(status == LSDK_ERR_CLIENT_DESTROYED || status == LSDK_ERR_BUSY);
    } else {
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_BUSY); /* helpers set it concurrently */
    }
    char buffer[300];
    size_t capacity = how % 3 == 0 ? 0 : 1 + how % 299;
    status = lsdk_client_get_session_token(c->client, buffer, capacity);
    if (capacity == 0) {
        FZ_CHECK(status == LSDK_ERR_OUT_OF_RANGE);
    } else if (c->state == FZ_DESTROYED) {
        FZ_CHECK(status == LSDK_ERR_CLIENT_DESTROYED);
    } else {
        FZ_CHECK(status == LSDK_OK && strlen(buffer) < capacity && strlen(buffer) <= 255);
    }
}

/* A helper thread: one foreign-thread action. */
typedef struct fz_helper_job {
    fz_client_t *c;
    lsdk_handle_t handle;
    uint8_t what;
    uint64_t key;
} fz_helper_job_t;

static void *helper_main(void *argument) {
    fz_helper_job_t *job = argument;
    fz_client_t *c = job->c;
    switch (job->what % 6) {
    case 0: {
        /* A long blocking call: ended by an interrupt from the harness, or by destroy. */
        uint64_t result = 0;
        lsdk_status_t status = lsdk_blocking_call(c->client, job->key, LSDK_MAX_BLOCKING_US, &result);
        FZ_CHECK(status == LSDK_ERR_INTERRUPTED || status == LSDK_ERR_CLIENT_DESTROYED);
        break;
    }
    case 1:
        for (int i = 0; i < 16; i++) {
            lsdk_status_t status = lsdk_client_set_session_token(c->client, i % 2 ? "helper" : NULL);
            FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_BUSY || status == LSDK_ERR_CLIENT_DESTROYED);
        }
        break;
    case 2: {
        lsdk_status_t status = lsdk_cancel(job->handle);
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INVALID_HANDLE);
        status = lsdk_pause(job->handle);
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INVALID_HANDLE || status == LSDK_ERR_NOT_A_STREAM);
        status = lsdk_resume(job->handle);
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_INVALID_HANDLE || status == LSDK_ERR_NOT_A_STREAM);
        break;
    }
    case 3: post_job(c); break;
    case 5: {
        /* A connection used from a foreign thread; the slot may be destroyed meanwhile. */
        fz_rpc_t *r = &rpcs[job->key % FZ_RPCS];
        lsdk_rpc_t *rpc = atomic_load(&r->rpc);
        if (rpc == NULL) break;
        uint64_t out = 0;
        lsdk_status_t status = lsdk_rpc_send(rpc, NULL, NULL, 0, &out);
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_CLIENT_DESTROYED || status == LSDK_ERR_RESOURCES);
        if (status == LSDK_OK) remember_id(r, out);
        status = lsdk_rpc_cancel(rpc, atomic_load(&r->recent[job->key % 8]));
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_UNKNOWN_ID || status == LSDK_ERR_CLIENT_DESTROYED);
        status = lsdk_rpc_disconnect(rpc);
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_CLIENT_DESTROYED);
        break;
    }
    default: {
        lsdk_status_t status = lsdk_interrupt(c->client, job->key);
        FZ_CHECK(status == LSDK_OK || status == LSDK_ERR_NOT_BLOCKED || status == LSDK_ERR_CLIENT_DESTROYED);
        lsdk_counters_t counters;
        FZ_CHECK(lsdk_client_counters(c->client, &counters) == LSDK_OK);
        break;
    }
    }
    free(job);
    return NULL;
}

static void step_helper(fz_input_t *in) {
    fz_client_t *c = pick_client(in);
    if (c->state == FZ_NONE) return;
    int slot = -1;
    for (int i = 0; i < FZ_HELPERS; i++) {
        if (!helpers[i].used) {
            slot = i;
            break;
        }
    }
    uint8_t what = take8(in);
    uint8_t key = take8(in);
    fz_op_t *op;
    lsdk_handle_t handle = pick_handle(in, &op);
    if (slot < 0) return;
    fz_helper_job_t *job = calloc(1, sizeof *job);
    FZ_CHECK(job != NULL);
    job->c = c;
    job->what = what;
    job->key = key;
    job->handle = handle;
    /* A WAITS cancel from a helper may wait for callbacks; they never block for long. */
    if (pthread_create(&helpers[slot].thread, NULL, helper_main, job) != 0) {
        free(job);
        return;
    }
    helpers[slot].used = true;
}

/* ------------------------------------------------------------------------ */
/* Invariants                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t all_callbacks(const lsdk_counters_t *k) {
    return k->callbacks_sync + k->callbacks_worker + k->callbacks_fresh_thread + k->callbacks_loop +
           k->callbacks_reentrant_cancel;
}

/** What must hold at any moment, whatever runs concurrently. */
static void check_consistent(const lsdk_counters_t *k) {
    FZ_CHECK(k->operations_finished <= k->operations_started);
    FZ_CHECK(k->contexts_released <= k->contexts_created);
    FZ_CHECK(k->handles_released <= k->handles_created);
    FZ_CHECK(k->handles_outstanding == k->handles_created - k->handles_released);
    FZ_CHECK(k->blocking_calls_interrupted <= k->blocking_calls);
    FZ_CHECK(k->blocking_in_flight < (1ull << 32)); /* never "negative" */
    FZ_CHECK(k->rpc_requests_settled <= k->rpc_requests_sent);
    FZ_CHECK(k->rpc_requests_finished <= k->rpc_requests_sent);
    FZ_CHECK(k->rpc_connections_finished <= k->rpc_connections_created);
    FZ_CHECK(k->listener_finished <= k->listener_starts);
    FZ_CHECK(k->listener_ends + k->listener_stops <= k->listener_starts);
    FZ_CHECK(k->rpc_replies_out_of_order + k->rpc_replies_duplicate + k->rpc_replies_unknown_id <= k->rpc_replies);
}

static void check_step(void) {
    lsdk_counters_t k;
    lsdk_global_counters(&k);
    check_consistent(&k);
    for (int i = 0; i < FZ_CLIENTS; i++) {
        fz_client_t *c = &clients[i];
        if (c->state == FZ_NONE) continue;
        FZ_CHECK(lsdk_client_counters(c->client, &k) == LSDK_OK);
        check_consistent(&k);
        FZ_CHECK(k.contexts_created == c->started + c->sets);
        FZ_CHECK(k.loop_jobs <= atomic_load(&c->jobs_posted));
        if (c->affinity == LSDK_AFFINITY_ANY) FZ_CHECK(k.affinity_violations == 0);
    }
    FZ_CHECK(lsdk_client_counters(NULL, &k) == LSDK_ERR_NULL_ARGUMENT);
    FZ_CHECK(!lsdk_client_is_loop_thread(NULL));
}

/** After every client is destroyed and every helper joined: the exact totals. */
static void check_end(void) {
    for (int i = 0; i < FZ_CLIENTS; i++) {
        fz_client_t *c = &clients[i];
        if (c->state == FZ_NONE) continue;
        FZ_CHECK(c->state == FZ_DESTROYED);
        lsdk_counters_t k;
        FZ_CHECK(lsdk_client_counters(c->client, &k) == LSDK_OK);
        uint64_t callbacks = 0, events = 0, replies = 0;
        for (int j = 0; j < op_count; j++) {
            fz_ctx_t *ctx = ops[j].ctx;
            if (ctx->client_index != i || !ctx->started) continue;
            callbacks += (uint64_t)atomic_load(&ctx->callbacks);
            events += (uint64_t)atomic_load(&ctx->events);
        }
        for (int j = 0; j < set_count; j++) {
            fz_set_t *set = sets[j];
            if (rpcs[set->rpc_index].client_index != i || !set->installed) continue;
            replies += (uint64_t)atomic_load(&set->replies);
            callbacks += (uint64_t)atomic_load(&set->replies) + (uint64_t)atomic_load(&set->disconnects);
        }
        FZ_CHECK(k.operations_started == c->started && k.operations_finished == c->started);
        FZ_CHECK(k.contexts_created == c->started + c->sets && k.contexts_released == c->started + c->sets);
        FZ_CHECK(k.rpc_connections_finished == k.rpc_connections_created);
        FZ_CHECK(k.rpc_requests_pending == 0 && k.rpc_requests_live == 0);
        FZ_CHECK(k.rpc_replies == replies);
        FZ_CHECK(k.listener_live == 0);
        FZ_CHECK(k.handles_created == c->started);
        FZ_CHECK(all_callbacks(&k) == callbacks);
        FZ_CHECK(k.stream_events == events);
        FZ_CHECK(k.loop_jobs == atomic_load(&c->jobs_posted));
        FZ_CHECK(atomic_load(&c->jobs_posted) == atomic_load(&c->jobs_run));
        FZ_CHECK(atomic_load(&c->jobs_accepted) == atomic_load(&c->jobs_run));
        FZ_CHECK(k.blocking_in_flight == 0);
    }
    for (int j = 0; j < op_count; j++) {
        fz_ctx_t *ctx = ops[j].ctx;
        if (ctx->started) {
            FZ_CHECK(atomic_load(&ctx->releases) == 1);
        } else {
            FZ_CHECK(atomic_load(&ctx->releases) == 0 && atomic_load(&ctx->callbacks) == 0);
        }
    }
    for (int j = 0; j < set_count; j++) {
        fz_set_t *set = sets[j];
        if (set->installed) {
            FZ_CHECK(atomic_load(&set->releases) == 1);
        } else {
            FZ_CHECK(atomic_load(&set->releases) == 0 && atomic_load(&set->replies) == 0 &&
                     atomic_load(&set->disconnects) == 0);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */
/* ------------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input_t in = {.data = data, .size = size, .at = 0};
    memset(clients, 0, sizeof clients);
    memset(ops, 0, sizeof ops);
    memset(helpers, 0, sizeof helpers);
    memset(rpcs, 0, sizeof rpcs);
    set_count = 0;
    op_count = 0;
    stale_count = 0;

    /* Each step: one opcode byte, then a record of fixed size (FZ_START_RECORD bytes for a start,
       FZ_RECORD for the others), read as its own input (zeros past the end of the data). */
    for (int step = 0; step < FZ_STEPS && more(&in); step++) {
        uint8_t opcode = take8(&in) % 14;
        size_t size = (opcode >= 1 && opcode <= 3) || opcode == 11 || opcode == 13 ? FZ_START_RECORD : FZ_RECORD;
        size_t left = in.size - in.at;
        fz_input_t record = {.data = in.data + in.at, .size = left < size ? left : size, .at = 0};
        in.at += record.size;
        switch (opcode) {
        case 0: step_create(&record); break;
        case 1:
        case 2:
        case 3: step_start(&record); break;
        case 4: step_handle_call(&record); break;
        case 5: step_destroy(&record); break;
        case 6: step_post(&record); break;
        case 7: step_blocking(&record); break;
        case 8: step_token(&record); break;
        case 9: step_helper(&record); break;
        case 10: step_rpc_create(&record); break;
        case 11: step_rpc_send(&record); break;
        case 12: step_rpc_call(&record); break;
        default: step_listen(&record); break;
        }
        check_step();
    }

    /* Tear down: destroy what is alive (this interrupts blocked helpers), join helpers, check. */
    for (int i = 0; i < FZ_CLIENTS; i++) {
        fz_client_t *c = &clients[i];
        if (c->state != FZ_ALIVE) continue;
        FZ_CHECK(lsdk_client_destroy(c->client) == LSDK_OK);
        atomic_store_explicit(&c->destroy_returned, true, memory_order_release);
        c->state = FZ_DESTROYED;
        check_jobs_ran(c);
        check_rpcs_closed(c);
    }
    for (int i = 0; i < FZ_HELPERS; i++) {
        if (helpers[i].used) pthread_join(helpers[i].thread, NULL);
    }
    check_end();
    /* Handles of destroyed clients stay valid until released, then are stale for good. */
    for (int j = 0; j < op_count; j++) {
        if (ops[j].handle != 0 && !ops[j].handle_released) {
            FZ_CHECK(lsdk_cancel(ops[j].handle) == LSDK_OK);
            FZ_CHECK(lsdk_handle_release(ops[j].handle) == LSDK_OK);
            FZ_CHECK(lsdk_handle_release(ops[j].handle) == LSDK_ERR_INVALID_HANDLE);
        }
    }
    for (int i = 0; i < FZ_CLIENTS; i++) {
        if (clients[i].state == FZ_NONE) continue;
        lsdk_counters_t k;
        FZ_CHECK(lsdk_client_counters(clients[i].client, &k) == LSDK_OK);
        FZ_CHECK(k.handles_outstanding == 0);
    }
    for (int j = 0; j < op_count; j++) free(ops[j].ctx);
    for (int j = 0; j < set_count; j++) free(sets[j]);
    return 0;
}
