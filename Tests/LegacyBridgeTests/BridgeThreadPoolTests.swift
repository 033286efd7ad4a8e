// The library's job threads on real threads: the bound holds under a storm (the pool's own
// thread starts are counted), a refused thread start neither stops the process nor loses a job,
// and jobs within the bound never wait for one another. Each test uses a pool of its own with an
// injected thread starter; the shared pool's limit is the public `BridgeThreads.limit`.

import ToolSupport
import Dispatch
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@testable import LegacyBridge

/// Starts threads for a test pool, counting them, and refuses while told to.
private final class CountingStarter: Sendable {
    let started = AtomicCell<Int>(0)
    let refused = AtomicCell<Int>(0)
    let refusing = AtomicCell<Bool>(false)

    var starter: BridgeThreadPool.ThreadStarter {
        { [self] name, body in
            if refusing.load(ordering: .acquiring) {
                refused.add(1, ordering: .relaxed)
                return EAGAIN
            }
            let rc = startDetachedThread(name: name, body)
            if rc == 0 { started.add(1, ordering: .relaxed) }
            return rc
        }
    }
}

/// Counts jobs running at once and the most there were.
private final class Concurrency: Sendable {
    let running = AtomicCell<Int>(0)
    let peak = AtomicCell<Int>(0)
    let finished = AtomicCell<Int>(0)

    func enter() {
        let now = running.add(1, ordering: .acquiringAndReleasing).newValue
        _ = peak.max(now, ordering: .relaxed)
    }

    func leave() {
        running.subtract(1, ordering: .acquiringAndReleasing)
        finished.add(1, ordering: .acquiringAndReleasing)
    }
}

@Suite("Job threads: the library's bounded set of threads for calls that may block")
struct BridgeThreadPoolTests {
    @Test("a storm of blocking jobs never has more threads than the limit; the rest wait, then all run")
    func stormStaysWithinTheLimit() async {
        let starter = CountingStarter()
        let pool = BridgeThreadPool(name: "test-storm", limit: 4, startThread: starter.starter)
        defer { pool.shutdown() }  // its threads end with the test
        let latch = OffloadLatch()
        let concurrency = Concurrency()
        for _ in 0..<200 {
            pool.run {
                concurrency.enter()
                latch.wait()
                concurrency.leave()
            }
        }
        // Every thread the limit allows is now blocked in a job; the others wait.
        #expect(await eventually { concurrency.running.load(ordering: .acquiring) == 4 })
        #expect(pool.snapshot.queuedJobs == 196)
        #expect(starter.started.load(ordering: .relaxed) == 4)
        latch.open()
        #expect(await eventually { concurrency.finished.load(ordering: .acquiring) == 200 })
        #expect(concurrency.peak.load(ordering: .relaxed) == 4)
        #expect(starter.started.load(ordering: .relaxed) == 4, "the pool started more threads than its limit")
        #expect(pool.snapshot.peakThreads == 4)
    }

