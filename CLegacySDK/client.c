/* The client: its shell (kept as a tombstone after destroy), worker pool, timer thread, fresh
 * callback threads, loop thread with its posted jobs, affinity, destroy handshake and session
 * token. */
#include "lsdk_internal.h"

/* ------------------------------------------------------------------------ */
/* Runtime: threads and queues                                              */
/* ------------------------------------------------------------------------ */

/** A fresh callback thread; joined by the next spawn or by destroy after it finished. */
typedef struct lsdk_fresh {
    pthread_t thread; /* written by the thread itself (pthread_self) before it finishes */
    struct lsdk_client *client;
    lsdk_task_t *task;
    struct lsdk_fresh *next;
} lsdk_fresh_t;

struct lsdk_runtime {
    /* Worker queue (FIFO). */
    pthread_mutex_t queue_mutex;
    pthread_cond_t queue_cond;
    lsdk_task_t *queue_head;
    lsdk_task_t *queue_tail;
    bool workers_stop;
    pthread_t *workers;
    uint32_t worker_count;

    /* Timer: min-heap on (due_ns, order), waits on CLOCK_MONOTONIC. */
    pthread_mutex_t timer_mutex;
    pthread_cond_t timer_cond;
    lsdk_task_t **heap;
    size_t heap_count;
    size_t heap_capacity;
    uint64_t heap_order;
    bool timer_stop;
    pthread_t timer;
    /** Set by destroy: every delay is skipped from then on. */
    _Atomic bool flushing;

    /* Fresh threads. */
    pthread_mutex_t fresh_mutex;
    pthread_cond_t fresh_cond;
    size_t fresh_running;
    lsdk_fresh_t *fresh_finished;

    /* Loop thread (config.loop_thread): one FIFO of LOOP tasks and posted jobs. */
    pthread_mutex_t loop_mutex;
    pthread_cond_t loop_cond;
    lsdk_task_t *loop_head;
    lsdk_task_t *loop_tail;
    bool loop_stop;
    pthread_t loop;
};

/* The client whose worker/timer/fresh/loop thread this is (NULL on other threads). */
static _Thread_local const struct lsdk_client *tls_owner;
/* The client whose loop thread this is (NULL on other threads). */
static _Thread_local const struct lsdk_client *tls_loop_client;
/* Callbacks of which clients this thread is currently inside of. */
static _Thread_local lsdk_frame_t *tls_frames;
/* This thread's identity for affinity checks (0 = not given yet). */
static _Thread_local uint64_t tls_thread_id;
static _Atomic uint64_t next_thread_id = 1;

/* What lsdk_live_clients and lsdk_live_threads report. A thread counts from just before its
   pthread_create to the last statement of its main function. */
static _Atomic size_t live_clients;
static _Atomic size_t live_threads;

size_t lsdk_live_clients(void) { return atomic_load(&live_clients); }
size_t lsdk_live_threads(void) { return atomic_load(&live_threads); }

/* pthread_create, counted in live_threads while the thread runs. */
static int spawn_counted(pthread_t *thread, void *(*body)(void *), void *argument) {
    atomic_fetch_add(&live_threads, 1);
    int status = pthread_create(thread, NULL, body, argument);
    if (status != 0) atomic_fetch_sub(&live_threads, 1);
    return status;
}

void lsdk_frame_push(lsdk_frame_t *frame, const struct lsdk_client *client, const struct lsdk_op *op) {
    frame->client = client;
    frame->op = op;
    frame->previous = tls_frames;
    tls_frames = frame;
}

void lsdk_frame_pop(lsdk_frame_t *frame) { tls_frames = frame->previous; }

bool lsdk_in_callback_of(const struct lsdk_op *op) {
    for (lsdk_frame_t *frame = tls_frames; frame != NULL; frame = frame->previous) {
        if (frame->op == op) return true;
    }
    return false;
}

bool lsdk_in_client_frame(const struct lsdk_client *client) {
    for (lsdk_frame_t *frame = tls_frames; frame != NULL; frame = frame->previous) {
        if (frame->client == client) return true;
    }
    return false;
}

uint64_t lsdk_thread_id(void) {
    /* pthread_t values are reused once a thread exited; these numbers never are. */
    if (tls_thread_id == 0) tls_thread_id = atomic_fetch_add_explicit(&next_thread_id, 1, memory_order_relaxed);
    return tls_thread_id;
}

