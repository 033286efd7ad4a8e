/// One-shot calls shared by every caller that asks for the same key while one is in flight: an
/// image cache, a token refresh, a configuration fetch.
///
/// The first caller for a key starts the SDK call. Callers that ask for the same key before its
/// result is in wait for that same call instead of starting another:
///
/// ```swift
/// let thumbnails = CoalescedCalls<URL, Image>()
///
/// func thumbnail(for url: URL) async throws -> Image {
///     try await thumbnails.value(for: url, timeout: .seconds(10)) { completion in
///         let request = loader.load(url) { completion($0) }
///         return CancelHandle { request.cancel() }
///     }
/// }
/// ```
///
/// Contract:
/// - A key has at most one SDK call in flight. `start` runs once per call, on the caller that
///   found no call in flight, synchronously, before that caller suspends.
/// - The call's result or error reaches every caller waiting for it, including the error `start`
///   threw. A caller that arrives once the result has been handed out starts a new call.
/// - A caller's cancellation or timeout removes that caller alone: it throws `CancellationError`
///   or ``BridgeTimeoutError`` at once, and the others keep waiting.
/// - When the last waiting caller leaves, the call is cancelled through its ``CancelHandle``,
///   once, and removed: the next caller starts a new call. A call whose result is in is never
///   cancelled.
/// - A value that reaches no caller goes to `onDiscard`, exactly once: a result that came after
///   every caller left, and any later value the SDK reports. A value that reached a caller is
///   shared by every caller that got it and never goes to `onDiscard`.
/// - The table never calls the SDK, `start` or a completion while it holds its lock.
public final class CoalescedCalls<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let storage: CoalescedCallsStorage<Key, Value>

    /// Creates an empty table of shared calls.
    ///
    /// - Parameters:
    ///   - scheduler: Where the calls' cancel handles must run, for an SDK that must be called from
    ///     its own thread. Nil runs them where a one-shot gate runs its handle. A cancel the
    ///     scheduler refuses is not made.
    ///   - onDiscard: Receives each success value that reached no caller, exactly once.
    public init(scheduler: SDKScheduler? = nil, onDiscard: (@Sendable (Value) -> Void)? = nil) {
        self.storage = CoalescedCallsStorage(scheduler: scheduler, onDiscard: onDiscard)
    }

    /// Returns the value for `key`, sharing the SDK call in flight for it if there is one.
    ///
    /// `start` is used only if no call for `key` is in flight. It receives a ``Completion`` to
    /// hand to the SDK and returns how to cancel the call, as with
    /// ``withCallback(isolation:timeout:onDiscard:_:)``.
    ///
    /// - Parameters:
    ///   - key: What the call is for. Equal keys share one call.
    ///   - isolation: The caller's isolation; leave the default.
    ///   - timeout: How long this caller waits; nil (the default) waits forever. It ends this
    ///     caller's wait alone, like a cancellation.
    ///   - start: Starts the SDK call with the given completion and returns how to cancel it.
    /// - Returns: The call's value.
    /// - Throws: The call's error or the error `start` threw, `CancellationError` if this caller's
    ///   task was cancelled first, or ``BridgeTimeoutError`` if its timeout expired first.
    @inlinable @inline(__always)
    public func value(
        for key: Key,
        isolation: isolated (any Actor)? = #isolation,
        timeout: Duration? = nil,
        _ start: (Completion<Value>) throws -> CancelHandle?
    ) async throws -> Value {
        let storage = self.storage
        return try await withCallback(isolation: isolation, timeout: timeout) { waiter in
            let token: UInt64
            switch storage.join(key, waiter: waiter) {
            case .joined(let waiterToken):
                token = waiterToken
            case .lead(let waiterToken, let call):
                token = waiterToken
                storage.startCall(key, token: call, start)
            }
            // Called only if this caller's cancellation or timeout decided.
            return CancelHandle { storage.leave(key, waiter: token) }
        }
    }

    /// Counters of a ``CoalescedCalls``.
    public struct Statistics: Sendable, Hashable {
        /// SDK calls started.
        public var calls: Int
        /// Callers that shared a call in flight instead of starting one.
        public var joined: Int
        /// Calls cancelled because every caller left before the result.
        public var abandoned: Int
        /// Calls in flight now.
        public var inFlight: Int
    }

    /// The counters, read atomically.
    public var statistics: Statistics {
        storage.statistics
    }
}
