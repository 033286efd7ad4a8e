// The test process's run-end check, installed before any test runs: at exit it calls
// legacy_bridge_run_end_check (TestSupport's RunEndCheck.swift), which says what a test left
// running, and the process exits with its status when that is not 0. A sampler thread keeps the
// process's peak thread count for the check's report.

#include "RunEndHook.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* Defined in Swift (TestSupport), linked into the same test process. */
extern int legacy_bridge_run_end_check(void);

static _Atomic size_t peak_threads;

size_t legacy_bridge_thread_count(void) {
    DIR *directory = opendir("/proc/self/task");
    if (directory == NULL) return 0;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        if (entry->d_name[0] != '.') count++;
    }
    closedir(directory);
    return count;
}

size_t legacy_bridge_peak_threads(void) { return atomic_load(&peak_threads); }

static void *sample(void *argument) {
    (void)argument;
    for (;;) {
        size_t now = legacy_bridge_thread_count();
        size_t peak = atomic_load(&peak_threads);
        while (now > peak && !atomic_compare_exchange_weak(&peak_threads, &peak, now)) {
        }
        usleep(20000);
    }
    return NULL;
}

static void at_exit(void) {
    int status = legacy_bridge_run_end_check();
    if (status != 0) _exit(status);
}

__attribute__((constructor)) static void install(void) {
    atexit(at_exit);
    pthread_t thread;
    if (pthread_create(&thread, NULL, sample, NULL) == 0) pthread_detach(thread);
}
