import Dispatch
import LegacyBridge

// The context of a scenario over the user's own SDK, for every fixture kind: it runs in the one
// run loop (Scenario.swift) like a scenario over the simulator, and ends with the checks every
// scenario makes on a real SDK — hanging calls released, the SDK's resources back to where they
// were, no SDK call off its thread, and each call's probe verdict (a second cancel, a cancel
// after the SDK's own outcome, a call on the wrong thread).

/// What every fixture declares besides its calls.
struct FixtureCommon: Sendable {
    let name: String
    let threading: AdapterThreading
    let liveResources: (@Sendable () -> Int)?
    let offThreadCalls: (@Sendable () -> Int)?
    /// What a one-shot fixture declares; every other kind has a cancel per request or subscription.
    var requestCancellation: SDKRequestCancellation = .perRequest
}

/// A fixture's declarations, read where its scenarios need them.
protocol DeclaresCommon {
    var common: FixtureCommon { get }
}

extension DeclaresCommon {
    var threading: AdapterThreading { common.threading }
    var liveResources: (@Sendable () -> Int)? { common.liveResources }
    var offThreadCalls: (@Sendable () -> Int)? { common.offThreadCalls }
    var requestCancellation: SDKRequestCancellation { common.requestCancellation }
}

/// One call or subscription a scenario watched through its probe, with a verdict of its own once
/// the scenario is over.
protocol FixtureWatch: Sendable {
    /// The first rule the adapter broke on this call, in words, or `nil`.
    func problem() -> String?
    /// Whether the adapter can no longer call the SDK through this call's probe: it dropped every
    /// copy. Until then a late mistake (a retried cancel on a job still queued) may yet show.
    var adapterLetGo: Bool { get }
    /// Asked when the scenario hung: the fixture's own fault that explains the hang, in words (its
    /// SDK stopped delivering while nothing of the adapter's was waiting on it), or `nil`.
    func stall(quietFor: Duration) -> String?
}

extension FixtureWatch {
    var adapterLetGo: Bool { true }
    func stall(quietFor: Duration) -> String? { nil }
}

/// What a running fixture scenario knows: the run's options, the fixture's declarations, the
/// resource counts it started from, and everything it must release and judge at its end.
final class FixtureContext: ScenarioContext {
    let options: ConformanceOptions
    let common: FixtureCommon
    /// How long the scenario waits for something that must happen.
    let patience: Duration
    /// `liveResources` when the scenario started (lowered when it falls below and
    /// ``tolerateDrops`` is set).
    var liveBaseline: Int? { baseline.withLock { $0 } }
    private let baseline: LockedBox<Int?>
    /// A scenario before this one in the same run did not pass: what its calls still held may be
    /// freed while this one runs, so a drop below the baseline lowers it instead of being a usage
    /// error.
    let tolerateDrops: Bool
    /// `offThreadCalls` when the scenario started.
    let offThreadBaseline: Int?
    private let watches = LockedBox<[any FixtureWatch]>([])
    private let releases = LockedBox<[@Sendable () -> Void]>([])
    /// The lowest `liveResources` seen below its baseline, if any.
    private let belowBaseline = LockedBox<Int?>(nil)

    init(options: ConformanceOptions, common: FixtureCommon, patience: Duration, tolerateDrops: Bool = false) {
        self.options = options
        self.common = common
        self.patience = patience
        self.baseline = LockedBox(common.liveResources?())
        self.tolerateDrops = tolerateDrops
        self.offThreadBaseline = common.offThreadCalls?()
    }

    var threading: AdapterThreading { common.threading }

    /// Judges `watch` when the scenario ends.
    func watch(_ watch: any FixtureWatch) {
        watches.withLock { $0.append(watch) }
    }

    /// Why the scenario hung, when a watched call says it was the fixture's SDK that stopped.
    func stallDiagnosis() -> String? {
        watches.withLock { $0 }.lazy.compactMap { $0.stall(quietFor: self.patience / 2) }.first
    }

    /// Calls `release` when the scenario ends, whatever happened (a hanging call's release).
    func releaseAtEnd(_ release: @escaping @Sendable () -> Void) {
        releases.withLock { $0.append(release) }
    }

    /// Calls every registered release now (and again at the end).
    func releaseHangs() {
        for release in releases.withLock({ $0 }) { release() }
    }

