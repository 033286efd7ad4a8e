// What every test target shares to tell "slow" from "hung", and to wait for something that must
// happen without guessing a schedule.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether this process has the runtime that defines `symbol` linked in.
private func runtimeLinked(_ symbol: String) -> Bool {
    guard let process = dlopen(nil, RTLD_NOW) else { return false }
    return dlsym(process, symbol) != nil
}

/// Whether this test process runs with ThreadSanitizer (its runtime is linked in).
package let testsUnderThreadSanitizer = runtimeLinked("__tsan_init")

/// Whether this test process runs with AddressSanitizer (its runtime is linked in).
package let testsUnderAddressSanitizer = runtimeLinked("__asan_init")

/// Whether a sanitizer instruments this process. Stress sizes scale down under one, and the
/// suites that enumerate a pure value's orderings do not run: the value lives on one thread and
/// holds no unsafe memory, so neither sanitizer has anything to see there, and their minutes of
/// work would only crowd the tests that do have something.
package let testsUnderSanitizer = testsUnderThreadSanitizer || testsUnderAddressSanitizer

/// How many seconds a test waits for something that must happen before it reports a hang: 120,
/// or 600 under ThreadSanitizer.
///
/// Generous on purpose: under ThreadSanitizer the burst suites put tens of thousands of jobs on a
/// two-core pool, and a task that suspends a few times waits its turn behind them each time. A
/// real hang costs a failing run this long; a passing run never waits for it.
package let testHangBoundSeconds = testsUnderThreadSanitizer ? 600 : 120

/// Polls `condition` from a task until it holds or `seconds` pass; `false` then.
///
/// The polling interval (1 ms) is never a guess at a schedule: the condition is something that
/// must happen, and the bound only turns a hang into a failure.
package func eventually(
    isolation: isolated (any Actor)? = #isolation, within seconds: Double = Double(testHangBoundSeconds),
    _ condition: () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}

/// Polls `condition` from a plain thread (never the cooperative pool) until it holds or `seconds`
/// pass; `false` then.
package func spinUntil(within seconds: Double = Double(testHangBoundSeconds), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        usleep(100)
    }
    return true
}
