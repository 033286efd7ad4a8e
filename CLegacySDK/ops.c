/* Operations: start, delivery of completions and stream events, cancel, pause/resume and the
 * context-release contract; listeners (streams that hold a topic). See lsdk_internal.h for the
 * lifetime rules. */
#include "lsdk_internal.h"

#include <stdio.h>

/** Events a worker delivers per scheduling turn before it lets other work run. */
#define LSDK_PRODUCER_QUOTA 4096u

enum { LSDK_HOLD_NONE = 0, LSDK_HOLD_HANG, LSDK_HOLD_PARKED };

enum {
    LSDK_PHASE_DATA = 0,  /* data and progress events */
    LSDK_PHASE_END,       /* the terminal event is next */
    LSDK_PHASE_DUPLICATE, /* the duplicate terminal event is next */
    LSDK_PHASE_AFTER,     /* data events after the terminal */
    LSDK_PHASE_SILENT,    /* STREAM_END_NONE: nothing more, ever (until cancelled) */
    LSDK_PHASE_DONE,      /* everything produced */
};

enum { LSDK_CLAIM_EVENT, LSDK_CLAIM_HANG, LSDK_CLAIM_DONE };

struct lsdk_op {
    pthread_mutex_t mutex;
    struct lsdk_client *client;
    _Atomic uint32_t refs;
    struct lsdk_op_links links; /* guarded by client->mutex */

    /* Immutable after start. */
    bool is_stream;
    /** A listener (lsdk_listen_start): a stream that holds its topic while bound. */
    bool is_listener;
    uint64_t topic;
    uint64_t request_id;
    lsdk_behavior_t behavior;
    char path[256];
    char message[256];
    uint32_t response_size;
    uint64_t total_bytes;
    uint64_t data_count;
    lsdk_completion_fn completion;
    lsdk_event_fn on_event;
    lsdk_pull_event_fn pull_event; /* pull-style streams: instead of on_event */
    void *context;
    lsdk_release_fn release_context;
    /** Data buffer of the (single) producer of a stream. */
    uint8_t *producer_buffer;

    /* LSDK_CANCEL_WAITS only: callbacks running now, and cancels waiting for them to return. */
    _Atomic uint32_t running;
    _Atomic uint32_t waiters;

    /* Guarded by mutex. */
    uint64_t rng;
    uint32_t inflight;
    int hold;
    bool finished;
    bool cancelled;      /* a cancel took effect (not IGNORED): no more normal callbacks */
    bool cancel_called;  /* a user cancel was seen (idempotence, after-cancel accounting) */
    bool cancel_counted;
    bool late_reserved;
    uint64_t late_delay_us;
    /* requests */
    uint32_t next_completion;
    uint32_t attempts;
    /* streams */
    int phase;
    uint64_t data_index;
    uint64_t next_index; /* production index of the next numbered event */
    uint64_t bytes_produced;
    uint64_t after_offset;
    uint32_t after_left;
    bool progress_pending;
    bool ended;
    bool paused;
    bool producer_active;
    uint32_t batch_outstanding;
    /** Events a pull callback refused, in production order; delivered first after the resume. */
    lsdk_ev_t pending[LSDK_MAX_STREAM_CONCURRENCY];
    uint32_t pending_count;

    /* Listeners: guarded by client->listen_mutex. */
    bool topic_bound;
    struct lsdk_op *listen_next;

    lsdk_task_t request_task;
    lsdk_task_t produce_task;
    lsdk_task_t cancel_task;
    lsdk_task_t late_task;
    lsdk_task_t event_tasks[LSDK_MAX_STREAM_CONCURRENCY];
};

static const char cancelled_message[] = "operation cancelled";
static const char default_error_message[] = "simulated remote failure";

struct lsdk_op_links *lsdk_op_links(struct lsdk_op *op) { return &op->links; }
struct lsdk_client *lsdk_op_client(const struct lsdk_op *op) { return op->client; }

void lsdk_op_ref(struct lsdk_op *op) { atomic_fetch_add_explicit(&op->refs, 1, memory_order_relaxed); }

void lsdk_op_unref(struct lsdk_op *op) {
    if (atomic_fetch_sub_explicit(&op->refs, 1, memory_order_acq_rel) != 1) return;
    free(op->producer_buffer);
    lsdk_mutex_destroy(&op->mutex);
    free(op);
}

/* ------------------------------------------------------------------------ */
/* Inflight references and the release of the context                       */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Listener topics                                                          */
/* ------------------------------------------------------------------------ */

/** Claims `topic` for `op` (a listener): false when another listener holds it. */
static bool topic_bind(struct lsdk_op *op) {
    struct lsdk_client *client = op->client;
    lsdk_lock(&client->listen_mutex);
    bool taken = false;
    for (struct lsdk_op *other = client->listeners; other != NULL; other = other->listen_next) {
        if (other->topic == op->topic) {
            taken = true;
            break;
        }
    }
    if (!taken) {
        op->listen_next = client->listeners;
        client->listeners = op;
        op->topic_bound = true;
    }
    lsdk_unlock(&client->listen_mutex);
    return !taken;
}

/** Frees the listener's topic, if it still holds it. Idempotent; callable with op->mutex held
    (listen_mutex is a leaf lock). */
static void topic_unbind(struct lsdk_op *op) {
    if (!op->is_listener) return;
    struct lsdk_client *client = op->client;
    lsdk_lock(&client->listen_mutex);
    if (op->topic_bound) {
        struct lsdk_op **link = &client->listeners;
        while (*link != op) link = &(*link)->listen_next;
        *link = op->listen_next;
        op->listen_next = NULL;
        op->topic_bound = false;
    }
    lsdk_unlock(&client->listen_mutex);
}

static void op_finish(struct lsdk_op *op) {
    struct lsdk_client *client = op->client;
    topic_unbind(op);
    /* Counted before the release callback so a test woken by it sees the count. */
    lsdk_count(client, LSDK_COUNTER_operations_finished, 1);
    lsdk_count(client, LSDK_COUNTER_contexts_released, 1);
    if (op->is_listener) lsdk_count(client, LSDK_COUNTER_listener_finished, 1);
    if (op->release_context != NULL) {
        lsdk_frame_t frame;
        lsdk_frame_push(&frame, client, NULL);
        op->release_context(op->context);
        lsdk_frame_pop(&frame);
    }
    lsdk_client_live_remove(client, op);
    lsdk_op_unref(op); /* the live list's reference */
}

/** Drops one inflight reference; the last one finishes the operation. The caller must not touch
    the operation afterwards unless it owns a memory reference. */
static void inflight_drop(struct lsdk_op *op) {
    lsdk_lock(&op->mutex);
    LSDK_ASSERT(op->inflight > 0);
    bool last = --op->inflight == 0;
    if (last) op->finished = true;
    lsdk_unlock(&op->mutex);
    if (last) op_finish(op);
}

/* ------------------------------------------------------------------------ */
/* Random draws (mutex held)                                                */
/* ------------------------------------------------------------------------ */

