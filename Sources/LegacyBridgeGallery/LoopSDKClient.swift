// The correct adapter over `LoopSDK`, written the way the guides tell users to wrap a C SDK that
// must be called on its own loop thread: every SDK call posted to the loop (start first, then the
// cancel or the stream's controls, in that order), a context retained for the SDK with
// `SDKContext` and released only in its release callback, and the conformance probe threaded
// through each call (`.off` in production). The gallery's `loop-sdk-*` adapters differ from it in
// one place each; the real-adapter scenarios must pass this one and flag each of those.

import LegacyBridge
import LegacyBridgeConformance

/// One event of a ``LoopSDK`` subscription.
public struct LoopSDKEvent: Sendable, Hashable {
    /// 0, 1, 2, ... in the order the SDK delivered them.
    public var sequence: UInt64
    /// What the event carries.
    public var payload: Int64
}

/// An async face for ``LoopSDK``: one-shot requests, event streams and blocking queries.
public struct LoopSDKClient: Sendable {
    /// The SDK.
    public let sdk: LoopSDK
    /// Contexts this adapter allocated and has not freed.
    let contexts: LockedValue<Int>
    /// Where blocking queries run: threads of the library's own, never the cooperative pool.
    static let pool = Result { try OffloadPool(threads: 8, name: "loop-sdk queries") }

    /// Creates the client.
    /// - Parameter sdk: The SDK.
    public init(sdk: LoopSDK) {
        self.sdk = sdk
        self.contexts = LockedValue(0)
    }

    /// One process-wide client, created on first use (the adapter catalog's fixtures use it).
    public static let shared: LoopSDKClient = {
        do {
            return LoopSDKClient(sdk: try LoopSDK(name: "loop-sdk-shared"))
        } catch {
            preconditionFailure("LoopSDK could not start its loop thread: \(error)")
        }
    }()

    /// SDK resources live now: the SDK's contexts, this adapter's contexts, blocking queries.
    public var liveResources: Int { sdk.liveContexts + contexts.withLock { $0 } + sdk.activeQueries }

    /// The SDK's loop thread, where every SDK call of this client runs.
    public var threading: AdapterThreading { .sdkThread(sdk.loop.scheduler) }