    /// The SDK's live resources now, noting a count below the baseline.
    var live: Int? {
        guard let value = common.liveResources?() else { return nil }
        if let liveBaseline, value < liveBaseline {
            if tolerateDrops {
                baseline.withLock { $0 = min($0 ?? value, value) }
            } else {
                belowBaseline.withLock { $0 = min($0 ?? value, value) }
            }
        }
        return value
    }

    /// Whether the SDK holds more resources than when the scenario started (`nil`: not counted).
    var liveAboveBaseline: Bool? {
        guard let live, let liveBaseline else { return nil }
        return live > liveBaseline
    }

    /// Waits until the SDK's live resources are back to their baseline; `nil` when they are (or are
    /// not counted), the problem otherwise. `after` says when, for the message.
    func resourcesBack(after: String, within bound: Duration? = nil) async -> Check? {
        guard common.liveResources != nil, liveBaseline != nil else { return nil }
        let back = await eventually(within: bound) { (self.live ?? 0) <= (self.liveBaseline ?? 0) }
        let liveBaseline = self.liveBaseline ?? 0
        if let usage = baselineProblem() { return usage }
        guard back else {
            let now = live ?? liveBaseline
            return .fail(
                "\(after), the SDK still held \(now - liveBaseline) resource(s) more than when the scenario started (liveResources \(liveBaseline) → \(now))"
            )
        }
        return nil
    }

    /// A usage error when `liveResources` fell below its baseline.
    func baselineProblem() -> Check? {
        guard let lowest = belowBaseline.withLock({ $0 }), let liveBaseline else { return nil }
        return .usageError(
            "liveResources fell to \(lowest), below the \(liveBaseline) it counted when the scenario started: something else uses this SDK at the same time (another test?). Give the fixture an SDK, or a counter, of its own, or run such tests one at a time"
        )
    }

