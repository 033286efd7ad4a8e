import LegacyBridge
import LegacySimulator

/// Blocking calls of the simulated SDK (`lsdk_blocking_call`): each really blocks the thread that
/// makes it until its set duration passes or `lsdk_interrupt` ends it. The SDK's counters say how
/// many started blocking and how many were interrupted.
final class BlockingLab: Sendable {
    private struct State {
        var released = false
        var active: [UInt64: Int] = [:]
        /// Calls whose interrupt was made.
        var interruptedCalls: Set<UInt64> = []
        /// Blocking calls begun after their call's interrupt was made.
        var begunAfterInterrupt = 0
        /// Tokens each kept alive by one call's closures: when all are gone, the adapter let go of
        /// every call and can start none any more.
        var tokens: [WeakCallToken] = []
        /// Calls made inside a task that runs on Swift's default executors.
        var inDefaultExecutorTask = 0
    }
    private let sdk: SDKClient
    private let state = LockedBox(State())
    /// Keys of this lab's calls: far from any other client's, though keys are per client anyway.
    private static let keyBase: UInt64 = 0xB10C_0000

    init(sdk: SDKClient) { self.sdk = sdk }

    /// Calls that started blocking in the SDK.
    var entered: Int { Int(sdk.counters.blockingCalls) }
    /// Calls that an interrupt ended early.
    var interrupted: Int { Int(sdk.counters.blockingCallsInterrupted) }

    /// A call numbered `number` that blocks for `duration` (at most 60 s), or throws `failing`
    /// after it.
    func call(_ number: UInt64, duration: Duration, failing: LegacySDKError? = nil) -> LegacyBlockingCall {
        let key = Self.keyBase + number
        let sdk = self.sdk
        let token = CallToken()
        state.withLock { $0.tokens.append(WeakCallToken(token)) }
        return LegacyBlockingCall(
            number: number,
            perform: {
                try withExtendedLifetime(token) {
                    try self.perform(number, key: key, duration: duration, failing: failing)
                }
            },
            interrupt: {
                withExtendedLifetime(token) {
                    self.state.withLock { _ = $0.interruptedCalls.insert(number) }
                    _ = try? sdk.interrupt(key: key)  // not remembered, as the SDK documents
                }
            })
    }

    /// Waits (at most `bound`) until the adapter let go of every call of this lab, so that none
    /// can begin any more, then says how many blocking calls began after their interrupt.
    func begunAfterInterrupt(within bound: Duration) async -> Int {
        _ = await eventually(within: bound) {
            self.state.withLock { $0.tokens.allSatisfy { $0.token == nil } }
        }
        return state.withLock { $0.begunAfterInterrupt }
    }

    /// Ends every blocked call and lets later ones return at once, so that a scenario never leaves
    /// threads blocked behind it. An interrupt is not remembered, so calls about to block are
    /// interrupted again until none is left (bounded).
    func releaseAll() {
        state.withLock { $0.released = true }
        _ = waitOnThisThread(upTo: .seconds(10)) {
            let keys = state.withLock { Array($0.active.keys) }
            for key in keys { _ = try? sdk.interrupt(key: key) }
            return keys.isEmpty
        }
    }

    /// What the calls showed about where the adapter makes them, in words, or `nil`.
    func problem() -> String? {
        guard state.withLock({ $0.inDefaultExecutorTask }) > 0 else { return nil }
        return
            "the adapter made the blocking call inside a task on Swift's own threads (the cooperative pool, or the main actor): a few such calls hold every thread of the pool. Run it on threads of its own (OffloadPool)"
    }

    private func perform(
        _ number: UInt64, key: UInt64, duration: Duration, failing: LegacySDKError?
    ) throws -> LegacyPayload {
        // A task is current on this thread and prefers no task executor: the call runs on the
        // cooperative pool or the main actor. Seen on the thread itself, whatever the load.
        let inDefaultExecutorTask = withUnsafeCurrentTask { task in task.map { $0.unownedTaskExecutor == nil } ?? false
        }
        if inDefaultExecutorTask { state.withLock { $0.inDefaultExecutorTask += 1 } }
        let released = state.withLock { state -> Bool in
            if state.interruptedCalls.contains(number) { state.begunAfterInterrupt += 1 }
            if !state.released { state.active[key, default: 0] += 1 }
            return state.released
        }
        if released { throw LegacySDKError.interrupted }
        defer {
            state.withLock { state in
                state.active[key, default: 1] -= 1
                if state.active[key] == 0 { state.active.removeValue(forKey: key) }
            }
        }
        let microseconds = UInt32(clamping: duration.nanosecondsClamped / 1_000)
        let result = try sdk.blockingCall(key: key, durationMicroseconds: microseconds)
        guard result == SDK.blockingResult(key: key) else { throw LegacySDKError.remote }
        if let failing { throw failing }
        return LegacyPayload(requestID: number, attempt: 1)
    }
}

/// Kept alive by one blocking call's closures, and only by them.
final class CallToken: Sendable {}

/// A weak reference to a ``CallToken``.
struct WeakCallToken: @unchecked Sendable {
    // @unchecked Sendable: only read and written behind the lab's lock.
    weak var token: CallToken?
    init(_ token: CallToken) { self.token = token }
}
