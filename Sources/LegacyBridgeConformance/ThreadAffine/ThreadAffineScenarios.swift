import Dispatch
import LegacyBridge
import LegacySimulator

/// The thread-affine contract: every call into an SDK that must only be called from its own thread
/// comes from that thread, whoever calls the adapter, cancellation included.
enum ThreadAffineScenarios {
    static let all: [Scenario<any ThreadAffineAdapter>] = [callsOnSDKThread, cancelOnSDKThread]

    /// A loop-thread SDK client whose affinity is its loop, in `behavior` for `start`.
    static func makeSDK(_ context: ScenarioContext, behavior: SimulatedBehavior) throws -> LegacyAffineSDK {
        let client = try SDKClient(workerThreads: 2, seed: context.options.seed, loopThread: true, affinity: .loop)
        return LegacyAffineSDK(client: client, behavior: behavior, probe: AffineProbe())
    }

    static let callsOnSDKThread = Scenario<any ThreadAffineAdapter>(
        name: "thread-affine-calls-on-sdk-thread",
        summary:
            "40 calls from 8 concurrent tasks (some on the main actor) all reach a loop-thread-only SDK on its loop thread"
    ) { adapter, context in
        let sdk: LegacyAffineSDK
        let session: any ThreadAffineSession
        do {
            sdk = try makeSDK(context, behavior: .wellBehaved)
            session = try await adapter.open(sdk)
        } catch {
            return .fail("could not open the adapter: \(error)")
        }
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

    static let cancelOnSDKThread = Scenario<any ThreadAffineAdapter>(
        name: "thread-affine-cancel-on-sdk-thread",
        summary:
            "a pending operation of a loop-thread-only SDK is cancelled: the caller gets CancellationError, start and cancel ran on the loop thread"
    ) { adapter, context in
        let sdk: LegacyAffineSDK
        let session: any ThreadAffineSession
        do {
            sdk = try makeSDK(context, behavior: .neverCompletes)
            session = try await adapter.open(sdk)
        } catch {
            return .fail("could not open the adapter: \(error)")
        }
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
}
