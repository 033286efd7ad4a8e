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

/// Thrown by a scenario (or a helper it calls) that cannot go on: `check` is its verdict.
struct ScenarioStop: Error {
    let check: Check
}

/// What one scenario runs against besides its subject, and the checks every scenario of its
/// kind ends with: the bundled simulator's lab (``LabContext``), or the user's own SDK as its
/// fixture declares it (``FixtureContext``). The run loop (``runScenarios(_:on:options:onResult:makeContext:)``)
/// is the same for both.
protocol ScenarioContext: Sendable {
    /// The verdict once the body returned `check`: the checks every scenario ends with after a
    /// pass, or what explains a failure first.
    func conclude(_ check: Check) async -> Check
    /// Called after the scenario whatever happened (`hung`: the watchdog expired first), to let go
    /// of what it still holds; a check that replaces the watchdog's verdict, or `nil`.
    func wrapUp(hung: Bool) async -> Check?
}

/// What a context is made from: the run's options, the scenario's place in its list, how long it
/// waits for something that must happen, and whether a scenario before it did not pass.
struct ScenarioSetup: Sendable {
    let options: ConformanceOptions
    let index: Int
    let patience: Duration
    let afterFailure: Bool
}

/// One named scenario: a hazard, checked on `Subject` (an adapter over the simulator, or a
/// fixture over the user's SDK) with what `Context` gives.
struct Scenario<Subject: Sendable, Context: ScenarioContext>: Sendable {
    let name: String
    let summary: String
    /// The hazard, checked; a ``ScenarioStop`` it throws ends it with that verdict.
    let body: @Sendable (Subject, Context) async throws -> Check
}

/// The one run loop: runs each scenario `options.only` selects, in order, against `subject`, each
/// on a fresh context from `makeContext`, on threads of its own (``ScenarioExecutor``) and bounded by
/// the watchdog, then lets the context conclude and wrap up.
func runScenarios<Subject: Sendable, Context: ScenarioContext>(
    _ scenarios: [Scenario<Subject, Context>], on subject: Subject, options: ConformanceOptions,
    onResult: (@Sendable (ScenarioResult) -> Void)?,
    makeContext: @escaping @Sendable (ScenarioSetup) throws -> Context
) async -> [ScenarioResult] {
    var results: [ScenarioResult] = []
    for (index, scenario) in scenarios.enumerated() where options.only?.contains(scenario.name) ?? true {
        // Waits for things that must happen get most of the watchdog's bound, and never all of it:
        // a scenario that waited in vain must still have time to say why before it counts as a hang.
        let setup = ScenarioSetup(
            options: options, index: index, patience: options.watchdog * 0.6,
            afterFailure: results.contains { !$0.passed })
        let result = await execute(scenario, on: subject, setup: setup, makeContext: makeContext)
        onResult?(result)
        results.append(result)
    }
    return results
}

/// Runs one scenario (see ``runScenarios(_:on:options:onResult:makeContext:)``).
private func execute<Subject: Sendable, Context: ScenarioContext>(
    _ scenario: Scenario<Subject, Context>, on subject: Subject, setup: ScenarioSetup,
    makeContext: @escaping @Sendable (ScenarioSetup) throws -> Context
) async -> ScenarioResult {
    let options = setup.options
    let made = LockedBox<Context?>(nil)
    let check = await runBounded(scenario.name, options: options, patience: setup.patience) { () -> Check in
        let context: Context
        do {
            context = try makeContext(setup)
        } catch {
            return .fail("\(error)")
        }
        made.withLock { $0 = context }
        let check: Check
        do {
            check = try await scenario.body(subject, context)
        } catch let stop as ScenarioStop {
            check = stop.check
        } catch {
            check = .fail("the scenario stopped: \(error)")
        }
        return await context.conclude(check)
    }
    let replaced = await made.withLock({ $0 })?.wrapUp(hung: check == nil)
    return result(for: replaced ?? check, name: scenario.name, summary: scenario.summary, watchdog: options.watchdog)
}

/// What a scenario over the bundled simulator has besides the adapter: a fresh SDK client of its
/// own (the lab) and the run's options. After a scenario passes, the lab checks the context
/// lifetime rules on every one-shot operation it ran (whatever the scenario was about): no callback
/// after the adapter released its context, no release before the SDK's, no double release, no
/// context left behind.
struct LabContext: ScenarioContext {
    let lab: ScenarioLab
    let options: ConformanceOptions

    /// Why a lab could not be made.
    struct SetupError: Error, CustomStringConvertible {
        let underlying: any Error
        var description: String { "could not create the simulated SDK client: \(underlying)" }
    }

    /// A context on a fresh client, seeded by the scenario's place in its list.
    @Sendable static func make(_ setup: ScenarioSetup) throws -> LabContext {
        do {
            let lab = try ScenarioLab(seed: setup.options.seed &+ UInt64(setup.index), patience: setup.patience)
            return LabContext(lab: lab, options: setup.options)
        } catch {
            throw SetupError(underlying: error)
        }
    }

    func conclude(_ check: Check) async -> Check {
        guard case .pass = check else { return check }
        if let problem = await lab.lifetimeProblem() { return .fail(problem) }
        return .pass
    }

    func wrapUp(hung: Bool) async -> Check? {
        // A hung scenario's adapter may still be running: its contexts stay guarded.
        if !hung { lab.releaseContextGuards() }
        // Whatever the adapter still holds, the scenario's clients end with it. A hung adapter's
        // callback may never return, and the destroy waits for it: then it is not waited for.
        await lab.destroyClients(waiting: hung ? .zero : lab.patience)
        return nil
    }
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
            "did not finish within \(watchdog) (the adapter never returned: a lost resume, a deadlock, a wait nothing "
                + "will end, or a reply the SDK holds that the adapter never asked for: a descriptor that only says "
                + "\"go look\" watched without the SDK's readiness query, SDKLoop.watch(_:for:readiness:_:))"
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
