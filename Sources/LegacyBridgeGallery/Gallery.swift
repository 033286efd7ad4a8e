// The bad-adapter gallery: adapters that are WRONG ON PURPOSE.
//
// Each one is the kind of adapter that passes a happy-path unit test and fails in production.
// They exist so the conformance suite can prove it catches them: every one must be flagged in the
// scenario(s) its documentation names, on every run. Never use them as examples to copy.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. `withCheckedThrowingContinuation` resuming on every callback.
///
/// Why it is wrong: a second callback resumes the continuation again, which traps ("SWIFT TASK
/// CONTINUATION MISUSE ... tried to resume its continuation more than once"). It also ignores the
/// cancel function, the caller's cancellation and timeouts.
/// Flagged by: `repeated-callback-*` (crash), `cancel-in-flight` (hang).
public struct NaiveContinuationAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `naive-continuation`.
    public var name: String { "naive-continuation" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: checked continuation resumed on every callback (traps on a repeat)"
    }

    /// Bridges naively.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The value of whichever callback resumed first.
    /// - Throws: The error of whichever callback resumed first.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCheckedThrowingContinuation(isolation: isolation) { continuation in
            _ = operation.start { result in continuation.resume(with: result) }
        }
    }
}

/// WRONG ON PURPOSE. A first-result-wins gate that resumes and cancels while holding its lock.
///
/// Why it is wrong: the SDK's cancel may call the completion back synchronously, on the same
/// thread; the completion then waits for the lock the cancelling code already holds. Deadlock (or,
/// with an error-checking mutex, a trap).
/// Flagged by: `callback-inside-cancel` (hang or crash).
public struct LockHeldGateAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `lock-held-gate`.
    public var name: String { "lock-held-gate" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: gate that calls cancel and resumes under its lock (deadlocks on a re-entrant cancel)"
    }

    private final class Gate: Sendable {
        struct State {
            var continuation: CheckedContinuation<LegacyPayload, any Error>?
            var early: Result<LegacyPayload, any Error>?
            var cancel: LegacyCancel?
            var cancelled = false
            var done = false
        }
        let state = LockedBox(State())

        func finish(_ result: Result<LegacyPayload, any Error>) {
            state.withLock { state in
                guard !state.done else { return }
                state.done = true
                if let continuation = state.continuation {
                    continuation.resume(with: result)  // WRONG: resumes under the lock
                } else {
                    state.early = result
                }
            }
        }

        func cancel() {
            state.withLock { state in
                state.cancelled = true
                state.cancel?()  // WRONG: calls out under the lock; a re-entrant callback deadlocks
                guard !state.done else { return }
                state.done = true
                if let continuation = state.continuation {
                    continuation.resume(throwing: CancellationError())
                } else {
                    state.early = .failure(CancellationError())
                }
            }
        }
    }

    /// Bridges with the lock-held gate.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error or `CancellationError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let gate = Gate()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation(isolation: isolation) { continuation in
                let cancel = operation.start { gate.finish($0) }
                gate.state.withLock { state in
                    state.cancel = cancel
                    if let early = state.early {
                        continuation.resume(with: early)
                    } else {
                        state.continuation = continuation
                    }
                    if state.cancelled { cancel?() }
                }
            }
        } onCancel: {
            gate.cancel()
        }
    }
}

/// WRONG ON PURPOSE. Checks cancellation once before starting and has no cancellation handler.
///
/// Why it is wrong: a cancellation that arrives after the check — while start runs, or while
/// waiting — is never seen: the operation is never cancelled and a silent operation is waited for
/// forever. Timeouts are ignored too.
/// Flagged by: `cancel-before-handle`, `cancel-in-flight`, `timeout` (hangs).
public struct NoCancellationHandlerAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `no-cancellation-handler`.
    public var name: String { "no-cancellation-handler" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: checks Task.isCancelled once, no cancellation handler (hangs on never + cancel)"
    }

    /// Bridges without a cancellation handler.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, or `CancellationError` if cancelled before starting.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try Task.checkCancellation()
        let resumed = LockedBox(false)
        return try await withCheckedThrowingContinuation(isolation: isolation) { continuation in
            _ = operation.start { result in
                let first = resumed.withLock { done in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(with: result) }
            }
        }
    }
}

