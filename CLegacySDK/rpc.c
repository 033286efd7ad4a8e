/* RPC connections: ONE reply callback per connection, requests matched by id (MQTT message ids,
 * JSON-RPC). The hazards it reproduces: replies out of order, duplicated, for ids nobody sent,
 * inside the send call before an assigned id is known, never; disconnects (asked for or not) that
 * drop every pending request, reported or silent; late replies for ids that may have been reused.
 *
 * Lifetime rules:
 *  - One mutex per connection guards everything of it and of its requests.
 *  - A connection is "in flight" while rpc->inflight > 0: one reference while it is open, one per
 *    live request, one per spontaneous-disconnect task, one per disconnect at work. When it drops
 *    to 0 (only after the destroy) the connection finishes: its callback set is released, its
 *    table freed, and its client no longer waits for it. The shell itself is never freed, so a
 *    stale pointer stays safe to pass, like a destroyed client's.
 *  - A request is freed when its last reference goes: the table's (while pending), one per
 *    scheduled task (its reply chain, its report, its late reply), and temporary ones of calls that
 *    deliver to it. Each task is embedded in its request, so scheduling never allocates.
 *  - A callback set is released when its last reference goes: the installed one, one per callback
 *    running with it. No lock is held while a callback or release_context runs. */
#include "lsdk_internal.h"

#define LSDK_RPC_MAGIC 0x4C53444B52504321ull /* "LSDKRPC!" */

static const char unknown_message[] = "unsolicited reply";
static const char disconnected_message[] = "connection lost";
static const char cancelled_message[] = "operation cancelled";
static const char default_error_message[] = "simulated remote failure";

typedef struct lsdk_callback_set {
    lsdk_rpc_callbacks_t callbacks;
    uint32_t refs; /* guarded by the connection's mutex */
} lsdk_callback_set_t;

struct lsdk_rpc_req {
    struct lsdk_rpc *rpc;
    /* Immutable after the send. */
    uint64_t id;
    uint64_t number; /* the request's number within its client (response.request_id) */
    lsdk_behavior_t behavior;
    char path[256];
    char message[256];
    uint32_t response_size;

    /* Guarded by rpc->mutex. */
    uint64_t rng;
    uint32_t refs;
    bool pending;       /* its id is in the table */
    bool dropped;       /* a cancel took effect or a disconnect dropped it: normal replies stop */
    bool by_disconnect; /* dropped by a disconnect (not a cancel) */
    bool cancel_called;
    bool late_reserved;
    uint64_t late_delay_us;
    lsdk_status_t report_status; /* the report task's status */
    uint32_t report_attempt;     /* a synchronous disconnect report's attempt */
    uint32_t next_completion;
    uint32_t attempts;
    struct lsdk_rpc_req *hash_next;
    struct lsdk_rpc_req *order_previous; /* pending requests in send order */
    struct lsdk_rpc_req *order_next;

    lsdk_task_t reply_task;
    lsdk_task_t report_task;
    lsdk_task_t late_task;
};

enum { LSDK_RPC_OPEN = 0, LSDK_RPC_CLOSED = 1 };

struct lsdk_rpc {
    uint64_t magic;
    struct lsdk_client *client;
    /** Never destroyed (the shell outlives every caller). */
    pthread_mutex_t mutex;
    /* Immutable after create. */
    lsdk_rpc_config_t config;
    uint64_t id_mask;

    /* Guarded by mutex. */
    int state;
    uint32_t inflight;
    uint64_t rng;
    uint64_t next_id;
    struct lsdk_rpc_req **buckets;
    size_t bucket_count; /* a power of two */
    size_t pending_count;
    struct lsdk_rpc_req *order_head;
    struct lsdk_rpc_req *order_tail;
    lsdk_callback_set_t *set;

    /* The client's list of connections not yet destroyed, guarded by client->mutex. */
    bool listed;
    struct lsdk_rpc *list_next;
    struct lsdk_rpc *list_previous;
    /* Tombstones: every connection ever created, for the whole process lifetime. */
    struct lsdk_rpc *tombstone_next;
};

static pthread_once_t tombstones_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t tombstones_mutex;
static struct lsdk_rpc *tombstones;

static void tombstones_init(void) { lsdk_mutex_init(&tombstones_mutex); }

static bool rpc_valid(const lsdk_rpc_t *rpc) { return rpc != NULL && rpc->magic == LSDK_RPC_MAGIC; }

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

void lsdk_rpc_config_init(lsdk_rpc_config_t *config) {
    if (config == NULL) return;
    memset(config, 0, sizeof *config);
    config->id_bits = 32;
    config->disconnect_report = LSDK_DISCONNECT_REPORT_SYNC;
    config->unknown_reply_per_mille = 0;
    config->disconnect_per_mille = 0;
    config->seed = 0;
}