    /// After the scenario, once its hanging calls were released: waits until the SDK's resources
    /// are back to the baseline, or have stopped falling for a moment (a leak stays), so that the
    /// next scenario of an in-process run does not count this one's late releases as its own.
    func settle() async {
        guard common.liveResources != nil, let liveBaseline else { return }
        let clock = ContinuousClock()
        let deadline = clock.now + patience
        let quiet = patience / 20
        var last = live ?? liveBaseline
        var changed = clock.now
        while clock.now < deadline {
            let now = live ?? liveBaseline
            if now <= liveBaseline { return }
            if now != last {
                last = now
                changed = clock.now
            } else if clock.now - changed > quiet {
                return
            }
            // A cancelled task cannot sleep (it would spin): the watchdog has given up on it.
            if Task.isCancelled { return }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// For an SDK with a thread of its own: a job posted there now must run within the patience.
    /// The problem when it did not; `nil` when it ran, or the thread takes no more jobs (the SDK
    /// was shut down) or there is none.
    func sdkThreadBlocked() async -> Check? {
        guard let scheduler = common.threading.scheduler else { return nil }
        let ran = LockedBox(false)
        do {
            try scheduler.post { ran.withLock { $0 = true } }
        } catch {
            return nil
        }
        guard await eventually(within: patience / 2, { ran.withLock { $0 } }) else {
            return .fail(
                "a job posted to the SDK's thread at the end of the scenario did not run within \(patience / 2): something the adapter runs there (a callback sleeping, retrying or waiting, a lock it kept) blocks that thread, and every later SDK call and callback waits behind it"
            )
        }
        return nil
    }

    /// The thread-affinity hazard, written once for every fixture kind: an SDK that must be called
    /// on its own thread was called only there. `exercise` runs the fixture's calls, each watched
    /// by a recorder that reports an SDK call off that thread in the final check, and says per call
    /// whether the probe saw any SDK call; `offThreadCalls` counts the rest. What cannot be seen is
    /// not checked: `noCall` when the fixture gives no call, `notThroughProbe` when the adapter
    /// passes nothing through the probe and the SDK counts nothing.
    func threadAffinity(
        noCall: String, notThroughProbe: String, exercise: () async throws -> [Bool]
    ) async throws -> Check {
        guard case .sdkThread = threading.kind else {
            return .notChecked("the fixture declares threading .anyThread: its SDK may be called from any thread")
        }
        let counts = common.offThreadCalls != nil
        guard threading.knowsSDKThread || counts else {
            return .notChecked(
                "the scheduler given to \(threading.declared) was made without isCurrent and the fixture counts no offThreadCalls, so where the SDK was called cannot be seen"
            )
        }
        let seen = try await exercise()
        guard !seen.isEmpty else { return .notChecked(noCall) }
        if !counts && !seen.contains(true) { return .notChecked(notThroughProbe) }
        return .pass
    }

    /// SDK calls made off the SDK's thread since the scenario started.
    var offThreadGrowth: Int {
        guard let offThreadBaseline, let now = common.offThreadCalls?() else { return 0 }
        return now - offThreadBaseline
    }

    /// A context for one scenario of a fixture that declares `common`.
    static func maker(_ common: FixtureCommon) -> @Sendable (ScenarioSetup) -> FixtureContext {
        { setup in
            FixtureContext(
                options: setup.options, common: common, patience: setup.patience, tolerateDrops: setup.afterFailure)
        }
    }

    func conclude(_ check: Check) async -> Check {
        switch check {
        case .pass, .passWithNote:
            let final = await finalCheck()
            guard case .pass = final else { return final }
            return check
        case .fail, .notChecked, .usageError:
            // A usage error explains a failure the fixture caused; say so first.
            return baselineProblem() ?? check
        }
    }

    func wrapUp(hung: Bool) async -> Check? {
        // A hang the fixture's SDK caused (it stopped delivering) is the fixture's, asked before
        // the hanging calls are let go below.
        let stall = hung ? stallDiagnosis() : nil
        // Whatever happened, hanging calls are let go, so that nothing of this scenario hangs on.
        releaseHangs()
        await settle()
        return stall.map { .usageError($0) }
    }

    /// The checks every scenario ends with, after it released its hanging calls: the SDK's thread
    /// (if it has one) still runs jobs, each watched call's verdict, the SDK's resources back to
    /// their baseline, no SDK call off its thread.
    func finalCheck() async -> Check {
        releaseHangs()
        // First: a blocked SDK thread also keeps the SDK from freeing what the calls held, and
        // is the cause to report.
        if let blocked = await sdkThreadBlocked() { return blocked }
        let resources = await resourcesBack(after: "after every call of the scenario ended")
        if let usage = baselineProblem() { return usage }
        // A mistake the adapter makes late (a retried cancel posted behind the first, on a thread
        // the machine descheduled) would otherwise come after the verdict: wait until the adapter
        // dropped its probes, or for a quiet period if it keeps one.
        let watched = watches.withLock { $0 }
        _ = await eventually(within: patience / 4) { watched.allSatisfy(\.adapterLetGo) }
        for watch in watched {
            if let problem = watch.problem() { return .fail(problem) }
        }
        if case .fail(let observed)? = resources {
            return .fail(
                "\(observed): what the adapter allocated, or asked the SDK for, per call was not all freed (a context retained for the SDK and never released, a handle never closed, a request never finished or cancelled)"
            )
        }
        if let resources { return resources }
        let off = offThreadGrowth
        if off > 0 {
            return .fail(
                "the SDK counted \(off) call(s) made off its own thread during the scenario (offThreadCalls): post every SDK call to the SDK's thread, cancel included"
            )
        }
        return .pass
    }
}

/// The value of `task`, or `nil` when it did not come within `bound` (the task then runs on).
func value<Value: Sendable>(of task: Task<Value, Never>, within bound: Duration) async -> Value? {
    let latch = FirstResultLatch<Value?>()
    let arrived = DispatchSemaphore(value: 0)
    _ = ScenarioThreads.task {
        latch.offer(await task.value)
        arrived.signal()
    }
    onDedicatedThread("conformance timer") {
        if arrived.wait(timeout: .now() + .nanoseconds(Int(bound.nanosecondsClamped))) == .timedOut {
            latch.offer(nil)
        }
    }
    return await latch.value()
}

/// The error the probe injects where a scenario needs the SDK to report a failure it would not.
struct ProbeInjectedError: Error, CustomStringConvertible, Sendable {
    var description: String { "an error injected by the conformance probe" }
}

/// The outcome of one call, for messages.
func describeOutcome<Value>(_ result: Result<Value, any Error>) -> String {
    switch result {
    case .success: return "a value"
    case .failure(let error as ProbeInjectedError): return "the error the probe injected (\(error))"
    case .failure(let error): return "error \(type(of: error)): \(error)"
    }
}
