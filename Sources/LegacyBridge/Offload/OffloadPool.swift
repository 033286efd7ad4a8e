/// A fixed set of dedicated threads for blocking calls, so they never occupy the cooperative pool.
///
/// Swift Concurrency runs tasks on a cooperative pool of about one thread per core that does not
/// grow: a task blocked in a synchronous C call (connect, open, flush, a query that takes seconds)
/// is a lost thread, and as many blocked tasks as there are cores stop the whole program. Hand such
/// calls to an `OffloadPool` instead:
///
/// ```swift
/// let pool = try OffloadPool(threads: 4)
///
/// func open(_ path: String) async throws -> Database {
///     let request = OpenRequest(path)                          // this call's own interrupt flag
///     return try await pool.run(
///         cancel: CancelHandle { request.interrupt() },       // asks the blocked call to give up
///         onDiscard: { late in late.close() }                 // a result nobody waits for any more
///     ) {
///         try Database(opening: request)                      // blocks a pool thread, not a task
///     }
/// }
/// ```
///
/// Rules:
/// - `threads` calls run at once, each on its own pthread (never on the cooperative pool); up to
///   `queueLimit` more wait in first-in, first-out order. A call beyond that bound throws
///   ``OffloadError/queueFull(limit:)`` at once and never runs.
/// - Every accepted call runs exactly once, or never (cancelled while waiting, or rejected at
///   shutdown); never twice.
/// - The caller resumes on its own isolation (for example the main actor) with no extra hop.
/// - Cancelling the calling task throws `CancellationError` at once, whatever the body is doing;
///   see ``run(isolation:timeout:cancel:onDiscard:_:)`` for what happens to the body.
/// - ``shutdown(_:isolation:)`` drains or rejects the waiting calls; releasing the last reference
///   to the pool drains it in the background. Work submitted after shutdown began throws
///   ``OffloadError/shutDown``.
public final class OffloadPool: Sendable {
    /// How a pool stops.
    public struct ShutdownMode: Sendable, Hashable {
        @usableFromInline
        enum Kind: Sendable, Hashable {
            case drain
            case rejectQueued
        }

        @usableFromInline let kind: Kind

        /// Run every call already accepted (waiting ones included), then stop the threads.
        public static var drain: ShutdownMode { ShutdownMode(kind: .drain) }

        /// Reject the calls still waiting (they never run; their callers get
        /// ``OffloadError/shutDown``), let the running ones finish, then stop the threads.
        public static var rejectQueued: ShutdownMode { ShutdownMode(kind: .rejectQueued) }
    }

    /// The largest thread count a pool accepts.
    public static let maximumThreads = 1024

    /// How many calls run at once (one pthread each).
    public let threads: Int
    /// How many calls may wait for a thread before ``OffloadError/queueFull(limit:)``.
    public let queueLimit: Int
    /// The name of the pool's threads (`name-0`, `name-1`, ..., cut to 15 bytes on Linux).
    public let name: String

    @usableFromInline let core: OffloadPoolCore

    /// Creates a pool and starts its threads.
    ///
    /// - Parameters:
    ///   - threads: How many blocking calls may run at once, `1 ... OffloadPool.maximumThreads`.
    ///     Choose what the SDK tolerates in parallel, not the core count: blocked threads use no CPU.
    ///   - queueLimit: How many calls may wait for a thread, 0 or more (default 1,024). Calls beyond
    ///     `threads + queueLimit` in flight are refused with ``OffloadError/queueFull(limit:)``.
    ///   - name: The threads' name, for debuggers and backtraces.
    /// - Throws: ``OffloadError/invalidThreadCount(_:)`` (a zero-width pool, for example),
    ///   ``OffloadError/invalidQueueLimit(_:)``, or ``OffloadError/threadCreationFailed(code:)``.
    public init(threads: Int, queueLimit: Int = 1024, name: String = "offload") throws(OffloadError) {
        guard threads >= 1 && threads <= Self.maximumThreads else { throw .invalidThreadCount(threads) }
        guard queueLimit >= 0 else { throw .invalidQueueLimit(queueLimit) }
        self.threads = threads
        self.queueLimit = queueLimit
        self.name = name
        self.core = OffloadPoolCore(name: name, width: threads, queueLimit: queueLimit)
        try self.core.start()
    }

    /// Releasing the pool drains it: calls already accepted still run, then the threads end.
    /// Nothing waits here.
    deinit {
        self.core.beginShutdown(.drain, waiter: nil)
    }