void lsdk_affinity_check(struct lsdk_client *client) {
    bool allowed;
    switch (client->affinity) {
    case LSDK_AFFINITY_CREATOR: allowed = lsdk_thread_id() == client->creator_id; break;
    case LSDK_AFFINITY_LOOP: allowed = tls_loop_client == client; break;
    default: return;
    }
    if (!allowed) lsdk_count(client, LSDK_COUNTER_affinity_violations, 1);
}

bool lsdk_client_is_loop_thread(const lsdk_client_t *client) {
    return client != NULL && tls_loop_client == client;
}

static bool on_client_thread(const struct lsdk_client *client) {
    if (tls_owner == client) return true;
    for (lsdk_frame_t *frame = tls_frames; frame != NULL; frame = frame->previous) {
        if (frame->client == client) return true;
    }
    return false;
}

static void worker_push(struct lsdk_runtime *runtime, lsdk_task_t *task) {
    task->next = NULL;
    lsdk_lock(&runtime->queue_mutex);
    if (runtime->queue_tail != NULL) {
        runtime->queue_tail->next = task;
    } else {
        runtime->queue_head = task;
    }
    runtime->queue_tail = task;
    LSDK_CHECK(pthread_cond_signal(&runtime->queue_cond));
    lsdk_unlock(&runtime->queue_mutex);
}

static void *worker_main(void *argument) {
    struct lsdk_client *client = argument;
    struct lsdk_runtime *runtime = client->runtime;
    tls_owner = client;
    lsdk_lock(&runtime->queue_mutex);
    for (;;) {
        lsdk_task_t *task = runtime->queue_head;
        if (task == NULL) {
            if (runtime->workers_stop) break;
            LSDK_CHECK(pthread_cond_wait(&runtime->queue_cond, &runtime->queue_mutex));
            continue;
        }
        runtime->queue_head = task->next;
        if (runtime->queue_head == NULL) runtime->queue_tail = NULL;
        lsdk_unlock(&runtime->queue_mutex);
        lsdk_task_run(task, LSDK_WHERE_WORKER);
        lsdk_lock(&runtime->queue_mutex);
    }
    lsdk_unlock(&runtime->queue_mutex);
    atomic_fetch_sub(&live_threads, 1);
    return NULL;
}

/* Joins fresh threads that have finished (they are about to return). */
static void fresh_reap(struct lsdk_runtime *runtime) {
    lsdk_lock(&runtime->fresh_mutex);
    lsdk_fresh_t *finished = runtime->fresh_finished;
    runtime->fresh_finished = NULL;
    lsdk_unlock(&runtime->fresh_mutex);
    while (finished != NULL) {
        lsdk_fresh_t *next = finished->next;
        LSDK_CHECK(pthread_join(finished->thread, NULL));
        free(finished);
        finished = next;
    }
}

static void *fresh_main(void *argument) {
    lsdk_fresh_t *fresh = argument;
    struct lsdk_client *client = fresh->client;
    struct lsdk_runtime *runtime = client->runtime;
    tls_owner = client;
    /* Counted here, before the callback, so whoever the callback wakes sees it. */
    lsdk_count(client, LSDK_COUNTER_threads_created, 1);
    lsdk_task_run(fresh->task, LSDK_WHERE_FRESH);
    /* Last touch of the runtime: destroy waits for fresh_running == 0, then joins us. */
    lsdk_lock(&runtime->fresh_mutex);
    fresh->thread = pthread_self();
    fresh->task = NULL;
    fresh->next = runtime->fresh_finished;
    runtime->fresh_finished = fresh;
    runtime->fresh_running--;
    if (runtime->fresh_running == 0) LSDK_CHECK(pthread_cond_broadcast(&runtime->fresh_cond));
    lsdk_unlock(&runtime->fresh_mutex);
    atomic_fetch_sub(&live_threads, 1);
    return NULL;
}

static void fresh_spawn(struct lsdk_client *client, lsdk_task_t *task) {
    struct lsdk_runtime *runtime = client->runtime;
    fresh_reap(runtime);
    lsdk_fresh_t *fresh = malloc(sizeof *fresh);
    if (fresh != NULL) {
        fresh->client = client;
        fresh->task = task;
        fresh->next = NULL;
        lsdk_lock(&runtime->fresh_mutex);
        runtime->fresh_running++;
        lsdk_unlock(&runtime->fresh_mutex);
        pthread_t thread;
        if (spawn_counted(&thread, fresh_main, fresh) == 0) return;
        lsdk_lock(&runtime->fresh_mutex);
        runtime->fresh_running--;
        lsdk_unlock(&runtime->fresh_mutex);
        free(fresh);
    }
    /* No thread available: a worker delivers instead (and the worker counter says so). */
    worker_push(runtime, task);
}

