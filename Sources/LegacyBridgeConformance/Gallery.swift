// The bad-adapter gallery: adapters that are WRONG ON PURPOSE.
//
// Each one is the kind of adapter that passes a happy-path unit test and fails in production.
// They exist so the conformance suite can prove it catches them: every one must be flagged in the
// scenario(s) its documentation names, on every run. Never use them as examples to copy.

import LegacyBridge
import LegacySimulator

/// WRONG ON PURPOSE. `withCheckedThrowingContinuation` resuming on every callback.
///
/// Why it is wrong: a second callback resumes the continuation again, which traps ("SWIFT TASK
/// CONTINUATION MISUSE ... tried to resume its continuation more than once"). It also ignores the
/// cancel function, the caller's cancellation and timeouts.
/// Flagged by: `repeated-callback-*` (crash), `never-calls-back-then-cancel` (hang).
public struct NaiveContinuationAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `naive-continuation`.
    public var name: String { "naive-continuation" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: checked continuation resumed on every callback (traps on a repeat)" }

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
/// Flagged by: `reentrant-cancel` (hang or crash).
public struct LockHeldGateAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `lock-held-gate`.
    public var name: String { "lock-held-gate" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: gate that calls cancel and resumes under its lock (deadlocks on a re-entrant cancel)" }

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
/// Flagged by: `cancel-before-handle`, `never-calls-back-then-cancel`, `timeout-silent-operation` (hangs).
public struct NoCancellationHandlerAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `no-cancellation-handler`.
    public var name: String { "no-cancellation-handler" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: checks Task.isCancelled once, no cancellation handler (hangs on never + cancel)" }

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
    public var summary: String { "WRONG ON PURPOSE: releases its C context on the first callback (use-after-free with repeats)" }

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
/// Flagged by: `consumer-cancel-stops-producer`, `break-stops-producer` (and `slow-consumer-backpressure`).
public struct AsyncStreamNoTerminationAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `asyncstream-no-ontermination`.
    public var name: String { "asyncstream-no-ontermination" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: AsyncThrowingStream without onTermination (the source keeps running)" }

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
/// Flagged by: `slow-consumer-backpressure`.
public struct UnboundedAsyncStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `unbounded-asyncstream`.
    public var name: String { "unbounded-asyncstream" }
    /// One line describing the adapter.
    public var summary: String { "WRONG ON PURPOSE: unbounded AsyncThrowingStream (memory grows under a slow consumer)" }

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
        CallbackStream(buffering: .backpressure(low: source.lowWater, high: source.highWater)) { sink in
            let control = source.start(
                onEvent: { sink.yield($0) },
                onEnd: { error in
                    if let error { sink.finish(throwing: error) } else { sink.finish() }
                })
            return StreamControl(cancel: control.cancel, pause: control.pause, resume: control.resume)
        }
    }
}
