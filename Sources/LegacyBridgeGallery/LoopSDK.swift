// A small C-like SDK, written as a test double of the SDKs users wrap: one event loop on a thread
// of its own (hosted by an `SDKLoop`), every function to be called on that thread, callbacks with a
// `void *context` and a release callback after the last one, one-shot requests, event
// subscriptions with pause and resume, and a blocking query with an interrupt.
//
// The real-adapter path of the conformance suite checks adapters over it the way a user checks
// theirs over their own SDK: `LoopSDKClient` is the correct adapter, the gallery's `loop-sdk-*`
// adapters make one mistake each. A call made off the loop thread is counted (and still served,
// so that a broken adapter is reported rather than crashed); every piece of state sits behind a
// lock, so such a call is no data race of the double's own.

import Dispatch
import LegacyBridge

/// What a ``LoopSDK`` request does.
public enum LoopSDKBehavior: Sendable, Hashable {
    /// Completes with `value` on a later iteration of the loop.
    case value(Int64)
    /// Fails with `status` on a later iteration of the loop.
    case failure(Int32)
    /// Completes only when ``LoopSDK/releaseHeld()`` runs (with the value 42), or when cancelled.
    case hang
}

/// What a ``LoopSDK`` subscription delivers.
public enum LoopSDKStreamPlan: Sendable, Hashable {
    /// `count` events, then a normal end.
    case finite(Int)
    /// `count` events, then an end with ``LoopSDK/failedStatus``.
    case failing(after: Int)
    /// Events until unsubscribed, or until ``LoopSDK/releaseHeld()`` ends it normally.
    case endless
    /// `count` events, then silence without an end until unsubscribed or released: a test source
    /// that ran dry (a fixture's mistake, not an adapter's).
    case runsDry(after: Int)
}

/// The status codes of ``LoopSDK`` callbacks.
extension LoopSDK {
    /// Success.
    public static let okStatus: Int32 = 0
    /// The request or subscription failed.
    public static let failedStatus: Int32 = 5
    /// The request was cancelled (reported inside ``cancel(_:)``).
    public static let cancelledStatus: Int32 = 125
    /// A blocking query was interrupted.
    public static let interruptedStatus: Int32 = 4
}

/// A one-shot request's callback: `(context, status, value)`.
public typealias LoopSDKCallback = @convention(c) (UnsafeMutableRawPointer?, Int32, Int64) -> Void
/// A subscription's event callback: `(context, sequence, payload)`.
public typealias LoopSDKEventCallback = @convention(c) (UnsafeMutableRawPointer?, UInt64, Int64) -> Void
/// A subscription's end callback: `(context, status)`.
public typealias LoopSDKEndCallback = @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void
/// The release callback: the SDK is done with `context`, after its last callback.
public typealias LoopSDKRelease = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// A C-like SDK on a loop thread of its own: the test double of the real-adapter examples.
///
/// Rules, as a C header would state them:
/// - ``start(_:context:callback:release:)``, ``cancel(_:)``, ``subscribe(_:context:onEvent:onEnd:release:)``,
///   ``pause(_:)``, ``resume(_:)`` and ``unsubscribe(_:)`` must be called on the loop thread
///   (``loop``); a call from elsewhere is counted in ``offLoopCalls``.
/// - A request calls back exactly once from the loop thread (its value, its failure, or
///   ``cancelledStatus`` synchronously inside ``cancel(_:)``), then releases its context on a later
///   iteration. Cancelling a finished request does nothing.
/// - A subscription delivers events from the loop thread, ends with its end callback unless it is
///   unsubscribed, then releases its context. `pause` stops the events until `resume`.
/// - ``blockingQuery(_:token:)`` blocks its caller, on any thread, until done or interrupted
///   through ``interrupt(_:)``; an interrupt that comes first is remembered.
public final class LoopSDK: Sendable {
    /// The loop thread every SDK function must be called on.
    public let loop: SDKLoop
    private let state = LockedValue(State())

    // @unchecked Sendable: the context pointer is never dereferenced here, only handed back to the
    // adapter's callbacks, as a C SDK does.
    private struct Request: @unchecked Sendable {
        let behavior: LoopSDKBehavior
        let context: UnsafeMutableRawPointer?
        let callback: LoopSDKCallback
        let release: LoopSDKRelease
    }

    // @unchecked Sendable: as `Request`.
    private struct Subscription: @unchecked Sendable {
        let plan: LoopSDKStreamPlan
        let context: UnsafeMutableRawPointer?
        let onEvent: LoopSDKEventCallback
        let onEnd: LoopSDKEndCallback
        let release: LoopSDKRelease
        var sent: UInt64 = 0
        var paused = false
        var emitting = false
    }

