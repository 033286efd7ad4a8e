import Foundation
import LegacyBridge
import LegacySimulator
import LegacyBridgeConformance
import Synchronization

/// Settings of one stress run.
struct StressPlan: Sendable {
    var operations: Int
    var concurrency: Int
    var seconds: Double
    var seed: UInt64
    var showProgress: Bool
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

        var total: Int { doubleResume + hangs + leakedContexts + leakedGates + eventsAfterTerminal + outOfOrder }
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

    var isClean: Bool { violations.total == 0 }

    var rendered: String {
        """
        stress: \(ops) operations (\(fetches) fetches, \(downloads) downloads) in \(String(format: "%.2f", seconds)) s, \(Int(opsPerSecond)) ops/s, seed \(seed)
          outcomes:   success \(outcomes.success), failure \(outcomes.failure), cancelled \(outcomes.cancelled), timed out \(outcomes.timedOut)
          SDK did:    sync \(sdk.syncCallbacks), worker \(sdk.workerCallbacks), fresh-thread \(sdk.freshThreadCallbacks) callbacks; repeated \(sdk.repeatedCallbacks), after-cancel \(sdk.callbacksAfterCancel), re-entrant cancel \(sdk.reentrantCancelCallbacks); stream events \(sdk.streamEvents)
          contexts:   created \(sdk.contextsCreated), released \(sdk.contextsReleased); handles outstanding \(sdk.handlesOutstanding)
          violations: double resume \(violations.doubleResume), hangs \(violations.hangs), leaked contexts \(violations.leakedContexts), leaked gates \(violations.leakedGates), events after terminal \(violations.eventsAfterTerminal), out of order \(violations.outOfOrder)\(isClean ? "  (clean)" : "  VIOLATIONS")
        """
    }
}

/// What one operation did.
private enum OperationOutcome: Sendable {
    case success, failure, cancelled, timedOut
}

/// Runs randomised fetches and downloads against the simulated SDK and checks every invariant.
enum StressRunner {
    private struct Plan: Sendable {
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
        return Plan(isDownload: isDownload, behavior: behavior, cancelAfter: cancelAfter, timeout: timeout, size: size)
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

        let showProgress = stressPlan.showProgress
        let total = stressPlan.operations
        let progress = showProgress ? Task {
            while !Task.isCancelled {
                let done = finished.value
                Terminal.progressBar(label: "stress", fraction: Double(done) / Double(max(total, 1)), suffix: "\(done)/\(total) ops")
                try? await Task.sleep(for: .milliseconds(100))
            }
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
        let ended = await runUntil(bound: hangBound) { await work.value }
        progress?.cancel()
        if showProgress { Terminal.endProgress() }
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18

        var summary = StressSummary(
            seed: stressPlan.seed, ops: finished.value, seconds: seconds,
            opsPerSecond: Double(finished.value) / max(seconds, 1e-9))
        tally.fill(&summary)
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
            callbacksAfterCancel: counters.callbacksAfterCancel, reentrantCancelCallbacks: counters.callbacksReentrantCancel,
            contextsCreated: counters.contextsCreated, contextsReleased: counters.contextsReleased,
            handlesOutstanding: counters.handlesOutstanding, streamEvents: counters.streamEvents)
        summary.violations.leakedContexts = Int(counters.contextsCreated - counters.contextsReleased)
        summary.violations.leakedGates = diagnostics.liveGates - before.liveGates
        summary.violations.doubleResume = (diagnostics.resumes - before.resumes) - (diagnostics.suspensions - before.suspensions) > 0
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
                    _ = try await client.fetch(FetchRequest(path: "/stress", responseSize: plan.size), behavior: plan.behavior, timeout: plan.timeout)
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
        var iterator = client.download(DownloadRequest(path: "/stress", totalBytes: plan.size), behavior: plan.behavior)
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
    }
    private let counts = LockedBox(Counts())

    func record(_ outcome: OperationOutcome, download: Bool, afterTerminal: Bool, outOfOrder: Bool) {
        counts.withLock { counts in
            switch outcome {
            case .success: counts.outcomes.success += 1
            case .failure: counts.outcomes.failure += 1
            case .cancelled: counts.outcomes.cancelled += 1
            case .timedOut: counts.outcomes.timedOut += 1
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

/// A counter shared between tasks.
final class AtomicCounter: Sendable {
    private let storage = Atomic<Int>(0)
    var value: Int { storage.load(ordering: .acquiring) }
    /// Adds one; returns the value before.
    @discardableResult
    func increment() -> Int { storage.add(1, ordering: .acquiringAndReleasing).oldValue }
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