static lsdk_mode_t draw_mode(struct lsdk_op *op, bool sync_allowed) {
    switch (op->behavior.delivery) {
    case LSDK_DELIVERY_SYNC: return sync_allowed ? LSDK_MODE_SYNC : LSDK_MODE_WORKER;
    case LSDK_DELIVERY_WORKER: return LSDK_MODE_WORKER;
    case LSDK_DELIVERY_FRESH_THREAD: return LSDK_MODE_FRESH;
    case LSDK_DELIVERY_LOOP: return LSDK_MODE_LOOP;
    default:
        if (sync_allowed) return (lsdk_mode_t)lsdk_rng_below(&op->rng, 3);
        return lsdk_rng_below(&op->rng, 2) == 0 ? LSDK_MODE_WORKER : LSDK_MODE_FRESH;
    }
}

/** Where work that never runs inside a call goes (asynchronous cancellations, late callbacks):
    the loop thread for LOOP delivery, a worker otherwise. */
static lsdk_mode_t async_mode(const struct lsdk_op *op) {
    return op->behavior.delivery == LSDK_DELIVERY_LOOP ? LSDK_MODE_LOOP : LSDK_MODE_WORKER;
}

static uint64_t draw_delay(struct lsdk_op *op) {
    uint64_t delay = op->behavior.delay_us;
    if (op->behavior.jitter_us > 0) delay += lsdk_rng_below(&op->rng, op->behavior.jitter_us + 1);
    return delay;
}

/* ------------------------------------------------------------------------ */
/* Running callbacks (LSDK_CANCEL_WAITS)                                    */
/* ------------------------------------------------------------------------ */

/** Whether the callback about to be made may run. For a WAITS operation it counts as running from
    here, decided under the mutex its cancel sets `cancelled` under: either the cancel sees it
    running (and waits for it), or it sees the cancel and is dropped. Other modes deliver what was
    claimed before a cancel and do not track running callbacks. */
static bool callback_begin(struct lsdk_op *op) {
    if (op->behavior.cancel_mode != LSDK_CANCEL_WAITS) return true;
    lsdk_lock(&op->mutex);
    bool allowed = !op->cancelled;
    if (allowed) atomic_fetch_add(&op->running, 1);
    lsdk_unlock(&op->mutex);
    return allowed;
}

static void callback_end(struct lsdk_op *op) {
    if (op->behavior.cancel_mode != LSDK_CANCEL_WAITS) return;
    /* Sequentially consistent with wait_for_callbacks: either the waiter sees running == 0, or we
       see its registration and wake it under the mutex it checks under. */
    if (atomic_fetch_sub(&op->running, 1) == 1 && atomic_load(&op->waiters) > 0) {
        struct lsdk_client *client = op->client;
        lsdk_lock(&client->mutex);
        LSDK_CHECK(pthread_cond_broadcast(&client->wait_cond));
        lsdk_unlock(&client->mutex);
    }
}

/** A WAITS cancel: blocks until no callback of `op` runs. On a thread inside one of the client's
    callbacks (its own operation's: a deadlock, counted) it also ends when destroy begins. */
static void wait_for_callbacks(struct lsdk_op *op) {
    struct lsdk_client *client = op->client;
    bool deadlock = lsdk_in_callback_of(op);
    if (deadlock) lsdk_count(client, LSDK_COUNTER_cancel_deadlocks, 1);
    bool inside = deadlock || lsdk_in_client_frame(client);
    lsdk_lock(&client->mutex);
    atomic_fetch_add(&op->waiters, 1);
    while (atomic_load(&op->running) > 0) {
        if (inside && atomic_load(&client->state) != LSDK_CLIENT_ALIVE) break;
        LSDK_CHECK(pthread_cond_wait(&client->wait_cond, &client->mutex));
    }
    atomic_fetch_sub(&op->waiters, 1);
    lsdk_unlock(&client->mutex);
}

/* ------------------------------------------------------------------------ */
/* Delivery                                                                 */
/* ------------------------------------------------------------------------ */

static const lsdk_counter_id_t where_counter[] = {
    [LSDK_WHERE_SYNC] = LSDK_COUNTER_callbacks_sync,
    [LSDK_WHERE_WORKER] = LSDK_COUNTER_callbacks_worker,
    [LSDK_WHERE_FRESH] = LSDK_COUNTER_callbacks_fresh_thread,
    [LSDK_WHERE_CANCEL] = LSDK_COUNTER_callbacks_reentrant_cancel,
    [LSDK_WHERE_LOOP] = LSDK_COUNTER_callbacks_loop,
};

void lsdk_count_where(struct lsdk_client *client, lsdk_where_t where) {
    lsdk_count(client, where_counter[where], 1);
}

static void deliver_completion(struct lsdk_op *op, lsdk_where_t where, lsdk_status_t status,
                               uint32_t attempt, uint32_t flags) {
    if (!callback_begin(op)) return;
    struct lsdk_client *client = op->client;
    uint8_t *body = NULL;
    size_t length = 0;
    const char *message = op->path;
    if (status == LSDK_OK) {
        length = op->response_size;
        if (length > 0) {
            body = lsdk_xmalloc(length);
            for (size_t i = 0; i < length; i++) {
                body[i] = lsdk_content_byte_inline(op->request_id, i);
            }
        }
    } else {
        message = status == LSDK_ERR_CANCELLED ? cancelled_message : op->message;
    }
    lsdk_response_t response = {
        .request_id = op->request_id,
        .attempt = attempt,
        .body = body,
        .body_length = length,
        .message = message,
    };
    /* Counted before the callback so whoever the callback wakes sees the counts. */
    lsdk_count(client, where_counter[where], 1);
    if (attempt > 1) lsdk_count(client, LSDK_COUNTER_callbacks_repeated, 1);
    if (flags & LSDK_EV_AFTER_CANCEL) lsdk_count(client, LSDK_COUNTER_callbacks_after_cancel, 1);

    lsdk_frame_t frame;
    lsdk_frame_push(&frame, client, op);
    op->completion(op->context, status, &response);
    lsdk_frame_pop(&frame);

    /* The response was valid only during the callback. */
    if (body != NULL) {
        memset(body, 0xDD, length);
        free(body);
    }
    callback_end(op);
}

/** A pull callback refused `ev` (mutex held): keep it for the resume and pause the stream. Returns
    whether the refusal was honoured (see lsdk_download_start_pull). */
static bool refuse_locked(struct lsdk_op *op, const lsdk_ev_t *ev) {
    if (op->cancelled || ev->kind == LSDK_EVENT_END || (ev->flags & LSDK_EV_AFTER_CANCEL)) return false;
    /* At most one batch is outstanding, and a batch holds at most stream_concurrency events. */
    LSDK_ASSERT(op->pending_count < LSDK_MAX_STREAM_CONCURRENCY);
    uint32_t at = op->pending_count;
    while (at > 0 && op->pending[at - 1].index > ev->index) {
        op->pending[at] = op->pending[at - 1];
        at--;
    }
    op->pending[at] = *ev;
    op->pending_count++;
    op->paused = true;
    /* A silent stream (STREAM_END_NONE) whose producer already went idle: the refused event needs
       the producer back on resume, so the idle hold becomes a parked one. */
    if (op->hold == LSDK_HOLD_HANG) op->hold = LSDK_HOLD_PARKED;
    return true;
}

