// The real-adapter gallery: one-shot adapters over `LoopSDK` that are WRONG ON PURPOSE, each
// differing from the correct `LoopSDKClient.fetch` in one place. They thread the conformance probe
// through like the correct one, so what flags them is their mistake. Never copy them.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE, each one; see ``LoopSDKMistake`` for what and why.
public enum LoopSDKGallery {
    /// The fixtures of every mistake, over `client`.
    /// - Parameter client: The client whose SDK the calls use.
    /// - Returns: One fixture per mistake, named after it.
    public static func fixtures(
        client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> [(LoopSDKMistake, OneShotFixture<Int64>)] {
        LoopSDKMistake.allCases.map { mistake in
            (
                mistake,
                LoopSDKFixtures.oneShot(
                    name: mistake.rawValue, client: client, countsResources: mistake != .cancelDoesNothing
                ) { client, behavior, timeout, probe in
                    try await mistake.fetch(client, behavior, timeout: timeout, probe: probe)
                }
            )
        }
    }
}

/// One mistake of a one-shot adapter over ``LoopSDK``: WRONG ON PURPOSE.
public enum LoopSDKMistake: String, CaseIterable, Sendable {
    /// A checked continuation resumed by every callback. A second callback resumes it again, which
    /// traps ("SWIFT TASK CONTINUATION MISUSE ... more than once").
    case resumeEveryCallback = "loop-sdk-resume-every-callback"
    /// Never calls the SDK's cancel: the caller is let go, but the SDK request runs on, holding
    /// its resources, until it completes by itself (or never).
    case noSDKCancel = "loop-sdk-no-sdk-cancel"
    /// Cancels the SDK request after its value arrived, to "close" it. Cancel is not close: on a
    /// real SDK the handle may already belong to another request.
    case cancelAfterValue = "loop-sdk-cancel-after-value"
    /// Cancels, then cancels again "in case the first was lost". The second cancel reaches an SDK
    /// that may have reused the handle.
    case retryCancel = "loop-sdk-retry-cancel"
    /// Blocks the caller's thread on a semaphore until the SDK's callback comes, instead of
    /// suspending: an actor, the main thread or a cooperative thread is held for the whole call.
    case semaphoreCaller = "loop-sdk-semaphore-caller"
    /// Starts the SDK call on the caller's thread instead of posting it to the SDK's loop: an SDK
    /// that must only be called on its loop thread is called from anywhere.
    case offThreadStart = "loop-sdk-off-thread-start"
    /// Never releases the context it retained for the SDK: one leaked context per call.
    case leaksContext = "loop-sdk-leaks-context"
    /// Returns the SDK's request handle, a number too, in place of the value its callback
    /// delivered: every call "succeeds", with the wrong value.
    case handleAsValue = "loop-sdk-handle-as-value"
    /// Reads the request's handle on the cancelling thread and posts the SDK's cancel only if
    /// it is there: a cancel that comes before the posted start has run finds no handle and is
    /// dropped, and the request, started a moment later, runs on.
    case cancelRacesStart = "loop-sdk-cancel-races-start"
    /// After the SDK fails a call, backs off on the SDK's loop thread (a blocking sleep before a
    /// retry or a reconnect) from inside its callback: the failing caller gets its error at once,
    /// and every later call waits behind the sleep.
    case backoffOnLoop = "loop-sdk-backoff-on-loop"
    /// Keeps a deadline of its own: a timer that fails the call and cancels the SDK request when
    /// the timeout expires, never cancelled when the call ends another way. It fires later, after
    /// the reply or the caller's cancellation, and cancels a request that ended (on a real SDK the
    /// handle may belong to another request by then).
    case timerNeverCancelled = "loop-sdk-timer-never-cancelled"
    /// Its cancel only sets an abort flag of its own, which the SDK never reads (as a progress
    /// callback's abort value that is never returned): the caller is let go, and the SDK request
    /// runs on and answers later. Its fixture counts no `liveResources`, as many a user's does:
    /// only the answer that comes after the cancel shows it.
    case cancelDoesNothing = "loop-sdk-cancel-does-nothing"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .resumeEveryCallback: return ["duplicate-callback", "success-then-error"]
        case .noSDKCancel: return ["cancel-in-flight"]
        case .cancelAfterValue: return ["success"]
        case .retryCancel: return ["cancel-in-flight"]
        case .semaphoreCaller: return ["caller-not-blocked"]
        case .offThreadStart: return ["thread-affinity"]
        case .leaksContext: return ["success"]
        case .handleAsValue: return ["success"]
        case .cancelRacesStart: return ["burst-random-cancels"]
        case .backoffOnLoop: return ["failure-throws"]
        case .timerNeverCancelled: return ["timeout"]
        case .cancelDoesNothing: return ["cancel-in-flight"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .resumeEveryCallback:
            return
                "WRONG ON PURPOSE: over LoopSDK, a checked continuation resumed by every callback (traps on a repeat)"
        case .noSDKCancel:
            return "WRONG ON PURPOSE: over LoopSDK, never calls the SDK's cancel (the request runs on)"
        case .cancelAfterValue:
            return "WRONG ON PURPOSE: over LoopSDK, cancels the request after its value arrived (cancel = close)"
        case .retryCancel:
            return "WRONG ON PURPOSE: over LoopSDK, cancels twice (a retry cancel)"
        case .semaphoreCaller:
            return "WRONG ON PURPOSE: over LoopSDK, blocks the caller on a semaphore until the callback"
        case .offThreadStart:
            return "WRONG ON PURPOSE: over LoopSDK, starts the SDK call on the caller's thread, not the loop"
        case .leaksContext:
            return "WRONG ON PURPOSE: over LoopSDK, never releases the context it retained for the SDK"
        case .handleAsValue:
            return "WRONG ON PURPOSE: over LoopSDK, returns the request's handle in place of the value delivered"
        case .cancelRacesStart:
            return "WRONG ON PURPOSE: over LoopSDK, drops a cancel that comes before its posted start has run"
        case .backoffOnLoop:
            return "WRONG ON PURPOSE: over LoopSDK, sleeps on the SDK's loop thread after a failure (a backoff)"
        case .timerNeverCancelled:
            return
                "WRONG ON PURPOSE: over LoopSDK, a deadline timer of its own, never cancelled when the call ends another way"
        case .cancelDoesNothing:
            return
                "WRONG ON PURPOSE: over LoopSDK, its cancel sets a flag the SDK never reads (the request answers later)"
        }
    }

