/* Counters: per client (in the client shell, readable after destroy) and process-wide.
   Relaxed C11 atomics: each counter is exact, counters are not a consistent snapshot. */
#include "lsdk_internal.h"

static lsdk_atomic_counters_t global_counters;

void lsdk_count(struct lsdk_client *client, lsdk_counter_id_t id, uint64_t amount) {
    if (client != NULL) {
        atomic_fetch_add_explicit(&client->counters.value[id], amount, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&global_counters.value[id], amount, memory_order_relaxed);
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

void lsdk_counters_read(const lsdk_atomic_counters_t *counters, lsdk_counters_t *out) {
#define LSDK_COUNTER_READ(name)                                                                    \
    out->name = atomic_load_explicit(&counters->value[LSDK_COUNTER_##name], memory_order_relaxed);
    LSDK_COUNTER_LIST(LSDK_COUNTER_READ)
#undef LSDK_COUNTER_READ
    /* Released first, then created: created can only have grown meanwhile, so the difference
       is never negative. */
    out->handles_released = atomic_load_explicit(
        &counters->value[LSDK_COUNTER_handles_released], memory_order_relaxed);
    out->handles_created = atomic_load_explicit(
        &counters->value[LSDK_COUNTER_handles_created], memory_order_relaxed);
    out->handles_outstanding = out->handles_created - out->handles_released;
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
