// What every test target shares to tell "slow" from "hung", and to wait for something that must
// happen without guessing a schedule.

import Dispatch

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
    var attempt = 0
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        await pollPause(attempt)
        attempt += 1
    }
    return true
}

/// The pause between two looks of a test's polling loop: 1 ms for the first few, then longer, up to
/// 16 ms, so that a wait of minutes (a hang bound under ThreadSanitizer) costs a few thousand
/// wake-ups rather than hundreds of thousands.
///
/// It pauses in a cancelled task too. `Task.sleep` does not: it throws at once, so a poller in a
/// task that was cancelled (a test's helper task, a consumer a scenario cancelled) spun a core
/// until its bound, and each throw went through the test library's backtrace capture for thrown
/// errors, which ThreadSanitizer makes slow. That spin stalled a whole TSan run on two cores.
package func pollPause(_ attempt: Int) async {
    let milliseconds = attempt < 8 ? 1 : min(16, 1 << min(4, (attempt - 8) / 8 + 1))
    if !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(milliseconds))
        return
    }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
            continuation.resume()
        }
    }
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
