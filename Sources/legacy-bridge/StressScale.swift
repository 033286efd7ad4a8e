import Foundation
import LegacyBridge
import ToolSupport

// `stress --scale`: beside the usual operations against the simulated SDK, thousands of one-shot
// calls in flight at once whose SDK cancel is slow (it blocks a few milliseconds), each cancelled,
// timed out or completed late. What must hold: every caller comes back; every cancel or timeout
// calls its handle exactly once; a completion made from inside the handle always loses and goes
// to onDiscard; the library never runs more job threads than `BridgeThreads.limit`.

/// What the slow-cancel load did, and what it found wrong.
struct StressScaleSummary: Codable, Sendable {
    var calls = 0
    var completed = 0
    var cancelled = 0
    var timedOut = 0
    /// Cancel handles called (each blocks a few milliseconds, like a slow SDK cancel).
    var handleCalls = 0
    /// Completions made from inside a handle, each of which must lose and reach onDiscard.
    var reentrantCompletions = 0
    var discarded = 0
    /// Calls that ended with an outcome their plan cannot have (a completion from a handle that
    /// won, another call's value).
    var unexpectedOutcomes = 0
    var peakLibraryThreads = 0
    var threadLimit = 0

    /// Handle calls that do not match the cancels and timeouts (0 when clean).
    var handleMiscount: Int { abs(handleCalls - (cancelled + timedOut)) }
    /// Completions from a handle that did not reach onDiscard, or won (0 when clean).
    var discardMiscount: Int { abs(discarded - reentrantCompletions) }
    /// Library job threads beyond the limit at the peak (0 when clean).
    var threadsOverLimit: Int { max(0, peakLibraryThreads - threadLimit) }

    var violations: Int { handleMiscount + discardMiscount + threadsOverLimit + unexpectedOutcomes }
}

enum StressScale {
    /// Counters shared by the load's calls.
    private final class Tally: Sendable {
        let completed = AtomicCell<Int>(0)
        let cancelled = AtomicCell<Int>(0)
        let timedOut = AtomicCell<Int>(0)
        let handleCalls = AtomicCell<Int>(0)
        let reentrant = AtomicCell<Int>(0)
        let discarded = AtomicCell<Int>(0)
        let other = AtomicCell<Int>(0)
    }

    /// One call's plan, drawn from the seed.
    private struct Plan {
        enum Ending {
            /// Completed from a task after this many microseconds.
            case completes(UInt64)
            /// Its task is cancelled after this many microseconds.
            case cancelled(UInt64)
            /// Times out after this many microseconds.
            case timesOut(Int64)
        }
        var ending: Ending
        /// How long its cancel handle blocks, in microseconds.
        var cancelCost: UInt32
        /// Whether the handle calls the completion back synchronously.
        var reentrant: Bool
    }

    private static func plan(_ index: Int, seed: UInt64) -> Plan {
        var random = SplitMixGenerator(seed: seed ^ 0x5CA1E ^ (UInt64(index) &* 0xA24B_AED4_963E_E407))
        let ending: Plan.Ending
        switch random.next() % 3 {
        case 0: ending = .completes(random.next() % 5_000)
        case 1: ending = .cancelled(random.next() % 5_000)
        default: ending = .timesOut(500 + Int64(random.next() % 5_000))
        }
        return Plan(ending: ending, cancelCost: 500 + UInt32(random.next() % 2_500), reentrant: random.next() % 2 == 0)
    }

    /// Runs `calls` slow-cancel calls, `concurrency` at a time, stopping new ones at `deadline`;
    /// returns once every call is back and every handle it owes has run (or `bound` passed).
    static func run(
        calls: Int, concurrency: Int, seed: UInt64, deadline: ContinuousClock.Instant, bound: Duration
    ) async -> StressScaleSummary {
        let census = LibraryThreadCensus()
        let tally = Tally()
        let next = AtomicCounter()
        let started = AtomicCounter()
        await withDiscardingTaskGroup { group in
            for _ in 0..<max(1, min(concurrency, calls)) {
                group.addTask {
                    while true {
                        let index = next.increment()
                        guard index < calls, ContinuousClock.now < deadline else { return }
                        started.increment()
                        await one(plan(index, seed: seed), index: index, tally: tally)
                    }
                }
            }
        }
        // Callers are back; handles may still be on their way (they run on job threads).
        let owed = { tally.cancelled.load(ordering: .acquiring) + tally.timedOut.load(ordering: .acquiring) }
        _ = await eventuallyTrue(within: bound) {
            tally.handleCalls.load(ordering: .acquiring) >= owed()
                && tally.discarded.load(ordering: .acquiring) >= tally.reentrant.load(ordering: .acquiring)
        }
        let peaks = census.stop()
        return StressScaleSummary(
            calls: started.value, completed: tally.completed.load(ordering: .acquiring),
            cancelled: tally.cancelled.load(ordering: .acquiring), timedOut: tally.timedOut.load(ordering: .acquiring),
            handleCalls: tally.handleCalls.load(ordering: .acquiring),
            reentrantCompletions: tally.reentrant.load(ordering: .acquiring),
            discarded: tally.discarded.load(ordering: .acquiring),
            unexpectedOutcomes: tally.other.load(ordering: .acquiring), peakLibraryThreads: peaks.library,
            threadLimit: BridgeThreads.limit)
    }

    private static func one(_ plan: Plan, index: Int, tally: Tally) async {
        var timeout: Duration? = nil
        if case .timesOut(let micros) = plan.ending { timeout = .microseconds(micros) }
        let task = Task {
            try await withCallback(timeout: timeout, onDiscard: { _ in tally.discarded.add(1, ordering: .relaxed) }) {
                (completion: Completion<Int>) in
                if case .completes(let micros) = plan.ending {
                    Task {
                        try? await Task.sleep(for: .microseconds(micros))
                        completion.succeed(index)
                    }
                }
                return CancelHandle {
                    tally.handleCalls.add(1, ordering: .relaxed)
                    usleep(plan.cancelCost)  // a slow SDK cancel
                    if plan.reentrant {
                        tally.reentrant.add(1, ordering: .relaxed)
                        completion.succeed(-1)  // the SDK reports from inside its cancel: must lose
                    }
                }
            }
        }
        if case .cancelled(let micros) = plan.ending {
            try? await Task.sleep(for: .microseconds(micros))
            task.cancel()
        }
        switch await task.result {
        case .success(let value) where value == index: tally.completed.add(1, ordering: .relaxed)
        case .failure(is CancellationError): tally.cancelled.add(1, ordering: .relaxed)
        case .failure(is BridgeTimeoutError): tally.timedOut.add(1, ordering: .relaxed)
        default: tally.other.add(1, ordering: .relaxed)
        }
    }
}
