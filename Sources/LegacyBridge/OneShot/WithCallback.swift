/// Calls a callback-based operation once and awaits its result.
///
/// `start` runs synchronously, on the caller's isolation, before this function
/// suspends. It receives a ``Completion`` to hand to the SDK, starts the
/// operation, and returns a ``CancelHandle`` that stops it (or nil if it cannot
/// be stopped). If `start` throws, that error is the outcome unless the
/// completion already decided it. `start` runs even if the task is already
/// cancelled (the operation is then cancelled through its handle right away).
///
/// The first of these decides the outcome; everything later is ignored:
/// - the completion is called (success or failure; repeated calls lose),
/// - the calling task is cancelled (throws `CancellationError`),
/// - the timeout expires (throws ``BridgeTimeoutError``).
///
/// Cancellation of the task is observed from the moment `start` returns:
/// - If `start` reported the outcome synchronously, that outcome is returned
///   at once, without a cancellation handler, continuation or timer, even if
///   the task was cancelled while `start` ran (the work is already done).
/// - Otherwise a cancellation that arrived before or during `start` decides
///   right after `start` returns, and one that arrives later decides when it
///   arrives.
///
/// When cancellation or the timeout decides, the caller resumes at once and the operation's
/// cancel handle is called exactly once, on a job thread of the library's own: not inside the
/// code that cancelled, and possibly after this function has thrown (see ``CancelHandle``). It is
/// never called when the completion decided first. The caller resumes promptly even if the
/// operation never calls back.
///
/// The timeout is kept by the library's timer thread, not by a task: it fires on time even when
/// every cooperative thread is busy or blocked, and even when every job thread is stuck in a
/// slow SDK cancel, because the timer thread itself resumes the caller and runs no SDK code.
///
/// The caller resumes directly on its own isolation (for example the main actor) with no extra
/// executor hops; a synchronous outcome never suspends.
///
/// The call's state is freed when this function has returned and the SDK has dropped the
/// completion; the gate keeps no cancel handle or timer after the outcome is decided, so a handle
/// that captures the completion forms no cycle.
///
/// ```swift
/// let page = try await withCallback(timeout: .seconds(5)) { completion in
///     let request = sdk.fetch(url) { page, error in
///         if let page { completion.succeed(page) } else { completion.fail(error!) }
///     }
///     return CancelHandle { request.cancel() }
/// }
/// ```
///
/// - Parameters:
///   - isolation: The caller's isolation; leave the default.
///   - timeout: How long to wait for an outcome; nil (the default) waits
///     forever and costs nothing. Measured from the call; a timer is created
///     only if `start` returns with the outcome still open. Zero or less times
///     out as soon as `start` returns without an outcome; 100 years or more
///     means no timeout.
///   - onDiscard: Receives each success value that arrives after the outcome
///     was decided (by cancellation, the timeout or an earlier completion),
///     exactly once, so that resources it owns can be released. Never receives
///     the value that is returned. Runs on the thread that delivered the value.
///   - start: Starts the operation with the given completion and returns how
///     to cancel it.
/// - Returns: The value of the first successful outcome.
/// - Throws: The operation's error, the error `start` threw,
///   `CancellationError` if the calling task was cancelled first, or
///   ``BridgeTimeoutError`` if the timeout expired first.
@inlinable @inline(__always)
public func withCallback<Value: Sendable>(
    isolation: isolated (any Actor)? = #isolation,
    timeout: Duration? = nil,
    onDiscard: (@Sendable (Value) -> Void)? = nil,
    _ start: (Completion<Value>) throws -> CancelHandle?
) async throws -> Value {
    // The completion holds the only reference to the gate that this function keeps (no copy
    // is made to pass it to `start`), so that `startReturned` can tell whether the SDK kept one.
    let completion = Completion(storage: CompletionGateStorage<Value>(onDiscard: onDiscard))
    let plan = TimeoutPlan(timeout)
    if case .after(let timeout) = plan {
        completion.storage.planTimer(timeout: timeout, deadline: ContinuousClock.now + timeout)
    }
    let handle: CancelHandle?
    do {
        handle = try start(completion)
    } catch {
        _ = completion.storage.finish(.failure(error))
        handle = nil
    }
    var owner = consume completion
    if let outcome = owner.startReturned(handle) {
        // Decided while `start` ran: no cancellation handler, no continuation, no timer.
        return try outcome.get()
    }
    return try await waitForCallback(owner.storage, plan: plan, timeout: timeout, isolation: isolation)
}