static void deliver_event(struct lsdk_op *op, lsdk_where_t where, const lsdk_ev_t *ev,
                          uint8_t *buffer) {
    if (!callback_begin(op)) return;
    struct lsdk_client *client = op->client;
    lsdk_event_t event = {
        .kind = ev->kind,
        .sequence = ev->sequence,
        .bytes_done = ev->bytes_done,
        .bytes_total = ev->bytes_total,
        .data = NULL,
        .length = 0,
        .status = ev->status,
        .message = "",
        .request_id = op->request_id,
    };
    if (ev->kind == LSDK_EVENT_DATA) {
        uint64_t id = op->request_id;
        uint64_t offset = ev->bytes_done;
        for (uint32_t i = 0; i < ev->length; i++) buffer[i] = lsdk_content_byte_inline(id, offset + i);
        event.data = buffer;
        event.length = ev->length;
    } else if (ev->kind == LSDK_EVENT_END && ev->status != LSDK_OK) {
        event.message = ev->status == LSDK_ERR_CANCELLED ? cancelled_message : op->message;
    }
    lsdk_count(client, where_counter[where], 1);
    lsdk_count(client, LSDK_COUNTER_stream_events, 1);
    if (op->is_listener) {
        lsdk_lock(&op->mutex);
        bool paused = op->paused;
        lsdk_unlock(&op->mutex);
        lsdk_count(client, LSDK_COUNTER_listener_events, 1);
        if (paused) lsdk_count(client, LSDK_COUNTER_listener_events_while_paused, 1);
    }
    if (ev->flags & LSDK_EV_AFTER_CANCEL) lsdk_count(client, LSDK_COUNTER_callbacks_after_cancel, 1);
    if (ev->flags & LSDK_EV_AFTER_TERMINAL) {
        lsdk_count(client, LSDK_COUNTER_stream_events_after_terminal, 1);
    }

    lsdk_frame_t frame;
    lsdk_frame_push(&frame, client, op);
    int32_t answer = LSDK_PULL_CONTINUE;
    if (op->pull_event != NULL) {
        answer = op->pull_event(op->context, &event);
    } else {
        op->on_event(op->context, &event);
    }
    lsdk_frame_pop(&frame);

    if (ev->kind == LSDK_EVENT_DATA) memset(buffer, 0xDD, ev->length);
    if (answer == LSDK_PULL_PAUSE) {
        lsdk_lock(&op->mutex);
        bool honoured = refuse_locked(op, ev);
        lsdk_unlock(&op->mutex);
        if (honoured) lsdk_count(client, LSDK_COUNTER_stream_pauses_by_callback, 1);
    } else if (answer != LSDK_PULL_CONTINUE) {
        lsdk_bad_call(client, LSDK_ERR_OUT_OF_RANGE);
    }
    callback_end(op);
}

/* ------------------------------------------------------------------------ */
/* Stream production (mutex held)                                           */
/* ------------------------------------------------------------------------ */

/** Numbers the next event in production order (mutex held): the behaviour's sequence knobs
    applied to its 1-based production index. `data_chunk` is the 1-based number of a content data
    event, 0 for any other event. Unsigned arithmetic wraps modulo 2^64, so masking the low bits
    gives the value modulo 2^sequence_bits. */
static void take_sequence(struct lsdk_op *op, lsdk_ev_t *ev, uint64_t data_chunk) {
    const lsdk_behavior_t *b = &op->behavior;
    ev->index = op->next_index++;
    uint64_t i = ev->index + 1;
    if (data_chunk != 0 && data_chunk == b->sequence_corrupt_at) {
        ev->sequence = b->sequence_corrupt_value;
        return;
    }
    uint64_t number = b->first_sequence + (i - 1);
    if (b->sequence_jump_at != 0 && i > b->sequence_jump_at) number += b->sequence_jump;
    ev->sequence = number & lsdk_sequence_mask(b->sequence_bits);
}

static bool has_work_left(const struct lsdk_op *op) {
    if (op->is_stream) return op->phase != LSDK_PHASE_DONE || op->pending_count > 0;
    return op->behavior.completion_count == 0 || op->next_completion < op->behavior.completion_count;
}

static void claim_end(struct lsdk_op *op, lsdk_ev_t *ev) {
    const lsdk_behavior_t *b = &op->behavior;
    ev->kind = LSDK_EVENT_END;
    ev->status = b->stream_end == LSDK_STREAM_END_SUCCESS ? LSDK_OK : b->error_status;
    ev->bytes_done = op->bytes_produced;
    if (op->ended) ev->flags |= LSDK_EV_AFTER_TERMINAL;
    if (!op->ended && op->is_listener) {
        /* A listener's own terminal frees its topic (the events after it may still come). */
        lsdk_count(op->client, LSDK_COUNTER_listener_ends, 1);
        topic_unbind(op);
    }
    op->ended = true;
}

static void claim_after_terminal_data(struct lsdk_op *op, lsdk_ev_t *ev) {
    ev->kind = LSDK_EVENT_DATA;
    ev->bytes_done = op->after_offset;
    ev->length = op->behavior.chunk_size;
    ev->flags |= LSDK_EV_AFTER_TERMINAL;
    op->after_offset += ev->length;
}

static int next_phase_after_terminal(const struct lsdk_op *op) {
    return op->after_left > 0 ? LSDK_PHASE_AFTER : LSDK_PHASE_DONE;
}

/** Claims the next event of the stream in production order (sequence numbers included). */
static int stream_claim(struct lsdk_op *op, lsdk_ev_t *ev) {
    const lsdk_behavior_t *b = &op->behavior;
    memset(ev, 0, sizeof *ev);
    ev->bytes_total = op->total_bytes;
    switch (op->phase) {
    case LSDK_PHASE_DATA:
        if (op->progress_pending) {
            op->progress_pending = false;
            ev->kind = LSDK_EVENT_PROGRESS;
            ev->bytes_done = op->bytes_produced;
        } else if (op->data_index < op->data_count) {
            uint64_t offset = op->data_index * (uint64_t)b->chunk_size;
            uint64_t remaining = op->total_bytes - offset;
            ev->kind = LSDK_EVENT_DATA;
            ev->bytes_done = offset;
            ev->length = remaining < b->chunk_size ? (uint32_t)remaining : b->chunk_size;
            op->data_index++;
            op->bytes_produced = offset + ev->length;
            if (b->progress_every != 0 && op->data_index % b->progress_every == 0) {
                op->progress_pending = true;
            }
        } else if (b->stream_end == LSDK_STREAM_END_NONE) {
            op->phase = LSDK_PHASE_SILENT;
            return LSDK_CLAIM_HANG;
        } else {
            claim_end(op, ev);
            op->phase = b->duplicate_terminal ? LSDK_PHASE_DUPLICATE : next_phase_after_terminal(op);
        }
        break;
    case LSDK_PHASE_END:
        claim_end(op, ev);
        op->phase = b->duplicate_terminal ? LSDK_PHASE_DUPLICATE : next_phase_after_terminal(op);
        break;
    case LSDK_PHASE_DUPLICATE:
        claim_end(op, ev);
        op->phase = next_phase_after_terminal(op);
        break;
    case LSDK_PHASE_AFTER:
        claim_after_terminal_data(op, ev);
        if (--op->after_left == 0) op->phase = LSDK_PHASE_DONE;
        break;
    case LSDK_PHASE_SILENT: return LSDK_CLAIM_HANG;
    default: return LSDK_CLAIM_DONE;
    }
    take_sequence(op, ev, ev->kind == LSDK_EVENT_DATA && !(ev->flags & LSDK_EV_AFTER_TERMINAL) ? op->data_index : 0);
    if (op->cancel_called) ev->flags |= LSDK_EV_AFTER_CANCEL;
    return LSDK_CLAIM_EVENT;
}