/// WRONG ON PURPOSE. Releases its C context on the first callback.
///
/// Why it is wrong: SDKs that call back more than once (or late, after a cancel) hand the freed
/// context to the next callback: a use-after-free in production, a crash only sometimes. The suite
/// watches the context and reports it deterministically instead of touching freed memory.
/// Flagged by: `context-released-once`.
public struct EarlyContextReleaseAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `early-context-release`.
    public var name: String { "early-context-release" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: releases its C context on the first callback (use-after-free with repeats)"
    }

    private final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    /// Bridges with a context released too early.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Unmanaged<AnyObject>.passRetained(Context(completion))
            let cancel = operation.start(
                context: context,
                callback: { context, result in
                    // WRONG: takes back the SDK's reference on the first callback.
                    let box = context.takeRetainedValue() as! Context
                    box.completion(result)
                },
                release: { _ in })
            return cancel.map(CancelHandle.init)
        }
    }
}

/// WRONG ON PURPOSE. An `AsyncThrowingStream` that never wires `onTermination`.
///
/// Why it is wrong: when the consumer stops (task cancelled, `break`), nothing tells the source;
/// it keeps producing into a stream nobody reads. It is also unbounded.
/// Flagged by: `stream-consumer-cancel`, `stream-break` (and `stream-stalled-consumer`).
public struct AsyncStreamNoTerminationAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `asyncstream-no-ontermination`.
    public var name: String { "asyncstream-no-ontermination" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: AsyncThrowingStream without onTermination (the source keeps running)"
    }

    /// Wraps `source` without termination handling.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events as they arrive.
    public func events(from source: LegacyEventSource) -> AsyncThrowingStream<LegacyEvent, any Error> {
        AsyncThrowingStream { continuation in
            _ = source.start(
                onEvent: { continuation.yield($0) },
                onEnd: { continuation.finish(throwing: $0) })
        }
    }
}

/// WRONG ON PURPOSE. An unbounded `AsyncThrowingStream` (termination wired correctly).
///
/// Why it is wrong: a source faster than its consumer fills the buffer without limit; memory grows
/// with the backlog. Nothing pauses the source.
/// Flagged by: `stream-stalled-consumer`.
public struct UnboundedAsyncStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `unbounded-asyncstream`.
    public var name: String { "unbounded-asyncstream" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: unbounded AsyncThrowingStream (memory grows under a slow consumer)"
    }

    /// Wraps `source` in an unbounded stream.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events as they arrive.
    public func events(from source: LegacyEventSource) -> AsyncThrowingStream<LegacyEvent, any Error> {
        AsyncThrowingStream(bufferingPolicy: .unbounded) { continuation in
            let control = source.start(
                onEvent: { continuation.yield($0) },
                onEnd: { continuation.finish(throwing: $0) })
            continuation.onTermination = { _ in control.cancel() }
        }
    }
}

/// WRONG ON PURPOSE. A backpressured `CallbackStream` that yields in arrival order.
///
/// Why it is wrong: events delivered from several SDK threads arrive out of order; without
/// restoring sequence order, data chunks are reassembled wrongly and progress goes backwards.
/// Flagged by: `out-of-order-restored`.
public struct NoReorderingStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `no-reordering-stream`.
    public var name: String { "no-reordering-stream" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: CallbackStream that yields in arrival order (no reordering)" }

    /// Wraps `source` without reordering.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events in arrival order.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(buffering: source.waterMarkBuffering) { sink in
            let control = source.start(feeding: sink, sequenced: false)
            return StreamControl(cancel: CancelHandle(control.cancel), pause: control.pause, resume: control.resume)
        }
    }
}

/// WRONG ON PURPOSE. Calls the SDK's cancel function after a successful completion ("cancel = close").
///
/// Why it is wrong: the cancel handle is for stopping an operation that has not decided yet. Called
/// after the completion decided, it cancels something that is over — on a real SDK, whatever now
/// reuses the handle or the request id, or it fails an internal assertion. Everything else
/// (first-result-wins, cancellation, timeouts, isolation) is `withCallback`'s and correct.
/// Flagged by: `no-cancel-after-completion` (and every scenario where the SDK completes by itself).
public struct CancelAfterSuccessAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `cancel-after-success`.
    public var name: String { "cancel-after-success" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: calls the SDK's cancel after a successful completion (cancel used as close)"
    }

    /// Bridges with `withCallback`, then "closes" the operation.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let cancel = LockedBox<LegacyCancel?>(nil)
        let value = try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let sdkCancel = operation.start { completion($0) }
            cancel.withLock { $0 = sdkCancel }
            return sdkCancel.map(CancelHandle.init)
        }
        cancel.withLock { $0 }?()  // WRONG: the completion decided; there is nothing to cancel
        return value
    }
}