static void loop_push(struct lsdk_runtime *runtime, lsdk_task_t *task) {
    task->next = NULL;
    lsdk_lock(&runtime->loop_mutex);
    if (runtime->loop_tail != NULL) {
        runtime->loop_tail->next = task;
    } else {
        runtime->loop_head = task;
    }
    runtime->loop_tail = task;
    LSDK_CHECK(pthread_cond_signal(&runtime->loop_cond));
    lsdk_unlock(&runtime->loop_mutex);
}

static void *loop_main(void *argument) {
    struct lsdk_client *client = argument;
    struct lsdk_runtime *runtime = client->runtime;
    tls_owner = client;
    tls_loop_client = client;
    lsdk_lock(&runtime->loop_mutex);
    for (;;) {
        lsdk_task_t *task = runtime->loop_head;
        if (task == NULL) {
            /* Stops only when the queue is empty: jobs still queued at destroy are run. */
            if (runtime->loop_stop) break;
            LSDK_CHECK(pthread_cond_wait(&runtime->loop_cond, &runtime->loop_mutex));
            continue;
        }
        runtime->loop_head = task->next;
        if (runtime->loop_head == NULL) runtime->loop_tail = NULL;
        lsdk_unlock(&runtime->loop_mutex);
        if (task->kind == LSDK_TASK_JOB) {
            lsdk_count(client, LSDK_COUNTER_loop_jobs, 1);
            task->job(task->job_context);
            free(task);
        } else {
            lsdk_task_run(task, LSDK_WHERE_LOOP);
        }
        lsdk_lock(&runtime->loop_mutex);
    }
    lsdk_unlock(&runtime->loop_mutex);
    tls_loop_client = NULL;
    atomic_fetch_sub(&live_threads, 1);
    return NULL;
}

static void route(struct lsdk_client *client, lsdk_task_t *task) {
    if (task->mode == LSDK_MODE_FRESH) {
        fresh_spawn(client, task);
    } else if (task->mode == LSDK_MODE_LOOP) {
        loop_push(client->runtime, task);
    } else {
        worker_push(client->runtime, task);
    }
}

static bool heap_less(const lsdk_task_t *a, const lsdk_task_t *b) {
    return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->order < b->order);
}

static void heap_push(struct lsdk_runtime *runtime, lsdk_task_t *task) {
    if (runtime->heap_count == runtime->heap_capacity) {
        size_t capacity = runtime->heap_capacity == 0 ? 64 : runtime->heap_capacity * 2;
        lsdk_task_t **grown = realloc(runtime->heap, capacity * sizeof *grown);
        if (grown == NULL) lsdk_fatal("out of memory (timer heap)", 0);
        runtime->heap = grown;
        runtime->heap_capacity = capacity;
    }
    task->order = runtime->heap_order++;
    size_t index = runtime->heap_count++;
    while (index > 0) {
        size_t parent = (index - 1) / 2;
        if (!heap_less(task, runtime->heap[parent])) break;
        runtime->heap[index] = runtime->heap[parent];
        index = parent;
    }
    runtime->heap[index] = task;
}

static lsdk_task_t *heap_pop(struct lsdk_runtime *runtime) {
    lsdk_task_t *top = runtime->heap[0];
    lsdk_task_t *last = runtime->heap[--runtime->heap_count];
    size_t count = runtime->heap_count;
    size_t index = 0;
    for (;;) {
        size_t child = 2 * index + 1;
        if (child >= count) break;
        if (child + 1 < count && heap_less(runtime->heap[child + 1], runtime->heap[child])) child++;
        if (!heap_less(runtime->heap[child], last)) break;
        runtime->heap[index] = runtime->heap[child];
        index = child;
    }
    if (count > 0) runtime->heap[index] = last;
    return top;
}

static void *timer_main(void *argument) {
    struct lsdk_client *client = argument;
    struct lsdk_runtime *runtime = client->runtime;
    tls_owner = client;
    lsdk_lock(&runtime->timer_mutex);
    for (;;) {
        if (runtime->heap_count == 0) {
            if (runtime->timer_stop) break;
            LSDK_CHECK(pthread_cond_wait(&runtime->timer_cond, &runtime->timer_mutex));
            continue;
        }
        lsdk_task_t *top = runtime->heap[0];
        if (atomic_load(&runtime->flushing) || top->due_ns <= lsdk_now_ns()) {
            heap_pop(runtime);
            lsdk_unlock(&runtime->timer_mutex);
            route(client, top);
            lsdk_lock(&runtime->timer_mutex);
            continue;
        }
        lsdk_cond_wait_until(&runtime->timer_cond, &runtime->timer_mutex, top->due_ns);
    }
    lsdk_unlock(&runtime->timer_mutex);
    atomic_fetch_sub(&live_threads, 1);
    return NULL;
}

