#ifndef TSAN_DEFAULTS_H
#define TSAN_DEFAULTS_H

/// The ThreadSanitizer suppressions the test process carries itself (the runtime asks for them at
/// start), so that `swift test --sanitize=thread` works as typed, without TSAN_OPTIONS.
const char *__tsan_default_suppressions(void);

/// The same text, for the test that keeps it equal to `.ci/tsan-suppressions.txt`.
const char *legacy_bridge_tsan_suppressions(void);

#endif
