import LegacyBridge

/// The value a simulated one-shot legacy operation produces.
public struct LegacyPayload: Sendable, Hashable {
    /// The operation's number within its SDK client.
    public var requestID: UInt64
    /// Which callback of the operation carried it (1 for the first; repeats count up).
    public var attempt: UInt32

    /// Creates a payload.
    /// - Parameters:
    ///   - requestID: The operation's number.
    ///   - attempt: Which callback carried it.
    public init(requestID: UInt64, attempt: UInt32) {
        self.requestID = requestID
        self.attempt = attempt
    }
}

/// A raw cancel function, the way legacy SDKs hand them out. Idempotent and thread-safe; it may call
/// the operation's callback synchronously, on the calling thread, before it returns.
public typealias LegacyCancel = @Sendable () -> Void

/// A one-shot legacy operation, as a conformance scenario hands it to an adapter.
///
/// It behaves like a real callback SDK: the callback may come zero, one or several times, from any
/// thread, possibly before `start` returns; cancelling may call back synchronously. The adapter's job
/// is to turn it into one async value (or error) — see ``OneShotAdapter``.
public struct LegacyOperation: Sendable {
    @usableFromInline
    let starter: @Sendable (@escaping @Sendable (Result<LegacyPayload, any Error>) -> Void) -> LegacyCancel?
    @usableFromInline
    let contextStarter:
        @Sendable (
            Unmanaged<AnyObject>,
            @escaping @Sendable (Unmanaged<AnyObject>, Result<LegacyPayload, any Error>) -> Void,
            @escaping @Sendable (Unmanaged<AnyObject>) -> Void
        ) -> LegacyCancel?

    /// The deadline the caller wants, or `nil` for none. An adapter that supports timeouts should give
    /// up after this long, report an error, and cancel the operation.
    public let timeout: Duration?

    package init(
        timeout: Duration?,
        start: @escaping @Sendable (@escaping @Sendable (Result<LegacyPayload, any Error>) -> Void) -> LegacyCancel?,
        startWithContext:
            @escaping @Sendable (
                Unmanaged<AnyObject>,
                @escaping @Sendable (Unmanaged<AnyObject>, Result<LegacyPayload, any Error>) -> Void,
                @escaping @Sendable (Unmanaged<AnyObject>) -> Void
            ) -> LegacyCancel?
    ) {
        self.timeout = timeout
        self.starter = start
        self.contextStarter = startWithContext
    }

    /// Starts the operation with a callback closure.
    ///
    /// The operation keeps `callback` until it has made its last call, then drops it.
    /// - Parameter callback: Called zero or more times with the operation's outcomes.
    /// - Returns: A cancel function, or `nil` when the operation cannot be cancelled.
    @inlinable
    public func start(_ callback: @escaping @Sendable (Result<LegacyPayload, any Error>) -> Void) -> LegacyCancel? {
        starter(callback)
    }

    /// Starts the operation C-style, with a context object the adapter owns.
    ///
    /// This mirrors `start(context, callback, release_context)` C APIs. The adapter passes a retained
    /// reference (`Unmanaged.passRetained`); the operation hands it to every `callback` and calls
    /// `release` exactly once, after its last callback. The adapter must balance its retain in
    /// `release`, never earlier. Scenarios watch the context and report an adapter that frees it while
    /// the operation can still call back (a use-after-free in a real SDK) instead of touching it.
    /// - Parameters:
    ///   - context: The adapter's retained context.
    ///   - callback: Called zero or more times with the context and an outcome.
    ///   - release: Called once when the operation is done with the context.
    /// - Returns: A cancel function, or `nil` when the operation cannot be cancelled.
    @inlinable
    public func start(
        context: Unmanaged<AnyObject>,
        callback: @escaping @Sendable (Unmanaged<AnyObject>, Result<LegacyPayload, any Error>) -> Void,
        release: @escaping @Sendable (Unmanaged<AnyObject>) -> Void
    ) -> LegacyCancel? {
        contextStarter(context, callback, release)
    }
}

/// Something that turns a one-shot legacy callback operation into an async value.
///
/// Conform in a few lines, e.g. with `withCallback`:
/// ```swift
/// struct MyAdapter: OneShotAdapter {
///     var name: String { "mine" }
///     var summary: String { "withCallback around the raw callback" }
///     func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
///         try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
///             operation.start { completion($0) }.map(CancelHandle.init)
///         }
///     }
/// }
/// let report = await ConformanceSuite.run(MyAdapter())
/// ```
public protocol OneShotAdapter: Sendable {
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Runs `operation` to its outcome.
    ///
    /// Called from arbitrary isolation, including the main actor. `isolation` is the caller's actor:
    /// pass it on (to `withCallback(isolation:)`, `withCheckedThrowingContinuation(isolation:)`, ...)
    /// so `start` runs where the caller is, with no executor hop.
    /// - Parameters:
    ///   - operation: The legacy operation to bridge.
    ///   - isolation: The caller's actor, or `nil`.
    /// - Returns: The operation's value.
    /// - Throws: The operation's error, `CancellationError` when the calling task was cancelled, or a
    ///   timeout error when `operation.timeout` expired.
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload

    /// Where the adapter calls its SDK. ``AdapterThreading/anyThread`` by default: `start` runs
    /// where the caller is. An adapter that posts `start` and the cancel to its SDK's own thread
    /// declares ``AdapterThreading/sdkThread(_:)``, and `main-actor-caller` then expects `start` there.
    var threading: AdapterThreading { get }
}

extension OneShotAdapter {
    /// ``AdapterThreading/anyThread``: `start` runs where the caller is.
    public var threading: AdapterThreading { .anyThread }
}
