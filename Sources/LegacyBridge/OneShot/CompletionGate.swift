/// The per-call state of a one-shot bridge, for adapters that cannot express
/// their call as a single ``withCallback(isolation:timeout:onDiscard:_:)``.
///
/// A gate decides one outcome from these events, in any order and from any
/// thread: the operation's results (``complete(_:)`` or its ``completion``),
/// cancellation (``cancel()``, or cancellation of the task awaiting
/// ``value(isolation:timeout:)``), and the timeout. The first one wins; later
/// ones are ignored, and a late success value goes to `onDiscard`.
///
/// Typical use:
/// ```swift
/// let gate = CompletionGate<Page>()
/// let request = sdk.fetch(url, callback: gate.completion)   // may call back at once
/// gate.attach(CancelHandle { request.cancel() })
/// let page = try await gate.value()
/// ```
///
/// Rules (misuse stops the process with a message saying what to do):
/// - Await ``value(isolation:timeout:)`` at most once per gate; awaiting
///   twice is a precondition failure.
/// - ``attach(_:)`` the operation's cancel handle (or nil) at most once; it is
///   called at most once, only if cancellation or the timeout decided, even if
///   it is attached after that decision. It runs on a job thread of the
///   library's own, never in the code that cancelled (see ``CancelHandle``).
/// - The gate never calls anything while holding its lock, so the handle and
///   `onDiscard` may call back into the gate.
public final class CompletionGate<Value: Sendable>: Sendable {
    @usableFromInline
    let storage: CompletionGateStorage<Value>

    /// Creates a gate for one call.
    ///
    /// - Parameter onDiscard: Receives each success value that arrives after
    ///   the outcome was decided, exactly once, so that resources it owns can
    ///   be released. Never receives the winning value.
    public init(onDiscard: (@Sendable (Value) -> Void)? = nil) {
        self.storage = CompletionGateStorage(onDiscard: onDiscard)
    }

    /// The callback end of this gate, to hand to the operation.
    ///
    /// It shares this gate's state, so it stays valid if the gate object itself
    /// is dropped while the operation runs.
    public var completion: Completion<Value> {
        Completion(storage: self.storage)
    }

    /// Reports the operation's result, like calling ``completion``.
    ///
    /// - Parameter result: The value or error the operation produced.
    /// - Returns: `true` if this call decided the outcome.
    @discardableResult
    public func complete(_ result: Result<Value, any Error>) -> Bool {
        self.storage.finish(result)
    }

    /// Cancels the call: decides `CancellationError` if nothing decided yet, resumes
    /// the waiter, and hands the attached cancel handle to a job thread of the
    /// library's own (or does so when it is attached).
    ///
    /// It returns without waiting for the handle, which may run after it returned.
    /// The same happens when the task awaiting ``value(isolation:timeout:)`` is
    /// cancelled.
    ///
    /// - Returns: `true` if this call decided the outcome.
    @discardableResult
    public func cancel() -> Bool {
        self.storage.cancel()
    }

    /// Attaches the operation's cancel handle. Call at most once per gate
    /// (with nil, or not at all, if the operation cannot be cancelled).
    ///
    /// If cancellation or the timeout already decided, the handle is handed to a
    /// job thread of the library's own now and this returns at once; if a
    /// completion already decided, it is dropped without being called. Attaching
    /// twice is a precondition failure.
    ///
    /// - Parameter handle: How to cancel the operation, or nil.
    public func attach(_ handle: CancelHandle?) {
        self.storage.attach(handle)
    }

    /// Installs the continuation that receives the outcome. It is resumed
    /// exactly once: now if the outcome is decided, else when it is.
    ///
    /// Prefer ``value(isolation:timeout:)``, which also handles task
    /// cancellation. Installing twice is a precondition failure.
    ///
    /// - Parameter continuation: The waiter to resume with the outcome.
    package func install(_ continuation: UnsafeContinuation<Value, any Error>) {
        self.storage.install(continuation)
    }

    /// Waits for the outcome. Await at most once per gate.
    ///
    /// Cancelling the awaiting task cancels the call (and, through the
    /// attached handle, the operation). The caller resumes on its own isolation
    /// with no extra executor hops.
    ///
    /// - Parameters:
    ///   - isolation: The caller's isolation; leave the default.
    ///   - timeout: How long to wait from now; nil (the default) waits forever.
    ///     Zero or less times out at once unless the outcome is already
    ///     decided; 100 years or more means no timeout.
    /// - Returns: The value of the first successful outcome.
    /// - Throws: The operation's error, `CancellationError` if cancellation
    ///   decided, or ``BridgeTimeoutError`` if the timeout expired first.
    public func value(
        isolation: isolated (any Actor)? = #isolation,
        timeout: Duration? = nil
    ) async throws -> Value {
        let storage = self.storage
        let plan = TimeoutPlan(timeout)
        let deadline: ContinuousClock.Instant?
        if case .after(let timeout) = plan {
            deadline = ContinuousClock.now + timeout
        } else {
            deadline = nil
        }
        if case .immediately = plan {
            storage.timeOut(BridgeTimeoutError(timeout: timeout ?? .zero))
        }
        return try await withTaskCancellationHandler(
            operation: {
                try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                    if storage.install(continuation), case .after(let timeout) = plan, let deadline {
                        storage.armTimer(timeout: timeout, deadline: deadline)
                    }
                }
            },
            onCancel: {
                storage.cancel()
            },
            isolation: isolation
        )
    }
}
