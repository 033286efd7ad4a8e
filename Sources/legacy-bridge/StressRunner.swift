import Foundation
import LegacyBridge
import LegacySimulator
import LegacyBridgeConformance
import ToolSupport

/// Settings of one stress run.
struct StressPlan: Sendable {
    var operations: Int
    var concurrency: Int
    var seconds: Double
    var seed: UInt64
    var progress: StressProgress
    /// Also run the high-concurrency slow-cancel load (`stress --scale`, see StressScale.swift).
    var scale = false
}

/// How a stress run shows its progress.
enum StressProgress: Sendable {
    /// Not at all (JSON output).
    case none
    /// A bar redrawn in place (standard output is a terminal).
    case bar
    /// A plain line at 25, 50 and 75 % (standard output is a pipe or a file).
    case lines

    /// The style for this process's standard output.
    static func forOutput(json: Bool) -> StressProgress {
        json ? .none : Terminal.isInteractive ? .bar : .lines
    }
}

/// The stress summary; its `Codable` shape is the documented `--json` output.
struct StressSummary: Codable, Sendable {
    struct Outcomes: Codable, Sendable {
        var success = 0
        var failure = 0
        var cancelled = 0
        var timedOut = 0
    }
    struct SDK: Codable, Sendable {
        var syncCallbacks: UInt64 = 0
        var workerCallbacks: UInt64 = 0
        var freshThreadCallbacks: UInt64 = 0
        var repeatedCallbacks: UInt64 = 0
        var callbacksAfterCancel: UInt64 = 0
        var reentrantCancelCallbacks: UInt64 = 0
        var contextsCreated: UInt64 = 0
        var contextsReleased: UInt64 = 0
        var handlesOutstanding: UInt64 = 0
        var streamEvents: UInt64 = 0
    }
    struct Violations: Codable, Sendable {
        var doubleResume = 0
        var hangs = 0
        var leakedContexts = 0
        var leakedGates = 0
        var eventsAfterTerminal = 0
        var outOfOrder = 0
        /// Fetches that returned a response made for another operation (its path or size differ).
        var foreignResults = 0
        /// What `--scale`'s slow-cancel load found wrong (see `StressScaleSummary.violations`).
        var scaleLoad = 0

        var total: Int {
            doubleResume + hangs + leakedContexts + leakedGates + eventsAfterTerminal + outOfOrder + foreignResults
                + scaleLoad
        }
    }

    var seed: UInt64
    var ops: Int
    var fetches = 0
    var downloads = 0
    var seconds: Double
    var opsPerSecond: Double
    var outcomes = Outcomes()
    var sdk = SDK()
    var violations = Violations()
    /// The slow-cancel load of `--scale` (absent otherwise).
    var scale: StressScaleSummary? = nil

    var isClean: Bool { violations.total == 0 }

    /// Operations that never reached the SDK: a download whose task is cancelled before it asks
    /// for its first element never starts (a cancelled stream does not run `start`), so it
    /// creates no context. Every fetch reaches the SDK (`withCallback` always runs `start`).
    var operationsNotStarted: Int { max(0, ops - Int(clamping: sdk.contextsCreated)) }