static lsdk_status_t config_validate(const lsdk_rpc_config_t *config) {
    if (config->id_bits < 8 || config->id_bits > 64) return LSDK_ERR_OUT_OF_RANGE;
    if (config->disconnect_report < LSDK_DISCONNECT_REPORT_SYNC ||
        config->disconnect_report > LSDK_DISCONNECT_SILENT) {
        return LSDK_ERR_UNKNOWN_ENUM;
    }
    if (config->unknown_reply_per_mille > LSDK_MAX_PER_MILLE) return LSDK_ERR_OUT_OF_RANGE;
    if (config->disconnect_per_mille > LSDK_MAX_PER_MILLE) return LSDK_ERR_OUT_OF_RANGE;
    return LSDK_OK;
}

/* ------------------------------------------------------------------------ */
/* Pending table (mutex held)                                               */
/* ------------------------------------------------------------------------ */

static size_t bucket_of(const struct lsdk_rpc *rpc, uint64_t id) {
    return (size_t)(lsdk_mix64(id) & (rpc->bucket_count - 1));
}

static struct lsdk_rpc_req *table_find(const struct lsdk_rpc *rpc, uint64_t id) {
    for (struct lsdk_rpc_req *req = rpc->buckets[bucket_of(rpc, id)]; req != NULL; req = req->hash_next) {
        if (req->id == id) return req;
    }
    return NULL;
}

/** Doubles the table when it is full; keeps longer chains if memory is short. */
static void table_grow(struct lsdk_rpc *rpc) {
    if (rpc->pending_count < rpc->bucket_count) return;
    size_t count = rpc->bucket_count * 2;
    struct lsdk_rpc_req **grown = calloc(count, sizeof *grown);
    if (grown == NULL) return;
    struct lsdk_rpc_req **old = rpc->buckets;
    size_t old_count = rpc->bucket_count;
    rpc->buckets = grown;
    rpc->bucket_count = count;
    for (size_t i = 0; i < old_count; i++) {
        struct lsdk_rpc_req *req = old[i];
        while (req != NULL) {
            struct lsdk_rpc_req *next = req->hash_next;
            size_t bucket = bucket_of(rpc, req->id);
            req->hash_next = grown[bucket];
            grown[bucket] = req;
            req = next;
        }
    }
    free(old);
}

static void table_insert(struct lsdk_rpc *rpc, struct lsdk_rpc_req *req) {
    table_grow(rpc);
    size_t bucket = bucket_of(rpc, req->id);
    req->hash_next = rpc->buckets[bucket];
    rpc->buckets[bucket] = req;
    req->order_previous = rpc->order_tail;
    req->order_next = NULL;
    if (rpc->order_tail != NULL) {
        rpc->order_tail->order_next = req;
    } else {
        rpc->order_head = req;
    }
    rpc->order_tail = req;
    rpc->pending_count++;
    req->pending = true;
    req->refs++; /* the table's */
}

/** Takes `req` out of the table (its id is free from now on) and counts it settled. The table's
    reference passes to the caller. */
static void table_remove(struct lsdk_rpc *rpc, struct lsdk_rpc_req *req) {
    LSDK_ASSERT(req->pending);
    struct lsdk_rpc_req **link = &rpc->buckets[bucket_of(rpc, req->id)];
    while (*link != req) link = &(*link)->hash_next;
    *link = req->hash_next;
    req->hash_next = NULL;
    if (req->order_previous != NULL) {
        req->order_previous->order_next = req->order_next;
    } else {
        rpc->order_head = req->order_next;
    }
    if (req->order_next != NULL) {
        req->order_next->order_previous = req->order_previous;
    } else {
        rpc->order_tail = req->order_previous;
    }
    req->order_previous = NULL;
    req->order_next = NULL;
    rpc->pending_count--;
    req->pending = false;
    lsdk_count(rpc->client, LSDK_COUNTER_rpc_requests_settled, 1);
}

/* ------------------------------------------------------------------------ */
/* References                                                               */
/* ------------------------------------------------------------------------ */

/** Drops one reference of the connection (mutex held); true when that finished it. */
static bool rpc_unref_locked(struct lsdk_rpc *rpc) {
    LSDK_ASSERT(rpc->inflight > 0);
    return --rpc->inflight == 0;
}

/** Drops one reference of a request (mutex held); true when that finished the connection. */
static bool req_unref_locked(struct lsdk_rpc_req *req) {
    LSDK_ASSERT(req->refs > 0);
    if (--req->refs > 0) return false;
    struct lsdk_rpc *rpc = req->rpc;
    lsdk_count(rpc->client, LSDK_COUNTER_rpc_requests_finished, 1);
    free(req);
    return rpc_unref_locked(rpc);
}

static void release_set(struct lsdk_client *client, lsdk_callback_set_t *set) {
    /* Counted before the release callback so a test woken by it sees the count. */
    lsdk_count(client, LSDK_COUNTER_contexts_released, 1);
    if (set->callbacks.release_context != NULL) {
        lsdk_frame_t frame;
        lsdk_frame_push(&frame, client, NULL);
        set->callbacks.release_context(set->callbacks.context);
        lsdk_frame_pop(&frame);
    }
    free(set);
}