/** PAUSE_DROPS drops the live part of the stream (data and progress before the terminal); the
    terminal event and what follows it are always delivered. */
static bool droppable(const struct lsdk_op *op, const lsdk_ev_t *ev) {
    return op->paused && op->behavior.pause_mode == LSDK_PAUSE_DROPS && ev->kind != LSDK_EVENT_END &&
           !(ev->flags & LSDK_EV_AFTER_TERMINAL);
}

/** Whether a paused stream's producer parks: PAUSE_STOPS, or a refused pull event waits (nothing
    may overtake it, whatever the pause mode). */
static bool must_park(const struct lsdk_op *op) {
    return op->paused && (op->behavior.pause_mode == LSDK_PAUSE_STOPS || op->pending_count > 0);
}

/** Whether the producer must stop at its next step (cancelled, done, silent or parked). */
static bool producer_must_stop(const struct lsdk_op *op) {
    bool idle = op->pending_count == 0 &&
                (op->phase == LSDK_PHASE_DONE || op->phase == LSDK_PHASE_SILENT);
    return op->cancelled || idle || must_park(op);
}

enum {
    LSDK_STEP_DELIVER,
    LSDK_STEP_DROP,
    LSDK_STEP_STOP,        /* the producer's inflight reference must be dropped */
    LSDK_STEP_STOP_HOLDING /* the producer's inflight reference became the operation's hold */
};

/** One step of a stream producer (mutex held). */
static int producer_step(struct lsdk_op *op, lsdk_ev_t *ev) {
    if (op->cancelled || (op->phase == LSDK_PHASE_DONE && op->pending_count == 0)) {
        op->producer_active = false;
        return LSDK_STEP_STOP;
    }
    if (op->pending_count > 0) {
        if (op->paused) {
            op->producer_active = false;
            op->hold = LSDK_HOLD_PARKED;
            return LSDK_STEP_STOP_HOLDING;
        }
        /* A refused event goes again, first, as it was (same sequence, same bytes). */
        *ev = op->pending[0];
        op->pending_count--;
        memmove(&op->pending[0], &op->pending[1], op->pending_count * sizeof op->pending[0]);
        return LSDK_STEP_DELIVER;
    }
    if (must_park(op) && op->phase != LSDK_PHASE_SILENT) {
        op->producer_active = false;
        op->hold = LSDK_HOLD_PARKED;
        return LSDK_STEP_STOP_HOLDING;
    }
    switch (stream_claim(op, ev)) {
    case LSDK_CLAIM_HANG:
        op->producer_active = false;
        op->hold = LSDK_HOLD_HANG;
        return LSDK_STEP_STOP_HOLDING;
    case LSDK_CLAIM_DONE: op->producer_active = false; return LSDK_STEP_STOP;
    default: return droppable(op, ev) ? LSDK_STEP_DROP : LSDK_STEP_DELIVER;
    }
}

/* Producer of a stream with stream_concurrency 1: events in order, one thread at a time. With
   worker delivery it delivers many events per turn and only re-queues itself after its quota, when
   an interval is set, or when the next event must go elsewhere. */
static void run_produce_serial(lsdk_task_t *task, lsdk_where_t where) {
    struct lsdk_op *op = task->op;
    const lsdk_behavior_t *b = &op->behavior;
    /* A fresh thread delivers one event; the loop thread goes back to its queue after every
       event (drops included), so jobs posted meanwhile run between them. */
    uint32_t quota = where == LSDK_WHERE_FRESH || where == LSDK_WHERE_LOOP ? 1 : LSDK_PRODUCER_QUOTA;
    bool all_inline = where == LSDK_WHERE_SYNC && b->delivery == LSDK_DELIVERY_SYNC;
    for (;;) {
        lsdk_ev_t ev;
        lsdk_lock(&op->mutex);
        int step = producer_step(op, &ev);
        lsdk_unlock(&op->mutex);
        if (step == LSDK_STEP_STOP) {
            inflight_drop(op);
            return;
        }
        if (step == LSDK_STEP_STOP_HOLDING) return;

        if (step == LSDK_STEP_DROP) {
            lsdk_count(op->client, LSDK_COUNTER_stream_events_dropped_paused, 1);
            if (all_inline) continue;
            /* Without an interval, drops are produced as fast as possible, here; a worker still
               lets other work run after its quota. */
            bool counted = where == LSDK_WHERE_WORKER || where == LSDK_WHERE_LOOP;
            if (b->interval_us == 0 && (!counted || --quota > 0)) continue;
        } else {
            deliver_event(op, where, &ev, op->producer_buffer);
            if (all_inline) continue;
            quota--;
            /* The fast path: more events on this worker, no lock until the next step. */
            if (where == LSDK_WHERE_WORKER && b->delivery != LSDK_DELIVERY_MIXED &&
                b->interval_us == 0 && quota > 0) {
                continue;
            }
        }

        lsdk_lock(&op->mutex);
        if (producer_must_stop(op)) {
            /* The next step stops (or parks) right here; no need to move. */
            lsdk_unlock(&op->mutex);
            continue;
        }
        lsdk_mode_t mode = draw_mode(op, where == LSDK_WHERE_SYNC);
        lsdk_unlock(&op->mutex);
        if (mode == LSDK_MODE_SYNC) continue;
        if (mode == LSDK_MODE_WORKER && where == LSDK_WHERE_WORKER && b->interval_us == 0 && quota > 0) {
            continue;
        }
        lsdk_dispatch(op->client, task, mode, b->interval_us);
        return;
    }
}

static void shuffle(struct lsdk_op *op, uint32_t *order, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) order[i] = i;
    for (uint32_t i = count; i > 1; i--) {
        uint32_t j = lsdk_rng_below(&op->rng, i);
        uint32_t swap = order[i - 1];
        order[i - 1] = order[j];
        order[j] = swap;
    }
}

/** Whether the producer's next claim is a terminal event (mutex held). */
static bool next_is_terminal(const struct lsdk_op *op) {
    if (op->pending_count > 0) return false;
    switch (op->phase) {
    case LSDK_PHASE_DATA:
        return !op->progress_pending && op->data_index >= op->data_count &&
               op->behavior.stream_end != LSDK_STREAM_END_NONE;
    case LSDK_PHASE_END:
    case LSDK_PHASE_DUPLICATE:
        return true;
    default:
        return false;
    }
}