    /// The summary as text, fitted to `width`.
    func lines(width: Int) -> [String] {
        func g(_ value: some BinaryInteger) -> String { TextLayout.grouped(value) }
        let rate = String(format: "%.2f", seconds)
        let head =
            "stress: \(g(ops)) operations (\(g(fetches)) fetches, \(g(downloads)) downloads) "
            + "in \(rate) s, \(g(Int(opsPerSecond))) ops/s, seed \(seed)"
        var lines = TextLayout.wrap(head, width: width, hangingIndent: "  ")

        let outcomeText =
            "success \(g(outcomes.success)), failure \(g(outcomes.failure)), "
            + "cancelled \(g(outcomes.cancelled)), timed out \(g(outcomes.timedOut))"
        let callbacks =
            "callbacks: \(g(sdk.syncCallbacks)) sync, \(g(sdk.workerCallbacks)) on a worker, "
            + "\(g(sdk.freshThreadCallbacks)) on a fresh thread, \(g(sdk.reentrantCancelCallbacks)) inside cancel; "
        let extra =
            "\(g(sdk.repeatedCallbacks)) repeated, \(g(sdk.callbacksAfterCancel)) after the cancel; "
            + "stream events \(g(sdk.streamEvents))"
        var contexts =
            "created \(g(sdk.contextsCreated)), released \(g(sdk.contextsReleased)); "
            + "handles outstanding \(g(sdk.handlesOutstanding))"
        if operationsNotStarted > 0 {
            contexts +=
                ". \(TextLayout.counted(operationsNotStarted, "operation")) never reached the SDK, "
                + "so made no context: downloads cancelled before they asked for their first element "
                + "(a cancelled stream does not start)"
        }
        let v = violations
        let violationText =
            "double resume \(v.doubleResume), hangs \(v.hangs), leaked contexts \(v.leakedContexts), "
            + "leaked gates \(v.leakedGates), events after terminal \(v.eventsAfterTerminal), "
            + "out of order \(v.outOfOrder), foreign results \(v.foreignResults)"
            + (scale == nil ? "" : ", scale load \(v.scaleLoad)")
            + (isClean ? " (clean)" : " VIOLATIONS")
        var rows: [(String, String)] = [
            ("outcomes", outcomeText), ("SDK did", callbacks + extra), ("contexts", contexts),
        ]
        if let scale {
            let text =
                "\(g(scale.calls)) calls with a slow SDK cancel: \(g(scale.completed)) completed, "
                + "\(g(scale.cancelled)) cancelled, \(g(scale.timedOut)) timed out; "
                + "\(g(scale.handleCalls)) cancel handles called, \(g(scale.discarded)) of "
                + "\(g(scale.reentrantCompletions)) completions from a handle discarded; "
                + "at most \(g(scale.peakLibraryThreads)) library threads (limit \(g(scale.threadLimit)))"
            rows.append(("scale", text))
        }
        rows.append(("violations", violationText))
        for (label, text) in rows {
            lines += TextLayout.labelled(label, text, labelWidth: 10, width: width)
        }
        return lines
    }
}

/// What one operation did.
private enum OperationOutcome: Sendable {
    case success, failure, cancelled, timedOut
    /// A success that carried another operation's response.
    case foreign
}

/// Runs randomised fetches and downloads against the simulated SDK and checks every invariant.
enum StressRunner {
    private struct Plan: Sendable {
        /// The request path, unique to the operation: a fetch must get back its own.
        var path: String
        var isDownload: Bool
        var behavior: SimulatedBehavior
        /// Cancel the calling task after this long (`nil`: do not).
        var cancelAfter: Duration?
        var timeout: Duration?
        var size: Int
    }