/** The connection's last reference went: release its set, free its table, let its client go. */
static void rpc_finish(struct lsdk_rpc *rpc) {
    struct lsdk_client *client = rpc->client;
    lsdk_lock(&rpc->mutex);
    lsdk_callback_set_t *set = rpc->set;
    rpc->set = NULL;
    bool release = set != NULL && --set->refs == 0;
    struct lsdk_rpc_req **buckets = rpc->buckets;
    rpc->buckets = NULL;
    lsdk_unlock(&rpc->mutex);
    free(buckets);
    /* Counted before the release callback, as every finish is, so a test woken by it sees it. */
    lsdk_count(client, LSDK_COUNTER_rpc_connections_finished, 1);
    if (release) release_set(client, set);
    /* Last touch of the client's runtime: its destroy may free it from now on. */
    lsdk_client_live_release(client);
}

static void rpc_unref(struct lsdk_rpc *rpc) {
    lsdk_lock(&rpc->mutex);
    bool finished = rpc_unref_locked(rpc);
    lsdk_unlock(&rpc->mutex);
    if (finished) rpc_finish(rpc);
}

static void req_unref(struct lsdk_rpc_req *req) {
    struct lsdk_rpc *rpc = req->rpc;
    lsdk_lock(&rpc->mutex);
    bool finished = req_unref_locked(req);
    lsdk_unlock(&rpc->mutex);
    if (finished) rpc_finish(rpc);
}

/* ------------------------------------------------------------------------ */
/* Draws (mutex held)                                                       */
/* ------------------------------------------------------------------------ */

static lsdk_mode_t draw_mode(struct lsdk_rpc_req *req, bool sync_allowed) {
    switch (req->behavior.delivery) {
    case LSDK_DELIVERY_SYNC: return sync_allowed ? LSDK_MODE_SYNC : LSDK_MODE_WORKER;
    case LSDK_DELIVERY_WORKER: return LSDK_MODE_WORKER;
    case LSDK_DELIVERY_FRESH_THREAD: return LSDK_MODE_FRESH;
    case LSDK_DELIVERY_LOOP: return LSDK_MODE_LOOP;
    default:
        if (sync_allowed) return (lsdk_mode_t)lsdk_rng_below(&req->rng, 3);
        return lsdk_rng_below(&req->rng, 2) == 0 ? LSDK_MODE_WORKER : LSDK_MODE_FRESH;
    }
}

/** Where work that never runs inside a call goes: the loop thread for LOOP delivery, a worker
    otherwise. */
static lsdk_mode_t async_mode(const struct lsdk_rpc_req *req) {
    return req->behavior.delivery == LSDK_DELIVERY_LOOP ? LSDK_MODE_LOOP : LSDK_MODE_WORKER;
}

static uint64_t draw_delay(struct lsdk_rpc_req *req) {
    uint64_t delay = req->behavior.delay_us;
    if (req->behavior.jitter_us > 0) delay += lsdk_rng_below(&req->rng, req->behavior.jitter_us + 1);
    return delay;
}

static bool draw_per_mille(uint64_t *rng, uint32_t per_mille) {
    return per_mille > 0 && lsdk_rng_below(rng, LSDK_MAX_PER_MILLE) < per_mille;
}

/* ------------------------------------------------------------------------ */
/* Delivery                                                                 */
/* ------------------------------------------------------------------------ */

enum {
    LSDK_REPLY_OUT_OF_ORDER = 1u << 0,
    LSDK_REPLY_DUPLICATE = 1u << 1,
    LSDK_REPLY_UNKNOWN = 1u << 2,
    LSDK_REPLY_AFTER_DISCONNECT = 1u << 3,
    LSDK_REPLY_AFTER_CANCEL = 1u << 4,
};

/** The installed set with one more reference for a callback about to run, or NULL. */
static lsdk_callback_set_t *set_acquire(struct lsdk_rpc *rpc) {
    lsdk_lock(&rpc->mutex);
    lsdk_callback_set_t *set = rpc->set;
    if (set != NULL) set->refs++;
    lsdk_unlock(&rpc->mutex);
    return set;
}

static void set_return(struct lsdk_rpc *rpc, lsdk_callback_set_t *set) {
    lsdk_lock(&rpc->mutex);
    bool release = --set->refs == 0;
    lsdk_unlock(&rpc->mutex);
    if (release) release_set(rpc->client, set);
}

/** Calls on_reply (no lock held), or counts the reply discarded when none is installed. `req` is
    NULL for a reply to an id that was not pending; the caller keeps it alive. */