    private struct Query: Sendable {
        var interrupted = false
        var held = false
        var done: DispatchSemaphore?
    }

    private struct State: Sendable {
        var nextHandle: UInt64 = 1
        var requests: [UInt64: Request] = [:]
        /// Blocked queries that were abandoned: released by `releaseHeld` only.
        var abandoned: [DispatchSemaphore] = []
        var subscriptions: [UInt64: Subscription] = [:]
        /// Requests and subscriptions whose context is not released yet.
        var liveContexts = 0
        var queries: [UInt64: Query] = [:]
        var offLoopCalls = 0
        var startedCalls = 0
    }

    /// Starts the SDK's loop thread.
    ///
    /// - Parameter name: The loop thread's name.
    /// - Throws: What `SDKLoop` throws when the thread cannot be created.
    public init(name: String = "loop-sdk") throws {
        let wakeups = DispatchSemaphore(value: 0)
        self.loop = try SDKLoop(
            name: name,
            driver: .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() }))
    }

    /// Threads stalled in ``stallUntilShutdown()``; `nil` once ``shutdown()`` began.
    private let stalls = LockedValue<[DispatchSemaphore]?>([])

    /// Blocks the calling thread until ``shutdown()`` begins, at once if it has. The gallery's
    /// adapters that wait on the SDK's loop thread (a backoff inside a callback) wait here, so that
    /// the test that made the SDK can end their wait with the SDK. Test control, not an SDK function.
    public func stallUntilShutdown() {
        let semaphore = DispatchSemaphore(value: 0)
        let stalled = stalls.withLock { stalls -> Bool in
            guard stalls != nil else { return false }
            stalls?.append(semaphore)
            return true
        }
        if stalled { semaphore.wait() }
    }

    /// Ends the SDK: every stall ends, every held request and query is let go, then the loop thread
    /// ends once the jobs already posted have run. What a test calls when it is done with the SDK,
    /// so that nothing it made keeps running. Later posts to ``loop`` fail.
    public func shutdown() async {
        let stalled = stalls.withLock { stalls in
            defer { stalls = nil }
            return stalls ?? []
        }
        for stall in stalled { stall.signal() }
        releaseHeld()
        await loop.shutdown()
    }

    /// Contexts the SDK still holds: requests and subscriptions not yet released.
    public var liveContexts: Int { state.withLock { $0.liveContexts } }

    /// SDK calls made off the loop thread so far.
    public var offLoopCalls: Int { state.withLock { $0.offLoopCalls } }

    /// Blocking queries in progress.
    public var activeQueries: Int { state.withLock { $0.queries.values.filter { $0.done != nil }.count } }

    private func checkThread() {
        if !loop.isCurrent { state.withLock { $0.offLoopCalls += 1 } }
    }

    /// Runs `job` on a later iteration of the loop (SDK-internal; any thread).
    private func later(_ job: @escaping @Sendable () -> Void) {
        try? loop.post(job)
    }

    // MARK: One-shot requests

    /// Starts a request (loop thread only).
    ///
    /// - Parameters:
    ///   - behavior: What the request does.
    ///   - context: Handed to every callback and to `release`.
    ///   - callback: Called once, from the loop thread.
    ///   - release: Called once, after the callback, on a later iteration.
    /// - Returns: The request's handle.
    public func start(
        _ behavior: LoopSDKBehavior, context: UnsafeMutableRawPointer?, callback: LoopSDKCallback,
        release: LoopSDKRelease
    ) -> UInt64 {
        checkThread()
        let handle = state.withLock { state -> UInt64 in
            let handle = state.nextHandle
            state.nextHandle += 1
            state.requests[handle] = Request(behavior: behavior, context: context, callback: callback, release: release)
            state.liveContexts += 1
            state.startedCalls += 1
            return handle
        }
        if behavior != .hang {
            later { [self] in self.complete(handle, cancelled: false) }
        }
        return handle
    }

    /// Cancels a pending request (loop thread only): its callback reports ``cancelledStatus``
    /// before this returns. A finished request is left alone.
    ///
    /// - Parameter handle: The request's handle.
    public func cancel(_ handle: UInt64) {
        checkThread()
        complete(handle, cancelled: true)
    }

    /// Completes every request that hangs (with the value 42) and ends every endless subscription
    /// normally, on a later iteration; lets every held blocking query return. Any thread: this is
    /// the double's test control, not an SDK function.
    public func releaseHeld() {
        later { [self] in
            let (held, endless) = state.withLock { state in
                (
                    state.requests.filter { $0.value.behavior == .hang }.map(\.key),
                    state.subscriptions.filter {
                        if case .runsDry = $0.value.plan { return true }
                        return $0.value.plan == .endless
                    }.map(\.key)
                )
            }
            for handle in held { complete(handle, cancelled: false, heldValue: 42) }
            for handle in endless { end(handle, status: LoopSDK.okStatus) }
        }
        let waiting = state.withLock { state -> [DispatchSemaphore] in
            var waiting: [DispatchSemaphore] = state.abandoned
            state.abandoned.removeAll()
            for (token, query) in state.queries where query.held {
                state.queries[token]?.held = false
                if let done = query.done { waiting.append(done) }
            }
            return waiting
        }
        for done in waiting { done.signal() }
    }

    private func complete(_ handle: UInt64, cancelled: Bool, heldValue: Int64 = 0) {
        guard let request = state.withLock({ $0.requests.removeValue(forKey: handle) }) else { return }
        // Called back without the lock: the adapter may call the SDK from its callback.
        switch (cancelled, request.behavior) {
        case (true, _): request.callback(request.context, LoopSDK.cancelledStatus, 0)
        case (false, .value(let value)): request.callback(request.context, LoopSDK.okStatus, value)
        case (false, .failure(let status)): request.callback(request.context, status, 0)
        case (false, .hang): request.callback(request.context, LoopSDK.okStatus, heldValue)
        }
        later { [self] in
            request.release(request.context)
            state.withLock { $0.liveContexts -= 1 }
        }
    }

    // MARK: Subscriptions

    /// Starts a subscription (loop thread only).
    ///
    /// - Parameters:
    ///   - plan: What it delivers.
    ///   - context: Handed to every callback and to `release`.
    ///   - onEvent: Called for each event, from the loop thread, with sequence numbers 0, 1, 2, ...
    ///   - onEnd: Called once when the subscription ends by itself (not when unsubscribed).
    ///   - release: Called once, after the last callback, on a later iteration.
    /// - Returns: The subscription's handle.
    public func subscribe(
        _ plan: LoopSDKStreamPlan, context: UnsafeMutableRawPointer?, onEvent: LoopSDKEventCallback,
        onEnd: LoopSDKEndCallback, release: LoopSDKRelease
    ) -> UInt64 {
        checkThread()
        let handle = state.withLock { state -> UInt64 in
            let handle = state.nextHandle
            state.nextHandle += 1
            state.subscriptions[handle] = Subscription(
                plan: plan, context: context, onEvent: onEvent, onEnd: onEnd, release: release)
            state.liveContexts += 1
            return handle
        }
        scheduleEmit(handle)
        return handle
    }

    /// Stops a subscription's events until ``resume(_:)`` (loop thread only).
    public func pause(_ handle: UInt64) {
        checkThread()
        state.withLock { $0.subscriptions[handle]?.paused = true }
    }

    /// Lets a paused subscription deliver again (loop thread only).
    public func resume(_ handle: UInt64) {
        checkThread()
        state.withLock { $0.subscriptions[handle]?.paused = false }
        scheduleEmit(handle)
    }

    /// Ends a subscription without its end callback and releases its context on a later
    /// iteration (loop thread only).
    public func unsubscribe(_ handle: UInt64) {
        checkThread()
        guard let subscription = state.withLock({ $0.subscriptions.removeValue(forKey: handle) }) else { return }
        later { [self] in
            subscription.release(subscription.context)
            state.withLock { $0.liveContexts -= 1 }
        }
    }

    private func scheduleEmit(_ handle: UInt64) {
        let schedule = state.withLock { state -> Bool in
            guard let subscription = state.subscriptions[handle], !subscription.paused, !subscription.emitting else {
                return false
            }
            state.subscriptions[handle]?.emitting = true
            return true
        }
        if schedule { later { [self] in self.emit(handle) } }
    }

    /// Delivers a few events, then lets the loop run other jobs before the next few.
    private func emit(_ handle: UInt64) {
        for _ in 0..<4 {
            let next = state.withLock { state -> (Subscription, UInt64)? in
                guard var subscription = state.subscriptions[handle] else { return nil }
                guard !subscription.paused else {
                    state.subscriptions[handle]?.emitting = false
                    return nil
                }
                switch subscription.plan {
                case .finite(let count), .failing(after: let count):
                    if subscription.sent >= UInt64(count) { return (subscription, UInt64.max) }
                case .runsDry(after: let count):
                    if subscription.sent >= UInt64(count) {
                        state.subscriptions[handle]?.emitting = false
                        return nil
                    }
                case .endless:
                    break
                }
                let sequence = subscription.sent
                subscription.sent += 1
                state.subscriptions[handle] = subscription
                return (subscription, sequence)
            }
            guard let (subscription, sequence) = next else { return }
            if sequence == UInt64.max {
                end(handle, status: isFinite(subscription.plan) ? LoopSDK.okStatus : LoopSDK.failedStatus)
                return
            }
            subscription.onEvent(subscription.context, sequence, Int64(sequence) * 10)
        }
        let next = state.withLock { state -> (more: Bool, breather: Bool) in
            guard let subscription = state.subscriptions[handle] else { return (false, false) }
            if subscription.paused {
                state.subscriptions[handle]?.emitting = false
                return (false, false)
            }
            guard case .endless = subscription.plan else { return (true, false) }
            return (true, subscription.sent % Self.endlessBurst == 0)
        }
        guard next.more else { return }
        if next.breather {
            // An endless subscription nobody stops (an adapter that never unsubscribes, a consumer
            // that never reads) would otherwise hold a core for as long as the test waits. Still
            // far faster than any stalled consumer takes events.
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { [self] in
                later { [self] in self.emit(handle) }
            }
        } else {
            later { [self] in self.emit(handle) }
        }
    }

    /// Events an endless subscription delivers between two 1 ms pauses.
    private static let endlessBurst: UInt64 = 16

    private func isFinite(_ plan: LoopSDKStreamPlan) -> Bool {
        if case .finite = plan { return true }
        return false
    }

    private func end(_ handle: UInt64, status: Int32) {
        guard let subscription = state.withLock({ $0.subscriptions.removeValue(forKey: handle) }) else { return }
        subscription.onEnd(subscription.context, status)
        later { [self] in
            subscription.release(subscription.context)
            state.withLock { $0.liveContexts -= 1 }
        }
    }

    // MARK: Blocking queries

    /// A token for one blocking query, to interrupt it with.
    public func makeToken() -> UInt64 {
        state.withLock { state in
            let token = state.nextHandle
            state.nextHandle += 1
            state.queries[token] = Query()
            return token
        }
    }

    /// Runs a blocking query (any thread): `.value` returns it at once, `.failure` throws, `.hang`
    /// blocks until ``interrupt(_:)`` or ``releaseHeld()``.
    ///
    /// - Parameters:
    ///   - behavior: What the query does.
    ///   - token: From ``makeToken()``; one query per token.
    /// - Returns: The query's value (42 for a released `.hang`).
    /// - Throws: ``LoopSDKError`` with ``failedStatus`` or ``interruptedStatus``.
    public func blockingQuery(_ behavior: LoopSDKBehavior, token: UInt64) throws -> Int64 {
        defer { state.withLock { _ = $0.queries.removeValue(forKey: token) } }
        switch behavior {
        case .value(let value):
            return value
        case .failure(let status):
            throw LoopSDKError(status: status)
        case .hang:
            let done = DispatchSemaphore(value: 0)
            let interruptedFirst = state.withLock { state -> Bool in
                let interrupted = state.queries[token]?.interrupted ?? false
                state.queries[token, default: Query()].done = done
                state.queries[token]?.held = true
                return interrupted
            }
            if interruptedFirst { throw LoopSDKError(status: LoopSDK.interruptedStatus) }
            done.wait()  // the query blocks its caller: that is what a blocking SDK does
            if state.withLock({ $0.queries[token]?.interrupted ?? false }) {
                throw LoopSDKError(status: LoopSDK.interruptedStatus)
            }
            return 42
        }
    }

    /// Forgets the query of `token` without interrupting it (any thread), as closing a statement's
    /// handle does on an SDK whose blocking call keeps running: it is no longer counted in
    /// ``activeQueries``, and only ``releaseHeld()`` ends it.
    public func abandon(_ token: UInt64) {
        state.withLock { state in
            guard let query = state.queries.removeValue(forKey: token), let done = query.done else { return }
            state.abandoned.append(done)
        }
    }

    /// Makes the blocking query of `token` return early with ``interruptedStatus`` (any thread);
    /// remembered if the query has not blocked yet.
    public func interrupt(_ token: UInt64) {
        let done = state.withLock { state -> DispatchSemaphore? in
            guard state.queries[token] != nil else { return nil }
            state.queries[token]?.interrupted = true
            state.queries[token]?.held = false
            return state.queries[token]?.done
        }
        done?.signal()
    }
}

/// A ``LoopSDK`` status other than success, as a Swift error.
public struct LoopSDKError: Error, Hashable, CustomStringConvertible {
    /// The status code.
    public var status: Int32

    /// Creates the error.
    /// - Parameter status: The status code.
    public init(status: Int32) {
        self.status = status
    }

    /// The status in words.
    public var description: String {
        switch status {
        case LoopSDK.failedStatus: return "LoopSDK: failed (\(status))"
        case LoopSDK.cancelledStatus: return "LoopSDK: cancelled (\(status))"
        case LoopSDK.interruptedStatus: return "LoopSDK: interrupted (\(status))"
        default: return "LoopSDK: status \(status)"
        }
    }
}
