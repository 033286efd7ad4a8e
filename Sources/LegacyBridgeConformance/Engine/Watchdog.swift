import Dispatch
import LegacyBridge
import LegacySimulator

/// Runs `body` in its own task and waits at most `bound` for it.
///
/// Returns `nil` when the bound expired first. The body's task is then cancelled and abandoned: a
/// broken adapter may have left it suspended (or its threads blocked) forever, and the suite has to
/// go on without it. The timer is a thread of its own (not a Dispatch timer: on Linux Dispatch's
/// global threads are the cooperative pool, which a broken adapter may be starving), ending as soon
/// as the body does; the body runs on the scenario's own executor when there is one
/// (``ScenarioThreads``), so an adapter that blocks the threads it runs on neither delays the timer
/// nor keeps the waiter here from resuming.
func runWithWatchdog<Result: Sendable>(
    bound: Duration,
    _ body: @escaping @Sendable () async -> Result
) async -> Result? {
    let latch = FirstResultLatch<Result?>()
    let finished = DispatchSemaphore(value: 0)
    let task = ScenarioThreads.task {
        latch.offer(await body())
        finished.signal()
    }
    let deadline = DispatchTime.now() + .nanoseconds(Int(bound.nanosecondsClamped))
    onDedicatedThread("conformance watchdog") {
        if finished.wait(timeout: deadline) == .timedOut { latch.offer(nil) }
    }
    let result = await latch.value()
    if result == nil { task.cancel() }
    return result ?? nil
}

/// A one-shot latch: the first offered value wins and wakes the waiter; later offers are ignored.
/// Independent of the library's own gate so that a bug there cannot blind the watchdog.
final class FirstResultLatch<Value: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Value, Never>)
        case done(Value)
        case delivered
    }
    private let state = LockedBox<State>(.empty)

    func offer(_ value: Value) {
        let waiter: CheckedContinuation<Value, Never>? = state.withLock { state in
            switch state {
            case .empty:
                state = .done(value)
                return nil
            case .waiting(let continuation):
                state = .delivered
                return continuation
            case .done, .delivered:
                return nil
            }
        }
        waiter?.resume(returning: value)
    }

    func value() async -> Value {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
            let ready: Value? = state.withLock { state in
                switch state {
                case .empty:
                    state = .waiting(continuation)
                    return nil
                case .done(let value):
                    state = .delivered
                    return value
                case .waiting, .delivered:
                    preconditionFailure("FirstResultLatch.value() may be awaited only once")
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int` range.
    package var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        if seconds >= Int64.max / 1_000_000_000 { return Int64.max }
        if seconds < 0 { return 0 }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