static void deliver_reply(struct lsdk_rpc *rpc, lsdk_where_t where, uint64_t id, lsdk_status_t status,
                          const struct lsdk_rpc_req *req, uint32_t attempt, uint32_t flags) {
    struct lsdk_client *client = rpc->client;
    lsdk_callback_set_t *set = set_acquire(rpc);
    if (set == NULL || set->callbacks.on_reply == NULL) {
        lsdk_count(client, LSDK_COUNTER_rpc_replies_discarded, 1);
        if (set != NULL) set_return(rpc, set);
        return;
    }
    uint8_t *body = NULL;
    size_t length = 0;
    const char *message = unknown_message;
    uint64_t number = 0;
    if (req != NULL) {
        number = req->number;
        if (status == LSDK_OK) {
            message = req->path;
            length = req->response_size;
            if (length > 0) {
                body = lsdk_xmalloc(length);
                for (size_t i = 0; i < length; i++) body[i] = lsdk_content_byte_inline(number, i);
            }
        } else if (status == LSDK_ERR_CANCELLED) {
            message = cancelled_message;
        } else if (status == LSDK_ERR_DISCONNECTED) {
            message = disconnected_message;
        } else {
            message = req->message;
        }
    }
    lsdk_response_t response = {
        .request_id = number, .attempt = attempt, .body = body, .body_length = length, .message = message};
    /* Counted before the callback so whoever the callback wakes sees the counts. */
    lsdk_count_where(client, where);
    lsdk_count(client, LSDK_COUNTER_rpc_replies, 1);
    if (flags & LSDK_REPLY_OUT_OF_ORDER) lsdk_count(client, LSDK_COUNTER_rpc_replies_out_of_order, 1);
    if (flags & LSDK_REPLY_DUPLICATE) lsdk_count(client, LSDK_COUNTER_rpc_replies_duplicate, 1);
    if (flags & LSDK_REPLY_UNKNOWN) lsdk_count(client, LSDK_COUNTER_rpc_replies_unknown_id, 1);
    if (flags & LSDK_REPLY_AFTER_DISCONNECT) lsdk_count(client, LSDK_COUNTER_rpc_replies_after_disconnect, 1);
    if (flags & LSDK_REPLY_AFTER_CANCEL) lsdk_count(client, LSDK_COUNTER_rpc_replies_after_cancel, 1);

    lsdk_frame_t frame;
    lsdk_frame_push(&frame, client, NULL);
    set->callbacks.on_reply(set->callbacks.context, id, status, &response);
    lsdk_frame_pop(&frame);

    /* The response was valid only during the callback. */
    if (body != NULL) {
        memset(body, 0xDD, length);
        free(body);
    }
    set_return(rpc, set);
}

static void deliver_disconnect(struct lsdk_rpc *rpc, lsdk_where_t where, bool spontaneous, uint64_t dropped) {
    lsdk_callback_set_t *set = set_acquire(rpc);
    if (set == NULL) return;
    if (set->callbacks.on_disconnect != NULL) {
        lsdk_count_where(rpc->client, where);
        lsdk_frame_t frame;
        lsdk_frame_push(&frame, rpc->client, NULL);
        set->callbacks.on_disconnect(set->callbacks.context, spontaneous, dropped);
        lsdk_frame_pop(&frame);
    }
    set_return(rpc, set);
}

/** With the connection's unknown_reply_per_mille, a reply for an id that is not pending. */
static void maybe_unknown_reply(struct lsdk_rpc *rpc, lsdk_where_t where) {
    if (rpc->config.unknown_reply_per_mille == 0) return;
    uint64_t id = 0;
    lsdk_lock(&rpc->mutex);
    if (rpc->state == LSDK_RPC_OPEN && draw_per_mille(&rpc->rng, rpc->config.unknown_reply_per_mille)) {
        for (int attempt = 0; attempt < 8 && id == 0; attempt++) {
            uint64_t candidate = lsdk_rng_next(&rpc->rng) & rpc->id_mask;
            if (candidate != 0 && table_find(rpc, candidate) == NULL) id = candidate;
        }
    }
    lsdk_unlock(&rpc->mutex);
    if (id != 0) deliver_reply(rpc, where, id, LSDK_OK, NULL, 1, LSDK_REPLY_UNKNOWN);
}

/* ------------------------------------------------------------------------ */
/* Tasks                                                                    */
/* ------------------------------------------------------------------------ */

/** The normal replies of a request, one after the other: the first settles it, the others are
    duplicates. They stop once the request is dropped or the connection destroyed. */
static void run_reply(struct lsdk_rpc_req *req, lsdk_where_t where) {
    struct lsdk_rpc *rpc = req->rpc;
    const lsdk_behavior_t *b = &req->behavior;
    for (;;) {
        lsdk_lock(&rpc->mutex);
        if (req->dropped || rpc->state != LSDK_RPC_OPEN) {
            bool finished = req_unref_locked(req);
            lsdk_unlock(&rpc->mutex);
            if (finished) rpc_finish(rpc);
            return;
        }
        uint32_t index = req->next_completion++;
        uint32_t attempt = ++req->attempts;
        bool last = req->next_completion >= b->completion_count;
        uint32_t flags = req->cancel_called ? LSDK_REPLY_AFTER_CANCEL : 0;
        if (req->pending) {
            if (rpc->order_head != req) flags |= LSDK_REPLY_OUT_OF_ORDER;
            table_remove(rpc, req);
            req->refs--; /* the table's; this task still holds one */
        } else {
            flags |= LSDK_REPLY_DUPLICATE;
        }
        lsdk_unlock(&rpc->mutex);

        lsdk_status_t status = b->outcomes[index] == LSDK_OUTCOME_SUCCESS ? LSDK_OK : b->error_status;
        deliver_reply(rpc, where, req->id, status, req, attempt, flags);
        maybe_unknown_reply(rpc, where);
        if (last) {
            req_unref(req);
            return;
        }

        lsdk_lock(&rpc->mutex);
        lsdk_mode_t mode = draw_mode(req, where == LSDK_WHERE_SYNC);
        uint64_t delay = mode == LSDK_MODE_SYNC ? 0 : draw_delay(req);
        lsdk_unlock(&rpc->mutex);
        if (mode == LSDK_MODE_SYNC) continue;
        lsdk_dispatch(rpc->client, &req->reply_task, mode, delay);
        return;
    }
}

