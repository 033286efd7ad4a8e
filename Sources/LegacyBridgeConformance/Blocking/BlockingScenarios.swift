#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import LegacyBridge
import LegacySimulator

extension ConformanceSuite {
    /// Runs every blocking-call scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: BlockingAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(BlockingAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: BlockingAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        let results = await runAll(
            BlockingScenarios.all, on: adapter as any BlockingAdapter, options: options, onResult: onResult)
        return ConformanceReport(adapter: adapter.name, kind: .blocking, results: results)
    }
}

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

/// Blocking calls of the simulated SDK (`lsdk_blocking_call`): each really blocks the thread that
/// makes it until its set duration passes or `lsdk_interrupt` ends it. The SDK's counters say how
/// many started blocking and how many were interrupted.
final class BlockingLab: Sendable {
    private struct State {
        var released = false
        var active: [UInt64: Int] = [:]
    }
    private let sdk: SDKClient
    private let state = LockedBox(State())
    /// Keys of this lab's calls: far from any other client's, though keys are per client anyway.
    private static let keyBase: UInt64 = 0xB10C_0000

    init(sdk: SDKClient) { self.sdk = sdk }

    /// Calls that started blocking in the SDK.
    var entered: Int { Int(sdk.counters.blockingCalls) }
    /// Calls that an interrupt ended early.
    var interrupted: Int { Int(sdk.counters.blockingCallsInterrupted) }

    /// A call numbered `number` that blocks for `duration` (at most 60 s), or throws `failing`
    /// after it.
    func call(_ number: UInt64, duration: Duration, failing: LegacySDKError? = nil) -> LegacyBlockingCall {
        let key = Self.keyBase + number
        let sdk = self.sdk
        return LegacyBlockingCall(
            number: number,
            perform: { try self.perform(number, key: key, duration: duration, failing: failing) },
            interrupt: { _ = try? sdk.interrupt(key: key) })  // not remembered, as the SDK documents
    }

    /// Ends every blocked call and lets later ones return at once, so that a scenario never leaves
    /// threads blocked behind it. An interrupt is not remembered, so calls about to block are
    /// interrupted again until none is left (bounded).
    func releaseAll() {
        state.withLock { $0.released = true }
        _ = waitOnThisThread(upTo: .seconds(10)) {
            let keys = state.withLock { Array($0.active.keys) }
            for key in keys { _ = try? sdk.interrupt(key: key) }
            return keys.isEmpty
        }
    }

    private func perform(
        _ number: UInt64, key: UInt64, duration: Duration, failing: LegacySDKError?
    ) throws -> LegacyPayload {
        let released = state.withLock { state -> Bool in
            if !state.released { state.active[key, default: 0] += 1 }
            return state.released
        }
        if released { throw LegacySDKError.interrupted }
        defer {
            state.withLock { state in
                state.active[key, default: 1] -= 1
                if state.active[key] == 0 { state.active.removeValue(forKey: key) }
            }
        }
        let microseconds = UInt32(clamping: duration.nanosecondsClamped / 1_000)
        let result = try sdk.blockingCall(key: key, durationMicroseconds: microseconds)
        guard result == SDK.blockingResult(key: key) else { throw LegacySDKError.remote }
        if let failing { throw failing }
        return LegacyPayload(requestID: number, attempt: 1)
    }
}

/// A queue of its own for a scenario's verdict, which waits (polling) on its thread: a serial
/// queue gets a thread even when the global queue's threads are all busy, and its waits never
/// take a global thread away from the code under test.
func onVerdictThread(_ body: @escaping @Sendable () -> Void) {
    onDedicatedThread("conformance verdict", body)
}

/// A bound in words, e.g. "666 ms".
func milliseconds(_ duration: Duration) -> String {
    "\(duration.nanosecondsClamped / 1_000_000) ms"
}

/// Polls `condition` on the calling (Dispatch) thread until it holds or `bound` passes.
func waitOnThisThread(upTo bound: Duration, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + bound
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleepOnThisThread(1_000)
    }
    return condition()
}

/// Sleeps the calling thread (a Dispatch thread of the lab, never a cooperative one).
private func usleepOnThisThread(_ microseconds: Int) {
    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .microseconds(microseconds))
}

/// The number of processors the system has online.
func activeProcessorCount() -> Int {
    max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
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