/// WRONG ON PURPOSE. De-duplicates callbacks with a plain `Bool` in front of `withCallback`.
///
/// Why it is wrong: the flag is read and written from whichever threads the SDK calls back on, with
/// no lock and no atomic: a data race (undefined behaviour). `withCallback` behind it happens to
/// tolerate the second call that slips through, so no test fails and the program never crashes here;
/// only ThreadSanitizer sees it ("WARNING: ThreadSanitizer: data race"). Any state shared with
/// callbacks needs a lock or an atomic — or no state: `withCallback` already keeps the first result.
/// Flagged by: `concurrent-callbacks`, under ThreadSanitizer only (the crash-isolated CLI fails a
/// scenario whose process printed a sanitizer report).
public struct PlainBoolGateAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `plain-bool-gate`.
    public var name: String { "plain-bool-gate" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a plain Bool 'delivered' flag shared with SDK threads (a data race; TSan sees it)"
    }

    private final class Once: @unchecked Sendable {  // WRONG: claims Sendable, guards nothing
        var delivered = false
    }

    /// Bridges with a racy de-duplication flag.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let once = Once()
        return try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { result in
                guard !once.delivered else { return }  // WRONG: unsynchronised read…
                once.delivered = true  // …and write, on any SDK thread
                completion(result)
            }.map(CancelHandle.init)
        }
    }
}

/// WRONG ON PURPOSE. A stream subscription that keeps itself alive until it is cancelled.
///
/// Why it is wrong: the subscription object holds a reference to itself (so that "nothing frees it
/// while the SDK runs") and clears it only in `cancel`. A stream that ends by itself — a normal end
/// or an error — is never cancelled, so every such subscription leaks, with the SDK handle it holds.
/// Everything else (backpressure, ordering, termination) is `CallbackStream`'s and correct.
/// Flagged by: `stream-resources-released` (and the end checks of `stream-events-after-end`,
/// `stream-failure`).
public struct SelfRetainingSubscriptionAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `self-retaining-subscription`.
    public var name: String { "self-retaining-subscription" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: subscription retains itself until cancelled (leaks the SDK handle when a stream ends)"
    }

    private final class Subscription: Sendable {
        let me = LockedBox<Subscription?>(nil)
        let control = LockedBox<LegacySourceControl?>(nil)

        func cancel() {
            let control = self.control.withLock { $0 }
            me.withLock { $0 = nil }
            control?.cancel()
        }
    }

    /// Wraps `source` in a `CallbackStream` whose subscription retains itself.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(
            buffering: source.waterMarkBuffering, ordering: source.windowOrdering
        ) { sink in
            let subscription = Subscription()
            subscription.me.withLock { $0 = subscription }  // WRONG: cleared only by cancel
            let control = source.start(feeding: sink)
            subscription.control.withLock { $0 = control }
            return StreamControl(
                cancel: CancelHandle { subscription.cancel() }, pause: control.pause, resume: control.resume)
        }
    }
}

/// WRONG ON PURPOSE. Releases its C context in its cancel handle as well as in the release callback.
///
/// Why it is wrong: after a cancel, the SDK still calls back (the cancellation, a late callback) and
/// still calls the release callback; the context is released twice and used after it was freed.
/// In production that is a crash sometimes, memory corruption otherwise. The suite holds references
/// of its own and reports it on every cancelled operation instead of crashing.
/// Flagged by: `context-released-once` (and every scenario that cancels).
public struct ContextReleasedOnCancelAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `context-released-on-cancel`.
    public var name: String { "context-released-on-cancel" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: releases its C context on cancel and again in the release callback (double release)"
    }

    private final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    /// Bridges with a context released on cancel too.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Unmanaged<AnyObject>.passRetained(Context(completion))
            let cancel = operation.start(
                context: context,
                callback: { context, result in
                    (context.takeUnretainedValue() as! Context).completion(result)
                },
                release: { context in context.release() })
            let retained = RetainedContext(value: context)
            return cancel.map { cancel in
                CancelHandle {
                    cancel()
                    retained.value.release()  // WRONG: the SDK's release callback releases it (again) later
                }
            }
        }
    }
}

