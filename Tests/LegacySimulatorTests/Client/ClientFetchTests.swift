// LegacyClient.fetch against the real simulated C SDK, in every behaviour the SDK has.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("LegacyClient.fetch")
struct ClientFetchTests {
    // MARK: Delivery

    @Test("synchronous delivery: the value arrives within the call, from a callback made inside start")
    func synchronousDelivery() async throws {
        let client = try LegacyClient()
        let response = try await client.fetch(FetchRequest(path: "/sync", responseSize: 300), behavior: .synchronous)
        #expect(response.requestID == 1)
        #expect(response.attempt == 1)
        #expect(response.message == "/sync")
        #expect(response.body == clientTestContent(requestID: 1, count: 300))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksSync == 1)
        #expect(counters.clientTestAllCallbacks == 1)
        #expect(counters.contextsCreated == 1 && counters.contextsReleased == 1)
        #expect(counters.handlesOutstanding == 0)
        #expect(counters.cancels == 0)
    }

    @Test(
        "worker and fresh-thread delivery: the value arrives from the SDK's thread",
        arguments: [SimulatedBehavior.Delivery.worker, .freshThread])
    func threadDelivery(delivery: SimulatedBehavior.Delivery) async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.wellBehaved.with { $0.delivery = delivery }
        for index in 1...20 {
            let response = try await client.fetch(
                FetchRequest(path: "/r\(index)", responseSize: index * 7), behavior: behavior)
            #expect(response.requestID == UInt64(index))
            #expect(response.attempt == 1)
            #expect(response.message == "/r\(index)")
            #expect(response.body == clientTestContent(requestID: UInt64(index), count: index * 7))
        }
        let counters = await clientTestSettledCounters(client)
        #expect(counters.clientTestAllCallbacks == 20)
        switch delivery {
        case .worker: #expect(counters.callbacksWorker == 20)
        case .freshThread: #expect(counters.callbacksFreshThread == 20 && counters.threadsCreated == 20)
        case .synchronous, .mixed, .loop: Issue.record("not a thread delivery of a default client")
        }
        #expect(counters.contextsReleased == 20 && counters.handlesOutstanding == 0)
    }

    @Test("mixed delivery: every call returns its value, whichever thread the seed draws")
    func mixedDelivery() async throws {
        let client = try LegacyClient()
        for seed in UInt64(1)...60 {
            let response = try await client.fetch(
                FetchRequest(path: "/m", responseSize: 64), behavior: .mixedDelivery(seed: seed))
            #expect(response.requestID == seed)
            #expect(response.body == clientTestContent(requestID: seed, count: 64))
        }
        let counters = await clientTestSettledCounters(client)
        #expect(counters.clientTestAllCallbacks == 60)
        // Sixty seeds draw each kind of thread at least once (the draws are deterministic).
        #expect(counters.callbacksSync > 0)
        #expect(counters.callbacksWorker > 0)
        #expect(counters.callbacksFreshThread > 0)
        #expect(counters.contextsReleased == 60 && counters.handlesOutstanding == 0)
    }

    // MARK: Payload

    @Test(
        "the body is copied inside the callback: every byte equals the SDK's content (the SDK overwrites its buffer afterwards)",
        arguments: [0, 1, 4096, 1 << 20])
    func payloadCopied(size: Int) async throws {
        let client = try LegacyClient()
        // A default client has no loop thread, so loop delivery is the SDK layer's to test.
        for delivery in SimulatedBehavior.Delivery.allCases where delivery != .loop {
            let response = try await client.fetch(
                FetchRequest(path: "/payload", responseSize: size),
                behavior: .wellBehaved.with { $0.delivery = delivery })
            #expect(response.body.count == size)
            let firstWrong = clientTestFirstMismatch(response.body, requestID: response.requestID)
            #expect(firstWrong == nil, "byte \(firstWrong ?? -1) of \(delivery) differs")
        }
        let counters = await clientTestSettledCounters(client)
        #expect(counters.contextsReleased == 4 && counters.handlesOutstanding == 0)
    }

    // MARK: Repeats and failures

    @Test("success then error: the first success (attempt 1) wins, the repeat is ignored")
    func successThenError() async throws {
        let client = try LegacyClient()
        let response = try await client.fetch(
            FetchRequest(path: "/twice", responseSize: 8), behavior: .repeats([.success, .failure]))
        #expect(response.attempt == 1)
        #expect(response.body == clientTestContent(requestID: 1, count: 8))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksRepeated == 1)
        #expect(counters.clientTestAllCallbacks == 2)
        #expect(counters.handlesOutstanding == 0)
    }

    @Test("error then success: the error wins, the later success is ignored")
    func errorThenSuccess() async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.repeats([.failure, .success]).with { $0.errorMessage = "first" }
        let outcome = ClientTestOutcome(
            await clientTestResult { try await client.fetch(FetchRequest(path: "/e"), behavior: behavior) })
        #expect(outcome == .sdkError(LegacySDKError.remote.rawValue, "first"))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksRepeated == 1)
        #expect(counters.clientTestAllCallbacks == 2)
        #expect(counters.handlesOutstanding == 0)
    }

    @Test(
        "the same success several times: attempt 1 is returned",
        arguments: [SimulatedBehavior.Delivery.synchronous, .worker, .freshThread, .mixed])
    func repeatedSuccess(delivery: SimulatedBehavior.Delivery) async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.repeats(Array(repeating: .success, count: 8)).with { $0.delivery = delivery }
        let response = try await client.fetch(FetchRequest(path: "/8", responseSize: 16), behavior: behavior)
        #expect(response.attempt == 1)
        #expect(response.body == clientTestContent(requestID: 1, count: 16))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksRepeated == 7)
        #expect(counters.clientTestAllCallbacks == 8)
        #expect(counters.handlesOutstanding == 0)
    }

    @Test("an injected failure is thrown as LegacySDKError with its status and message")
    func injectedFailure() async throws {
        let client = try LegacyClient()
        let custom = ClientTestOutcome(
            await clientTestResult {
                try await client.fetch(
                    FetchRequest(path: "/f"), behavior: .failing(LegacySDKError(rawValue: 42), message: "disk on fire"))
            })
        #expect(custom == .sdkError(42, "disk on fire"))
        let standard = ClientTestOutcome(
            await clientTestResult { try await client.fetch(FetchRequest(path: "/f"), behavior: .failing()) })
        #expect(standard == .sdkError(LegacySDKError.remote.rawValue, "simulated remote failure"))
        let synchronous = ClientTestOutcome(
            await clientTestResult {
                try await client.fetch(
                    FetchRequest(path: "/f"),
                    behavior: .failing(.resources, message: "m").with { $0.delivery = .synchronous })
            })
        #expect(synchronous == .sdkError(LegacySDKError.resources.rawValue, "m"))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.contextsReleased == 3 && counters.handlesOutstanding == 0)
    }

    // MARK: Never completes: cancellation and timeout

    @Test(
        "never completes + task cancel: CancellationError, the SDK operation is cancelled once, context and handle released"
    )
    func neverCompletesCancelled() async throws {
        let client = try LegacyClient()
        let call = ClientTestCall { try await client.fetch(FetchRequest(path: "/never"), behavior: .neverCompletes) }
        #expect(await eventually { client.counters.contextsCreated == 1 })
        #expect(client.counters.contextsReleased == 0)  // provably in flight: it never completes by itself
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1)
        #expect(counters.handlesOutstanding == 0)
        // The default cancel mode calls back asynchronously with the cancellation; it is ignored.
        #expect(counters.callbacksWorker == 1)
    }

    @Test(
        "a task cancelled before fetch is called still ends with CancellationError and cancels the started operation",
        arguments: SimulatedBehavior.CancelMode.allCases.filter { $0 != .ignored })
    func cancelledBeforeCall(mode: SimulatedBehavior.CancelMode) async throws {
        let client = try LegacyClient()
        let call = ClientTestCall { () async throws -> FetchResponse in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.fetch(
                FetchRequest(path: "/never"), behavior: .neverCompletes.with { $0.cancelMode = mode })
        }
        #expect(await call.outcome() == .cancelled)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.contextsCreated == 1 && counters.contextsReleased == 1)
        #expect(counters.cancels == 1)
        #expect(counters.handlesOutstanding == 0)
    }

    @Test("never completes + timeout: BridgeTimeoutError, the SDK operation is cancelled, context and handle released")
    func neverCompletesTimeout() async throws {
        let client = try LegacyClient()
        let outcome = ClientTestOutcome(
            await clientTestResult {
                try await client.fetch(
                    FetchRequest(path: "/never"), behavior: .neverCompletes, timeout: .milliseconds(20))
            })
        #expect(outcome == .timedOut(.milliseconds(20)))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 1)
        #expect(counters.contextsCreated == 1 && counters.contextsReleased == 1)
        #expect(counters.handlesOutstanding == 0)
    }

    @Test("a timeout that does not expire changes nothing: the value is returned and nothing is cancelled")
    func timeoutNotExpired() async throws {
        let client = try LegacyClient()
        let response = try await client.fetch(
            FetchRequest(path: "/t", responseSize: 4), timeout: .seconds(5 * testHangBoundSeconds))
        #expect(response.body == clientTestContent(requestID: 1, count: 4))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 0)
        #expect(counters.handlesOutstanding == 0)
    }

    // MARK: Cancel modes

    @Test("cancel calls back synchronously (re-entrant, inside the cancel call): CancellationError, callback made once")
    func cancelCallsBackSynchronously() async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.neverCompletes.with { $0.cancelMode = .callbackSynchronously }
        let call = ClientTestCall { try await client.fetch(FetchRequest(path: "/s"), behavior: behavior) }
        #expect(await eventually { client.counters.contextsCreated == 1 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksReentrantCancel == 1)
        #expect(counters.clientTestAllCallbacks == 1)
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    @Test("a timeout with a synchronous cancel callback: BridgeTimeoutError, the re-entrant callback loses")
    func timeoutWithSynchronousCancel() async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.neverCompletes.with { $0.cancelMode = .callbackSynchronously }
        let outcome = ClientTestOutcome(
            await clientTestResult {
                try await client.fetch(FetchRequest(path: "/s"), behavior: behavior, timeout: .milliseconds(5))
            })
        #expect(outcome == .timedOut(.milliseconds(5)))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksReentrantCancel == 1)
        #expect(counters.cancels == 1 && counters.handlesOutstanding == 0)
    }

    @Test(
        "cancel calls back later: the caller gets CancellationError without waiting for the SDK's cancellation callback"
    )
    func cancelCallsBackLater() async throws {
        // One worker, held by a blocking callback: the SDK's asynchronous cancellation callback
        // cannot run until the test lets it, so the caller provably did not wait for it.
        let client = try LegacyClient(configuration: .init(workerThreads: 1))
        let blocker = try await ClientTestWorkerBlocker(client)
        defer { blocker.open() }
        let behavior = SimulatedBehavior.neverCompletes.with { $0.cancelMode = .callbackAsynchronously }
        let call = ClientTestCall { try await client.fetch(FetchRequest(path: "/later"), behavior: behavior) }
        #expect(await eventually { client.counters.contextsCreated == 2 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        // The cancel handle runs on a job thread of the library, maybe after the caller resumed.
        #expect(await eventually { client.counters.cancels == 1 })
        var counters = client.counters
        #expect(counters.callbacksWorker == 1)  // only the blocker's: the cancellation callback is still queued
        #expect(counters.contextsReleased == 0)
        blocker.open()
        counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksWorker == 2)  // the cancellation callback came, and was ignored
        #expect(counters.contextsReleased == 2 && counters.handlesOutstanding == 0)
    }

    @Test("cancel is silent: CancellationError, no callback ever, context released by the cancel")
    func cancelSilently() async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.neverCompletes.with { $0.cancelMode = .silent }
        let call = ClientTestCall { try await client.fetch(FetchRequest(path: "/silent"), behavior: behavior) }
        #expect(await eventually { client.counters.contextsCreated == 1 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.clientTestAllCallbacks == 0)
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    @Test("cancel is ignored: the caller still gets CancellationError at once; the operation completes normally later")
    func cancelIgnored() async throws {
        // One worker, held: the ignored operation's completion cannot run until the test lets it.
        let client = try LegacyClient(configuration: .init(workerThreads: 1))
        let blocker = try await ClientTestWorkerBlocker(client)
        defer { blocker.open() }
        let call = ClientTestCall {
            try await client.fetch(FetchRequest(path: "/ignored", responseSize: 10), behavior: .cancelIgnored)
        }
        #expect(await eventually { client.counters.contextsCreated == 2 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        #expect(await eventually { client.counters.cancels == 1 })
        var counters = client.counters
        #expect(counters.callbacksAfterCancel == 0)
        #expect(counters.contextsReleased == 0)
        blocker.open()
        counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksAfterCancel == 1)  // the normal completion, made after the ignored cancel
        #expect(counters.contextsReleased == 2 && counters.handlesOutstanding == 0)
    }

    @Test(
        "a late callback after the cancel: CancellationError, the late success is ignored, the context outlives it",
        // .waits promises nothing after the cancel, so it has no late callback.
        arguments: SimulatedBehavior.CancelMode.allCases.filter { $0 != .ignored && $0 != .waits })
    func lateCallbackAfterCancel(mode: SimulatedBehavior.CancelMode) async throws {
        let client = try LegacyClient()
        let behavior = SimulatedBehavior.neverCompletes.with {
            $0.cancelMode = mode
            $0.lateCallbackAfterCancel = true
        }
        let call = ClientTestCall {
            try await client.fetch(FetchRequest(path: "/late", responseSize: 32), behavior: behavior)
        }
        #expect(await eventually { client.counters.contextsCreated == 1 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.callbacksAfterCancel == 1)
        #expect(counters.clientTestAllCallbacks == (mode == .silent ? 1 : 2))
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    // MARK: Chaos

    @Test("chaos: every call ends with the outcome its behaviour prescribes; every context and handle is released")
    func chaos() async throws {
        let client = try LegacyClient()
        let seeds = UInt64(1)...400
        let outcomes = await withTaskGroup(of: (UInt64, ClientTestOutcome).self) { group in
            for seed in seeds {
                group.addTask {
                    let behavior = SimulatedBehavior.chaos(seed: seed)
                    // An operation that never completes ends by its timeout (chaos never pairs it
                    // with an ignored cancel); the others have only a hang bound.
                    let timeout: Duration =
                        behavior.outcomes.isEmpty ? .milliseconds(30) : .seconds(testHangBoundSeconds)
                    let result = await clientTestResult {
                        try await client.fetch(
                            FetchRequest(path: "/chaos", responseSize: Int(seed % 512)), behavior: behavior,
                            timeout: timeout)
                    }
                    return (seed, ClientTestOutcome(result))
                }
            }
            var outcomes: [UInt64: ClientTestOutcome] = [:]
            for await (seed, outcome) in group { outcomes[seed] = outcome }
            return outcomes
        }
        #expect(outcomes.count == seeds.count)
        var seen: Set<String> = []
        for seed in seeds {
            let behavior = SimulatedBehavior.chaos(seed: seed)
            let outcome = outcomes[seed] ?? .hung
            switch behavior.outcomes.first {
            case nil:
                #expect(outcome == .timedOut(.milliseconds(30)), "seed \(seed)")
                seen.insert("timeout")
            case .failure:
                #expect(outcome == .sdkError(behavior.errorStatus.rawValue, "simulated remote failure"), "seed \(seed)")
                seen.insert("error")
            case .success:
                guard case .success(let response) = outcome else {
                    Issue.record("seed \(seed): \(outcome)")
                    continue
                }
                #expect(response.attempt == 1, "seed \(seed)")
                #expect(
                    response.body == clientTestContent(requestID: response.requestID, count: Int(seed % 512)),
                    "seed \(seed)")
                seen.insert("success")
            }
        }
        #expect(seen == ["timeout", "error", "success"])
        let counters = await clientTestSettledCounters(client)
        #expect(counters.contextsCreated == UInt64(seeds.count))
        #expect(counters.contextsReleased == counters.contextsCreated)
        #expect(counters.handlesOutstanding == 0)
        #expect(counters.callbacksRepeated > 0)
    }

    // MARK: Invalid input

    @Test(
        "an invalid behaviour or request is the SDK's outOfRange, thrown at once: no callback, no context, no handle",
        arguments: [
            ("nine outcomes", SimulatedBehavior.repeats(Array(repeating: .success, count: 9)), 0),
            ("chunk size 0", SimulatedBehavior.wellBehaved.with { $0.chunkSize = 0 }, 0),
            ("delay above 10 s", SimulatedBehavior.wellBehaved.with { $0.delayMicroseconds = 10_000_001 }, 0),
            ("stream concurrency 9", SimulatedBehavior.wellBehaved.with { $0.streamConcurrency = 9 }, 0),
            ("error status cancelled", SimulatedBehavior.failing(.cancelled), 0),
            ("response above 1 MiB", SimulatedBehavior.synchronous, (1 << 20) + 1),
            ("negative response size", SimulatedBehavior.synchronous, -1),
        ])
    func invalidInput(name: String, behavior: SimulatedBehavior, responseSize: Int) async throws {
        let client = try LegacyClient()
        let outcome = ClientTestOutcome(
            await clientTestResult {
                try await client.fetch(
                    FetchRequest(path: "/bad", responseSize: responseSize), behavior: behavior,
                    timeout: .seconds(testHangBoundSeconds))
            })
        #expect(outcome == .sdkError(LegacySDKError.outOfRange.rawValue, nil), "\(name)")
        let counters = client.counters
        #expect(counters.badCalls == 1)
        #expect(counters.clientTestAllCallbacks == 0)
        #expect(counters.contextsCreated == 0 && counters.contextsReleased == 0)
        #expect(counters.handlesCreated == 0 && counters.handlesOutstanding == 0)
        #expect(counters.operationsStarted == 0)
        // The client is unharmed: the next request is number 1.
        let response = try await client.fetch(FetchRequest(path: "/ok"), behavior: .synchronous)
        #expect(response.requestID == 1)
    }

    // MARK: Isolation

    @Test(
        "from the main actor: every delivery works (no isolation trap on SDK threads) and the caller stays on the main actor",
        arguments: SimulatedBehavior.Delivery.allCases.filter { $0 != .loop })  // no loop thread here
    @MainActor
    func mainActorCaller(delivery: SimulatedBehavior.Delivery) async throws {
        // The main actor runs on the main queue (not always drained by the main thread here).
        let key = DispatchSpecificKey<Int>()
        DispatchQueue.main.setSpecific(key: key, value: 1)
        defer { DispatchQueue.main.setSpecific(key: key, value: nil) }
        let client = try LegacyClient()
        let response = try await client.fetch(
            FetchRequest(path: "/main", responseSize: 3), behavior: .wellBehaved.with { $0.delivery = delivery })
        MainActor.assertIsolated()
        #expect(DispatchQueue.getSpecific(key: key) == 1)
        #expect(response.body == clientTestContent(requestID: 1, count: 3))
        let cancelled = ClientTestCall { @MainActor in
            try await client.fetch(
                FetchRequest(path: "/main"), behavior: .neverCompletes.with { $0.delivery = delivery })
        }
        #expect(await eventually { client.counters.contextsCreated == 2 })
        cancelled.cancel()
        #expect(await cancelled.outcome() == .cancelled)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.handlesOutstanding == 0 && counters.contextsReleased == 2)
    }

    @Test(
        "from a custom actor: a synchronous fetch never leaves the actor (no executor hop), an asynchronous one hops back once at most"
    )
    func customActorCaller() async throws {
        let caller = ClientTestCountingActor()
        let client = try LegacyClient()
        let synchronous = try await caller.fetch(client, behavior: .synchronous)
        #expect(synchronous.requestID == 1)
        #expect(synchronous.stayedOnActor)
        #expect(synchronous.hops == 0)
        let asynchronous = try await caller.fetch(client, behavior: .wellBehaved)
        #expect(asynchronous.requestID == 2)
        #expect(asynchronous.stayedOnActor)
        #expect(asynchronous.hops <= 1)
        let failed = try await caller.fetchFailingSynchronously(client)
        #expect(failed.hops == 0 && failed.stayedOnActor)
    }
}