/// The part of ``withCallback(isolation:timeout:onDiscard:_:)`` after `start` returned with the
/// outcome still open: cancellation handler, continuation, timer.
///
/// A function of its own so that `withCallback` itself stays small enough to be inlined whole
/// into every caller (`@inline(__always)`): a synchronous outcome then costs no async frame of
/// its own and no executor check, on any isolation.
@inlinable
func waitForCallback<Value: Sendable>(
    _ storage: CompletionGateStorage<Value>,
    plan: TimeoutPlan,
    timeout: Duration?,
    isolation: isolated (any Actor)?
) async throws -> Value {
    let hasTimer: Bool
    switch plan {
    case .after: hasTimer = true
    case .never: hasTimer = false
    case .immediately:
        hasTimer = false
        // A timeout of zero or less: the operation did not answer inside
        // `start`, so the timeout decides now (and cancels it through its handle).
        storage.timeOut(BridgeTimeoutError(timeout: timeout ?? .zero))
    }
    // The operation is in flight. If the task was cancelled meanwhile (even
    // before or during `start`), the handler runs at once on installation and
    // calls the handle attached above. Installing the handler only now keeps
    // it (a status record on the task, with its own lock) off the synchronous path.
    return try await withTaskCancellationHandler(
        // This closure runs on `isolation` because it captures it (SE-0420);
        // the isolation tests fail if that capture is removed.
        operation: {
            try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                if storage.install(continuation), hasTimer {
                    storage.armPlannedTimer()
                }
            }
        },
        onCancel: {
            storage.cancel()
        },
        isolation: isolation
    )
}

/// Calls a callback-based operation of a single-threaded SDK once, on the SDK's thread, and
/// awaits its result.
///
/// This is ``withCallback(isolation:timeout:onDiscard:_:)`` for an SDK that must only be called
/// from its own thread or event loop, for example an ``SDKLoop``'s ``SDKLoop/scheduler``. The
/// calls into the SDK go through `scheduler`:
/// - `start` is posted through the scheduler and runs on the SDK's thread. A caller already on
///   that thread, as `scheduler.isCurrent` tells, runs it inline with no hop.
/// - A cancellation or timeout that decides before the posted `start` began means `start` never
///   runs: the caller throws `CancellationError` or ``BridgeTimeoutError`` at once.
/// - A cancellation or timeout that decides once `start` began calls its cancel handle exactly
///   once, after `start` returned, through the scheduler on the SDK's thread.
/// - When the scheduler refuses the post, for example because the loop was shut down, the
///   caller throws the scheduler's error and `start` never runs.
///
/// Every other guarantee of ``withCallback(isolation:timeout:onDiscard:_:)`` holds: the first
/// outcome wins, the caller resumes at once on its own isolation, `onDiscard` receives late
/// success values.
///
/// ```swift
/// let addresses = try await withCallback(timeout: .seconds(5), scheduler: loop.scheduler) { completion in
///     ares_gethostbyname(channel, host, AF_INET, onHost, SDKContext.retain(completion))
///     return CancelHandle { ares_cancel(channel) }
/// }
/// ```
///
/// - Parameters:
///   - isolation: The caller's isolation; leave the default.
///   - timeout: How long to wait for an outcome, measured from the call; nil (the default) waits
///     forever. Zero or less times out at once unless `start` runs inline and decides.
///   - scheduler: Runs `start` and the cancel handle on the SDK's thread.
///   - onDiscard: Receives each success value that arrives after the outcome was decided,
///     exactly once. Runs on the thread that delivered the value.
///   - start: Starts the operation with the given completion and returns how to cancel it. It
///     runs on the SDK's thread at most once.
/// - Returns: The value of the first successful outcome.
/// - Throws: The operation's error, the error `start` threw, the error the scheduler threw when
///   asked to post `start`, `CancellationError` if the calling task was cancelled first, or
///   ``BridgeTimeoutError`` if the timeout expired first.
@inlinable
public func withCallback<Value: Sendable>(
    isolation: isolated (any Actor)? = #isolation,
    timeout: Duration? = nil,
    scheduler: SDKScheduler,
    onDiscard: (@Sendable (Value) -> Void)? = nil,
    _ start: sending @escaping (Completion<Value>) throws -> CancelHandle?
) async throws -> Value {
    let start = PostedStart(start)
    if scheduler.isCurrent {
        // Already on the SDK's thread: no hop. Only the handle goes through the scheduler.
        return try await withCallback(isolation: isolation, timeout: timeout, onDiscard: onDiscard) { completion in
            try start.closure(completion)?.posted(through: scheduler)
        }
    }
    let storage = CompletionGateStorage<Value>(onDiscard: onDiscard, startPosted: true)
    let plan = TimeoutPlan(timeout)
    if case .after(let timeout) = plan {
        storage.planTimer(timeout: timeout, deadline: ContinuousClock.now + timeout)
    }
    do {
        try scheduler.post { storage.runPostedStart(start.closure, scheduler: scheduler) }
    } catch {
        // The job was dropped, so `start` never runs; nothing else holds the gate yet.
        _ = storage.finish(.failure(error))
        throw error
    }
    return try await waitForCallback(storage, plan: plan, timeout: timeout, isolation: isolation)
}

/// A `start` closure handed to the SDK's thread. It was passed as `sending` and is called at
/// most once, on one thread, so no other code can touch what it captures.
@usableFromInline
struct PostedStart<Value: Sendable>: @unchecked Sendable {
    @usableFromInline let closure: (Completion<Value>) throws -> CancelHandle?
    @inlinable init(_ closure: @escaping (Completion<Value>) throws -> CancelHandle?) { self.closure = closure }
}