static void dispatch_late(struct lsdk_rpc_req *req) {
    lsdk_dispatch(req->rpc->client, &req->late_task, async_mode(req), req->late_delay_us);
}

/** An asynchronous cancellation or disconnect report; then the late reply, if reserved. */
static void run_report(struct lsdk_rpc_req *req, lsdk_where_t where) {
    struct lsdk_rpc *rpc = req->rpc;
    lsdk_lock(&rpc->mutex);
    uint32_t attempt = ++req->attempts;
    lsdk_status_t status = req->report_status;
    bool late = req->late_reserved;
    lsdk_unlock(&rpc->mutex);
    deliver_reply(rpc, where, req->id, status, req, attempt, 0);
    if (late) dispatch_late(req);
    req_unref(req);
}

static void run_late(struct lsdk_rpc_req *req, lsdk_where_t where) {
    struct lsdk_rpc *rpc = req->rpc;
    lsdk_lock(&rpc->mutex);
    uint32_t attempt = ++req->attempts;
    uint32_t flags = req->by_disconnect ? LSDK_REPLY_AFTER_DISCONNECT : LSDK_REPLY_AFTER_CANCEL;
    lsdk_unlock(&rpc->mutex);
    deliver_reply(rpc, where, req->id, LSDK_OK, req, attempt, flags);
    req_unref(req);
}

static void drop_all(struct lsdk_rpc *rpc, lsdk_where_t where, bool spontaneous, bool close);

void lsdk_rpc_task_run(lsdk_task_t *task, lsdk_where_t where) {
    switch (task->kind) {
    case LSDK_TASK_RPC_REPLY: run_reply(task->owner, where); break;
    case LSDK_TASK_RPC_REPORT: run_report(task->owner, where); break;
    case LSDK_TASK_RPC_LATE: run_late(task->owner, where); break;
    case LSDK_TASK_RPC_DISCONNECT: {
        struct lsdk_rpc *rpc = task->owner;
        free(task);
        drop_all(rpc, where, true, false);
        rpc_unref(rpc); /* the task's */
        break;
    }
    default: lsdk_fatal("unknown rpc task kind", (int)task->kind);
    }
}

/* ------------------------------------------------------------------------ */
/* Disconnect                                                               */
/* ------------------------------------------------------------------------ */

/** Drops every pending request, reports them as configured, then calls on_disconnect, on this
    thread. `close` also destroys the connection (its open reference goes). A spontaneous
    disconnect of a destroyed connection does nothing. */