/* Producer of a stream with stream_concurrency > 1. It claims a batch of up to
   stream_concurrency events and hands them out in a shuffled order, each to its own worker or
   fresh thread; the next batch starts when the last event of this one was delivered. So events
   arrive out of order, but never more than stream_concurrency sequence numbers apart; an END is
   a batch of its own, so it never overtakes or is overtaken by another event. With
   synchronous delivery the batch is delivered inline, shuffled. */
static void run_produce_batch(lsdk_task_t *task, lsdk_where_t where) {
    struct lsdk_op *op = task->op;
    const lsdk_behavior_t *b = &op->behavior;
    bool all_inline = where == LSDK_WHERE_SYNC && b->delivery == LSDK_DELIVERY_SYNC;
    uint32_t empty_batches = 0;
    for (;;) {
        lsdk_ev_t events[LSDK_MAX_STREAM_CONCURRENCY];
        lsdk_mode_t modes[LSDK_MAX_STREAM_CONCURRENCY];
        uint32_t order[LSDK_MAX_STREAM_CONCURRENCY];
        uint32_t count = 0;
        uint32_t dropped = 0;
        int stop = LSDK_STEP_DELIVER;

        lsdk_lock(&op->mutex);
        for (uint32_t slot = 0; slot < b->stream_concurrency; slot++) {
            /* An END never shares a batch: it starts its own, so everything produced before it
               was delivered (or dropped) before it, and everything after it comes later. */
            if (slot > 0 && next_is_terminal(op)) break;
            lsdk_ev_t ev;
            int step = producer_step(op, &ev);
            if (step == LSDK_STEP_STOP || step == LSDK_STEP_STOP_HOLDING) {
                /* Stops after this batch. A park in mid-batch (impossible: the lock is held) or a
                   hang keeps the producer's reference as the hold. */
                stop = step;
                break;
            }
            if (step == LSDK_STEP_DROP) {
                dropped++;
            } else {
                events[count++] = ev;
                if (ev.kind == LSDK_EVENT_END) break;
            }
        }
        shuffle(op, order, count);
        if (!all_inline && count > 0) {
            for (uint32_t i = 0; i < count; i++) {
                modes[i] = draw_mode(op, false);
                lsdk_task_t *event_task = &op->event_tasks[i];
                event_task->op = op;
                event_task->kind = LSDK_TASK_EVENT;
                event_task->ev = events[order[i]];
            }
            op->inflight += count;
            op->batch_outstanding = count;
            if (stop == LSDK_STEP_DELIVER) {
                /* The batch's last event starts the next batch. */
                op->producer_active = false;
                stop = LSDK_STEP_STOP;
            }
        }
        lsdk_unlock(&op->mutex);

        if (dropped > 0) lsdk_count(op->client, LSDK_COUNTER_stream_events_dropped_paused, dropped);
        if (all_inline) {
            for (uint32_t i = 0; i < count; i++) {
                if (i > 0) {
                    lsdk_lock(&op->mutex);
                    bool cancelled = op->cancelled;
                    lsdk_unlock(&op->mutex);
                    if (cancelled) break;
                }
                deliver_event(op, where, &events[order[i]], op->producer_buffer);
            }
        } else {
            /* After this loop the event tasks and the produce task belong to others. */
            for (uint32_t i = 0; i < count; i++) {
                lsdk_dispatch(op->client, &op->event_tasks[i], modes[i], 0);
            }
        }
        if (stop == LSDK_STEP_STOP) {
            inflight_drop(op);
            return;
        }
        if (stop == LSDK_STEP_STOP_HOLDING) return;
        /* Here every event of the batch was dropped (or delivered inline). Go on after the
           interval, or right away; a worker lets other work run now and then. */
        bool yield = where == LSDK_WHERE_LOOP ||
                     (where == LSDK_WHERE_WORKER &&
                      ++empty_batches >= LSDK_PRODUCER_QUOTA / b->stream_concurrency);
        if (!all_inline && (b->interval_us > 0 || yield)) {
            lsdk_lock(&op->mutex);
            lsdk_mode_t mode = draw_mode(op, false);
            lsdk_unlock(&op->mutex);
            lsdk_dispatch(op->client, task, mode, b->interval_us);
            return;
        }
    }
}