    private static func plan(_ index: Int, seed: UInt64) -> Plan {
        var rng = SplitMixGenerator(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
        let isDownload = rng.next() % 100 < 15
        let behavior = SimulatedBehavior.chaos(seed: rng.next())
        var cancelAfter: Duration?
        var timeout: Duration?
        switch rng.next() % 4 {
        case 0: cancelAfter = .microseconds(Int64(rng.next() % 2_000))
        case 1 where !isDownload: timeout = .microseconds(200 + Int64(rng.next() % 3_000))
        default: break
        }
        // Operations that never end by themselves must be ended by the caller.
        if isDownload, behavior.streamEnd == .none, cancelAfter == nil {
            cancelAfter = .microseconds(Int64(rng.next() % 3_000))
        }
        if !isDownload, behavior.outcomes.isEmpty, cancelAfter == nil, timeout == nil {
            timeout = .microseconds(200 + Int64(rng.next() % 3_000))
        }
        let size = isDownload ? Int(rng.next() % 65_536) : Int(rng.next() % 512)
        return Plan(
            path: "/stress/\(index)", isDownload: isDownload, behavior: behavior, cancelAfter: cancelAfter,
            timeout: timeout, size: size)
    }

    static func run(_ stressPlan: StressPlan) async throws -> StressSummary {
        BridgeDiagnostics.enable()
        let before = BridgeDiagnostics.snapshot
        let client = try LegacyClient(configuration: .init(workerThreads: 4, seed: stressPlan.seed))
        let clock = ContinuousClock()
        let started = clock.now
        let deadline = started + .milliseconds(Int64(stressPlan.seconds * 1000))
        let next = AtomicCounter()
        let finished = AtomicCounter()
        let tally = LockedTally()

        let style = stressPlan.progress
        let total = stressPlan.operations
        let budget = stressPlan.seconds
        let progress =
            style == .none
            ? nil
            : Task {
                // The run ends at its operation count or its time budget, whichever comes first.
                var quartersShown = 0
                while !Task.isCancelled {
                    let done = finished.value
                    let elapsed = clock.now - started
                    let fraction = max(
                        Double(done) / Double(max(total, 1)),
                        (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) / budget)
                    if style == .bar {
                        Terminal.progressBar(
                            label: "stress", fraction: fraction, suffix: "\(TextLayout.grouped(done)) ops")
                    } else if Int(fraction * 4) > quartersShown, fraction < 1 {
                        quartersShown = Int(fraction * 4)
                        Terminal.write(
                            lines: TextLayout.wrap(
                                "stress: \(quartersShown * 25)% (\(TextLayout.grouped(done)) operations)",
                                width: Terminal.width))
                    }
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }

        let scaleLoad =
            stressPlan.scale
            ? Task {
                await StressScale.run(
                    calls: stressPlan.operations, concurrency: stressPlan.concurrency, seed: stressPlan.seed,
                    deadline: deadline, bound: .seconds(20))
            } : nil
        let work = Task {
            await withDiscardingTaskGroup { group in
                for _ in 0..<max(1, stressPlan.concurrency) {
                    group.addTask {
                        while true {
                            let index = next.increment()
                            guard index < total, clock.now < deadline else { return }
                            let plan = plan(index, seed: stressPlan.seed)
                            await runOne(plan, client: client, tally: tally)
                            finished.increment()
                        }
                    }
                }
            }
        }
        // Every operation ends by itself, by cancellation or by timeout; a run that does not end
        // well after its budget has hung operations.
        let hangBound = Duration.seconds(stressPlan.seconds) + .seconds(20)
        let ended = await runUntil(bound: hangBound) {
            await work.value
            _ = await scaleLoad?.value
        }
        progress?.cancel()
        _ = await progress?.value
        if style == .bar { Terminal.endProgress() }
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18

        var summary = StressSummary(
            seed: stressPlan.seed, ops: finished.value, seconds: seconds,
            opsPerSecond: Double(finished.value) / max(seconds, 1e-9))
        tally.fill(&summary)
        if ended, let scaleLoad {
            let scale = await scaleLoad.value
            summary.scale = scale
            summary.violations.scaleLoad = scale.violations
        }
        if !ended {
            summary.violations.hangs = max(1, min(next.value, total) - finished.value)
        }

        // Quiescence: every context released, every handle and gate freed (bounded wait).
        let settled = await eventuallyTrue(within: .seconds(5)) {
            let counters = client.counters
            let diagnostics = BridgeDiagnostics.snapshot
            return counters.contextsCreated == counters.contextsReleased && counters.handlesOutstanding == 0
                && diagnostics.liveGates - before.liveGates == 0
        }
        _ = settled
        let counters = client.counters
        let diagnostics = BridgeDiagnostics.snapshot
        summary.sdk = StressSummary.SDK(
            syncCallbacks: counters.callbacksSync, workerCallbacks: counters.callbacksWorker,
            freshThreadCallbacks: counters.callbacksFreshThread, repeatedCallbacks: counters.callbacksRepeated,
            callbacksAfterCancel: counters.callbacksAfterCancel,
            reentrantCancelCallbacks: counters.callbacksReentrantCancel,
            contextsCreated: counters.contextsCreated, contextsReleased: counters.contextsReleased,
            handlesOutstanding: counters.handlesOutstanding, streamEvents: counters.streamEvents)
        summary.violations.leakedContexts = Int(counters.contextsCreated - counters.contextsReleased)
        summary.violations.leakedGates = diagnostics.liveGates - before.liveGates
        summary.violations.doubleResume =
            (diagnostics.resumes - before.resumes) - (diagnostics.suspensions - before.suspensions) > 0
            ? (diagnostics.resumes - before.resumes) - (diagnostics.suspensions - before.suspensions) : 0
        if ended { withExtendedLifetime(client) {} }
        return summary
    }

    private static func runOne(_ plan: Plan, client: LegacyClient, tally: LockedTally) async {
        if plan.isDownload {
            let task = Task { await consumeDownload(plan, client: client) }
            if let cancelAfter = plan.cancelAfter {
                try? await Task.sleep(for: cancelAfter)
                task.cancel()
            }
            let (outcome, afterTerminal, outOfOrder) = await task.value
            tally.record(outcome, download: true, afterTerminal: afterTerminal, outOfOrder: outOfOrder)
        } else {
            let task = Task { () -> OperationOutcome in
                do {
                    let response = try await client.fetch(
                        FetchRequest(path: plan.path, responseSize: plan.size), behavior: plan.behavior,
                        timeout: plan.timeout)
                    // A gate that let one call's completion decide another would show here.
                    guard response.message == plan.path, response.body.count == plan.size else { return .foreign }
                    return .success
                } catch is CancellationError {
                    return .cancelled
                } catch is BridgeTimeoutError {
                    return .timedOut
                } catch {
                    return .failure
                }
            }
            if let cancelAfter = plan.cancelAfter {
                if cancelAfter > .microseconds(200) { try? await Task.sleep(for: cancelAfter) }
                task.cancel()
            }
            tally.record(await task.value, download: false, afterTerminal: false, outOfOrder: false)
        }
    }

    /// Reads a download to its end, checking order; returns the outcome and any violations seen.
    private static func consumeDownload(_ plan: Plan, client: LegacyClient) async -> (OperationOutcome, Bool, Bool) {
        var iterator = client.download(DownloadRequest(path: plan.path, totalBytes: plan.size), behavior: plan.behavior)
            .makeAsyncIterator()
        var nextOffset: UInt64 = 0
        var lastProgress: UInt64 = 0
        var outOfOrder = false
        let outcome: OperationOutcome
        do {
            while let event = try await iterator.next() {
                switch event {
                case .data(let offset, let bytes):
                    if offset < nextOffset { outOfOrder = true }
                    nextOffset = offset + UInt64(bytes.count)
                case .progress(let done, _):
                    if done < lastProgress { outOfOrder = true }
                    lastProgress = done
                }
            }
            outcome = Task.isCancelled ? .cancelled : .success
        } catch is CancellationError {
            outcome = .cancelled
        } catch let error as LegacySDKError where error == .cancelled {
            outcome = .cancelled
        } catch {
            outcome = .failure
        }
        // After the end, the stream must stay ended.
        var afterTerminal = false
        if outcome != .cancelled {
            do {
                if try await iterator.next() != nil { afterTerminal = true }
            } catch {
                afterTerminal = true
            }
        }
        return (outcome, afterTerminal, outOfOrder)
    }
}

/// Outcome counts shared by the stress workers.
private final class LockedTally: Sendable {
    private struct Counts {
        var outcomes = StressSummary.Outcomes()
        var fetches = 0
        var downloads = 0
        var afterTerminal = 0
        var outOfOrder = 0
        var foreign = 0
    }
    private let counts = LockedBox(Counts())

    func record(_ outcome: OperationOutcome, download: Bool, afterTerminal: Bool, outOfOrder: Bool) {
        counts.withLock { counts in
            switch outcome {
            case .success: counts.outcomes.success += 1
            case .failure: counts.outcomes.failure += 1
            case .cancelled: counts.outcomes.cancelled += 1
            case .timedOut: counts.outcomes.timedOut += 1
            case .foreign:
                counts.outcomes.success += 1
                counts.foreign += 1
            }
            if download { counts.downloads += 1 } else { counts.fetches += 1 }
            if afterTerminal { counts.afterTerminal += 1 }
            if outOfOrder { counts.outOfOrder += 1 }
        }
    }

    func fill(_ summary: inout StressSummary) {
        counts.withLock { counts in
            summary.outcomes = counts.outcomes
            summary.fetches = counts.fetches
            summary.downloads = counts.downloads
            summary.violations.eventsAfterTerminal = counts.afterTerminal
            summary.violations.outOfOrder = counts.outOfOrder
            summary.violations.foreignResults = counts.foreign
        }
    }
}

/// A seedable generator (SplitMix64) for reproducible plans.
struct SplitMixGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Waits for `body` at most `bound`; returns whether it finished. The body is abandoned if not.
func runUntil(bound: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    let done = AtomicCounter()
    Task {
        await body()
        done.increment()
    }
    return await eventuallyTrue(within: bound) { done.value > 0 }
}

/// Polls `condition` (every 5 ms) until it holds or `bound` passes.
func eventuallyTrue(within bound: Duration, _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + bound
    while clock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}
