import Dispatch
import LegacyBridge
import LegacySimulator

/// What a scenario concluded.
enum Check: Sendable {
    case pass
    case fail(String)
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
    func result(_ verdict: ScenarioVerdict, _ detail: String) -> ScenarioResult {
        ScenarioResult(name: scenario.name, summary: scenario.summary, verdict: verdict, detail: detail)
    }
    // Waits for things that must happen get most of the watchdog's bound, and never all of it: a
    // scenario that waited in vain must still have time to say why before it counts as a hang.
    let patience = options.watchdog * 0.6
    let lab: ScenarioLab
    do {
        lab = try ScenarioLab(seed: options.seed &+ UInt64(index), patience: patience)
    } catch {
        return result(.failed, "could not create the simulated SDK client: \(error)")
    }
    let context = ScenarioContext(lab: lab, options: options)
    let executor: (any Sendable)?
    if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
        executor = ScenarioExecutor(label: "conformance \(scenario.name)", maxThreads: 4)
    } else {
        executor = nil
    }
    let check = await Patience.$bound.withValue(patience) {
        await ScenarioThreads.$executor.withValue(executor) {
            await runWithWatchdog(bound: options.watchdog) { () -> Check in
                let check = await scenario.body(adapter, context)
                guard case .pass = check else { return check }
                if let problem = await lab.lifetimeProblem() { return .fail(problem) }
                return .pass
            }
        }
    }
    switch check {
    case .pass?:
        lab.releaseContextGuards()
        return result(.passed, "")
    case .fail(let detail)?:
        lab.releaseContextGuards()
        return result(.failed, detail)
    case nil:
        return result(
            .hung,
            "did not finish within \(options.watchdog) (the adapter never returned: a lost resume, a deadlock, or a wait nothing will end)"
        )
    }
}

/// Cancels `task` from a thread outside the cooperative pool, so an adapter that deadlocks inside
/// its cancellation handler strands that thread and not the pool.
func cancelFromForeignThread<Success, Failure>(_ task: Task<Success, Failure>) {
    onDedicatedThread("conformance canceller") { task.cancel() }
}

/// Runs the adapter in its own task so a scenario can cancel it.
func launch(
    _ adapter: any OneShotAdapter, _ operation: LegacyOperation
) -> Task<Result<LegacyPayload, any Error>, Never> {
    ScenarioThreads.task {
        do {
            return .success(try await adapter.value(of: operation, isolation: nil))
        } catch {
            return .failure(error)
        }
    }
}

/// Describes an outcome for failure messages.
func describe(_ result: Result<LegacyPayload, any Error>) -> String {
    switch result {
    case .success(let payload): return "value from callback #\(payload.attempt)"
    case .failure(let error): return "error \(type(of: error)): \(error)"
    }
}
