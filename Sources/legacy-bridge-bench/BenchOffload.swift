import Foundation
import LegacyBridge

// The offload pool and the SDK-thread executor: a round trip through each against the same work
// handed to a dedicated pthread by hand, and a burst of blocking calls that must finish near the
// ideal time while the cooperative pool stays free.

enum BenchOffload {
    // MARK: Round trip

    /// Floor: a bare continuation resumed by a dedicated pthread the work was handed to (one lock,
    /// the signal sent after unlocking, nothing else).
    static func floor(_ n: Int, worker: BenchHandoffThread) async -> Double {
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= await withUnsafeContinuation { worker.hand($0, i) }
                worker.confirmDone()
            }
        }
        benchConsume(sum)
        return ns
    }

    /// `OffloadPool.run` on a one-thread pool: the same hand-off, through the pool's queue and gate.
    static func offload(_ n: Int, pool: OffloadPool) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await pool.run { i }
            }
        }
        benchConsume(sum)
        return ns
    }

    static func roundTripVariants(worker: BenchHandoffThread, pool: OffloadPool) -> [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "floor") { await floor($0, worker: worker) },
            BenchBatchVariant(name: "offload") { try await offload($0, pool: pool) },
        ]
    }

    // MARK: SDK-thread executor

    /// Floor: the same work (one counter on the thread) posted to the executor's thread by hand,
    /// a bare continuation resumed there.
    static func executorFloor(_ n: Int, executor: SDKThreadExecutor, state: BenchThreadState) async -> Double {
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= await withUnsafeContinuation { continuation in
                    executor.execute {
                        continuation.resume(returning: state.add(i))
                        state.markResumed()
                    }
                }
                state.confirmResumed()
            }
        }
        benchConsume(sum)
        return ns
    }

    /// A call into an actor whose executor is the SDK thread, from a nonisolated task.
    static func executorActor(_ n: Int, actor: BenchExecutorActor) async -> Double {
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= await actor.work(i)
            }
        }
        benchConsume(sum)
        return ns
    }

    static func executorVariants(executor: SDKThreadExecutor, actor: BenchExecutorActor) -> [BenchBatchVariant] {
        let state = BenchThreadState()
        return [
            BenchBatchVariant(name: "executor floor") { await executorFloor($0, executor: executor, state: state) },
            BenchBatchVariant(name: "executor actor") { await executorActor($0, actor: actor) },
        ]
    }

    // MARK: Burst

    struct BurstResult {
        var milliseconds: Double
        /// Longest time an unrelated task waited to start while the burst ran.
        var poolDelayMaxNs: Double
        var probes: Int
    }

    /// `calls` concurrent calls, each blocking its pool thread for `blockMicroseconds`, on `pool`;
    /// meanwhile a probe starts a fresh task every millisecond and records how long each waited
    /// before it ran.
    static func burst(calls: Int, blockMicroseconds: Int, pool: OffloadPool) async throws -> BurstResult {
        let probe = Task { () -> (Double, Int) in
            var worst = 0.0
            var count = 0
            while !Task.isCancelled {
                let asked = ContinuousClock.now
                let started = await Task { ContinuousClock.now }.value
                worst = max(worst, (started - asked).benchNanoseconds)
                count += 1
                try? await Task.sleep(for: .milliseconds(1))
            }
            return (worst, count)
        }
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<calls {
                group.addTask {
                    try await pool.run { benchBlock(microseconds: blockMicroseconds) }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        probe.cancel()
        let (worst, count) = await probe.value
        return BurstResult(milliseconds: elapsed.benchNanoseconds / 1e6, poolDelayMaxNs: worst, probes: count)
    }

    /// The burst's floor: the same `calls` blocks on `threads` plain pthreads (no pool, no tasks),
    /// each thread taking the next block as soon as its last one returned. This is the ideal
    /// "calls / threads × one block" with what one block really takes on this machine (a 1 ms
    /// `nanosleep` oversleeps by the kernel's timer slack and wake-up latency).
    static func plainThreadsBurst(calls: Int, threads: Int, blockMicroseconds: Int) async -> Double {
        await withCheckedContinuation { (continuation: CheckedContinuation<Double, Never>) in
            let remaining = LockedBox((calls: calls, running: threads))
            let start = ContinuousClock.now
            for index in 0..<threads {
                let thread = Thread {
                    while remaining.withLock({ state -> Bool in
                        guard state.calls > 0 else { return false }
                        state.calls -= 1
                        return true
                    }) {
                        benchBlock(microseconds: blockMicroseconds)
                    }
                    let last = remaining.withLock { state -> Bool in
                        state.running -= 1
                        return state.running == 0
                    }
                    if last { continuation.resume(returning: (ContinuousClock.now - start).benchNanoseconds / 1e6) }
                }
                thread.name = "bench-plain-\(index)"
                thread.start()
            }
        }
    }
}

/// Blocks the calling thread for `microseconds` (a stand-in for a blocking C call).
func benchBlock(microseconds: Int) {
    var request = timespec(tv_sec: microseconds / 1_000_000, tv_nsec: (microseconds % 1_000_000) * 1_000)
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 { request = remaining }
}

/// An actor running on an SDK-thread executor, whose one method updates its state. (A method
/// that touches no actor state lets the optimizer drop the hop altogether: there would be nothing
/// to measure.)
actor BenchExecutorActor {
    let executor: SDKThreadExecutor
    private var total = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    init(executor: SDKThreadExecutor) { self.executor = executor }
    func work(_ value: Int) -> Int {
        total &+= value
        return total
    }
}

/// The floor's counterpart of the actor's state: touched only on the executor's thread.
final class BenchThreadState: @unchecked Sendable {
    // @unchecked Sendable: `total` is read and written only by jobs on the one executor thread;
    // `resumed` and `confirmed` only while `lock` is held.
    private var total = 0
    private let lock = NSLock()
    private var resumed = 0
    private var confirmed = 0

    func add(_ value: Int) -> Int {
        total &+= value
        return total
    }

    /// The job's `resume` call returned.
    func markResumed() {
        lock.withLock { resumed += 1 }
    }

    /// Returns once the job that resumed us has returned from `resume` (normally at once). The
    /// runtime orders that return before our next step with atomics ThreadSanitizer does not see;
    /// this lock makes the order visible (as `BenchThread.confirmJobsDone` does for the other floors).
    func confirmResumed() {
        let target = lock.withLock { () -> Int in
            confirmed += 1
            return confirmed
        }
        while lock.withLock({ resumed < target }) { sched_yield() }
    }
}

/// The leanest hand-off to a dedicated thread: a one-slot mailbox behind a condition, the thread
/// woken after the lock is released (so it never wakes only to wait for the lock), the
/// continuation resumed with the lock released.
final class BenchHandoffThread: @unchecked Sendable {
    // @unchecked Sendable: `slot` and `stopping` are touched only while `condition` is locked.
    private let condition = NSCondition()
    private var slot: (UnsafeContinuation<Int, Never>, Int)?
    private var stopping = false
    private var handed = 0
    private var resumed = 0
    private let stopped = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in self.loop() }
        thread.name = "bench-handoff"
        thread.start()
    }

    /// Hands one continuation and its value to the thread. One at a time.
    func hand(_ continuation: UnsafeContinuation<Int, Never>, _ value: Int) {
        condition.lock()
        precondition(slot == nil, "BenchHandoffThread: one hand-off at a time")
        slot = (continuation, value)
        handed += 1
        condition.unlock()
        condition.signal()
    }

    /// Returns once the thread has returned from every `resume` it made (normally at once): makes
    /// the order visible to ThreadSanitizer, as `BenchThread.confirmJobsDone` does.
    func confirmDone() {
        condition.lock()
        while resumed < handed {
            condition.unlock()
            sched_yield()
            condition.lock()
        }
        condition.unlock()
    }

    /// Ends the thread and waits until it has left its loop (called from the benchmark's driver
    /// after the last hand-off was resumed).
    func stop() {
        condition.lock()
        stopping = true
        condition.unlock()
        condition.signal()
        stopped.wait()
    }

    private func loop() {
        condition.lock()
        while true {
            if let (continuation, value) = slot {
                slot = nil
                condition.unlock()
                continuation.resume(returning: value)
                condition.lock()
                resumed += 1
            } else if stopping {
                break
            } else {
                condition.wait()
            }
        }
        condition.unlock()
        stopped.signal()
    }
}
