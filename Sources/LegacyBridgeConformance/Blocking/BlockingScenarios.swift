#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import LegacyBridge
import LegacySimulator

/// The blocking-call contract: a blocking SDK call never occupies the cooperative pool, and a
/// cancelled caller is let go at once while its call is interrupted.
///
/// The verdicts are taken on Dispatch threads, never in a task: an adapter that blocks the
/// cooperative pool would otherwise stall the scenario that is checking it.
enum BlockingScenarios {
    static let all: [Scenario<any BlockingAdapter>] = [valueAndError, leavesPoolFree, cancelInterrupts]

    /// How long an unrelated task, or a cancelled caller, may take before the adapter is blamed:
    /// a third of the run's patience (1 s with the default 5 s watchdog), so that the verdict comes
    /// well inside the watchdog (a failure with its reason, not a hang), and a longer watchdog
    /// gives a busy machine more room. Generous: a task starts in microseconds when a cooperative
    /// thread is free, and never while every one of them is blocked.
    static var promptly: Duration { Patience.bound / 3 }

    static let valueAndError = Scenario<any BlockingAdapter>(
        name: "blocking-value-and-error",
        summary: "a blocking call's value reaches the caller, and a failing call's error is thrown"
    ) { adapter, context in
        let lab = BlockingLab(sdk: context.lab.sdk)
        let good = await Task {
            await Result { try await adapter.value(of: lab.call(7, duration: .milliseconds(1)), isolation: nil) }
        }.value
        guard case .success(let payload) = good, payload.requestID == 7 else {
            return .fail("expected the payload of call 7, got \(describe(good))")
        }
        let bad = await Task {
            await Result {
                try await adapter.value(of: lab.call(8, duration: .milliseconds(1), failing: .remote), isolation: nil)
            }
        }.value
        guard case .failure(let error) = bad, (error as? LegacySDKError) == .remote else {
            return .fail("expected the SDK's error, got \(describe(bad))")
        }
        return .pass
    }

    static let leavesPoolFree = Scenario<any BlockingAdapter>(
        name: "blocking-leaves-pool-free",
        summary:
            "with 2 × cores + 2 blocking calls in flight, an unrelated task still starts promptly (1 s with the default watchdog)"
    ) { adapter, context in
        let lab = BlockingLab(sdk: context.lab.sdk)
        let promptly = promptly
        let cores = activeProcessorCount()
        let count = 2 * cores + 2
        let calls = (0..<count).map { index in
            Task {
                await Result {
                    try await adapter.value(of: lab.call(UInt64(index), duration: .seconds(60)), isolation: nil)
                }
            }
        }
        let verdict = FirstResultLatch<String?>()
        onVerdictThread {
            // Let the calls get going (they need not all be blocked: a pool may queue some).
            _ = waitOnThisThread(upTo: promptly / 2) { lab.entered >= min(count, cores + 1) }
            let started = LockedBox(false)
            let probe = Task { started.withLock { $0 = true } }
            let startedPromptly = waitOnThisThread(upTo: promptly) { started.withLock { $0 } }
            let entered = lab.entered
            lab.releaseAll()
            _ = probe
            verdict.offer(
                startedPromptly
                    ? nil
                    : "an unrelated task did not start within \(milliseconds(promptly)) while \(count) blocking calls were in flight (\(entered) of them blocked, \(cores) cores): the adapter blocks cooperative threads"
            )
        }
        let problem = await verdict.value()
        var wrong: String?
        for (index, call) in calls.enumerated() {
            let result = await call.value
            switch result {
            case .success(let payload) where payload.requestID == UInt64(index): continue
            case .failure(let error) where (error as? LegacySDKError) == .interrupted: continue
            default: wrong = wrong ?? "call \(index): \(describe(result))"
            }
        }
        if let problem { return .fail(problem) }
        if let wrong { return .fail("a call was lost or answered wrongly: \(wrong)") }
        return .pass
    }

    static let cancelInterrupts = Scenario<any BlockingAdapter>(
        name: "blocking-cancel-interrupts",
        summary:
            "cancelling a caller whose call is blocked: CancellationError promptly (1 s with the default watchdog), and the call is interrupted"
    ) { adapter, context in
        let lab = BlockingLab(sdk: context.lab.sdk)
        let promptly = promptly
        let patience = Patience.bound
        let ended = LockedBox<Result<LegacyPayload, any Error>?>(nil)
        let task = Task {
            let result = await Result {
                try await adapter.value(of: lab.call(1, duration: .seconds(60)), isolation: nil)
            }
            ended.withLock { $0 = result }
        }
        let verdict = FirstResultLatch<String?>()
        onVerdictThread {
            guard waitOnThisThread(upTo: patience, { lab.entered == 1 }) else {
                lab.releaseAll()
                verdict.offer("the blocking call never started")
                return
            }
            task.cancel()
            let resumed = waitOnThisThread(upTo: promptly) { ended.withLock { $0 != nil } }
            let interrupted = resumed && waitOnThisThread(upTo: promptly / 2) { lab.interrupted == 1 }
            lab.releaseAll()
            if !resumed {
                verdict.offer(
                    "the cancelled caller was not resumed within \(milliseconds(promptly)) while its call stayed blocked"
                )
            } else if !interrupted {
                verdict.offer(
                    "the caller was resumed, but its blocked call was never interrupted: it keeps a thread for its whole duration"
                )
            } else {
                verdict.offer(nil)
            }
        }
        if let problem = await verdict.value() { return .fail(problem) }
        _ = await task.value
        let result = ended.withLock { $0 }
        guard case .failure(let error)? = result, error is CancellationError else {
            return .fail("expected CancellationError, got \(result.map(describe) ?? "nothing")")
        }
        return .pass
    }
}

/// A queue of its own for a scenario's verdict, which waits (polling) on its thread: a serial
/// queue gets a thread even when the global queue's threads are all busy, and its waits never
/// take a global thread away from the code under test.
func onVerdictThread(_ body: @escaping @Sendable () -> Void) {
    onDedicatedThread("conformance verdict", body)
}

extension Result where Failure == any Error {
    /// The result of an async throwing body.
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