/// The context as the cancel handle keeps it. `@unchecked Sendable`: the pointer is only released.
private struct RetainedContext: @unchecked Sendable {
    let value: Unmanaged<AnyObject>
}

/// WRONG ON PURPOSE. Turns a failure into an empty success ("never throw from the SDK layer").
///
/// Why it is wrong: the caller cannot tell a failed operation from one that returned nothing; the
/// error is lost and the empty value flows on as if it were data.
/// Flagged by: `failure-throws` (and `repeated-callback-error-then-success`).
public struct FailureAsEmptySuccessAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `failure-as-empty-success`.
    public var name: String { "failure-as-empty-success" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: turns the SDK's failure into an empty value (the error is lost)" }

    /// Bridges, swallowing failures.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value, or an empty payload when it failed.
    /// - Throws: `CancellationError` or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { result in
                // WRONG: a failure becomes a default value.
                completion(.success((try? result.get()) ?? LegacyPayload(requestID: 0, attempt: 0)))
            }.map(CancelHandle.init)
        }
    }
}

/// WRONG ON PURPOSE. Blocks the caller on a semaphore until the SDK calls back.
///
/// Why it is wrong: the caller's thread — its actor, a cooperative-pool thread, the main thread —
/// is blocked for as long as the operation runs. A few such calls at once starve the pool (on a
/// 2-core machine, two are enough) and everything else in the process stops; on the main actor the
/// UI freezes. It handles repeats, cancellation and timeouts correctly, so only a scenario that
/// watches the caller catches it, on any number of cores.
/// Flagged by: `caller-not-blocked`.
public struct SemaphoreWaitAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `semaphore-wait`.
    public var name: String { "semaphore-wait" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: blocks the caller on a DispatchSemaphore until the SDK calls back" }

    private struct State {
        var result: Result<LegacyPayload, any Error>?
        var cancel: LegacyCancel?
        var cancelled = false
    }

    /// Bridges by blocking.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let semaphore = DispatchSemaphore(value: 0)
        let state = LockedBox(State())
        @Sendable func decide(_ result: Result<LegacyPayload, any Error>) {
            let first = state.withLock { state in
                guard state.result == nil else { return false }
                state.result = result
                return true
            }
            if first { semaphore.signal() }
        }
        @Sendable func cancelOperation() {
            let cancel = state.withLock { state -> LegacyCancel? in
                state.cancelled = true
                defer { state.cancel = nil }
                return state.cancel
            }
            cancel?()
        }
        return try await withTaskCancellationHandler(
            operation: {
                _ = isolation  // runs on the caller's actor (SE-0420: the closure captures it)
                let cancel = operation.start { decide($0) }
                let cancelNow = state.withLock { state -> Bool in
                    if state.cancelled { return true }
                    state.cancel = cancel
                    return false
                }
                if cancelNow { cancel?() }
                // WRONG: blocks the caller's thread until the SDK calls back (or the timeout passes).
                if !blockingWait(semaphore, timeout: operation.timeout), let timeout = operation.timeout {
                    decide(.failure(BridgeTimeoutError(timeout: timeout)))
                    cancelOperation()
                }
                return try state.withLock { state in
                    state.cancel = nil  // the cancel function holds our callback, which holds `state`
                    return state.result!
                }.get()
            },
            onCancel: {
                // Decide first, then cancel (which may call back inside), then wake the waiter.
                let (cancel, decided) = state.withLock { state -> (LegacyCancel?, Bool) in
                    state.cancelled = true
                    let decided = state.result == nil
                    if decided { state.result = .failure(CancellationError()) }
                    defer { state.cancel = nil }
                    return (state.cancel, decided)
                }
                cancel?()
                if decided { semaphore.signal() }
            }, isolation: isolation)
    }
}

/// Waits on `semaphore` (at most `timeout`); returns whether it was signalled. A synchronous
/// function, because `DispatchSemaphore.wait` is rightly unavailable in async code.
private func blockingWait(_ semaphore: DispatchSemaphore, timeout: Duration?) -> Bool {
    guard let timeout else {
        semaphore.wait()
        return true
    }
    return semaphore.wait(timeout: .now() + .nanoseconds(Int(timeout.nanosecondsClamped))) == .success
}