void lsdk_dispatch(struct lsdk_client *client, lsdk_task_t *task, lsdk_mode_t mode, uint64_t delay_us) {
    struct lsdk_runtime *runtime = client->runtime;
    task->mode = mode == LSDK_MODE_SYNC ? LSDK_MODE_WORKER : mode;
    if (delay_us > 0 && !atomic_load(&runtime->flushing)) {
        task->due_ns = lsdk_now_ns() + delay_us * 1000u;
        lsdk_lock(&runtime->timer_mutex);
        heap_push(runtime, task);
        if (runtime->heap[0] == task) LSDK_CHECK(pthread_cond_signal(&runtime->timer_cond));
        lsdk_unlock(&runtime->timer_mutex);
        return;
    }
    route(client, task);
}

static void runtime_free(struct lsdk_runtime *runtime) {
    free(runtime->workers);
    free(runtime->heap);
    lsdk_mutex_destroy(&runtime->queue_mutex);
    lsdk_cond_destroy(&runtime->queue_cond);
    lsdk_mutex_destroy(&runtime->timer_mutex);
    lsdk_cond_destroy(&runtime->timer_cond);
    lsdk_mutex_destroy(&runtime->fresh_mutex);
    lsdk_cond_destroy(&runtime->fresh_cond);
    lsdk_mutex_destroy(&runtime->loop_mutex);
    lsdk_cond_destroy(&runtime->loop_cond);
    free(runtime);
}

/* Stops and joins every thread. Only called when no task exists any more (posted jobs may still
   be queued: the loop thread runs them before it stops). */
static void runtime_stop(struct lsdk_runtime *runtime, uint32_t started_workers, bool timer_started,
                         bool loop_started) {
    if (loop_started) {
        lsdk_lock(&runtime->loop_mutex);
        runtime->loop_stop = true;
        LSDK_CHECK(pthread_cond_broadcast(&runtime->loop_cond));
        lsdk_unlock(&runtime->loop_mutex);
        LSDK_CHECK(pthread_join(runtime->loop, NULL));
    }

    lsdk_lock(&runtime->queue_mutex);
    runtime->workers_stop = true;
    LSDK_CHECK(pthread_cond_broadcast(&runtime->queue_cond));
    lsdk_unlock(&runtime->queue_mutex);
    for (uint32_t i = 0; i < started_workers; i++) LSDK_CHECK(pthread_join(runtime->workers[i], NULL));

    if (timer_started) {
        lsdk_lock(&runtime->timer_mutex);
        runtime->timer_stop = true;
        LSDK_CHECK(pthread_cond_broadcast(&runtime->timer_cond));
        lsdk_unlock(&runtime->timer_mutex);
        LSDK_CHECK(pthread_join(runtime->timer, NULL));
    }

    lsdk_lock(&runtime->fresh_mutex);
    while (runtime->fresh_running > 0) {
        LSDK_CHECK(pthread_cond_wait(&runtime->fresh_cond, &runtime->fresh_mutex));
    }
    lsdk_unlock(&runtime->fresh_mutex);
    fresh_reap(runtime);
}

/* ------------------------------------------------------------------------ */
/* Tombstones                                                               */
/* ------------------------------------------------------------------------ */

/* Destroyed clients, kept for the whole process lifetime and never freed, not even at exit: any
   thread (or an exit handler that runs after ours would have) may still pass a stale client
   pointer or release a handle of its operations, and both touch the shell. Reachable from this
   list, they are not leaks to LeakSanitizer. Each costs about 1 KiB. */
static pthread_once_t tombstones_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t tombstones_mutex;
static struct lsdk_client *tombstones;

static void tombstones_init(void) { lsdk_mutex_init(&tombstones_mutex); }

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                         */
/* ------------------------------------------------------------------------ */

/** Interrupts every blocked call (client->mutex held); see "Blocking calls" below. */
static void interrupt_all_locked(struct lsdk_client *client);

