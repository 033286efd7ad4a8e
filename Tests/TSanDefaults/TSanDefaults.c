// The test process's own ThreadSanitizer suppressions: the runtime calls
// __tsan_default_suppressions() at start in a ThreadSanitizer build, so the README's
// `swift test --sanitize=thread` needs no TSAN_OPTIONS. The list must stay equal to the rules of
// .ci/tsan-suppressions.txt, which explains them (one false positive of the concurrency runtime:
// a continuation resumed before its task finished suspending); a test compares the two.
// Outside ThreadSanitizer builds nothing calls it.

#include "TSanDefaults.h"

static const char suppressions[] =
    "race_top:withUnsafeContinuation\n"
    "race_top:withUnsafeThrowingContinuation\n"
    "race_top:withCheckedContinuation\n"
    "race_top:withCheckedThrowingContinuation\n"
    "race_top:Scc6resume\n"
    "race_top:ScC6resume\n";

const char *__tsan_default_suppressions(void) { return suppressions; }

const char *legacy_bridge_tsan_suppressions(void) { return suppressions; }