    @Test("jobs within the limit that block until all of them have started all run at once")
    func blockedJobsDoNotQueueBehindEachOther() {
        // Each job waits until every job has started. If a job ever waited for a thread another
        // job holds, the count would stop short and the jobs would give up at the hang bound.
        let count = 12
        let pool = BridgeThreadPool(name: "test-wide", limit: count)
        defer { pool.shutdown() }  // its threads end with the test
        let started = Concurrency()
        let sawAll = Concurrency()
        let allStarted = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            pool.run {
                started.enter()
                if started.peak.load(ordering: .acquiring) == count {
                    for _ in 0..<count { allStarted.signal() }
                }
                if allStarted.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success {
                    sawAll.enter()
                }
                finished.signal()
            }
        }
        for _ in 0..<count { finished.wait() }
        #expect(sawAll.running.load(ordering: .acquiring) == count)
    }

    @Test("a job posted while a thread is parked wakes it instead of starting another")
    func parkedThreadsAreReused() async {
        let starter = CountingStarter()
        let pool = BridgeThreadPool(name: "test-reuse", limit: 8, startThread: starter.starter)
        defer { pool.shutdown() }  // its threads end with the test
        let ran = AtomicCell<Int>(0)
        for round in 1...50 {
            pool.run { ran.add(1, ordering: .relaxed) }
            // The job ran and its thread parked again.
            #expect(
                await eventually {
                    let machine = pool.snapshot
                    return ran.load(ordering: .relaxed) == round && machine.parked == machine.threads
                })
        }
        #expect(starter.started.load(ordering: .relaxed) == 1)
    }

    @Test("a refused thread start with a thread alive: the job waits and runs on that thread, nothing stops")
    func refusedStartRunsOnAnExistingThread() async {
        let starter = CountingStarter()
        let pool = BridgeThreadPool(name: "test-refused", limit: 4, startThread: starter.starter)
        defer { pool.shutdown() }  // its threads end with the test
        let latch = OffloadLatch()
        let order = LockedBox<[Int]>([])
        pool.run {
            order.withLock { $0.append(1) }
            latch.wait()
        }
        #expect(await eventually { order.withLock { $0 == [1] } })
        starter.refusing.store(true, ordering: .releasing)
        pool.run { order.withLock { $0.append(2) } }
        #expect(starter.refused.load(ordering: .relaxed) == 1)
        #expect(pool.snapshot.threads == 1 && pool.snapshot.queuedJobs == 1)
        latch.open()
        #expect(await eventually { order.withLock { $0 == [1, 2] } })
    }

    @Test("a refused thread start with no thread at all: the job is kept and runs once a later job starts a thread")
    func refusedStartRetriedByTheNextJob() async {
        let starter = CountingStarter()
        starter.refusing.store(true, ordering: .releasing)
        let pool = BridgeThreadPool(name: "test-none", limit: 4, startThread: starter.starter)
        defer { pool.shutdown() }  // its threads end with the test
        let order = LockedBox<[Int]>([])
        pool.run { order.withLock { $0.append(1) } }
        pool.run { order.withLock { $0.append(2) } }
        #expect(starter.refused.load(ordering: .relaxed) == 2)
        #expect(pool.snapshot.threads == 0 && pool.snapshot.queuedJobs == 2)
        starter.refusing.store(false, ordering: .releasing)
        pool.run { order.withLock { $0.append(3) } }
        #expect(await eventually { order.withLock { $0 == [1, 2, 3] } })
    }

    @Test("a refused thread start with no thread and no later job: the pool tries again by itself")
    func refusedStartRetriedByTheTimer() async {
        let starter = CountingStarter()
        starter.refusing.store(true, ordering: .releasing)
        let pool = BridgeThreadPool(name: "test-retry", limit: 4, startThread: starter.starter)
        defer { pool.shutdown() }  // its threads end with the test
        let ran = OffloadFlag()
        pool.run { ran.set() }
        // The retry comes from the timer thread; refused again, it is asked for again.
        #expect(await eventually { starter.refused.load(ordering: .relaxed) >= 2 })
        #expect(!ran.isSet)
        starter.refusing.store(false, ordering: .releasing)
        #expect(await eventually { ran.isSet })
    }

    @Test("a pool thread knows it is one, and the shared pool's limit is BridgeThreads.limit")
    func identity() async {
        let pool = BridgeThreadPool(name: "test-identity", limit: 2)
        defer { pool.shutdown() }  // its threads end with the test
        let onPool = OffloadFlag()
        pool.run { if pool.isCurrentThread { onPool.set() } }
        #expect(await eventually { onPool.isSet })
        #expect(!pool.isCurrentThread)
        #expect(BridgeThreads.limit == BridgeThreadPool.shared.limit)
        #expect(BridgeThreads.defaultLimit >= 64)
    }
}

/// `BridgeThreads.limit` changes the process-wide pool, so these run in child processes of their
/// own (exit tests), where no other test shares it.
@Suite("Job threads: BridgeThreads.limit")
struct BridgeThreadsLimitTests {
    @Test(
        "a limit set at start-up bounds the shared job threads: a storm of slow cancels runs on that many",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func limitBoundsTheSharedPool() async {
        await #expect(processExitsWith: .success) {
            BridgeThreads.limit = 3
            precondition(BridgeThreads.limit == 3)
            let latch = OffloadLatch()
            let running = AtomicCell<Int>(0)
            let calls = (0..<20).map { _ in
                OneShotCall {
                    try await withCallback { (_: Completion<Int>) in
                        CancelHandle {
                            running.add(1, ordering: .relaxed)
                            latch.wait()
                        }
                    }
                }
            }
            for call in calls { call.cancel() }
            for call in calls {
                let outcome = await call.outcome(within: 60)
                precondition(outcome == .cancelled)
            }
            let three = await eventually(within: Double(60)) { running.load(ordering: .relaxed) == 3 }
            precondition(three, "the limit's threads did not all take a cancel")
            let machine = BridgeThreadPool.shared.snapshot
            precondition(machine.threads == 3 && machine.peakThreads == 3 && machine.queuedJobs == 17)
            latch.open()
            let all = await eventually(within: Double(60)) { running.load(ordering: .relaxed) == 20 }
            precondition(all)
        }
    }

    @Test(
        "a limit outside 1 ... maximumLimit stops with a message saying what to pass",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func invalidLimit() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            BridgeThreads.limit = 0
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("BridgeThreads.limit must be between 1 and 1024, not 0"))
        }
    }
}