void lsdk_client_config_init(lsdk_client_config_t *config) {
    if (config == NULL) return;
    memset(config, 0, sizeof *config);
    config->worker_threads = 4;
    config->seed = 0;
    config->session_token_probe = NULL;
    config->probe_context = NULL;
    config->loop_thread = false;
    config->affinity = LSDK_AFFINITY_ANY;
    config->handle_probe = NULL;
}

lsdk_status_t lsdk_client_create(const lsdk_client_config_t *config, lsdk_client_t **out_client) {
    if (out_client == NULL) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    lsdk_client_config_t defaults;
    lsdk_client_config_init(&defaults);
    if (config == NULL) config = &defaults;
    if (config->worker_threads == 0 || config->worker_threads > LSDK_MAX_WORKER_THREADS) {
        return lsdk_bad_call(NULL, LSDK_ERR_OUT_OF_RANGE);
    }
    if (config->affinity < LSDK_AFFINITY_ANY || config->affinity > LSDK_AFFINITY_LOOP) {
        return lsdk_bad_call(NULL, LSDK_ERR_UNKNOWN_ENUM);
    }
    if (config->affinity == LSDK_AFFINITY_LOOP && !config->loop_thread) {
        return lsdk_bad_call(NULL, LSDK_ERR_OUT_OF_RANGE);
    }
    pthread_once(&tombstones_once, tombstones_init);

    struct lsdk_client *client = calloc(1, sizeof *client);
    struct lsdk_runtime *runtime = calloc(1, sizeof *runtime);
    pthread_t *workers = calloc(config->worker_threads, sizeof *workers);
    if (client == NULL || runtime == NULL || workers == NULL) {
        free(client);
        free(runtime);
        free(workers);
        return LSDK_ERR_RESOURCES;
    }
    client->magic = LSDK_CLIENT_MAGIC;
    atomic_init(&client->state, LSDK_CLIENT_ALIVE);
    for (int i = 0; i < LSDK_COUNTER_COUNT; i++) atomic_init(&client->counters.value[i], 0);
    atomic_init(&client->next_request_id, 1);
    atomic_init(&client->active_calls, 0);
    atomic_flag_clear(&client->token_busy);
    client->seed = config->seed;
    client->probe = config->session_token_probe;
    client->probe_context = config->probe_context;
    client->handle_probe = config->handle_probe;
    client->has_loop = config->loop_thread;
    client->affinity = config->affinity;
    client->creator_id = lsdk_thread_id();
    lsdk_mutex_init(&client->mutex);
    lsdk_mutex_init(&client->listen_mutex);
    lsdk_cond_init(&client->cond);
    lsdk_cond_init(&client->wait_cond);
    lsdk_cond_init(&client->blocking_cond);
    client->runtime = runtime;

    lsdk_mutex_init(&runtime->queue_mutex);
    lsdk_cond_init(&runtime->queue_cond);
    lsdk_mutex_init(&runtime->timer_mutex);
    lsdk_cond_init(&runtime->timer_cond);
    lsdk_mutex_init(&runtime->fresh_mutex);
    lsdk_cond_init(&runtime->fresh_cond);
    lsdk_mutex_init(&runtime->loop_mutex);
    lsdk_cond_init(&runtime->loop_cond);
    atomic_init(&runtime->flushing, false);
    runtime->workers = workers;
    runtime->worker_count = config->worker_threads;

    uint32_t started = 0;
    bool timer_started = false;
    bool loop_started = false;
    bool failed = false;
    for (; started < runtime->worker_count; started++) {
        if (spawn_counted(&workers[started], worker_main, client) != 0) {
            failed = true;
            break;
        }
    }
    if (!failed) {
        timer_started = spawn_counted(&runtime->timer, timer_main, client) == 0;
        failed = !timer_started;
    }
    if (!failed && config->loop_thread) {
        loop_started = spawn_counted(&runtime->loop, loop_main, client) == 0;
        failed = !loop_started;
    }
    if (failed) {
        runtime_stop(runtime, started, timer_started, loop_started);
        runtime_free(runtime);
        lsdk_mutex_destroy(&client->mutex);
        lsdk_mutex_destroy(&client->listen_mutex);
        lsdk_cond_destroy(&client->cond);
        lsdk_cond_destroy(&client->wait_cond);
        lsdk_cond_destroy(&client->blocking_cond);
        free(client);
        return LSDK_ERR_RESOURCES;
    }
    atomic_fetch_add(&live_clients, 1);
    *out_client = client;
    return LSDK_OK;
}

/* Takes the first operation not yet cancelled by destroy, moving it to the swept list.
   Called with client->mutex held; returns it with a memory reference, or NULL. */
