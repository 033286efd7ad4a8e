// The one bound every test in this module uses to tell "slow" from "hung".

/// How many seconds a test waits for something that must happen before it
/// reports a hang. Generous on purpose: under ThreadSanitizer the burst suites
/// put tens of thousands of jobs on a two-core pool, and a 20 ms timer can wait
/// its turn behind them for tens of seconds. A real hang costs a failing run
/// this long; a passing run never waits for it.
let testHangBoundSeconds = 120

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