    /// The mistaken adapter's one-shot call.
    func fetch(
        _ client: LoopSDKClient, _ behavior: LoopSDKBehavior, timeout: Duration?, probe: CallProbe<Int64>,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Int64 {
        let sdk = client.sdk
        let contexts = client.contexts
        switch self {
        case .resumeEveryCallback:
            let handle = LoopHandle()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation(isolation: isolation) { continuation in
                    let deliver = probe.callback { continuation.resume(with: $0) }  // every time
                    post(sdk) {
                        probe.start {
                            let context = SDKContext.retain(RequestContext(deliver: deliver, contexts: contexts))
                            handle.value = sdk.start(
                                behavior, context: context, callback: requestCallback, release: requestRelease)
                        }
                    }
                }
            } onCancel: {
                post(sdk) { if let request = handle.value { probe.cancel { sdk.cancel(request) } } }
            }

        case .noSDKCancel, .cancelAfterValue, .retryCancel, .offThreadStart, .leaksContext, .handleAsValue,
            .cancelRacesStart, .backoffOnLoop, .timerNeverCancelled, .cancelDoesNothing:
            let ownTimer = self == .timerNeverCancelled
            return try await withCallback(isolation: isolation, timeout: ownTimer ? nil : timeout) { completion in
                let handle = LoopHandle()
                let deliver = probe.callback { result in
                    if self == .handleAsValue, case .success = result {
                        // WRONG: the handle, not the delivered value (both are numbers)
                        completion(.success(Int64(truncatingIfNeeded: handle.value ?? 0)))
                        return
                    }
                    completion(result)
                    if self == .backoffOnLoop, case .failure = result {
                        // WRONG: a backoff on the SDK's loop thread, inside its callback.
                        sdk.stallUntilShutdown()
                    }
                    if self == .cancelAfterValue, case .success = result {
                        // "Close" the finished request.
                        post(sdk) { if let request = handle.value { probe.cancel { sdk.cancel(request) } } }
                    }
                }
                let release = self == .leaksContext ? leakingRelease : requestRelease
                let start: @Sendable () -> Void = {
                    probe.start {
                        let context = SDKContext.retain(RequestContext(deliver: deliver, contexts: contexts))
                        handle.value = sdk.start(
                            behavior, context: context, callback: requestCallback, release: release)
                    }
                }
                if self == .offThreadStart {
                    start()  // on the caller's thread
                } else {
                    try sdk.loop.post(start)
                }
                if ownTimer, let timeout {
                    // WRONG: nothing cancels the timer when the reply or a cancellation ends the call.
                    let deadline = DispatchTime.now() + .nanoseconds(Int(timeout / .nanoseconds(1)))
                    DispatchQueue.global().asyncAfter(deadline: deadline) {
                        completion(.failure(BridgeTimeoutError(timeout: timeout)))
                        post(sdk) { if let request = handle.value { probe.cancel { sdk.cancel(request) } } }
                    }
                }
                if self == .noSDKCancel { return nil }
                if self == .cancelDoesNothing {
                    let aborted = LockedValue(false)
                    return CancelHandle {
                        // WRONG: a flag of its own, which nothing in the SDK reads.
                        post(sdk) { if handle.value != nil { probe.cancel { aborted.withLock { $0 = true } } } }
                    }
                }
                if self == .cancelRacesStart {
                    return CancelHandle {
                        // WRONG: read here, before the posted start may have run
                        if let request = handle.value { post(sdk) { probe.cancel { sdk.cancel(request) } } }
                    }
                }
                return CancelHandle {
                    post(sdk) { if let request = handle.value { probe.cancel { sdk.cancel(request) } } }
                    if self == .retryCancel {
                        post(sdk) { if let request = handle.value { probe.cancel { sdk.cancel(request) } } }
                    }
                }
            }

        case .semaphoreCaller:
            let done = DispatchSemaphore(value: 0)
            let outcome = LockedValue<Result<Int64, any Error>?>(nil)
            let deliver = probe.callback { result in
                outcome.withLock { $0 = $0 ?? result }
                done.signal()
            }
            try sdk.loop.post {
                probe.start {
                    let context = SDKContext.retain(RequestContext(deliver: deliver, contexts: contexts))
                    _ = sdk.start(behavior, context: context, callback: requestCallback, release: requestRelease)
                }
            }
            done.wait()  // the caller's thread waits here
            return try outcome.withLock { $0 }!.get()
        }
    }
}