static struct lsdk_op *take_unswept(struct lsdk_client *client) {
    struct lsdk_op *op = client->live;
    if (op == NULL) return NULL;
    struct lsdk_op_links *links = lsdk_op_links(op);
    client->live = links->next;
    if (links->next != NULL) lsdk_op_links(links->next)->previous = NULL;
    links->previous = NULL;
    links->next = client->swept;
    if (client->swept != NULL) lsdk_op_links(client->swept)->previous = op;
    client->swept = op;
    links->swept = true;
    lsdk_op_ref(op);
    return op;
}

lsdk_status_t lsdk_client_destroy(lsdk_client_t *client) {
    if (client == NULL) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    if (client->magic != LSDK_CLIENT_MAGIC) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    if (atomic_load(&client->state) == LSDK_CLIENT_ALIVE && on_client_thread(client)) {
        return lsdk_bad_call(client, LSDK_ERR_WRONG_THREAD);
    }
    lsdk_lock(&client->mutex);
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        lsdk_unlock(&client->mutex);
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    atomic_store(&client->state, LSDK_CLIENT_DESTROYING);
    /* A WAITS cancel blocked inside one of our callbacks can only end now (see LSDK_CANCEL_WAITS). */
    LSDK_CHECK(pthread_cond_broadcast(&client->wait_cond));
    /* Every blocked call returns INTERRUPTED; none can start blocking from now on. */
    interrupt_all_locked(client);
    lsdk_unlock(&client->mutex);

    /* Cancel every live operation (including ones whose start is still running), skip every
       delay from then on (including what already waits in the timer), and wait until every
       operation has released its context and no API call is inside the client. Delays are
       skipped only after the first sweep, so that nothing delayed is delivered as if it had
       not been cancelled. */
    struct lsdk_runtime *runtime = client->runtime;
    bool flushing = false;
    lsdk_lock(&client->mutex);
    for (;;) {
        struct lsdk_op *op = take_unswept(client);
        if (op != NULL) {
            lsdk_unlock(&client->mutex);
            lsdk_op_cancel(op, true);
            lsdk_op_unref(op);
            lsdk_lock(&client->mutex);
            continue;
        }
        /* RPC connections: each is destroyed here (its disconnect reports run on this thread) and
           counts in live_count until its last callback returned. */
        struct lsdk_rpc *rpc = lsdk_rpc_take_open(client);
        if (rpc != NULL) {
            lsdk_unlock(&client->mutex);
            lsdk_rpc_close(rpc);
            lsdk_lock(&client->mutex);
            continue;
        }
        if (!flushing) {
            flushing = true;
            lsdk_unlock(&client->mutex);
            atomic_store(&runtime->flushing, true);
            lsdk_lock(&runtime->timer_mutex);
            LSDK_CHECK(pthread_cond_broadcast(&runtime->timer_cond));
            lsdk_unlock(&runtime->timer_mutex);
            lsdk_lock(&client->mutex);
            continue;
        }
        if (client->live_count == 0 && atomic_load(&client->active_calls) == 0) {
            /* Decided under the mutex that lsdk_client_post takes to enter: no job is accepted
               from here on, so the runtime can go. */
            client->closed = true;
            break;
        }
        LSDK_CHECK(pthread_cond_wait(&client->cond, &client->mutex));
    }
    lsdk_unlock(&client->mutex);

    runtime_stop(runtime, runtime->worker_count, true, client->has_loop);
    runtime_free(runtime);
    atomic_fetch_sub(&live_clients, 1);

    lsdk_lock(&client->mutex);
    client->runtime = NULL;
    atomic_store(&client->state, LSDK_CLIENT_DESTROYED);
    lsdk_unlock(&client->mutex);

    lsdk_lock(&tombstones_mutex);
    client->tombstone_next = tombstones;
    tombstones = client;
    lsdk_unlock(&tombstones_mutex);
    return LSDK_OK;
}

/* ------------------------------------------------------------------------ */
/* Enter / leave, live list                                                 */
/* ------------------------------------------------------------------------ */

bool lsdk_client_enter(struct lsdk_client *client) {
    atomic_fetch_add(&client->active_calls, 1);
    if (atomic_load(&client->state) == LSDK_CLIENT_ALIVE) return true;
    lsdk_client_leave(client);
    return false;
}

void lsdk_client_enter_any(struct lsdk_client *client) { atomic_fetch_add(&client->active_calls, 1); }

