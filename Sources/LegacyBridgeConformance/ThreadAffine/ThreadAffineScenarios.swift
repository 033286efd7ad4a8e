import Dispatch
import LegacyBridge
import LegacySimulator

/// The thread-affine contract: every call into an SDK that must only be called from its own thread
/// comes from that thread, whoever calls the adapter, cancellation included.
enum ThreadAffineScenarios {
    static let all: [Scenario<any ThreadAffineAdapter, LabContext>] = [
        callsOnSDKThread, cancelOnSDKThread, callerNotBlocked,
    ]

    /// A loop-thread SDK client whose affinity is its loop, in `behavior` for `start`, opened by
    /// `adapter`; stops the scenario when that fails.
    static func open(
        _ adapter: any ThreadAffineAdapter, _ context: LabContext, behavior: SimulatedBehavior
    ) async throws -> (LegacyAffineSDK, any ThreadAffineSession) {
        do {
            let client = context.lab.adopt(
                try SDKClient(workerThreads: 2, seed: context.options.seed, loopThread: true, affinity: .loop))
            let sdk = LegacyAffineSDK(client: client, behavior: behavior, probe: AffineProbe())
            return (sdk, try await adapter.open(sdk))
        } catch {
            throw ScenarioStop(check: .fail("could not open the adapter: \(error)"))
        }
    }

    static let callsOnSDKThread = Scenario<any ThreadAffineAdapter, LabContext>(
        name: "thread-affine-calls-on-sdk-thread",
        summary:
            "40 calls from 8 concurrent tasks (some on the main actor) all reach a loop-thread-only SDK on its loop thread"
    ) { adapter, context in
        let (sdk, session) = try await open(adapter, context, behavior: .wellBehaved)
        let wrong = LockedBox<[String]>([])
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for step in 0..<5 {
                        let number = UInt64(task * 5 + step)
                        let result: Result<LegacyPayload, any Error>
                        if task.isMultiple(of: 4) {
                            result = await Task { @MainActor () -> Result<LegacyPayload, any Error> in
                                do { return .success(try await session.call(number)) } catch { return .failure(error) }
                            }.value
                        } else {
                            do { result = .success(try await session.call(number)) } catch { result = .failure(error) }
                        }
                        if case .success(let payload) = result, payload.requestID == number { continue }
                        wrong.withLock { $0.append("call \(number): \(describe(result))") }
                    }
                }
            }
        }
        let violations = sdk.client.counters.affinityViolations
        if violations > 0 {
            return .fail(
                "the SDK was called \(violations) time(s) from a thread other than its loop thread (of \(sdk.probe.calls) calls): the adapter runs SDK calls wherever its caller or actor happens to run"
            )
        }
        if let first = wrong.withLock({ $0.first }) {
            return .fail("a call was lost or answered wrongly: \(first)")
        }
        return .pass
    }

    static let cancelOnSDKThread = Scenario<any ThreadAffineAdapter, LabContext>(
        name: "thread-affine-cancel-on-sdk-thread",
        summary:
            "a pending operation of a loop-thread-only SDK is cancelled: the caller gets CancellationError, start and cancel ran on the loop thread"
    ) { adapter, context in
        let (sdk, session) = try await open(adapter, context, behavior: .neverCompletes)
        let task = Task { try await session.value() }
        guard await eventually({ sdk.client.counters.operationsStarted == 1 }) else {
            return .fail("the operation was never started")
        }
        cancelFromForeignThread(task)
        let outcome = FirstResultLatch<Result<LegacyPayload, any Error>?>()
        Task { outcome.offer(await task.result) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(Patience.bound.nanosecondsClamped))) {
            outcome.offer(nil)
        }
        guard let result = await outcome.value() else {
            return .fail("the caller was not resumed within \(Patience.bound) of cancelling its task")
        }
        guard case .failure(let error) = result, error is CancellationError else {
            return .fail("expected CancellationError, got \(describe(result))")
        }
        guard await eventually({ sdk.client.counters.cancels == 1 }) else {
            return .fail("the SDK operation was never cancelled")
        }
        let violations = sdk.client.counters.affinityViolations
        if violations > 0 {
            return .fail(
                "\(violations) SDK call(s) (start or cancel) came from a thread other than the SDK's loop thread")
        }
        return .pass
    }

    static let callerNotBlocked = Scenario<any ThreadAffineAdapter, LabContext>(
        name: "thread-affine-caller-not-blocked",
        summary:
            "while the SDK's loop is busy, a caller's call waits for it without blocking the caller's thread"
    ) { adapter, context in
        guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
            return .fail("this scenario needs task executors (macOS 15, iOS 18 or later)")
        }
        let (sdk, session) = try await open(adapter, context, behavior: .wellBehaved)
        let promptly = Patience.bound / 3
        // The loop is busy with work of its own until the verdict: a call posted to it waits. Its
        // bound only keeps an abandoned scenario from holding the loop for good: it must outlast
        // the verdict however slowly a loaded machine gets there, so the busy job never ends first.
        let busy = LabGate()
        let looping = LabGate()
        sdk.post {
            looping.open()
            _ = busy.wait(upTo: Patience.bound * 4)
        }
        guard await eventually({ looping.wait(upTo: .zero) }) else {
            busy.open()
            return .fail("the SDK's loop never ran the scenario's job")
        }
        // The caller's tasks all run on one thread of the suite's own, first come first served: the
        // call runs first, and the second task runs only once the call suspended. A caller that
        // waits for the loop by blocking (a semaphore, a lock) keeps it from running, on any load.
        let lane = ScenarioExecutor(label: "conformance caller", maxThreads: 1)
        let call = Task(executorPreference: lane) { () -> Result<LegacyPayload, any Error> in
            do { return .success(try await session.call(7)) } catch { return .failure(error) }
        }
        let pinged = LockedBox(false)
        let ping = Task(executorPreference: lane) { pinged.withLock { $0 = true } }
        let responsive = await eventually(within: promptly) { pinged.withLock { $0 } }
        busy.open()
        let result = await call.value
        _ = ping
        guard responsive else {
            return .fail(
                "while the SDK's loop was busy, the caller's thread ran nothing else for \(milliseconds(promptly)): the adapter blocks its caller until the loop ran the call (a semaphore, a lock). Suspend the caller instead (SDKThreadExecutor, or a continuation resumed from the loop)"
            )
        }
        guard case .success(let payload) = result, payload.requestID == 7 else {
            return .fail("the call was lost or answered wrongly: \(describe(result))")
        }
        return .pass
    }
}