static void drop_all(struct lsdk_rpc *rpc, lsdk_where_t where, bool spontaneous, bool close) {
    int32_t report = rpc->config.disconnect_report;
    lsdk_lock(&rpc->mutex);
    if (rpc->state != LSDK_RPC_OPEN) {
        lsdk_unlock(&rpc->mutex);
        return;
    }
    rpc->inflight++; /* this call's own reference while it works */
    if (close) {
        rpc->state = LSDK_RPC_CLOSED;
        rpc_unref_locked(rpc); /* the open one; ours keeps it in flight */
    }
    /* Detach the whole send-order list; its links stay intact for the walk below. */
    struct lsdk_rpc_req *dropped = rpc->order_head;
    uint64_t count = rpc->pending_count;
    for (struct lsdk_rpc_req *req = dropped; req != NULL;) {
        struct lsdk_rpc_req *next = req->order_next;
        table_remove(rpc, req); /* the table's reference is now this call's */
        req->order_next = next;  /* kept as the walk's link */
        req->dropped = true;
        req->by_disconnect = true;
        if (report == LSDK_DISCONNECT_REPORT_SYNC) {
            req->report_attempt = ++req->attempts;
        } else if (report == LSDK_DISCONNECT_REPORT_ASYNC) {
            req->refs++;
            req->report_status = LSDK_ERR_DISCONNECTED;
        }
        if (req->behavior.late_callback_after_cancel) {
            req->late_reserved = true;
            req->refs++;
            req->late_delay_us = draw_delay(req);
        }
        req = next;
    }
    lsdk_count(rpc->client, LSDK_COUNTER_rpc_disconnects, 1);
    if (spontaneous) lsdk_count(rpc->client, LSDK_COUNTER_rpc_disconnects_spontaneous, 1);
    lsdk_count(rpc->client, LSDK_COUNTER_rpc_dropped_at_disconnect, count);
    lsdk_unlock(&rpc->mutex);

    if (report == LSDK_DISCONNECT_REPORT_SYNC) {
        for (struct lsdk_rpc_req *req = dropped; req != NULL; req = req->order_next) {
            deliver_reply(rpc, where, req->id, LSDK_ERR_DISCONNECTED, req, req->report_attempt, 0);
        }
    }
    deliver_disconnect(rpc, where, spontaneous, count);
    for (struct lsdk_rpc_req *req = dropped; req != NULL;) {
        struct lsdk_rpc_req *next = req->order_next;
        req->order_next = NULL;
        if (report == LSDK_DISCONNECT_REPORT_ASYNC) {
            /* The report task dispatches the late reply after it. */
            lsdk_dispatch(rpc->client, &req->report_task, async_mode(req), 0);
        } else if (req->late_reserved) {
            dispatch_late(req);
        }
        req_unref(req); /* the table's */
        req = next;
    }
    rpc_unref(rpc);
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */
/* ------------------------------------------------------------------------ */

static lsdk_status_t copy_set(const lsdk_rpc_callbacks_t *callbacks, lsdk_callback_set_t **out) {
    *out = NULL;
    if (callbacks == NULL) return LSDK_OK;
    lsdk_callback_set_t *set = malloc(sizeof *set);
    if (set == NULL) return LSDK_ERR_RESOURCES;
    set->callbacks = *callbacks;
    set->refs = 1; /* installed */
    *out = set;
    return LSDK_OK;
}

lsdk_status_t lsdk_rpc_create(lsdk_client_t *client, const lsdk_rpc_config_t *config,
                              const lsdk_rpc_callbacks_t *callbacks, lsdk_rpc_t **out_rpc) {
    if (client == NULL || client->magic != LSDK_CLIENT_MAGIC) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    lsdk_affinity_check(client);
    if (!lsdk_client_enter(client)) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    lsdk_rpc_config_t defaults;
    lsdk_rpc_config_init(&defaults);
    if (config == NULL) config = &defaults;
    lsdk_status_t status = out_rpc == NULL ? LSDK_ERR_NULL_ARGUMENT : config_validate(config);
    if (status != LSDK_OK) {
        lsdk_client_leave(client);
        return lsdk_bad_call(client, status);
    }
    struct lsdk_rpc *rpc = calloc(1, sizeof *rpc);
    struct lsdk_rpc_req **buckets = calloc(64, sizeof *buckets);
    lsdk_callback_set_t *set = NULL;
    if (rpc == NULL || buckets == NULL || copy_set(callbacks, &set) != LSDK_OK) {
        free(rpc);
        free(buckets);
        lsdk_client_leave(client);
        return LSDK_ERR_RESOURCES;
    }
    pthread_once(&tombstones_once, tombstones_init);
    rpc->magic = LSDK_RPC_MAGIC;
    rpc->client = client;
    lsdk_mutex_init(&rpc->mutex);
    rpc->config = *config;
    rpc->id_mask = lsdk_sequence_mask(config->id_bits);
    rpc->state = LSDK_RPC_OPEN;
    rpc->inflight = 1; /* open */
    rpc->rng = config->seed != 0 ? config->seed : lsdk_mix64(client->seed ^ 0x52504343u /* "RPCC" */);
    rpc->next_id = 1;
    rpc->buckets = buckets;
    rpc->bucket_count = 64;
    rpc->set = set;

    lsdk_count(client, LSDK_COUNTER_rpc_connections_created, 1);
    if (set != NULL) lsdk_count(client, LSDK_COUNTER_contexts_created, 1);
    lsdk_lock(&tombstones_mutex);
    rpc->tombstone_next = tombstones;
    tombstones = rpc;
    lsdk_unlock(&tombstones_mutex);

    /* Listed (and counted live) under the mutex destroy sweeps under: a destroy that began
       meanwhile is woken and destroys it. */
    lsdk_client_live_hold(client);
    lsdk_lock(&client->mutex);
    rpc->listed = true;
    rpc->list_previous = NULL;
    rpc->list_next = client->rpcs;
    if (client->rpcs != NULL) client->rpcs->list_previous = rpc;
    client->rpcs = rpc;
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) LSDK_CHECK(pthread_cond_broadcast(&client->cond));
    lsdk_unlock(&client->mutex);

    *out_rpc = rpc;
    lsdk_client_leave(client);
    return LSDK_OK;
}

/** Takes `rpc` off its client's list (client->mutex held); false when it was not listed. */
static bool unlist_locked(struct lsdk_client *client, struct lsdk_rpc *rpc) {
    if (!rpc->listed) return false;
    if (rpc->list_previous != NULL) {
        rpc->list_previous->list_next = rpc->list_next;
    } else {
        client->rpcs = rpc->list_next;
    }
    if (rpc->list_next != NULL) rpc->list_next->list_previous = rpc->list_previous;
    rpc->list_next = NULL;
    rpc->list_previous = NULL;
    rpc->listed = false;
    return true;
}

struct lsdk_rpc *lsdk_rpc_take_open(struct lsdk_client *client) {
    struct lsdk_rpc *rpc = client->rpcs;
    if (rpc != NULL) unlist_locked(client, rpc);
    return rpc;
}

void lsdk_rpc_close(struct lsdk_rpc *rpc) { drop_all(rpc, LSDK_WHERE_CANCEL, false, true); }