void lsdk_client_leave(struct lsdk_client *client) {
    /* Sequentially consistent with destroy's store of the state and load of active_calls: either
       destroy sees our decrement, or we see DESTROYING and wake it. */
    if (atomic_fetch_sub(&client->active_calls, 1) == 1 &&
        atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        lsdk_lock(&client->mutex);
        LSDK_CHECK(pthread_cond_broadcast(&client->cond));
        lsdk_unlock(&client->mutex);
    }
}

void lsdk_client_live_add(struct lsdk_client *client, struct lsdk_op *op) {
    struct lsdk_op_links *links = lsdk_op_links(op);
    lsdk_lock(&client->mutex);
    links->previous = NULL;
    links->next = client->live;
    links->swept = false;
    if (client->live != NULL) lsdk_op_links(client->live)->previous = op;
    client->live = op;
    client->live_count++;
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        LSDK_CHECK(pthread_cond_broadcast(&client->cond));
    }
    lsdk_unlock(&client->mutex);
}

void lsdk_client_live_hold(struct lsdk_client *client) {
    lsdk_lock(&client->mutex);
    client->live_count++;
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        LSDK_CHECK(pthread_cond_broadcast(&client->cond));
    }
    lsdk_unlock(&client->mutex);
}

void lsdk_client_live_release(struct lsdk_client *client) {
    lsdk_lock(&client->mutex);
    LSDK_ASSERT(client->live_count > 0);
    client->live_count--;
    if (client->live_count == 0 && atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        LSDK_CHECK(pthread_cond_broadcast(&client->cond));
    }
    lsdk_unlock(&client->mutex);
}

void lsdk_client_live_remove(struct lsdk_client *client, struct lsdk_op *op) {
    struct lsdk_op_links *links = lsdk_op_links(op);
    lsdk_lock(&client->mutex);
    struct lsdk_op **head = links->swept ? &client->swept : &client->live;
    if (links->previous != NULL) {
        lsdk_op_links(links->previous)->next = links->next;
    } else {
        *head = links->next;
    }
    if (links->next != NULL) lsdk_op_links(links->next)->previous = links->previous;
    links->previous = NULL;
    links->next = NULL;
    client->live_count--;
    if (client->live_count == 0 && atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        LSDK_CHECK(pthread_cond_broadcast(&client->cond));
    }
    lsdk_unlock(&client->mutex);
}

/* ------------------------------------------------------------------------ */
/* Blocking calls                                                           */
/* ------------------------------------------------------------------------ */

/** One blocked lsdk_blocking_call (on its caller's stack), linked under client->mutex. */
struct lsdk_blocked {
    uint64_t key;
    bool interrupted;
    struct lsdk_blocked *next;
};

static void interrupt_all_locked(struct lsdk_client *client) {
    for (struct lsdk_blocked *call = client->blocked; call != NULL; call = call->next) call->interrupted = true;
    LSDK_CHECK(pthread_cond_broadcast(&client->blocking_cond));
}

lsdk_status_t lsdk_blocking_call(lsdk_client_t *client, uint64_t call_key, uint32_t duration_us,
                                 uint64_t *out_result) {
    if (client == NULL || client->magic != LSDK_CLIENT_MAGIC) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    lsdk_affinity_check(client);
    if (!lsdk_client_enter(client)) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    lsdk_status_t status = LSDK_OK;
    if (out_result == NULL) {
        status = LSDK_ERR_NULL_ARGUMENT;
    } else if (duration_us > LSDK_MAX_BLOCKING_US) {
        status = LSDK_ERR_OUT_OF_RANGE;
    }
    if (status != LSDK_OK) {
        lsdk_client_leave(client);
        return lsdk_bad_call(client, status);
    }

    struct lsdk_blocked call = {.key = call_key, .interrupted = false, .next = NULL};
    uint64_t deadline = lsdk_now_ns() + (uint64_t)duration_us * 1000u;
    lsdk_lock(&client->mutex);
    /* Registered under the mutex destroy interrupts under: either destroy sees this call, or this
       call sees that destroy began. */
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        lsdk_unlock(&client->mutex);
        lsdk_client_leave(client);
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    call.next = client->blocked;
    client->blocked = &call;
    lsdk_count(client, LSDK_COUNTER_blocking_calls, 1);
    lsdk_gauge_up(client);
    while (!call.interrupted && lsdk_now_ns() < deadline) {
        lsdk_cond_wait_until(&client->blocking_cond, &client->mutex, deadline);
    }
    struct lsdk_blocked **link = &client->blocked;
    while (*link != &call) link = &(*link)->next;
    *link = call.next;
    bool interrupted = call.interrupted;
    lsdk_unlock(&client->mutex);

    lsdk_gauge_down(client);
    if (interrupted) {
        lsdk_count(client, LSDK_COUNTER_blocking_calls_interrupted, 1);
        status = LSDK_ERR_INTERRUPTED;
    } else {
        *out_result = lsdk_blocking_result(call_key);
    }
    lsdk_client_leave(client);
    return status;
}