/// Posts `job` to the SDK's loop, dropping it once the loop is gone.
private func post(_ sdk: LoopSDK, _ job: @escaping @Sendable () -> Void) {
    try? sdk.loop.post(job)
}

/// The release callback that forgets to release.
private let leakingRelease: LoopSDKRelease = { _ in }

/// One mistake of a stream adapter over ``LoopSDK``: WRONG ON PURPOSE.
public enum LoopSDKStreamMistake: String, CaseIterable, Sendable {
    /// Buffers without bound and never pauses the SDK, though it promises backpressure: memory
    /// grows for as long as the consumer is slower than the SDK.
    case unbounded = "loop-sdk-stream-unbounded"
    /// Never unsubscribes when the consumer leaves: the SDK goes on delivering into a stream
    /// nobody reads, and the subscription's context is never released.
    case noUnsubscribe = "loop-sdk-stream-no-unsubscribe"
    /// Unsubscribes, then posts a second unsubscribe "in case the first was lost". The retry runs
    /// after the stream is done with its control: it reaches an SDK that may have reused the handle.
    case retryCancel = "loop-sdk-stream-retry-cancel"
    /// Sleeps on the SDK's loop thread when the subscription failed, inside its end callback (a
    /// backoff before resubscribing): the consumer got its error, and the loop runs nothing more.
    case backoffOnLoop = "loop-sdk-stream-backoff-on-loop"
    /// A dropping stream, the SDK never paused, whose cancel only sets a flag of its own that the
    /// event callback checks to ignore later events: it never unsubscribes, so the SDK keeps
    /// delivering after the cancel returned, until the subscription ends by itself. Its fixture
    /// counts no `liveResources`, as many a user's does: only the events that keep coming show it.
    case cancelDoesNothing = "loop-sdk-stream-cancel-does-nothing"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .backoffOnLoop: return ["stream-failure"]
        case .cancelDoesNothing: return ["stream-break", "stream-consumer-cancel"]
        case .unbounded: return ["stream-stalled-consumer"]
        case .noUnsubscribe: return ["stream-break", "stream-consumer-cancel"]
        case .retryCancel: return ["stream-break", "stream-consumer-cancel"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .unbounded:
            return
                "WRONG ON PURPOSE: over LoopSDK, an unbounded stream that never pauses the SDK (promises backpressure)"
        case .noUnsubscribe:
            return "WRONG ON PURPOSE: over LoopSDK, never unsubscribes when the consumer leaves"
        case .retryCancel:
            return "WRONG ON PURPOSE: over LoopSDK, unsubscribes twice (a retry posted after the first)"
        case .backoffOnLoop:
            return "WRONG ON PURPOSE: over LoopSDK, sleeps on the SDK's loop thread after the subscription failed"
        case .cancelDoesNothing:
            return
                "WRONG ON PURPOSE: over LoopSDK, a dropping stream whose cancel only sets a flag (never unsubscribes)"
        }
    }

    /// The fixtures of every stream mistake, over `client`.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func fixtures(
        client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> [(LoopSDKStreamMistake, StreamFixture<LoopSDKEvent>)] {
        allCases.map { mistake in
            (
                mistake,
                LoopSDKFixtures.stream(
                    name: mistake.rawValue, client: client,
                    bound: mistake == .cancelDoesNothing ? .dropping(limit: 32) : .backpressure(high: 32),
                    countsResources: mistake != .cancelDoesNothing
                ) { client, plan, probe in
                    mistake.events(client, plan, probe: probe)
                }
            )
        }
    }

    /// The mistaken adapter's subscription.
    func events(
        _ client: LoopSDKClient, _ plan: LoopSDKStreamPlan, probe: StreamProbe<LoopSDKEvent>
    )
        -> CallbackStream<LoopSDKEvent>
    {
        let sdk = client.sdk
        let contexts = client.contexts
        let buffering: StreamBuffering
        switch self {
        case .unbounded: buffering = .unbounded
        case .cancelDoesNothing: buffering = .bufferingNewest(32)
        case .noUnsubscribe, .retryCancel, .backoffOnLoop: buffering = .backpressure(low: 8, high: 32)
        }
        let ignored = LockedValue(false)
        return CallbackStream(buffering: buffering) { sink in
            let yield = probe.event { event in
                ignored.withLock { $0 } ? YieldOutcome.terminated : sink.yield(event)
            }
            let backoff = self == .backoffOnLoop
            let end = probe.end { error in
                if let error { sink.finish(throwing: error) } else { sink.finish() }
                if backoff, error != nil {
                    // WRONG: a backoff on the SDK's loop thread, inside its end callback.
                    sdk.stallUntilShutdown()
                }
            }
            let handle = LoopHandle()
            try sdk.loop.post {
                probe.start {
                    // Each mistake keeps the correct adapter's pause on a stop answer (an unbounded
                    // stream never answers stop), so it shows its one mistake only.
                    let context = SDKContext.retain(
                        StreamContext(
                            yield: yield, end: end, stop: { handle.value.map(sdk.pause) }, contexts: contexts))
                    handle.value = sdk.subscribe(
                        plan, context: context, onEvent: streamEvent, onEnd: streamEnd, release: streamRelease)
                }
            }
            switch self {
            case .cancelDoesNothing:
                return StreamControl(
                    scheduler: sdk.loop.scheduler,
                    cancel: CancelHandle { probe.cancel { ignored.withLock { $0 = true } } })  // WRONG: no unsubscribe
            case .unbounded:
                return StreamControl(
                    scheduler: sdk.loop.scheduler,
                    cancel: CancelHandle { probe.cancel { handle.value.map(sdk.unsubscribe) } })
            case .backoffOnLoop:
                return StreamControl(
                    scheduler: sdk.loop.scheduler,
                    cancel: CancelHandle { probe.cancel { handle.value.map(sdk.unsubscribe) } },
                    pause: { probe.pause { handle.value.map(sdk.pause) } },
                    resume: { probe.resume { handle.value.map(sdk.resume) } })
            case .noUnsubscribe:
                return StreamControl(
                    scheduler: sdk.loop.scheduler, cancel: CancelHandle {},
                    pause: { probe.pause { handle.value.map(sdk.pause) } },
                    resume: { probe.resume { handle.value.map(sdk.resume) } })
            case .retryCancel:
                return StreamControl(
                    scheduler: sdk.loop.scheduler,
                    cancel: CancelHandle {
                        probe.cancel { handle.value.map(sdk.unsubscribe) }
                        // The retry, as a job of its own behind this one on the loop.
                        post(sdk) { probe.cancel { handle.value.map(sdk.unsubscribe) } }
                    },
                    pause: { probe.pause { handle.value.map(sdk.pause) } },
                    resume: { probe.resume { handle.value.map(sdk.resume) } })
            }
        }
    }
}

