#ifndef RUN_END_HOOK_H
#define RUN_END_HOOK_H

#include <stddef.h>

/** The most threads the test process had at once, sampled every 20 ms from its start (Linux;
    0 where /proc is missing). */
size_t legacy_bridge_peak_threads(void);

/** The process's threads now (Linux; 0 where /proc is missing). */
size_t legacy_bridge_thread_count(void);

#endif
