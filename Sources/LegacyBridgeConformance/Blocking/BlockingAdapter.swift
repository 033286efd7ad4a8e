import LegacyBridge
import LegacySimulator

/// A simulated blocking SDK call (the simulator's `lsdk_blocking_call`), as a blocking scenario
/// hands it to an adapter.
///
/// ``perform()`` blocks the calling thread for the call's set duration (or until it is
/// interrupted), like a synchronous connect, open or query; ``interrupt()`` makes a blocked
/// `perform` return early with ``LegacySDKError/interrupted``, like `sqlite3_interrupt` or
/// closing the socket under a blocked `connect`. Like the SDK's, the interrupt is not
/// remembered: one that comes before the call has begun to block changes nothing. Both may be
/// called from any thread.
public struct LegacyBlockingCall: Sendable {
    /// The call's number; its payload carries it back as `requestID`.
    public let number: UInt64
    let performer: @Sendable () throws -> LegacyPayload
    let interrupter: @Sendable () -> Void

    package init(
        number: UInt64, perform: @escaping @Sendable () throws -> LegacyPayload,
        interrupt: @escaping @Sendable () -> Void
    ) {
        self.number = number
        self.performer = perform
        self.interrupter = interrupt
    }

    /// Makes the call: blocks the calling thread until it is done.
    ///
    /// - Returns: A payload with `requestID == number`.
    /// - Throws: ``LegacySDKError/interrupted`` when ``interrupt()`` ended it early, or the
    ///   SDK's error when the call fails.
    public func perform() throws -> LegacyPayload {
        try performer()
    }

    /// Makes a blocked ``perform()`` return early. Harmless, and without effect, when the call is
    /// not blocked (not yet, or any more).
    public func interrupt() {
        interrupter()
    }
}

/// Something that turns a blocking SDK call into an async call that does not block its caller.
///
/// Conform with an `OffloadPool`:
/// ```swift
/// struct MyAdapter: BlockingAdapter {
///     static let pool = try! OffloadPool(threads: 8)
///     var name: String { "mine" }
///     var summary: String { "OffloadPool.run with the call's interrupt" }
///     func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
///         try await Self.pool.run(isolation: isolation, cancel: CancelHandle(call.interrupt)) { try call.perform() }
///     }
/// }
/// ```
public protocol BlockingAdapter: Sendable {
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Makes `call` and returns its payload, without blocking the caller's thread.
    ///
    /// - Parameters:
    ///   - call: The blocking call.
    ///   - isolation: The caller's actor, or `nil`.
    /// - Returns: The call's payload.
    /// - Throws: The call's error, or `CancellationError` when the calling task was cancelled.
    func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload
}