    /// Runs one request to its outcome.
    ///
    /// - Parameters:
    ///   - behavior: What the request does.
    ///   - timeout: How long to wait, or `nil`.
    ///   - probe: The conformance probe; `.off` in production.
    ///   - isolation: The caller's isolation; leave the default.
    /// - Returns: The request's value.
    /// - Throws: ``LoopSDKError``, `CancellationError` or `BridgeTimeoutError`.
    public func fetch(
        _ behavior: LoopSDKBehavior, timeout: Duration? = nil, probe: CallProbe<Int64> = .off,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Int64 {
        let sdk = self.sdk
        let contexts = self.contexts
        return try await withCallback(isolation: isolation, timeout: timeout) { completion in
            let deliver = probe.callback { completion($0) }
            let handle = LoopHandle()
            // The context is made on the loop thread, where the SDK takes it: no pointer crosses threads.
            try sdk.loop.post {
                probe.start {
                    let context = SDKContext.retain(RequestContext(deliver: deliver, contexts: contexts))
                    handle.value = sdk.start(
                        behavior, context: context, callback: requestCallback, release: requestRelease)
                }
            }
            return CancelHandle {
                // Posted after the start, so it runs after it, on the loop thread.
                try? sdk.loop.post { if let request = handle.value { probe.cancel { sdk.cancel(request) } } }
            }
        }
    }

    /// The events of one subscription, with backpressure: the SDK is paused when 32 events wait.
    ///
    /// The subscription starts on the loop thread, so the SDK may deliver before `start` has
    /// returned the stream its control: until then the stream cannot pause the SDK, and a caller
    /// descheduled for a few milliseconds would let thousands of events in. The event callback
    /// therefore pauses the SDK itself, on its own thread, when a yield answers `.stopProducing`;
    /// the stream's own `pause` then finds it paused, and its `resume` lets it go again.
    ///
    /// - Parameters:
    ///   - plan: What the subscription delivers.
    ///   - probe: The conformance probe; `.off` in production.
    /// - Returns: The events, in the order the SDK delivered them.
    public func events(
        _ plan: LoopSDKStreamPlan, probe: StreamProbe<LoopSDKEvent> = .off
    ) -> CallbackStream<
        LoopSDKEvent
    > {
        let sdk = self.sdk
        let contexts = self.contexts
        return CallbackStream(buffering: .backpressure(low: 8, high: 32)) { sink in
            let yield = probe.event { event in sink.yield(event) }
            let end = probe.end { error in
                if let error { sink.finish(throwing: error) } else { sink.finish() }
            }
            let handle = LoopHandle()
            try sdk.loop.post {
                probe.start {
                    let context = SDKContext.retain(
                        StreamContext(
                            yield: yield, end: end, stop: { handle.value.map(sdk.pause) }, contexts: contexts))
                    handle.value = sdk.subscribe(
                        plan, context: context, onEvent: streamEvent, onEnd: streamEnd, release: streamRelease)
                }
            }
            // Every control call runs as a job on the loop thread, after the start.
            return StreamControl(
                scheduler: sdk.loop.scheduler,
                cancel: CancelHandle { probe.cancel { handle.value.map(sdk.unsubscribe) } },
                pause: { probe.pause { handle.value.map(sdk.pause) } },
                resume: { probe.resume { handle.value.map(sdk.resume) } })
        }
    }

    /// The events of one subscription, keeping only the newest `limit` that wait: the SDK is never
    /// paused, and older waiting events are dropped for a consumer that falls behind (a feed where
    /// only recent events matter, such as a ZeroMQ SUB socket).
    ///
    /// - Parameters:
    ///   - plan: What the subscription delivers.
    ///   - limit: The most events that wait for the consumer.
    ///   - probe: The conformance probe; `.off` in production.
    /// - Returns: The events the consumer takes, in the order the SDK delivered them.
    public func latestEvents(
        _ plan: LoopSDKStreamPlan, keeping limit: Int, probe: StreamProbe<LoopSDKEvent> = .off
    ) -> CallbackStream<LoopSDKEvent> {
        let sdk = self.sdk
        let contexts = self.contexts
        return CallbackStream(buffering: .bufferingNewest(limit)) { sink in
            let yield = probe.event { event in sink.yield(event) }
            let end = probe.end { error in
                if let error { sink.finish(throwing: error) } else { sink.finish() }
            }
            let handle = LoopHandle()
            try sdk.loop.post {
                probe.start {
                    let context = SDKContext.retain(StreamContext(yield: yield, end: end, stop: {}, contexts: contexts))
                    handle.value = sdk.subscribe(
                        plan, context: context, onEvent: streamEvent, onEnd: streamEnd, release: streamRelease)
                }
            }
            // The cancel runs as a job on the loop thread, after the start; nothing pauses the SDK.
            return StreamControl(
                scheduler: sdk.loop.scheduler,
                cancel: CancelHandle { probe.cancel { handle.value.map(sdk.unsubscribe) } })
        }
    }

    /// Runs a blocking query on a pool thread; cancelling the caller interrupts it.
    ///
    /// - Parameters:
    ///   - behavior: What the query does.
    ///   - probe: The conformance probe; `.off` in production.
    ///   - isolation: The caller's isolation; leave the default.
    /// - Returns: The query's value.
    /// - Throws: ``LoopSDKError``, `CancellationError`, or the pool's `OffloadError`.
    public func query(
        _ behavior: LoopSDKBehavior, probe: BlockingProbe = .off, isolation: isolated (any Actor)? = #isolation
    ) async throws -> Int64 {
        let sdk = self.sdk
        let token = sdk.makeToken()
        return try await Self.pool.get().run(
            isolation: isolation, cancel: CancelHandle { probe.cancel { sdk.interrupt(token) } }
        ) {
            try probe.body { try sdk.blockingQuery(behavior, token: token) }
        }
    }
}

/// The SDK's handle of one request or subscription, set by the start job and read by later jobs,
/// all on the loop thread.
final class LoopHandle: Sendable {
    private let stored = LockedValue<UInt64?>(nil)
    var value: UInt64? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// What a request's callbacks need: where to report, and the adapter's context count.
final class RequestContext: Sendable {
    let deliver: @Sendable (Result<Int64, any Error>) -> Void
    let contexts: LockedValue<Int>

    init(deliver: @escaping @Sendable (Result<Int64, any Error>) -> Void, contexts: LockedValue<Int>) {
        self.deliver = deliver
        self.contexts = contexts
        contexts.withLock { $0 += 1 }
    }

    deinit { contexts.withLock { $0 -= 1 } }
}

/// What a subscription's callbacks need.
final class StreamContext: Sendable {
    let yield: @Sendable (LoopSDKEvent) -> YieldOutcome
    let end: @Sendable ((any Error)?) -> Void
    /// Pauses the SDK from inside its event callback (loop thread).
    let stop: @Sendable () -> Void
    let contexts: LockedValue<Int>

    init(
        yield: @escaping @Sendable (LoopSDKEvent) -> YieldOutcome, end: @escaping @Sendable ((any Error)?) -> Void,
        stop: @escaping @Sendable () -> Void, contexts: LockedValue<Int>
    ) {
        self.yield = yield
        self.end = end
        self.stop = stop
        self.contexts = contexts
        contexts.withLock { $0 += 1 }
    }

    deinit { contexts.withLock { $0 -= 1 } }
}

// The C callbacks: file-level and nonisolated, so the SDK's thread may call them.

let requestCallback: LoopSDKCallback = { context, status, value in
    let request = SDKContext.value(of: context, as: RequestContext.self)
    request.deliver(status == LoopSDK.okStatus ? .success(value) : .failure(LoopSDKError(status: status)))
}

let requestRelease: LoopSDKRelease = { context in
    SDKContext.release(context, as: RequestContext.self)
}

let streamEvent: LoopSDKEventCallback = { context, sequence, payload in
    let stream = SDKContext.value(of: context, as: StreamContext.self)
    if stream.yield(LoopSDKEvent(sequence: sequence, payload: payload)) == .stopProducing { stream.stop() }
}

let streamEnd: LoopSDKEndCallback = { context, status in
    SDKContext.value(of: context, as: StreamContext.self).end(
        status == LoopSDK.okStatus ? nil : LoopSDKError(status: status))
}

let streamRelease: LoopSDKRelease = { context in
    SDKContext.release(context, as: StreamContext.self)
}
