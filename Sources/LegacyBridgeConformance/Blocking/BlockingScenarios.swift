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
    static let all: [Scenario<any BlockingAdapter, LabContext>] = [valueAndError, leavesPoolFree, cancelInterrupts]

    /// How long an unrelated task, or a cancelled caller, may take before the adapter is blamed:
    /// a third of the run's patience (1 s with the default 5 s watchdog), so that the verdict comes
    /// well inside the watchdog (a failure with its reason, not a hang), and a longer watchdog
    /// gives a busy machine more room. Generous: a task starts in microseconds when a cooperative
    /// thread is free, and never while every one of them is blocked.
    static var promptly: Duration { Patience.bound / 3 }

    static let valueAndError = Scenario<any BlockingAdapter, LabContext>(
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
        if let problem = lab.problem() { return .fail(problem) }
        return .pass
    }

    static let leavesPoolFree = Scenario<any BlockingAdapter, LabContext>(
        name: "blocking-leaves-pool-free",
        summary:
            "while its blocking call is in flight, the caller's thread runs other work (1 s with the default watchdog), and the call never runs in a task on the cooperative pool"
    ) { adapter, context in
        guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
            return .fail("this scenario needs task executors (macOS 15, iOS 18 or later)")
        }
        let lab = BlockingLab(sdk: context.lab.sdk)
        let promptly = promptly
        // The caller's tasks all run on one thread of the suite's own: whatever the adapter does
        // to wait for its call in the caller's task, the wait occupies that thread, and a second
        // task on it cannot run until the call is released. A forced order on any number of
        // cores and under any load: the waits below are only hang bounds.
        let lane = ScenarioExecutor(label: "conformance caller", maxThreads: 1)
        let call = Task(executorPreference: lane) {
            await Result { try await adapter.value(of: lab.call(1, duration: .seconds(60)), isolation: nil) }
        }
        let entered = await eventually { lab.entered >= 1 }
        let pinged = LockedBox(false)
        let ping = Task(executorPreference: lane) { pinged.withLock { $0 = true } }
        let responsive = entered ? await eventually(within: promptly) { pinged.withLock { $0 } } : false
        let verdict = FirstResultLatch<Void>()
        onVerdictThread {
            lab.releaseAll()
            verdict.offer(())
        }
        await verdict.value()
        let result = await call.value
        _ = ping
        guard entered else { return .fail("the blocking call never started: \(describe(result))") }
        guard responsive else {
            return .fail(
                "while the blocking call was in flight, the caller's thread ran nothing else for \(milliseconds(promptly)): the adapter makes the blocking call in the caller's task, or blocks that task's thread until the call returns (a semaphore, a lock). On the cooperative pool a few such calls hold every thread"
            )
        }
        if let problem = lab.problem() { return .fail(problem) }
        switch result {
        case .success(let payload) where payload.requestID == 1: return .pass
        case .failure(let error) where (error as? LegacySDKError) == .interrupted: return .pass
        default: return .fail("the call was answered wrongly: \(describe(result))")
        }
    }

    static let cancelInterrupts = Scenario<any BlockingAdapter, LabContext>(
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
        // The adapter may still hold the call (a retry loop on a thread of its own): watched until
        // it let go of it, so a retry is seen however late it comes.
        let retried = await lab.begunAfterInterrupt(within: patience / 2)
        if retried > 0 {
            return .fail(
                "the adapter made the blocking call again \(retried) time(s) after it had interrupted it for its cancelled caller: a retry blocks a thread for a caller that is gone. Treat the interrupted call's error as the end of the call"
            )
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