static void run_event(lsdk_task_t *task, lsdk_where_t where) {
    struct lsdk_op *op = task->op;
    const lsdk_behavior_t *b = &op->behavior;
    lsdk_ev_t ev = task->ev;

    lsdk_lock(&op->mutex);
    bool skip = op->cancelled; /* undelivered events of a cancelled stream are dropped */
    lsdk_unlock(&op->mutex);
    if (!skip) {
        uint8_t *buffer = ev.kind == LSDK_EVENT_DATA ? lsdk_xmalloc(ev.length) : NULL;
        deliver_event(op, where, &ev, buffer);
        free(buffer);
    }

    bool restart = false;
    bool parked = false;
    lsdk_mode_t mode = LSDK_MODE_WORKER;
    lsdk_lock(&op->mutex);
    LSDK_ASSERT(op->batch_outstanding > 0);
    bool producer_work = op->pending_count > 0 ||
                         (op->phase != LSDK_PHASE_DONE && op->phase != LSDK_PHASE_SILENT);
    if (--op->batch_outstanding == 0 && !op->cancelled && producer_work &&
        op->hold == LSDK_HOLD_NONE && !op->producer_active) {
        if (must_park(op)) {
            op->hold = LSDK_HOLD_PARKED;
            parked = true;
        } else {
            op->producer_active = true;
            mode = draw_mode(op, false);
            restart = true;
        }
    }
    lsdk_unlock(&op->mutex);
    if (restart) {
        lsdk_dispatch(op->client, &op->produce_task, mode, b->interval_us);
    } else if (!parked) {
        inflight_drop(op);
    }
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */

static void run_request(lsdk_task_t *task, lsdk_where_t where) {
    struct lsdk_op *op = task->op;
    const lsdk_behavior_t *b = &op->behavior;
    for (;;) {
        lsdk_lock(&op->mutex);
        if (op->cancelled) {
            lsdk_unlock(&op->mutex);
            inflight_drop(op);
            return;
        }
        uint32_t index = op->next_completion++;
        uint32_t attempt = ++op->attempts;
        bool last = op->next_completion >= b->completion_count;
        uint32_t flags = op->cancel_called ? LSDK_EV_AFTER_CANCEL : 0;
        lsdk_unlock(&op->mutex);

        lsdk_status_t status = b->outcomes[index] == LSDK_OUTCOME_SUCCESS ? LSDK_OK : b->error_status;
        deliver_completion(op, where, status, attempt, flags);
        if (last) {
            inflight_drop(op);
            return;
        }

        lsdk_lock(&op->mutex);
        if (op->cancelled) {
            lsdk_unlock(&op->mutex);
            inflight_drop(op);
            return;
        }
        lsdk_mode_t mode = draw_mode(op, where == LSDK_WHERE_SYNC);
        uint64_t delay = mode == LSDK_MODE_SYNC ? 0 : draw_delay(op);
        lsdk_unlock(&op->mutex);
        if (mode == LSDK_MODE_SYNC) continue;
        lsdk_dispatch(op->client, task, mode, delay);
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Cancel and late callbacks                                                */
/* ------------------------------------------------------------------------ */

typedef struct lsdk_claimed {
    uint32_t attempt; /* requests */
    lsdk_ev_t ev;     /* streams */
} lsdk_claimed_t;

/* Claims the cancellation completion / END (mutex held). */
static void claim_cancellation(struct lsdk_op *op, lsdk_claimed_t *claimed) {
    memset(claimed, 0, sizeof *claimed);
    if (!op->is_stream) {
        claimed->attempt = ++op->attempts;
        return;
    }
    claimed->ev.kind = LSDK_EVENT_END;
    claimed->ev.status = LSDK_ERR_CANCELLED;
    take_sequence(op, &claimed->ev, 0);
    claimed->ev.bytes_done = op->bytes_produced;
    claimed->ev.bytes_total = op->total_bytes;
    if (op->ended) claimed->ev.flags |= LSDK_EV_AFTER_TERMINAL;
    op->ended = true;
}

static void deliver_cancellation(struct lsdk_op *op, lsdk_where_t where, const lsdk_claimed_t *claimed) {
    if (op->is_stream) {
        deliver_event(op, where, &claimed->ev, NULL);
    } else {
        deliver_completion(op, where, LSDK_ERR_CANCELLED, claimed->attempt, 0);
    }
}

static void run_cancel(lsdk_task_t *task, lsdk_where_t where) {
    struct lsdk_op *op = task->op;
    lsdk_claimed_t claimed;
    lsdk_lock(&op->mutex);
    claim_cancellation(op, &claimed);
    bool late = op->late_reserved;
    uint64_t late_delay = op->late_delay_us;
    lsdk_unlock(&op->mutex);
    deliver_cancellation(op, where, &claimed);
    if (late) lsdk_dispatch(op->client, &op->late_task, async_mode(op), late_delay);
    inflight_drop(op);
}

static void run_late(lsdk_task_t *task, lsdk_where_t where) {
    struct lsdk_op *op = task->op;
    lsdk_claimed_t claimed;
    memset(&claimed, 0, sizeof claimed);
    lsdk_lock(&op->mutex);
    if (op->is_stream) {
        claimed.ev.kind = LSDK_EVENT_DATA;
        take_sequence(op, &claimed.ev, 0);
        claimed.ev.bytes_done = op->bytes_produced;
        claimed.ev.bytes_total = op->total_bytes;
        claimed.ev.length = op->behavior.chunk_size;
        claimed.ev.flags = LSDK_EV_AFTER_CANCEL | (op->ended ? LSDK_EV_AFTER_TERMINAL : 0);
    } else {
        claimed.attempt = ++op->attempts;
    }
    lsdk_unlock(&op->mutex);
    if (op->is_stream) {
        uint8_t *buffer = lsdk_xmalloc(claimed.ev.length);
        deliver_event(op, where, &claimed.ev, buffer);
        free(buffer);
    } else {
        deliver_completion(op, where, LSDK_OK, claimed.attempt, LSDK_EV_AFTER_CANCEL);
    }
    inflight_drop(op);
}

lsdk_status_t lsdk_op_cancel(struct lsdk_op *op, bool from_destroy) {
    const lsdk_behavior_t *b = &op->behavior;
    /* Every user cancel of a WAITS operation waits, whether or not it takes effect. Destroy's
       does not: destroy waits for everything anyway. */
    bool waits = !from_destroy && b->cancel_mode == LSDK_CANCEL_WAITS;
    lsdk_lock(&op->mutex);
    if (op->finished) {
        lsdk_unlock(&op->mutex);
        return LSDK_OK;
    }
    if (!from_destroy) {
        if (op->cancel_called) {
            lsdk_unlock(&op->mutex);
            if (waits) wait_for_callbacks(op);
            return LSDK_OK;
        }
        op->cancel_called = true;
    }
    if (op->cancelled || !has_work_left(op)) {
        lsdk_unlock(&op->mutex);
        if (waits) wait_for_callbacks(op);
        return LSDK_OK;
    }
    int32_t mode = b->cancel_mode;
    if (from_destroy && mode == LSDK_CANCEL_IGNORED) mode = LSDK_CANCEL_CALLBACK_ASYNC;
    /* WAITS stops like SILENT; the wait comes after. */
    if (mode == LSDK_CANCEL_WAITS) mode = LSDK_CANCEL_SILENT;
    bool count = !op->cancel_counted;
    op->cancel_counted = true;
    if (mode == LSDK_CANCEL_IGNORED) {
        lsdk_unlock(&op->mutex);
        if (count) lsdk_count(op->client, LSDK_COUNTER_cancels, 1);
        return LSDK_OK;
    }

    op->cancelled = true;
    topic_unbind(op);
    op->inflight++; /* this call's own reference while it works */
    if (op->hold != LSDK_HOLD_NONE) {
        op->hold = LSDK_HOLD_NONE;
        op->inflight--;
    }
    bool late = b->late_callback_after_cancel && b->cancel_mode != LSDK_CANCEL_WAITS;
    uint64_t late_delay = 0;
    if (late) {
        op->late_reserved = true;
        op->inflight++;
        late_delay = draw_delay(op);
        op->late_delay_us = late_delay;
    }
    lsdk_claimed_t claimed;
    uint64_t cancel_delay = 0;
    if (mode == LSDK_CANCEL_CALLBACK_SYNC) {
        claim_cancellation(op, &claimed);
    } else if (mode == LSDK_CANCEL_CALLBACK_ASYNC) {
        op->inflight++;
        cancel_delay = draw_delay(op);
    }
    lsdk_unlock(&op->mutex);

    if (count) lsdk_count(op->client, LSDK_COUNTER_cancels, 1);
    if (count && op->is_listener && !from_destroy) lsdk_count(op->client, LSDK_COUNTER_listener_stops, 1);
    switch (mode) {
    case LSDK_CANCEL_CALLBACK_SYNC:
        deliver_cancellation(op, LSDK_WHERE_CANCEL, &claimed);
        if (late) lsdk_dispatch(op->client, &op->late_task, async_mode(op), late_delay);
        break;
    case LSDK_CANCEL_CALLBACK_ASYNC:
        lsdk_dispatch(op->client, &op->cancel_task, async_mode(op), cancel_delay);
        break;
    default:
        if (late) lsdk_dispatch(op->client, &op->late_task, async_mode(op), late_delay);
        break;
    }
    inflight_drop(op);
    /* The caller owns a memory reference: the operation outlives the wait. */
    if (waits) wait_for_callbacks(op);
    return LSDK_OK;
}

void lsdk_task_run(lsdk_task_t *task, lsdk_where_t where) {
    switch (task->kind) {
    case LSDK_TASK_REQUEST: run_request(task, where); break;
    case LSDK_TASK_CANCEL: run_cancel(task, where); break;
    case LSDK_TASK_LATE: run_late(task, where); break;
    case LSDK_TASK_PRODUCE:
        if (task->op->behavior.stream_concurrency > 1) {
            run_produce_batch(task, where);
        } else {
            run_produce_serial(task, where);
        }
        break;
    case LSDK_TASK_EVENT: run_event(task, where); break;
    case LSDK_TASK_RPC_REPLY:
    case LSDK_TASK_RPC_REPORT:
    case LSDK_TASK_RPC_LATE:
    case LSDK_TASK_RPC_DISCONNECT: lsdk_rpc_task_run(task, where); break;
    default: lsdk_fatal("unknown task kind", (int)task->kind);
    }
}

/* ------------------------------------------------------------------------ */
/* Start                                                                    */
/* ------------------------------------------------------------------------ */

static void init_task(lsdk_task_t *task, struct lsdk_op *op, lsdk_task_kind_t kind) {
    memset(task, 0, sizeof *task);
    task->op = op;
    task->kind = kind;
}

/** `listen` is NULL except for lsdk_listen_start (then is_stream is true and total_bytes unused). */
static lsdk_status_t start_operation(struct lsdk_client *client, bool is_stream, const char *path,
                                     uint32_t response_size, uint64_t total_bytes,
                                     const lsdk_listen_request_t *listen,
                                     const lsdk_behavior_t *behavior, lsdk_completion_fn completion,
                                     lsdk_event_fn on_event, lsdk_pull_event_fn pull_event,
                                     void *context, lsdk_release_fn release_context,
                                     lsdk_handle_t *out_handle) {
    if (client == NULL || client->magic != LSDK_CLIENT_MAGIC) {
        return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    }
    lsdk_affinity_check(client);
    if (!lsdk_client_enter(client)) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);

    lsdk_behavior_t defaults;
    lsdk_behavior_init(&defaults);
    if (behavior == NULL) behavior = &defaults;
    lsdk_status_t status = LSDK_OK;
    if (is_stream ? on_event == NULL && pull_event == NULL : completion == NULL) {
        status = LSDK_ERR_NULL_ARGUMENT;
    } else {
        status = lsdk_behavior_validate(behavior, client->has_loop);
    }
    if (status == LSDK_OK && !is_stream && response_size > LSDK_MAX_CHUNK_SIZE) {
        status = LSDK_ERR_OUT_OF_RANGE;
    }
    if (status == LSDK_OK && is_stream && listen == NULL && total_bytes > (1ull << 40)) {
        status = LSDK_ERR_OUT_OF_RANGE;
    }
    if (status != LSDK_OK) {
        lsdk_client_leave(client);
        return lsdk_bad_call(client, status);
    }

    struct lsdk_op *op = calloc(1, sizeof *op);
    uint8_t *buffer = is_stream ? malloc(behavior->chunk_size) : NULL;
    if (op == NULL || (is_stream && buffer == NULL)) {
        free(op);
        free(buffer);
        lsdk_client_leave(client);
        return LSDK_ERR_RESOURCES;
    }
    lsdk_mutex_init(&op->mutex);
    op->client = client;
    atomic_init(&op->refs, 1); /* the live list's reference */
    atomic_init(&op->running, 0);
    atomic_init(&op->waiters, 0);
    op->is_stream = is_stream;
    op->behavior = *behavior;
    lsdk_copy_string(op->path, path);
    lsdk_copy_string(op->message,
                     behavior->error_message != NULL ? behavior->error_message : default_error_message);
    op->behavior.error_message = op->message;
    op->response_size = response_size;
    op->total_bytes = total_bytes;
    op->data_count = is_stream ? (total_bytes + behavior->chunk_size - 1) / behavior->chunk_size : 0;
    if (listen != NULL) {
        /* Data events only, each chunk_size bytes; endless streams never reach their data_count. */
        op->is_listener = true;
        op->topic = listen->topic;
        op->behavior.progress_every = 0;
        uint64_t chunk = behavior->chunk_size;
        bool endless = listen->event_count == 0;
        op->data_count = endless ? UINT64_MAX : listen->event_count;
        op->total_bytes = endless || listen->event_count > UINT64_MAX / chunk ? UINT64_MAX
                                                                               : listen->event_count * chunk;
        if (!topic_bind(op)) {
            free(buffer); /* not yet the operation's */
            lsdk_mutex_destroy(&op->mutex);
            free(op);
            lsdk_count(client, LSDK_COUNTER_listener_busy, 1);
            lsdk_client_leave(client);
            return lsdk_bad_call(client, LSDK_ERR_ALREADY_LISTENING);
        }
    }
    op->completion = completion;
    op->on_event = on_event;
    op->pull_event = pull_event;
    op->context = context;
    op->release_context = release_context;
    op->producer_buffer = buffer;
    op->after_offset = op->total_bytes;
    op->after_left = behavior->events_after_terminal;
    op->phase = LSDK_PHASE_DATA;
    init_task(&op->request_task, op, LSDK_TASK_REQUEST);
    init_task(&op->produce_task, op, LSDK_TASK_PRODUCE);
    init_task(&op->cancel_task, op, LSDK_TASK_CANCEL);
    init_task(&op->late_task, op, LSDK_TASK_LATE);
    for (uint32_t i = 0; i < LSDK_MAX_STREAM_CONCURRENCY; i++) {
        init_task(&op->event_tasks[i], op, LSDK_TASK_EVENT);
    }

    op->request_id = atomic_fetch_add(&client->next_request_id, 1);
    op->rng = behavior->seed != 0 ? behavior->seed
                                  : lsdk_mix64(client->seed ^ lsdk_mix64(op->request_id));

    /* The first piece of work. inflight starts at 1 for this function itself, so the operation
       cannot finish before we are done with it. All of this is set before the handle is
       published: from then on any thread holding the handle value (a forged one included) may
       cancel, pause or resume the operation, under op->mutex. */
    op->inflight = 1;
    lsdk_task_t *first = NULL;
    lsdk_mode_t mode = LSDK_MODE_WORKER;
    uint64_t delay = 0;
    if (!is_stream && behavior->completion_count == 0) {
        op->hold = LSDK_HOLD_HANG;
        op->inflight++;
    } else {
        first = is_stream ? &op->produce_task : &op->request_task;
        op->producer_active = is_stream;
        op->inflight++;
        mode = draw_mode(op, true);
        delay = mode == LSDK_MODE_SYNC ? 0 : draw_delay(op);
    }

    /* handles_created is counted by lsdk_handle_create before it publishes the slot. */
    lsdk_handle_t handle = LSDK_INVALID_HANDLE;
    if (lsdk_handle_create(op, &handle) != LSDK_OK) {
        topic_unbind(op);
        lsdk_op_unref(op);
        lsdk_client_leave(client);
        return LSDK_ERR_RESOURCES;
    }
    /* From here on the start succeeds. Counted before the operation can finish (this function
       holds an inflight reference until its end), so contexts_released never overtakes
       contexts_created, nor operations_finished operations_started. */
    lsdk_count(client, LSDK_COUNTER_operations_started, 1);
    lsdk_count(client, LSDK_COUNTER_contexts_created, 1);
    if (op->is_listener) lsdk_count(client, LSDK_COUNTER_listener_starts, 1);
    if (client->handle_probe != NULL) {
        lsdk_frame_t frame;
        lsdk_frame_push(&frame, client, NULL);
        client->handle_probe(client->probe_context, handle);
        lsdk_frame_pop(&frame);
    }

    /* Published: destroy may cancel it from now on. */
    lsdk_client_live_add(client, op);
    if (first != NULL) {
        if (mode == LSDK_MODE_SYNC) {
            lsdk_task_run(first, LSDK_WHERE_SYNC);
        } else {
            lsdk_dispatch(client, first, mode, delay);
        }
    }
    inflight_drop(op);

    /* After every synchronous callback ran. */
    if (out_handle != NULL) {
        *out_handle = handle;
    } else {
        /* Another thread may have released it already (any value can be passed to release). */
        struct lsdk_op *removed = lsdk_handle_remove(handle);
        if (removed != NULL) {
            lsdk_count(client, LSDK_COUNTER_handles_released, 1);
            lsdk_op_unref(removed);
        }
    }
    lsdk_client_leave(client);
    return LSDK_OK;
}

lsdk_status_t lsdk_request_start(lsdk_client_t *client, const lsdk_request_t *request,
                                 const lsdk_behavior_t *behavior, lsdk_completion_fn completion,
                                 void *context, lsdk_release_fn release_context,
                                 lsdk_handle_t *out_handle) {
    lsdk_request_t defaults = {.path = NULL, .response_size = 0};
    if (request == NULL) request = &defaults;
    return start_operation(client, false, request->path, request->response_size, 0, NULL, behavior,
                           completion, NULL, NULL, context, release_context, out_handle);
}

lsdk_status_t lsdk_download_start(lsdk_client_t *client, const lsdk_download_request_t *request,
                                  const lsdk_behavior_t *behavior, lsdk_event_fn on_event,
                                  void *context, lsdk_release_fn release_context,
                                  lsdk_handle_t *out_handle) {
    lsdk_download_request_t defaults = {.path = NULL, .total_bytes = 0};
    if (request == NULL) request = &defaults;
    return start_operation(client, true, request->path, 0, request->total_bytes, NULL, behavior, NULL,
                           on_event, NULL, context, release_context, out_handle);
}

lsdk_status_t lsdk_listen_start(lsdk_client_t *client, const lsdk_listen_request_t *request,
                                const lsdk_behavior_t *behavior, lsdk_event_fn on_event, void *context,
                                lsdk_release_fn release_context, lsdk_handle_t *out_handle) {
    lsdk_listen_request_t defaults = {.topic = 0, .event_count = 0};
    if (request == NULL) request = &defaults;
    char path[32];
    snprintf(path, sizeof path, "/topic/%llu", (unsigned long long)request->topic);
    return start_operation(client, true, path, 0, 0, request, behavior, NULL, on_event, NULL, context,
                           release_context, out_handle);
}

lsdk_status_t lsdk_download_start_pull(lsdk_client_t *client, const lsdk_download_request_t *request,
                                       const lsdk_behavior_t *behavior, lsdk_pull_event_fn on_event,
                                       void *context, lsdk_release_fn release_context,
                                       lsdk_handle_t *out_handle) {
    lsdk_download_request_t defaults = {.path = NULL, .total_bytes = 0};
    if (request == NULL) request = &defaults;
    return start_operation(client, true, request->path, 0, request->total_bytes, NULL, behavior, NULL,
                           NULL, on_event, context, release_context, out_handle);
}

/* ------------------------------------------------------------------------ */
/* Handle functions                                                         */
/* ------------------------------------------------------------------------ */

lsdk_status_t lsdk_cancel(lsdk_handle_t handle) {
    struct lsdk_op *op = lsdk_handle_acquire(handle);
    if (op == NULL) return lsdk_bad_call(NULL, LSDK_ERR_INVALID_HANDLE);
    struct lsdk_client *client = op->client;
    lsdk_affinity_check(client);
    if (lsdk_in_callback_of(op)) lsdk_count(client, LSDK_COUNTER_cancels_inside_callback, 1);
    lsdk_client_enter_any(client);
    lsdk_status_t status = lsdk_op_cancel(op, false);
    lsdk_client_leave(client);
    lsdk_op_unref(op);
    return status;
}

lsdk_status_t lsdk_pause(lsdk_handle_t handle) {
    struct lsdk_op *op = lsdk_handle_acquire(handle);
    if (op == NULL) return lsdk_bad_call(NULL, LSDK_ERR_INVALID_HANDLE);
    struct lsdk_client *client = op->client;
    lsdk_affinity_check(client);
    lsdk_status_t status = LSDK_OK;
    if (!op->is_stream) {
        status = lsdk_bad_call(client, LSDK_ERR_NOT_A_STREAM);
    } else {
        lsdk_lock(&op->mutex);
        bool changed = !op->finished && !op->paused;
        if (changed) op->paused = true;
        lsdk_unlock(&op->mutex);
        if (changed) lsdk_count(client, LSDK_COUNTER_stream_pauses, 1);
        if (changed && op->is_listener) lsdk_count(client, LSDK_COUNTER_listener_pauses, 1);
    }
    lsdk_op_unref(op);
    return status;
}

lsdk_status_t lsdk_resume(lsdk_handle_t handle) {
    struct lsdk_op *op = lsdk_handle_acquire(handle);
    if (op == NULL) return lsdk_bad_call(NULL, LSDK_ERR_INVALID_HANDLE);
    struct lsdk_client *client = op->client;
    lsdk_affinity_check(client);
    lsdk_status_t status = LSDK_OK;
    if (!op->is_stream) {
        status = lsdk_bad_call(client, LSDK_ERR_NOT_A_STREAM);
    } else {
        lsdk_client_enter_any(client);
        bool changed = false;
        bool restart = false;
        lsdk_mode_t mode = LSDK_MODE_WORKER;
        lsdk_lock(&op->mutex);
        if (!op->finished && op->paused) {
            op->paused = false;
            changed = true;
            if (op->hold == LSDK_HOLD_PARKED) {
                /* The parked producer's reference goes back to a producer task. */
                op->hold = LSDK_HOLD_NONE;
                op->producer_active = true;
                mode = draw_mode(op, false);
                restart = true;
            }
        }
        lsdk_unlock(&op->mutex);
        if (changed) lsdk_count(client, LSDK_COUNTER_stream_resumes, 1);
        if (changed && op->is_listener) lsdk_count(client, LSDK_COUNTER_listener_resumes, 1);
        if (restart) lsdk_dispatch(client, &op->produce_task, mode, 0);
        lsdk_client_leave(client);
    }
    lsdk_op_unref(op);
    return status;
}

lsdk_status_t lsdk_handle_release(lsdk_handle_t handle) {
    struct lsdk_op *op = lsdk_handle_remove(handle);
    if (op == NULL) return lsdk_bad_call(NULL, LSDK_ERR_INVALID_HANDLE);
    lsdk_count(op->client, LSDK_COUNTER_handles_released, 1);
    lsdk_op_unref(op);
    return LSDK_OK;
}
