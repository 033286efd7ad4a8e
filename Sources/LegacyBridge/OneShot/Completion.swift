/// The callback end of a one-shot call: hand it to the SDK's completion
/// callback and call it with the operation's result.
///
/// Only the first call (or cancellation, or the timeout, whichever comes first)
/// decides the outcome. Later calls are ignored: a late success value is passed
/// to the call's `onDiscard` closure so that resources it owns can be freed.
/// Calling it from any thread, any number of times, synchronously inside
/// `start` or long after the caller has returned is safe.
///
/// A `Completion` keeps the call's small shared state alive, nothing more:
/// drop it when the SDK will not call back any more.
public struct Completion<Value: Sendable>: Sendable {
    // `var` only for `startReturned`'s uniqueness check; never reassigned.
    @usableFromInline
    var storage: CompletionGateStorage<Value>

    @inlinable
    init(storage: CompletionGateStorage<Value>) {
        self.storage = storage
    }

    /// Reports the operation's result.
    ///
    /// - Parameter result: The value or the error the operation produced.
    /// - Returns: `true` if this call decided the outcome; `false` if the
    ///   outcome was already decided (the result is then ignored, or handed to
    ///   `onDiscard` if it is a success).
    @inlinable
    @discardableResult
    public func callAsFunction(_ result: Result<Value, any Error>) -> Bool {
        self.storage.finish(result)
    }

    // `start` returned `handle` (see `CompletionGateStorage.startReturned`); called on the
    // completion that owns the gate, so no copy of it is made.
    @inlinable
    mutating func startReturned(_ handle: CancelHandle?) -> Result<Value, any Error>? {
        self.storage.startReturned(handle)
    }

    /// Whether the outcome is decided (an offload worker skips a call whose caller is gone).
    @usableFromInline
    var isDecided: Bool {
        self.storage.isDecided
    }

    /// Reports success.
    ///
    /// - Parameter value: The operation's value.
    /// - Returns: `true` if this call decided the outcome; `false` if the
    ///   outcome was already decided (the value then goes to `onDiscard`).
    @inlinable
    @discardableResult
    public func succeed(_ value: Value) -> Bool {
        self.storage.finish(.success(value))
    }

    /// Reports failure.
    ///
    /// - Parameter error: The operation's error.
    /// - Returns: `true` if this call decided the outcome; `false` if the
    ///   outcome was already decided (the error is then ignored).
    @inlinable
    @discardableResult
    public func fail(_ error: any Error) -> Bool {
        self.storage.finish(.failure(error))
    }
}

/// How to cancel the operation underneath a one-shot call.
///
/// Return one from `withCallback`'s `start`, or pass it to ``CompletionGate/attach(_:)``.
///
/// - It is called exactly once if cancellation or the timeout decided the outcome, also when
///   that happened before `start` returned it. It is never called if the operation's own
///   completion decided first.
/// - It runs on a job thread of the library's own (see ``BridgeThreads``), outside any lock.
///   Never in the code that cancelled: not inside `Task.cancel()`, a task group's `cancelAll()`,
///   the task runtime's cancellation handler, ``CompletionGate/cancel()``, the timer, or `start`'s
///   caller. A slow SDK cancel delays no caller and no other timeout.
/// - The caller does not wait for it: it resumes as soon as the outcome is decided, so it may run
///   on before the handle has been called or has returned. Capture in the closure what it needs,
///   and let it do no harm if the operation has ended meanwhile.
/// - It may call the ``Completion`` synchronously; that call then loses, and a success value goes
///   to `onDiscard`.
/// - Keep it short. Handles beyond ``BridgeThreads/limit`` wait in order for a job thread, and
///   one that blocks keeps its thread for as long.
public struct CancelHandle: Sendable {
    @usableFromInline
    let cancel: @Sendable () -> Void

    /// Creates a handle that runs `cancel` to stop the operation.
    ///
    /// - Parameter cancel: Asks the operation to stop, e.g. calls the SDK's cancel function.
    public init(_ cancel: @escaping @Sendable () -> Void) {
        self.cancel = cancel
    }

    /// Hands the call to one of the library's job threads (`BridgeThreads`); returns at once.
    @usableFromInline
    func callOnJobThread() {
        BridgeThreadPool.submit(cancel)
    }
}

/// The error a one-shot call throws when its timeout expires first.
///
/// When the timeout decides the outcome, the operation is also cancelled
/// through its ``CancelHandle``.
public struct BridgeTimeoutError: Error, Hashable, CustomStringConvertible {
    /// The timeout that expired, as passed to `withCallback(timeout:)` or
    /// ``CompletionGate/value(isolation:timeout:)``.
    public let timeout: Duration

    /// Creates the error for an expired `timeout`.
    ///
    /// - Parameter timeout: The timeout that expired.
    public init(timeout: Duration) {
        self.timeout = timeout
    }

    /// A readable message naming the timeout, e.g.
    /// "operation timed out after 0.5 seconds".
    public var description: String {
        "operation timed out after \(self.timeout)"
    }
}