    /// Runs a blocking closure on one of the pool's threads and returns its result.
    ///
    /// The caller suspends (its thread is free for other tasks) while `body` runs on a pool thread;
    /// it then resumes on its own isolation with no extra executor hop.
    ///
    /// Cancellation (of the calling task) and the timeout are decided by the same first-outcome-wins
    /// gate as ``withCallback(isolation:timeout:onDiscard:_:)``:
    /// - If the task is already cancelled, this throws `CancellationError` without submitting.
    /// - If it is cancelled while the call waits for a thread, this throws `CancellationError` at
    ///   once and `body` never runs.
    /// - If it is cancelled while `body` runs, this throws `CancellationError` at once, without
    ///   waiting for `body`. `cancel`, if given, is then called once, on a job thread of the
    ///   library's own (see ``BridgeThreads``; never inside the task's cancellation handler, never
    ///   on a pool thread), to ask the blocked call to give up. It is not called if `body` already
    ///   returned; and the pool thread does not take its next call before `cancel` has returned, so
    ///   a cancel never lands on a later call.
    ///   Whatever `body` then returns is ignored, except that a value goes to `onDiscard`,
    ///   exactly once.
    /// - When `cancel` runs: usually after the cancelled caller has resumed, and at any point of
    ///   `body`, also before `body` reached the blocking call. An SDK that forgets an interrupt made
    ///   while nothing blocks, as SQLite's `sqlite3_interrupt` does, needs a flag that `cancel` sets
    ///   and `body` checks before it blocks.
    /// - A timeout acts like a cancellation but throws ``BridgeTimeoutError``.
    ///
    /// - Parameters:
    ///   - isolation: The caller's isolation; leave the default.
    ///   - timeout: Give up after this long (measured from the call, waiting time included); nil
    ///     (the default) waits as long as `body` takes. Must be positive.
    ///   - cancel: Asks a running `body` to return early (for example an SDK's `interrupt` or
    ///     `cancel` function). It may race with `body` returning on its own, so it must be harmless
    ///     then. Keep it short: it must return for the thread to be reused.
    ///   - onDiscard: Receives the value `body` returns when nobody waits for it any more
    ///     (cancellation or the timeout decided first), on the pool thread, so that resources it
    ///     owns can be released.
    ///   - body: The blocking work. It runs at most once, on a pool thread; it may throw.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw; `CancellationError` or ``BridgeTimeoutError`` as described
    ///   above; ``OffloadError/queueFull(limit:)`` when `threads` calls run and `queueLimit` wait
    ///   already; ``OffloadError/shutDown`` when the pool was shut down before the call could run.
    @inlinable
    public func run<Value: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        timeout: Duration? = nil,
        cancel: CancelHandle? = nil,
        onDiscard: (@Sendable (Value) -> Void)? = nil,
        _ body: sending @escaping () throws -> Value
    ) async throws -> Value {
        if Task.isCancelled { throw CancellationError() }
        if let timeout {
            precondition(
                timeout > .zero, "OffloadPool.run(timeout:) needs a positive duration; pass nil for no timeout")
        }
        let core = self.core
        let interrupt = cancel?.cancel
        let body = OffloadBody(body)
        return try await withCallback(isolation: isolation, timeout: timeout, onDiscard: onDiscard) { completion in
            // Built here, where `Value` is known to the caller's specialized code, so the worker
            // runs the body and the gate's `finish` without looking up generic metadata.
            let settle: OffloadSettle = { rejection in
                if let rejection {
                    completion(.failure(rejection))
                } else if !completion.isDecided {
                    completion(Result { try body.closure() })
                }
                // Otherwise the caller was cancelled or timed out while the call waited: its
                // cancel handle, on its way to a job thread, would have dropped it.
            }
            switch core.submit(.call(settle), interruptible: interrupt != nil) {
            case .success(let id):
                return CancelHandle { core.cancel(id, interrupt: interrupt) }
            case .failure(let error):
                throw error
            }
        }
    }

    /// Posts a closure to the pool: it runs once, on a pool thread, in FIFO order with the calls.
    ///
    /// Nothing waits for it. It has the shape `CallbackStream` expects for posting an SDK's control
    /// calls (`pool.execute` where `@Sendable (@escaping @Sendable () -> Void) -> Void` is wanted,
    /// after handling the error); for an SDK that needs one particular thread use
    /// ``SDKThreadExecutor/execute(_:)`` instead.
    ///
    /// - Parameter work: The closure to run.
    /// - Throws: ``OffloadError/queueFull(limit:)`` or ``OffloadError/shutDown``; the closure is
    ///   then not kept and never runs. A closure still waiting when ``shutdown(_:isolation:)``
    ///   rejects the queue is dropped without running.
    public func execute(_ work: @escaping @Sendable () -> Void) throws(OffloadError) {
        if case .failure(let error) = self.core.submit(.closure(work), interruptible: false) {
            throw error
        }
    }

    /// Stops the pool and waits until its threads have left.
    ///
    /// From the first call on, new work throws ``OffloadError/shutDown``. Calls that are running
    /// always finish (cancel their callers to interrupt them). Calling it again is harmless; a
    /// later `.rejectQueued` also rejects what a `.drain` left waiting.
    ///
    /// - Parameters:
    ///   - mode: ``ShutdownMode/drain`` (the default) runs every accepted call first;
    ///     ``ShutdownMode/rejectQueued`` makes the waiting calls throw ``OffloadError/shutDown``.
    ///   - isolation: The caller's isolation; leave the default.
    public func shutdown(_ mode: ShutdownMode = .drain, isolation: isolated (any Actor)? = #isolation) async {
        let core = self.core
        await withUnsafeContinuation(isolation: isolation) { (continuation: UnsafeContinuation<Void, Never>) in
            core.beginShutdown(mode, waiter: continuation)
        }
        // The last worker is resuming us right now; it counts itself gone a moment later.
        while !core.allWorkersGone { await Task.yield() }
    }

    /// Whether the calling code runs on one of this pool's threads.
    public var isCurrentThread: Bool { self.core.isCurrentThread }
}

/// The body of a call, handed from the caller to the worker that runs it.
///
/// `@unchecked Sendable`: the closure came in as a `sending` parameter, so nothing else can touch
/// what it captured; it is called at most once, by the one worker that took the call.
@usableFromInline
struct OffloadBody<Value>: @unchecked Sendable {
    @usableFromInline let closure: () throws -> Value
    @inlinable init(_ closure: @escaping () throws -> Value) { self.closure = closure }
}
