// Many concurrent blocking calls with random cancellations, interrupts, throwing bodies and a
// bounded queue, then shutdown; and many concurrent calls into an actor on an SDK-thread executor
// mixed with posted closures. Bounded in count; built to run under ThreadSanitizer. Checks that
// every body ran at most once and each value it produced went to exactly one place (its caller or
// onDiscard), that every caller ended, and that the threads ended after shutdown.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

private final class OffloadStressCounters: Sendable {
    let bodiesRun = AtomicCell<Int>(0)
    let bodiesReturningValue = AtomicCell<Int>(0)
    let bodiesThrowing = AtomicCell<Int>(0)
    let interrupts = AtomicCell<Int>(0)
    let discards = AtomicCell<Int>(0)
    let values = AtomicCell<Int>(0)
    let cancelled = AtomicCell<Int>(0)
    let bodyErrors = AtomicCell<Int>(0)
    let queueFull = AtomicCell<Int>(0)
    let other = AtomicCell<Int>(0)
    let doubleRuns = AtomicCell<Int>(0)
}

/// Whether a call's body ran, set once.
private final class OffloadRunMark: Sendable {
    let ran = AtomicCell<Int>(0)
    let interrupted = AtomicCell<Bool>(false)
}

@Suite("Offload: under concurrent stress")
struct OffloadStressTests {
    @Test(
        "2,000 blocking calls with random cancels, interrupts and throws: each value delivered or discarded exactly once",
        .timeLimit(.minutes(5)))
    func poolStress() async throws {
        let counters = OffloadStressCounters()
        let calls = 2_000
        let core: OneShotWeak
        do {
            let pool = try OffloadPool(threads: 4, queueLimit: 1_800)
            core = OneShotWeak(pool.core)
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<calls {
                    let task = startStressCall(index, pool: pool, counters: counters)
                    if index % 3 == 0 {
                        group.addTask {
                            for _ in 0..<(index % 5) { await Task.yield() }
                            task.cancel()
                        }
                    }
                    group.addTask {
                        do {
                            _ = try await task.value
                            counters.values.add(1, ordering: .relaxed)
                        } catch is CancellationError {
                            counters.cancelled.add(1, ordering: .relaxed)
                        } catch is OneShotTestError {
                            counters.bodyErrors.add(1, ordering: .relaxed)
                        } catch OffloadError.queueFull {
                            counters.queueFull.add(1, ordering: .relaxed)
                        } catch {
                            counters.other.add(1, ordering: .relaxed)
                        }
                    }
                }
            }
            await pool.shutdown()
            #expect(pool.offloadSnapshot.lifecycle == .stopped)
        }
        let run = counters.bodiesRun.load(ordering: .acquiring)
        let valued = counters.bodiesReturningValue.load(ordering: .acquiring)
        let values = counters.values.load(ordering: .acquiring)
        let discards = counters.discards.load(ordering: .acquiring)
        let ended =
            values + counters.cancelled.load(ordering: .acquiring) + counters.bodyErrors.load(ordering: .acquiring)
            + counters.queueFull.load(ordering: .acquiring)
        #expect(counters.doubleRuns.load(ordering: .acquiring) == 0)
        #expect(counters.other.load(ordering: .acquiring) == 0)
        #expect(ended == calls, "every caller ends exactly once")
        #expect(
            values + discards == valued,
            "each value goes to its caller or to onDiscard: \(values) + \(discards) vs \(valued)")
        #expect(counters.bodyErrors.load(ordering: .acquiring) <= counters.bodiesThrowing.load(ordering: .acquiring))
        #expect(run <= calls)
        #expect(await eventually { core.object == nil })
    }

    @Test(
        "8 tasks × 300 calls into an SDK-thread actor, with posted closures in between: one thread, nothing lost",
        .timeLimit(.minutes(5)))
    func executorStress() async throws {
        let executor = try SDKThreadExecutor()
        let counter = OffloadStressActor(executor: executor)
        let posted = OneShotCounter()
        let offThread = OneShotCounter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for step in 0..<300 {
                        if !(await counter.add()) { offThread.increment() }
                        if step.isMultiple(of: 10) {
                            executor.execute {
                                if !executor.isCurrentThread { offThread.increment() }
                                posted.increment()
                            }
                        }
                    }
                }
            }
        }
        #expect(await counter.total == 2_400)
        _ = try await executor.run { 0 }  // everything posted before this has run
        #expect(posted.value == 240)
        #expect(offThread.value == 0)
    }
}

/// Starts one stress call in its own task.
private func startStressCall(_ index: Int, pool: OffloadPool, counters: OffloadStressCounters) -> Task<Int, any Error> {
    let mark = OffloadRunMark()
    var interrupt: (@Sendable () -> Void)? = nil
    if index.isMultiple(of: 2) {
        interrupt = {
            mark.interrupted.store(true, ordering: .releasing)
            counters.interrupts.add(1, ordering: .relaxed)
        }
    }
    let chosenInterrupt = interrupt
    // A third of the calls cancel their own task from inside the body: a cancel while running.
    let own = LockedBox<Task<Int, any Error>?>(nil)
    let task = Task {
        try await pool.run(
            cancel: chosenInterrupt.map(CancelHandle.init),
            onDiscard: { _ in counters.discards.add(1, ordering: .relaxed) }
        ) { () throws -> Int in
            if mark.ran.add(1, ordering: .relaxed).newValue > 1 { counters.doubleRuns.add(1, ordering: .relaxed) }
            counters.bodiesRun.add(1, ordering: .relaxed)
            if index % 3 == 1 { own.withLock { $0 }?.cancel() }
            // Busy for a moment, or until interrupted (bounded either way). The moment is measured on
            // the clock: a loop of `sched_yield` here took a full time slice per call whenever other
            // processes wanted the CPU, and under ThreadSanitizer on a busy machine ran for minutes.
            let busyUntil = ContinuousClock.now + .microseconds((index % 7) * 40)
            while ContinuousClock.now < busyUntil && !mark.interrupted.load(ordering: .acquiring) {}
            if index % 11 == 0 {
                counters.bodiesThrowing.add(1, ordering: .relaxed)
                throw OneShotTestError(code: index)
            }
            counters.bodiesReturningValue.add(1, ordering: .relaxed)
            return index
        }
    }
    own.withLock { $0 = task }
    return task
}

private actor OffloadStressActor {
    let executor: SDKThreadExecutor
    var total = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(executor: SDKThreadExecutor) { self.executor = executor }
    func add() -> Bool {
        total += 1
        return executor.isCurrentThread
    }
}
