/* Small helpers: locks, clock, allocation, random numbers, status strings. */
#include "lsdk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

_Noreturn void lsdk_fatal(const char *what, int code) {
    fprintf(stderr, "CLegacySDK fatal: %s (%d)\n", what, code);
    abort();
}

void lsdk_mutex_init(pthread_mutex_t *mutex) {
#ifdef LSDK_DEBUG
    pthread_mutexattr_t attributes;
    LSDK_CHECK(pthread_mutexattr_init(&attributes));
    LSDK_CHECK(pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_ERRORCHECK));
    LSDK_CHECK(pthread_mutex_init(mutex, &attributes));
    LSDK_CHECK(pthread_mutexattr_destroy(&attributes));
#else
    LSDK_CHECK(pthread_mutex_init(mutex, NULL));
#endif
}

void lsdk_mutex_destroy(pthread_mutex_t *mutex) { LSDK_CHECK(pthread_mutex_destroy(mutex)); }

void lsdk_cond_init(pthread_cond_t *cond) {
    pthread_condattr_t attributes;
    LSDK_CHECK(pthread_condattr_init(&attributes));
#if !defined(__APPLE__)
    LSDK_CHECK(pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC));
#endif
    LSDK_CHECK(pthread_cond_init(cond, &attributes));
    LSDK_CHECK(pthread_condattr_destroy(&attributes));
}

void lsdk_cond_destroy(pthread_cond_t *cond) { LSDK_CHECK(pthread_cond_destroy(cond)); }

uint64_t lsdk_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

void lsdk_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns) {
#if defined(__APPLE__)
    uint64_t now = lsdk_now_ns();
    uint64_t wait = deadline_ns > now ? deadline_ns - now : 0;
    struct timespec relative = {(time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull)};
    int rc = pthread_cond_timedwait_relative_np(cond, mutex, &relative);
#else
    struct timespec deadline = {(time_t)(deadline_ns / 1000000000ull),
                                (long)(deadline_ns % 1000000000ull)};
    int rc = pthread_cond_timedwait(cond, mutex, &deadline);
#endif
    if (rc != 0 && rc != ETIMEDOUT) lsdk_fatal("pthread_cond_timedwait", rc);
}

void *lsdk_xmalloc(size_t size) {
    void *memory = malloc(size == 0 ? 1 : size);
    if (memory == NULL) lsdk_fatal("out of memory", 0);
    return memory;
}

void lsdk_copy_string(char dst[256], const char *src) {
    size_t length = 0;
    if (src != NULL) {
        while (length < 255 && src[length] != '\0') length++;
        memcpy(dst, src, length);
    }
    dst[length] = '\0';
}

uint64_t lsdk_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint64_t lsdk_rng_next(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ull;
    return lsdk_mix64(*state);
}

uint32_t lsdk_rng_below(uint64_t *state, uint32_t bound) {
    if (bound == 0) return 0;
    /* Multiply-shift: unbiased enough for a simulator, and cheap. */
    return (uint32_t)(((lsdk_rng_next(state) >> 32) * (uint64_t)bound) >> 32);
}

uint64_t lsdk_blocking_result(uint64_t call_key) { return lsdk_mix64(call_key ^ 0x424C4F434B494E47ull); }

uint8_t lsdk_content_byte(uint64_t request_id, uint64_t offset) {
    return lsdk_content_byte_inline(request_id, offset);
}

const char *lsdk_status_string(lsdk_status_t status) {
    switch (status) {
    case LSDK_OK: return "ok";
    case LSDK_ERR_NULL_ARGUMENT: return "a required argument was NULL";
    case LSDK_ERR_OUT_OF_RANGE: return "a value is out of its documented range";
    case LSDK_ERR_UNKNOWN_ENUM: return "an enum field holds an unknown value";
    case LSDK_ERR_CLIENT_DESTROYED: return "the client was destroyed";
    case LSDK_ERR_INVALID_HANDLE: return "the handle is invalid or was already released";
    case LSDK_ERR_CANCELLED: return "the operation was cancelled";
    case LSDK_ERR_REMOTE: return "the remote end refused the request";
    case LSDK_ERR_BUSY: return "a non-thread-safe call was entered concurrently";
    case LSDK_ERR_WRONG_THREAD: return "called from one of the client's own threads";
    case LSDK_ERR_RESOURCES: return "out of memory or threads";
    case LSDK_ERR_NOT_A_STREAM: return "the operation is not a stream";
    case LSDK_ERR_NO_LOOP_THREAD: return "the client has no loop thread";
    case LSDK_ERR_INTERRUPTED: return "the blocking call was interrupted";
    case LSDK_ERR_NOT_BLOCKED: return "no call is blocked with that key";
    case LSDK_ERR_DISCONNECTED: return "the connection was lost";
    case LSDK_ERR_DUPLICATE_ID: return "a request with that id is still pending";
    case LSDK_ERR_UNKNOWN_ID: return "no request with that id is pending";
    case LSDK_ERR_ALREADY_LISTENING: return "the topic already has a listener";
    default: return "unknown status";
    }
}