/// One mistake of a blocking-call adapter over ``LoopSDK``: WRONG ON PURPOSE.
public enum LoopSDKBlockingMistake: String, CaseIterable, Sendable {
    /// Makes the blocking query right in the async function, on the caller's cooperative thread:
    /// a few blocked queries hold every thread of the pool, and a cancelled caller waits for its
    /// query to end by itself.
    case queryOnPool = "loop-sdk-query-on-pool"
    /// Runs the query on an `OffloadPool`, but its cancel only abandons the query (frees what the
    /// SDK counts for it) instead of interrupting it: the caller leaves, the SDK's count drops back,
    /// and the query goes on blocking a thread until it ends by itself (libpq without `PQcancel`).
    case abandonsQuery = "loop-sdk-query-abandoned"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .queryOnPool: return ["blocking-leaves-pool-free", "blocking-cancel-interrupts"]
        case .abandonsQuery: return ["blocking-cancel-interrupts"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .queryOnPool: return "WRONG ON PURPOSE: over LoopSDK, makes the blocking query on the cooperative pool"
        case .abandonsQuery:
            return
                "WRONG ON PURPOSE: over LoopSDK, a pooled query whose cancel frees its SDK record but never interrupts it"
        }
    }

    /// The fixtures of every blocking mistake, over `client`.
    public static func fixtures(
        client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> [(LoopSDKBlockingMistake, BlockingFixture<Int64>)] {
        allCases.map { mistake in
            (
                mistake,
                LoopSDKFixtures.blocking(name: mistake.rawValue, client: client) { client, behavior, probe in
                    try await mistake.query(client, behavior, probe: probe)
                }
            )
        }
    }

    /// The mistaken adapter's query.
    func query(_ client: LoopSDKClient, _ behavior: LoopSDKBehavior, probe: BlockingProbe) async throws -> Int64 {
        let sdk = client.sdk
        let token = sdk.makeToken()
        switch self {
        case .queryOnPool:
            await Task.yield()
            return try probe.body { try sdk.blockingQuery(behavior, token: token) }  // blocks this cooperative thread
        case .abandonsQuery:
            return try await LoopSDKClient.pool.get().run(
                cancel: CancelHandle { probe.cancel { sdk.abandon(token) } }  // WRONG: frees, never interrupts
            ) {
                try probe.body { try sdk.blockingQuery(behavior, token: token) }
            }
        }
    }
}
