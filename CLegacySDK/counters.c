/* Counters: per client (in the client shell, readable after destroy) and process-wide.
 *
 * Each counter is exact; a read is not a snapshot across counters. What a read does promise is
 * that an "effect" never exceeds its "cause" (handles released <= created, contexts released <=
 * created, operations finished <= started, blocking calls interrupted <= made), on any CPU:
 *  1. the cause is counted before its effect can happen, and the effect's increment happens after
 *     it (handles_created is counted before the slot is published under the table mutex that every
 *     release takes; contexts and operations are counted while start still holds the operation
 *     open, and its finish is reached through the queues' mutexes); so the cause's increment
 *     happens-before the effect's;
 *  2. every increment is a release operation and every read an acquire one, and a read loads the
 *     effect before the cause (LSDK_COUNTER_EFFECTS before LSDK_COUNTER_CAUSES). A reader that
 *     sees an effect's increment synchronizes with it (release sequences cover the other threads'
 *     later increments), so everything that happened before it, the cause's increment included,
 *     is visible to the cause's later load.
 * With relaxed operations (as before) step 2 does not hold: on a weakly ordered CPU (arm64) the
 * effect can be seen without its cause, and handles_outstanding (created - released) underflows.
 * x86 orders these anyway, so no test on this machine can show it; the order of step 1 is what
 * Tests/CLegacySDKTests/CounterOrderTests.swift pins down. */
#include "lsdk_internal.h"

static lsdk_atomic_counters_t global_counters;

void lsdk_count(struct lsdk_client *client, lsdk_counter_id_t id, uint64_t amount) {
    if (client != NULL) {
        atomic_fetch_add_explicit(&client->counters.value[id], amount, memory_order_release);
    }
    atomic_fetch_add_explicit(&global_counters.value[id], amount, memory_order_release);
}

static void gauge_up(lsdk_atomic_counters_t *counters) {
    uint64_t now = atomic_fetch_add(&counters->value[LSDK_COUNTER_blocking_in_flight], 1) + 1;
    uint64_t peak = atomic_load(&counters->value[LSDK_COUNTER_blocking_in_flight_peak]);
    while (now > peak &&
           !atomic_compare_exchange_weak(&counters->value[LSDK_COUNTER_blocking_in_flight_peak], &peak, now)) {
    }
}

void lsdk_gauge_up(struct lsdk_client *client) {
    if (client != NULL) gauge_up(&client->counters);
    gauge_up(&global_counters);
}

void lsdk_gauge_down(struct lsdk_client *client) {
    if (client != NULL) atomic_fetch_sub(&client->counters.value[LSDK_COUNTER_blocking_in_flight], 1);
    atomic_fetch_sub(&global_counters.value[LSDK_COUNTER_blocking_in_flight], 1);
}

lsdk_status_t lsdk_bad_call(struct lsdk_client *client, lsdk_status_t status) {
    lsdk_count(client, LSDK_COUNTER_bad_calls, 1);
    return status;
}

static uint64_t load(const lsdk_atomic_counters_t *counters, lsdk_counter_id_t id) {
    return atomic_load_explicit(&counters->value[id], memory_order_acquire);
}

/* Counters that are the effect of another one (read first) and their causes (read after). */
#define LSDK_COUNTER_EFFECTS(X)                                                                    \
    X(handles_released)                                                                            \
    X(contexts_released)                                                                           \
    X(operations_finished)                                                                         \
    X(blocking_calls_interrupted)                                                                  \
    X(rpc_connections_finished)                                                                    \
    X(rpc_requests_settled)                                                                        \
    X(rpc_requests_finished)                                                                       \
    X(listener_finished)
#define LSDK_COUNTER_CAUSES(X)                                                                     \
    X(handles_created)                                                                             \
    X(contexts_created)                                                                            \
    X(operations_started)                                                                          \
    X(blocking_calls)                                                                              \
    X(rpc_connections_created)                                                                     \
    X(rpc_requests_sent)                                                                           \
    X(listener_starts)

static bool is_ordered(lsdk_counter_id_t id) {
#define LSDK_COUNTER_MATCH(name) || id == LSDK_COUNTER_##name
    return false LSDK_COUNTER_EFFECTS(LSDK_COUNTER_MATCH) LSDK_COUNTER_CAUSES(LSDK_COUNTER_MATCH);
#undef LSDK_COUNTER_MATCH
}

void lsdk_counters_read(const lsdk_atomic_counters_t *counters, lsdk_counters_t *out) {
    /* Effects first (acquire), then their causes: see the comment at the top. */
#define LSDK_COUNTER_READ(name) out->name = load(counters, LSDK_COUNTER_##name);
    LSDK_COUNTER_EFFECTS(LSDK_COUNTER_READ)
    LSDK_COUNTER_CAUSES(LSDK_COUNTER_READ)
#undef LSDK_COUNTER_READ
    /* The rest in any order. */
#define LSDK_COUNTER_READ(name)                                                                    \
    if (!is_ordered(LSDK_COUNTER_##name)) out->name = load(counters, LSDK_COUNTER_##name);
    LSDK_COUNTER_LIST(LSDK_COUNTER_READ)
#undef LSDK_COUNTER_READ
    out->handles_outstanding = out->handles_created - out->handles_released;
    out->rpc_requests_pending = out->rpc_requests_sent - out->rpc_requests_settled;
    out->rpc_requests_live = out->rpc_requests_sent - out->rpc_requests_finished;
    out->listener_live = out->listener_starts - out->listener_finished;
}

lsdk_status_t lsdk_client_counters(const lsdk_client_t *client, lsdk_counters_t *out) {
    if (client == NULL || out == NULL) return lsdk_bad_call(NULL, LSDK_ERR_NULL_ARGUMENT);
    lsdk_counters_read(&client->counters, out);
    return LSDK_OK;
}

void lsdk_global_counters(lsdk_counters_t *out) {
    if (out == NULL) return;
    lsdk_counters_read(&global_counters, out);
}
