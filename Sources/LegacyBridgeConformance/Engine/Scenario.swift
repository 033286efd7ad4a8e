import Dispatch
import Foundation
import LegacyBridge
import LegacySimulator

/// What a scenario concluded.
enum Check: Sendable {
    case pass
    /// Passed, with something the reader should know (how the scenario had to make do).
    case passWithNote(String)
    case fail(String)
    /// The fixture does not make the scenario possible; the reason says what it would need.
    case notChecked(String)
    /// The fixture contradicted its own declaration; the reason says how to fix it.
    case usageError(String)

    /// The check, unless it passed.
    var problem: Check? {
        switch self {
        case .pass, .passWithNote: return nil
        case .fail, .notChecked, .usageError: return self
        }
    }
}

/// What a scenario needs besides the adapter.
struct ScenarioContext: Sendable {
    let lab: ScenarioLab
    let options: ConformanceOptions
}

/// One named scenario for adapters of type `Adapter`.
struct Scenario<Adapter: Sendable>: Sendable {
    let name: String
    let summary: String
    let body: @Sendable (Adapter, ScenarioContext) async -> Check
}

/// Runs `scenario` against `adapter` on a fresh SDK client, bounded by the watchdog.
///
/// The scenario's tasks run on an executor with threads of its own (``ScenarioExecutor``), so an
/// adapter that blocks its threads cannot starve the cooperative pool the watchdog's waiter needs.
/// After a scenario passes, the lab checks the context lifetime rules on every one-shot operation
/// it ran (whatever the scenario was about): no callback after the adapter released its context,
/// no release before the SDK's, no double release, no context left behind.
func execute<Adapter: Sendable>(
    _ scenario: Scenario<Adapter>, on adapter: Adapter, options: ConformanceOptions, index: Int
) async -> ScenarioResult {
    // Waits for things that must happen get most of the watchdog's bound, and never all of it: a
    // scenario that waited in vain must still have time to say why before it counts as a hang.
    let patience = options.watchdog * 0.6
    let lab: ScenarioLab
    do {
        lab = try ScenarioLab(seed: options.seed &+ UInt64(index), patience: patience)
    } catch {
        return ScenarioResult(
            name: scenario.name, summary: scenario.summary, verdict: .failed,
            detail: "could not create the simulated SDK client: \(error)")
    }
    let context = ScenarioContext(lab: lab, options: options)
    let check = await runBounded(scenario.name, options: options, patience: patience) { () -> Check in
        let check = await scenario.body(adapter, context)
        guard case .pass = check else { return check }
        if let problem = await lab.lifetimeProblem() { return .fail(problem) }
        return .pass
    }
    // A hung scenario's adapter may still be running: its contexts stay guarded.
    if check != nil { lab.releaseContextGuards() }
    return result(for: check, name: scenario.name, summary: scenario.summary, watchdog: options.watchdog)
}

/// Runs a scenario's body on an executor with threads of its own, with the run's patience,
/// bounded by the watchdog; `nil` when the watchdog expired first.
func runBounded(
    _ name: String, options: ConformanceOptions, patience: Duration, _ body: @escaping @Sendable () async -> Check
) async -> Check? {
    let executor: (any Sendable)?
    if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
        executor = ScenarioExecutor(label: "conformance \(name)", maxThreads: 4)
    } else {
        executor = nil
    }
    return await Patience.$bound.withValue(patience) {
        await ScenarioThreads.$executor.withValue(executor) {
            await runWithWatchdog(bound: options.watchdog, body)
        }
    }
}

/// The result a scenario's check amounts to (`nil`: the watchdog expired).
func result(for check: Check?, name: String, summary: String, watchdog: Duration) -> ScenarioResult {
    func result(_ verdict: ScenarioVerdict, _ detail: String) -> ScenarioResult {
        ScenarioResult(name: name, summary: summary, verdict: verdict, detail: detail)
    }
    switch check {
    case .pass?:
        return result(.passed, "")
    case .passWithNote(let note)?:
        return result(.passed, note)
    case .fail(let detail)?:
        return result(.failed, detail)
    case .notChecked(let reason)?:
        return result(.notChecked, "not checked: \(reason)")
    case .usageError(let reason)?:
        return result(.usageError, "usage error: \(reason)")
    case nil:
        return result(
            .hung,
            "did not finish within \(watchdog) (the adapter never returned: a lost resume, a deadlock, or a wait nothing will end)"
        )
    }
}

/// Cancels `task` from a thread outside the cooperative pool, so an adapter that deadlocks inside
/// its cancellation handler strands that thread and not the pool.
func cancelFromForeignThread<Success, Failure>(_ task: Task<Success, Failure>) {
    onDedicatedThread("conformance canceller") { task.cancel() }
}

/// Runs the adapter in its own task so a scenario can cancel it.
///
/// - Parameters:
///   - adapter: The adapter.
///   - operation: The operation to hand it.
///   - beforeCall: Receives how to cancel the task, before the adapter is called.
/// - Returns: The task, whose value is the adapter's outcome.
func launch(
    _ adapter: any OneShotAdapter, _ operation: LegacyOperation,
    beforeCall: ((@escaping @Sendable () -> Void) -> Void)? = nil
) -> Task<Result<LegacyPayload, any Error>, Never> {
    let go = FirstResultLatch<Bool>()
    let waits = beforeCall != nil
    let task = ScenarioThreads.task { () -> Result<LegacyPayload, any Error> in
        if waits { _ = await go.value() }
        do {
            return .success(try await adapter.value(of: operation, isolation: nil))
        } catch {
            return .failure(error)
        }
    }
    if let beforeCall {
        beforeCall { task.cancel() }
        go.offer(true)
    }
    return task
}

/// Describes an outcome for failure messages.
func describe(_ result: Result<LegacyPayload, any Error>) -> String {
    switch result {
    case .success(let payload): return "value from callback #\(payload.attempt)"
    case .failure(let error): return "error \(type(of: error)): \(error)"
    }
}

/// Starts the line the lab prints when a sanitizer's report would mean something from then on
/// (it freed a context under AddressSanitizer): the crash-isolating runner quotes it after the report.
let watchLinePrefix = "WATCHING "

/// Says, on standard error, what a sanitizer's report from now on would mean, so that a process
/// that ends with one is explained by more than a stack (see ``watchLinePrefix``).
func announceWatch(_ what: String) {
    FileHandle.standardError.write(Data((watchLinePrefix + what + "\n").utf8))
}
