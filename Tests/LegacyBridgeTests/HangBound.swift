// The one bound every test in this module uses to tell "slow" from "hung".

/// How many seconds a test waits for something that must happen before it
/// reports a hang: 120, or 600 under ThreadSanitizer. Generous on purpose:
/// under ThreadSanitizer the burst suites put tens of thousands of jobs on a
/// two-core pool while two property tests keep both cores busy, and a task
/// that suspends a few times waits its turn behind them each time (CI saw a
/// 300-event download consumer take over 120 s that way). A real hang costs a
/// failing run this long; a passing run never waits for it.
let testHangBoundSeconds = runningUnderThreadSanitizer ? 600 : 120

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether this test process runs with ThreadSanitizer (its runtime is linked in). Exit tests are
/// skipped there: each re-runs the whole TSan-built test binary, and on two cores a handful of
/// them at once kept the cooperative pool waiting for over a minute.
let runningUnderThreadSanitizer: Bool = {
    guard let process = dlopen(nil, RTLD_NOW) else { return false }
    return dlsym(process, "__tsan_init") != nil
}()