/// A serial executor that counts the jobs enqueued on it: every hop onto the actor is one.
private final class ClientTestCountingExecutor: SerialExecutor {
    private let queue = DispatchQueue(label: "client-test.counting-executor")
    private let key = DispatchSpecificKey<Int>()
    let enqueued = AtomicCell<Int>(0)

    init() { queue.setSpecific(key: key, value: 1) }

    func enqueue(_ job: consuming ExecutorJob) {
        enqueued.add(1, ordering: .relaxed)
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == 1 }
    var hops: Int { enqueued.load(ordering: .relaxed) }
}

/// An actor on a counting executor, calling fetch from its own isolation.
private actor ClientTestCountingActor {
    let executor = ClientTestCountingExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    struct Observation: Sendable {
        var requestID: UInt64
        var hops: Int
        var stayedOnActor: Bool
    }

    func fetch(_ client: LegacyClient, behavior: SimulatedBehavior) async throws -> Observation {
        let before = executor.hops
        let response = try await client.fetch(FetchRequest(path: "/actor", responseSize: 5), behavior: behavior)
        let hops = executor.hops - before
        assertIsolated()
        return Observation(requestID: response.requestID, hops: hops, stayedOnActor: executor.isCurrent)
    }

    func fetchFailingSynchronously(_ client: LegacyClient) async throws -> Observation {
        let before = executor.hops
        do {
            _ = try await client.fetch(
                FetchRequest(path: "/actor"), behavior: .failing().with { $0.delivery = .synchronous })
            Issue.record("a failing fetch returned a value")
        } catch let error as LegacySDKError {
            #expect(error == .remote)
        }
        let hops = executor.hops - before
        return Observation(requestID: 0, hops: hops, stayedOnActor: executor.isCurrent)
    }
}
