#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LegacyBridge

/// What one blocking call of the simulated SDK returned.
public struct BlockingCallResult: Sendable, Hashable {
    /// The key the call was made with (unique within its client).
    public var key: UInt64
    /// The SDK's result, a documented function of `key` (`lsdk_blocking_result`).
    public var value: UInt64
}

extension LegacyClient {
    /// Makes one blocking call of the simulated SDK (`lsdk_blocking_call`), which blocks the thread
    /// that makes it for `duration`, on the client's ``OffloadPool``: never on the caller's thread,
    /// never on the cooperative pool.
    ///
    /// Cancelling the calling task (or the timeout) throws at once; the blocked call is then
    /// interrupted (`lsdk_interrupt`) so its pool thread comes back, and its late result is
    /// dropped. The SDK's interrupt is not remembered, so a cancellation that lands just before the
    /// call begins to block is handled here: the call does not start if the interrupt came first,
    /// and the interrupt is repeated for the few instructions between that check and the SDK's
    /// call blocking.
    ///
    /// - Parameters:
    ///   - duration: How long the call blocks, 0 ... 60 s.
    ///   - timeout: Give up after this long (and interrupt the call), or `nil` for no limit.
    ///   - isolation: The caller's actor; the call adds no executor hop.
    /// - Returns: The call's key and result.
    /// - Throws: ``LegacySDKError/outOfRange`` for a duration outside 0 ... 60 s;
    ///   ``LegacySDKError/resources`` when the client's first blocking call cannot start its threads;
    ///   ``LegacySDKError/interrupted`` when the client's destruction ended it;
    ///   `CancellationError` or `BridgeTimeoutError` as above; `OffloadError.queueFull(limit:)` when
    ///   ``Configuration/blockingThreads`` calls run and 1,024 more wait.
    public func blockingCall(
        duration: Duration,
        timeout: Duration? = nil,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> BlockingCallResult {
        guard duration >= .zero, duration <= .seconds(60) else { throw LegacySDKError.outOfRange }
        let microseconds =
            UInt32(duration.components.seconds) * 1_000_000
            + UInt32(duration.components.attoseconds / 1_000_000_000_000)
        let sdk = self.sdk
        let key = self.nextBlockingKey()
        let call = BlockingCallState()
        return try await self.offload().run(
            isolation: isolation,
            timeout: timeout,
            cancel: CancelHandle { call.interrupt { (try? sdk.interrupt(key: key)) ?? true } },
            {
                try call.perform {
                    BlockingCallResult(
                        key: key, value: try sdk.blockingCall(key: key, durationMicroseconds: microseconds))
                }
            }
        )
    }
}

/// One blocking call's race between starting to block and being interrupted.
///
/// The SDK forgets an interrupt that finds no blocked call. So the body checks, under the lock,
/// whether an interrupt came first (then it does not call the SDK at all), and the interrupt,
/// when the body has passed that check but not yet returned, repeats the SDK's interrupt until
/// one lands or the body returns: the window is the few instructions before the SDK blocks.
final class BlockingCallState: Sendable {
    private enum Phase {
        case notStarted
        case calling
        case returned
    }
    private struct State {
        var phase = Phase.notStarted
        var interrupted = false
    }
    private let state = LockedBox(State())

    /// Runs `body` (the SDK call) unless an interrupt came first.
    func perform<Value>(_ body: () throws -> Value) throws -> Value {
        let interruptedFirst = state.withLock { state -> Bool in
            if state.interrupted { return true }
            state.phase = .calling
            return false
        }
        if interruptedFirst { throw LegacySDKError.interrupted }
        defer { state.withLock { $0.phase = .returned } }
        return try body()
    }

    /// Interrupts: `attempt` returns whether the SDK found the call blocked (or the client is gone).
    func interrupt(_ attempt: () -> Bool) {
        let phase = state.withLock { state -> Phase in
            state.interrupted = true
            return state.phase
        }
        guard case .calling = phase else { return }  // not started (it will not), or already returned
        while !attempt() {
            if state.withLock({ $0.phase == .returned }) { return }
            sched_yield()
        }
    }
}
