/* Behaviour defaults, chaos draws and validation. */
#include "lsdk_internal.h"

void lsdk_behavior_init(lsdk_behavior_t *behavior) {
    if (behavior == NULL) return;
    memset(behavior, 0, sizeof *behavior);
    behavior->delivery = LSDK_DELIVERY_WORKER;
    behavior->delay_us = 0;
    behavior->jitter_us = 0;
    behavior->completion_count = 1;
    for (int i = 0; i < LSDK_MAX_COMPLETIONS; i++) behavior->outcomes[i] = LSDK_OUTCOME_SUCCESS;
    behavior->cancel_mode = LSDK_CANCEL_CALLBACK_ASYNC;
    behavior->late_callback_after_cancel = false;
    behavior->chunk_size = 4096;
    behavior->progress_every = 1;
    behavior->interval_us = 0;
    behavior->stream_concurrency = 1;
    behavior->stream_end = LSDK_STREAM_END_SUCCESS;
    behavior->duplicate_terminal = false;
    behavior->events_after_terminal = 0;
    behavior->pause_mode = LSDK_PAUSE_STOPS;
    behavior->error_status = LSDK_ERR_REMOTE;
    behavior->error_message = NULL;
    behavior->seed = 0;
    behavior->first_sequence = 0;
    behavior->sequence_bits = 64;
    behavior->sequence_jump_at = 0;
    behavior->sequence_jump = 0;
    behavior->sequence_corrupt_at = 0;
    behavior->sequence_corrupt_value = 0;
}

void lsdk_behavior_init_chaos(lsdk_behavior_t *behavior, uint64_t seed) {
    if (behavior == NULL) return;
    lsdk_behavior_init(behavior);
    uint64_t rng = lsdk_mix64(seed ^ 0x43484153u /* "CHAS" */);

    behavior->delivery = (int32_t)lsdk_rng_below(&rng, 4);
    /* Small delays (delay + jitter <= 2 ms) so bursts of chaos operations finish quickly. */
    if (lsdk_rng_below(&rng, 2) == 0) {
        behavior->delay_us = lsdk_rng_below(&rng, 1001);
        behavior->jitter_us = lsdk_rng_below(&rng, 1001);
    }

    uint32_t shape = lsdk_rng_below(&rng, 10);
    if (shape == 0) {
        behavior->completion_count = 0;
    } else if (shape <= 6) {
        behavior->completion_count = 1;
    } else if (shape <= 8) {
        behavior->completion_count = 2;
    } else {
        behavior->completion_count = 3 + lsdk_rng_below(&rng, LSDK_MAX_COMPLETIONS - 2);
    }
    for (int i = 0; i < LSDK_MAX_COMPLETIONS; i++) {
        behavior->outcomes[i] =
            lsdk_rng_below(&rng, 4) == 0 ? LSDK_OUTCOME_ERROR : LSDK_OUTCOME_SUCCESS;
    }

    uint32_t end = lsdk_rng_below(&rng, 8);
    behavior->stream_end = end < 5 ? LSDK_STREAM_END_SUCCESS
                           : end < 7 ? LSDK_STREAM_END_ERROR
                                     : LSDK_STREAM_END_NONE;

    behavior->cancel_mode = (int32_t)lsdk_rng_below(&rng, 4);
    /* An operation that never ends by itself always ends when cancelled, so chaos runs can
       finish: never pair it with an ignored cancel. */
    if (behavior->cancel_mode == LSDK_CANCEL_IGNORED &&
        (behavior->completion_count == 0 || behavior->stream_end == LSDK_STREAM_END_NONE)) {
        behavior->cancel_mode = (int32_t)lsdk_rng_below(&rng, 3);
    }
    behavior->late_callback_after_cancel = lsdk_rng_below(&rng, 4) == 0;

    behavior->chunk_size = 1024u << lsdk_rng_below(&rng, 5); /* 1 KiB ... 16 KiB */
    behavior->progress_every = lsdk_rng_below(&rng, 4);
    behavior->interval_us = lsdk_rng_below(&rng, 4) == 0 ? lsdk_rng_below(&rng, 101) : 0;
    behavior->stream_concurrency = lsdk_rng_below(&rng, 3) == 0 ? 2 + lsdk_rng_below(&rng, 3) : 1;
    behavior->duplicate_terminal = lsdk_rng_below(&rng, 5) == 0;
    behavior->events_after_terminal =
        lsdk_rng_below(&rng, 5) == 0 ? 1 + lsdk_rng_below(&rng, 3) : 0;
    behavior->pause_mode = (int32_t)lsdk_rng_below(&rng, 2);

    behavior->error_status = lsdk_rng_below(&rng, 4) == 0 ? LSDK_ERR_RESOURCES : LSDK_ERR_REMOTE;
    behavior->error_message = NULL;
    behavior->seed = lsdk_mix64(seed + 0x5EEDu) | 1u;
}

lsdk_status_t lsdk_behavior_validate(const lsdk_behavior_t *b, bool has_loop) {
    if (b->delivery < LSDK_DELIVERY_SYNC || b->delivery > LSDK_DELIVERY_LOOP) {
        return LSDK_ERR_UNKNOWN_ENUM;
    }
    if (b->delivery == LSDK_DELIVERY_LOOP && !has_loop) return LSDK_ERR_NO_LOOP_THREAD;
    if (b->delay_us > LSDK_MAX_DELAY_US || b->jitter_us > LSDK_MAX_DELAY_US) {
        return LSDK_ERR_OUT_OF_RANGE;
    }
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
    if (b->pause_mode != LSDK_PAUSE_STOPS && b->pause_mode != LSDK_PAUSE_DROPS) {
        return LSDK_ERR_UNKNOWN_ENUM;
    }
    if (b->error_status == LSDK_OK || b->error_status == LSDK_ERR_CANCELLED) {
        return LSDK_ERR_OUT_OF_RANGE;
    }
    /* sequence_bits first: first_sequence is checked against it. */
    if (b->sequence_bits < 8 || b->sequence_bits > 64) return LSDK_ERR_OUT_OF_RANGE;
    if (b->first_sequence > lsdk_sequence_mask(b->sequence_bits)) return LSDK_ERR_OUT_OF_RANGE;
    return LSDK_OK;
}