lsdk_status_t lsdk_interrupt(lsdk_client_t *client, uint64_t call_key) {
    if (client == NULL || client->magic != LSDK_CLIENT_MAGIC) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    lsdk_lock(&client->mutex);
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        lsdk_unlock(&client->mutex);
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    bool found = false;
    for (struct lsdk_blocked *call = client->blocked; call != NULL; call = call->next) {
        if (call->key == call_key) {
            call->interrupted = true;
            found = true;
        }
    }
    if (found) LSDK_CHECK(pthread_cond_broadcast(&client->blocking_cond));
    lsdk_unlock(&client->mutex);
    return found ? LSDK_OK : LSDK_ERR_NOT_BLOCKED;
}

/* ------------------------------------------------------------------------ */
/* Posted jobs                                                              */
/* ------------------------------------------------------------------------ */

lsdk_status_t lsdk_client_post(lsdk_client_t *client, void (*job)(void *), void *job_context) {
    if (client == NULL || client->magic != LSDK_CLIENT_MAGIC) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    /* Entered under the mutex destroy decides `closed` under, so the runtime outlives this call. */
    lsdk_lock(&client->mutex);
    bool closed = client->closed || atomic_load(&client->state) == LSDK_CLIENT_DESTROYED;
    if (!closed) atomic_fetch_add(&client->active_calls, 1);
    lsdk_unlock(&client->mutex);
    if (closed) return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    lsdk_status_t status = LSDK_OK;
    if (job == NULL) {
        status = LSDK_ERR_NULL_ARGUMENT;
    } else if (!client->has_loop) {
        status = LSDK_ERR_NO_LOOP_THREAD;
    }
    if (status != LSDK_OK) {
        lsdk_client_leave(client);
        return lsdk_bad_call(client, status);
    }
    lsdk_task_t *task = calloc(1, sizeof *task);
    if (task == NULL) {
        lsdk_client_leave(client);
        return LSDK_ERR_RESOURCES;
    }
    task->kind = LSDK_TASK_JOB;
    task->mode = LSDK_MODE_LOOP;
    task->job = job;
    task->job_context = job_context;
    loop_push(client->runtime, task);
    lsdk_client_leave(client);
    return LSDK_OK;
}

/* ------------------------------------------------------------------------ */
/* Session token                                                            */
/* ------------------------------------------------------------------------ */

lsdk_status_t lsdk_client_set_session_token(lsdk_client_t *client, const char *token) {
    if (client == NULL) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    lsdk_affinity_check(client);
    /* Documented as not thread-safe: a concurrent entry is detected, not serialised. */
    if (atomic_flag_test_and_set(&client->token_busy)) {
        return lsdk_bad_call(client, LSDK_ERR_BUSY);
    }
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        atomic_flag_clear(&client->token_busy);
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    if (client->probe != NULL) {
        lsdk_frame_t frame;
        lsdk_frame_push(&frame, client, NULL);
        client->probe(client->probe_context);
        lsdk_frame_pop(&frame);
    }
    lsdk_lock(&client->mutex);
    lsdk_copy_string(client->token, token);
    lsdk_unlock(&client->mutex);
    atomic_flag_clear(&client->token_busy);
    return LSDK_OK;
}

lsdk_status_t lsdk_client_get_session_token(lsdk_client_t *client, char *buffer, size_t capacity) {
    if (client != NULL) lsdk_affinity_check(client);
    if (client == NULL || buffer == NULL) return lsdk_bad_call(client, LSDK_ERR_NULL_ARGUMENT);
    if (capacity == 0) return lsdk_bad_call(client, LSDK_ERR_OUT_OF_RANGE);
    if (atomic_load(&client->state) != LSDK_CLIENT_ALIVE) {
        return lsdk_bad_call(client, LSDK_ERR_CLIENT_DESTROYED);
    }
    lsdk_lock(&client->mutex);
    size_t length = strlen(client->token);
    if (length > capacity - 1) length = capacity - 1;
    memcpy(buffer, client->token, length);
    buffer[length] = '\0';
    lsdk_unlock(&client->mutex);
    return LSDK_OK;
}