lsdk_status_t lsdk_rpc_destroy(lsdk_rpc_t *rpc) {
    if (!rpc_valid(rpc)) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    struct lsdk_client *client = rpc->client;
    lsdk_affinity_check(client);
    lsdk_lock(&client->mutex);
    /* A destroying client destroys its connections itself. */
    bool mine = atomic_load(&client->state) == LSDK_CLIENT_ALIVE && unlist_locked(client, rpc);
    lsdk_unlock(&client->mutex);
    if (!mine) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    /* Unlisted but not finished, the connection keeps its client's runtime alive meanwhile. */
    lsdk_rpc_close(rpc);
    return LSDK_OK;
}

lsdk_status_t lsdk_rpc_set_callbacks(lsdk_rpc_t *rpc, const lsdk_rpc_callbacks_t *callbacks) {
    if (!rpc_valid(rpc)) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    struct lsdk_client *client = rpc->client;
    lsdk_affinity_check(client);
    lsdk_callback_set_t *set = NULL;
    if (copy_set(callbacks, &set) != LSDK_OK) return LSDK_ERR_RESOURCES;
    lsdk_lock(&rpc->mutex);
    if (rpc->state != LSDK_RPC_OPEN) {
        lsdk_unlock(&rpc->mutex);
        free(set);
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    if (set != NULL) lsdk_count(client, LSDK_COUNTER_contexts_created, 1);
    lsdk_callback_set_t *old = rpc->set;
    rpc->set = set;
    bool release = old != NULL && --old->refs == 0;
    lsdk_unlock(&rpc->mutex);
    if (release) release_set(client, old);
    return LSDK_OK;
}

lsdk_status_t lsdk_rpc_send(lsdk_rpc_t *rpc, const lsdk_request_t *request, const lsdk_behavior_t *behavior,
                            uint64_t id, uint64_t *out_id) {
    if (!rpc_valid(rpc)) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    struct lsdk_client *client = rpc->client;
    lsdk_affinity_check(client);
    if (!lsdk_client_enter(client)) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    lsdk_lock(&rpc->mutex);
    bool open = rpc->state == LSDK_RPC_OPEN;
    lsdk_unlock(&rpc->mutex);

    lsdk_behavior_t default_behavior;
    lsdk_behavior_init(&default_behavior);
    if (behavior == NULL) behavior = &default_behavior;
    lsdk_request_t default_request = {.path = NULL, .response_size = 0};
    if (request == NULL) request = &default_request;
    lsdk_status_t status = LSDK_OK;
    if (!open) {
        status = LSDK_ERR_CLIENT_DESTROYED;
    } else {
        status = lsdk_behavior_validate(behavior, client->has_loop);
    }
    if (status == LSDK_OK && behavior->cancel_mode == LSDK_CANCEL_WAITS) status = LSDK_ERR_OUT_OF_RANGE;
    if (status == LSDK_OK && request->response_size > LSDK_MAX_CHUNK_SIZE) status = LSDK_ERR_OUT_OF_RANGE;
    if (status == LSDK_OK && id == 0 && out_id == NULL) status = LSDK_ERR_NULL_ARGUMENT;
    if (status == LSDK_OK && id > rpc->id_mask) status = LSDK_ERR_OUT_OF_RANGE;
    if (status != LSDK_OK) {
        lsdk_client_leave(client);
        return lsdk_bad_call(client, status);
    }

    struct lsdk_rpc_req *req = calloc(1, sizeof *req);
    if (req == NULL) {
        lsdk_client_leave(client);
        return LSDK_ERR_RESOURCES;
    }
    req->rpc = rpc;
    req->behavior = *behavior;
    lsdk_copy_string(req->path, request->path);
    lsdk_copy_string(req->message,
                     behavior->error_message != NULL ? behavior->error_message : default_error_message);
    req->behavior.error_message = req->message;
    req->response_size = request->response_size;
    req->number = atomic_fetch_add(&client->next_request_id, 1);
    req->rng = behavior->seed != 0 ? behavior->seed : lsdk_mix64(client->seed ^ lsdk_mix64(req->number));
    req->reply_task.kind = LSDK_TASK_RPC_REPLY;
    req->reply_task.owner = req;
    req->report_task.kind = LSDK_TASK_RPC_REPORT;
    req->report_task.owner = req;
    req->late_task.kind = LSDK_TASK_RPC_LATE;
    req->late_task.owner = req;

    lsdk_task_t *disconnect = NULL;
    if (rpc->config.disconnect_per_mille > 0) {
        disconnect = calloc(1, sizeof *disconnect);
        if (disconnect != NULL) {
            disconnect->kind = LSDK_TASK_RPC_DISCONNECT;
            disconnect->owner = rpc;
        }
    }

    lsdk_lock(&rpc->mutex);
    if (rpc->state != LSDK_RPC_OPEN) {
        status = LSDK_ERR_CLIENT_DESTROYED;
    } else if (id != 0) {
        if (table_find(rpc, id) != NULL) status = LSDK_ERR_DUPLICATE_ID;
    } else if (rpc->pending_count >= rpc->id_mask) {
        status = LSDK_ERR_RESOURCES;
    } else {
        /* Count up, wrap to 1, skip what is pending: MQTT's message ids. */
        do {
            id = rpc->next_id;
            rpc->next_id = rpc->next_id >= rpc->id_mask ? 1 : rpc->next_id + 1;
        } while (table_find(rpc, id) != NULL);
    }
    if (status != LSDK_OK) {
        lsdk_unlock(&rpc->mutex);
        free(req);
        free(disconnect);
        lsdk_client_leave(client);
        return status == LSDK_ERR_RESOURCES ? status : lsdk_bad_call(client, status);
    }
    req->id = id;
    rpc->inflight++; /* the live request's */
    req->refs = 1;   /* this call's, while it works */
    table_insert(rpc, req);
    /* Counted under the mutex a cancel or reply settles it under: settled never overtakes sent. */
    lsdk_count(client, LSDK_COUNTER_rpc_requests_sent, 1);
    bool replies = behavior->completion_count > 0;
    lsdk_mode_t mode = LSDK_MODE_WORKER;
    uint64_t delay = 0;
    if (replies) {
        req->refs++; /* the reply task's */
        mode = draw_mode(req, true);
        delay = mode == LSDK_MODE_SYNC ? 0 : draw_delay(req);
    }
    uint64_t disconnect_delay = 0;
    if (disconnect != NULL && draw_per_mille(&rpc->rng, rpc->config.disconnect_per_mille)) {
        rpc->inflight++; /* the task's */
        disconnect_delay = draw_delay(req);
    } else {
        free(disconnect);
        disconnect = NULL;
    }
    lsdk_unlock(&rpc->mutex);

    if (replies) {
        if (mode == LSDK_MODE_SYNC) {
            run_reply(req, LSDK_WHERE_SYNC);
        } else {
            lsdk_dispatch(client, &req->reply_task, mode, delay);
        }
    }
    if (disconnect != NULL) lsdk_dispatch(client, disconnect, async_mode(req), disconnect_delay);
    req_unref(req);
    /* After every synchronous reply ran. */
    if (out_id != NULL) *out_id = id;
    lsdk_client_leave(client);
    return LSDK_OK;
}

lsdk_status_t lsdk_rpc_cancel(lsdk_rpc_t *rpc, uint64_t id) {
    if (!rpc_valid(rpc)) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    struct lsdk_client *client = rpc->client;
    lsdk_affinity_check(client);
    if (!lsdk_client_enter(client)) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    lsdk_lock(&rpc->mutex);
    if (rpc->state != LSDK_RPC_OPEN) {
        lsdk_unlock(&rpc->mutex);
        lsdk_client_leave(client);
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    struct lsdk_rpc_req *req = table_find(rpc, id);
    if (req == NULL) {
        lsdk_unlock(&rpc->mutex);
        lsdk_client_leave(client);
        return LSDK_ERR_UNKNOWN_ID;
    }
    if (!req->cancel_called) lsdk_count(client, LSDK_COUNTER_rpc_cancels, 1);
    req->cancel_called = true;
    int32_t mode = req->behavior.cancel_mode;
    if (mode == LSDK_CANCEL_IGNORED) {
        lsdk_unlock(&rpc->mutex);
        lsdk_client_leave(client);
        return LSDK_OK;
    }
    table_remove(rpc, req); /* the table's reference is now this call's */
    req->dropped = true;
    bool late = req->behavior.late_callback_after_cancel;
    if (late) {
        req->late_reserved = true;
        req->refs++;
        req->late_delay_us = draw_delay(req);
    }
    uint32_t attempt = 0;
    uint64_t report_delay = 0;
    if (mode == LSDK_CANCEL_CALLBACK_SYNC) {
        attempt = ++req->attempts;
    } else if (mode == LSDK_CANCEL_CALLBACK_ASYNC) {
        req->refs++;
        req->report_status = LSDK_ERR_CANCELLED;
        report_delay = draw_delay(req);
    }
    lsdk_unlock(&rpc->mutex);

    switch (mode) {
    case LSDK_CANCEL_CALLBACK_SYNC:
        deliver_reply(rpc, LSDK_WHERE_CANCEL, id, LSDK_ERR_CANCELLED, req, attempt, 0);
        if (late) dispatch_late(req);
        break;
    case LSDK_CANCEL_CALLBACK_ASYNC:
        /* The report task dispatches the late reply after it. */
        lsdk_dispatch(client, &req->report_task, async_mode(req), report_delay);
        break;
    default:
        if (late) dispatch_late(req);
        break;
    }
    req_unref(req);
    lsdk_client_leave(client);
    return LSDK_OK;
}

lsdk_status_t lsdk_rpc_disconnect(lsdk_rpc_t *rpc) {
    if (!rpc_valid(rpc)) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    struct lsdk_client *client = rpc->client;
    lsdk_affinity_check(client);
    if (!lsdk_client_enter(client)) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    lsdk_lock(&rpc->mutex);
    bool open = rpc->state == LSDK_RPC_OPEN;
    lsdk_unlock(&rpc->mutex);
    /* A destroy racing this call may win: then this one does nothing, as if it came after. */
    if (open) drop_all(rpc, LSDK_WHERE_CANCEL, false, false);
    lsdk_client_leave(client);
    return open ? LSDK_OK : lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
}
