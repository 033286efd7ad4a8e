// OffloadPool on real threads. Each test that names an order forces it: bodies block on latches
// the test opens, and the test waits (polling, bounded) for the pool's own state to show the step
// it needs before it takes the racing step.

import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

@Suite("Offload: OffloadPool on real threads")
struct OffloadPoolTests {
    // MARK: Results and errors

    @Test("a blocking call runs on one of the pool's named threads and returns its value")
    func runsOnPoolThread() async throws {
        let pool = try OffloadPool(threads: 2, name: "blocker")
        let observed = try await pool.run { () -> [String] in
            [String(pool.isCurrentThread), offloadCurrentThreadName()]
        }
        #expect(observed[0] == "true")
        #expect(observed[1].hasPrefix("blocker-"), "thread name \(observed[1])")
        #expect(!pool.isCurrentThread)
        await pool.shutdown()
    }

    @Test("an error thrown by the body is thrown to the caller, and the pool goes on")
    func bodyThrows() async throws {
        let pool = try OffloadPool(threads: 1)
        let outcome = await oneShotOutcome {
            try await pool.run { () throws -> Int in throw OneShotTestError(code: 7) }
        }
        #expect(outcome == .failure(7))
        #expect(try await pool.run { 8 } == 8)
        await pool.shutdown()
    }

    @Test("bad configurations are refused with documented errors, not traps")
    func badConfiguration() {
        #expect(throws: OffloadError.invalidThreadCount(0)) { try OffloadPool(threads: 0) }
        #expect(throws: OffloadError.invalidThreadCount(-3)) { try OffloadPool(threads: -3) }
        #expect(throws: OffloadError.invalidThreadCount(OffloadPool.maximumThreads + 1)) {
            try OffloadPool(threads: OffloadPool.maximumThreads + 1)
        }
        #expect(throws: OffloadError.invalidQueueLimit(-1)) { try OffloadPool(threads: 1, queueLimit: -1) }
        #expect(OffloadError.queueFull(limit: 8).description == "offload queue full (limit 8 waiting jobs)")
        #expect(OffloadError.invalidThreadCount(0).description.contains("1 ... \(OffloadPool.maximumThreads)"))
    }

    // MARK: Cancellation

    @Test("a task cancelled before the call gets CancellationError and nothing is submitted")
    func cancelledBeforeCall() async throws {
        let pool = try OffloadPool(threads: 1)
        let ran = OffloadFlag()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pool.run { ran.set() }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(pool.offloadSnapshot.lastAcceptedID == 0)  // nothing was submitted
        try await pool.run {}  // a later call runs after anything the first might have queued
        #expect(!ran.isSet)
        await pool.shutdown()
    }

    @Test("cancel while the call waits for a thread: CancellationError at once, and the body never runs")
    func cancelWhileQueued() async throws {
        let pool = try OffloadPool(threads: 1)
        let blocker = OffloadLatch()
        let blocking = OneShotCall {
            try await pool.run {
                blocker.wait(); return 1
            }
        }
        #expect(await eventually { pool.offloadSnapshot.runningIDs.count == 1 })
        let ran = OffloadFlag()
        let waiting = OneShotCall {
            try await pool.run {
                ran.set(); return 2
            }
        }
        #expect(await eventually { pool.offloadSnapshot.queuedIDs.count == 1 })
        waiting.cancel()
        #expect(await waiting.outcome() == .cancelled)
        #expect(!blocker.isOpen)  // the caller resumed while the only thread was still blocked
        // The job leaves the queue when the call's cancel handle runs, on a job thread.
        #expect(await eventually { pool.offloadSnapshot.queuedIDs.isEmpty })
        blocker.open()
        #expect(await blocking.outcome() == .success(1))
        #expect(try await pool.run { 3 } == 3)  // FIFO: the cancelled call would have run before this one
        #expect(!ran.isSet)
        await pool.shutdown()
    }

    @Test(
        "cancel while the body runs: CancellationError at once, the interrupt is called, the late value goes to onDiscard"
    )
    func cancelWhileRunning() async throws {
        let pool = try OffloadPool(threads: 1)
        let bodyRelease = OffloadLatch()
        let interrupted = OffloadFlag()
        let interruptOnPoolThread = OffloadFlag()
        let discarded = OneShotRecorder<Int>()
        let bodyStarted = OffloadFlag()
        let call = OneShotCall {
            try await pool.run(
                cancel: CancelHandle {
                    if pool.isCurrentThread { interruptOnPoolThread.set() }
                    interrupted.set()
                },
                onDiscard: { discarded.append($0) }
            ) { () -> Int in
                bodyStarted.set()
                bodyRelease.wait()
                return 41
            }
        }
        // The body itself, not only its job: a cancel made after a thread took the job but before
        // the body began skips the body, as for a queued call.
        #expect(await eventually { bodyStarted.isSet })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        #expect(!bodyRelease.isOpen)  // resumed while the body is still blocked
        #expect(await eventually { interrupted.isSet })
        #expect(!interruptOnPoolThread.isSet)
        #expect(discarded.values.isEmpty)
        bodyRelease.open()
        #expect(await eventually { discarded.values == [41] })
        #expect(try await pool.run { 5 } == 5)
        #expect(discarded.values == [41])  // exactly once
        await pool.shutdown()
    }

    @Test("a cancelled call without an interrupt leaves the body to finish; its value still goes to onDiscard")
    func cancelWithoutInterrupt() async throws {
        let pool = try OffloadPool(threads: 1)
        let bodyRelease = OffloadLatch()
        let discarded = OneShotRecorder<Int>()
        let bodyStarted = OffloadFlag()
        let call = OneShotCall {
            try await pool.run(onDiscard: { discarded.append($0) }) {
                bodyStarted.set()
                bodyRelease.wait(); return 9
            }
        }
        // The body itself, not only its job (see above).
        #expect(await eventually { bodyStarted.isSet })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        bodyRelease.open()
        #expect(await eventually { discarded.values == [9] })
        await pool.shutdown()
    }

    @Test("a thread does not take the next call while the previous call's interrupt is still running")
    func interruptHoldsTheThread() async throws {
        let pool = try OffloadPool(threads: 1)
        let bodyRelease = OffloadLatch()
        let interruptRelease = OffloadLatch()
        let interruptStarted = OffloadFlag()
        let bodyStarted = OffloadFlag()
        let first = OneShotCall {
            try await pool.run(
                cancel: CancelHandle {
                    interruptStarted.set()
                    interruptRelease.wait()
                }
            ) { () -> Int in
                bodyStarted.set()
                bodyRelease.wait()
                return 1
            }
        }
        // The body itself, not only its job (see above).
        #expect(await eventually { bodyStarted.isSet })
        let firstID = try #require(pool.offloadSnapshot.runningIDs.first)
        first.cancel()
        #expect(await first.outcome() == .cancelled)
        #expect(await eventually { interruptStarted.isSet })
        let secondStarted = OffloadFlag()
        let second = OneShotCall {
            try await pool.run {
                secondStarted.set(); return 2
            }
        }
        #expect(await eventually { pool.offloadSnapshot.queuedIDs.count == 1 })
        bodyRelease.open()  // the first body returns while its interrupt is still running
        #expect(
            await eventually {
                pool.offloadSnapshot.isAwaitingInterrupt(firstID)
            })
        #expect(pool.offloadSnapshot.queuedIDs.count == 1)
        #expect(!secondStarted.isSet)
        interruptRelease.open()
        #expect(await second.outcome() == .success(2))
        await pool.shutdown()
    }

    @Test(
        "at its timeout a call throws BridgeTimeoutError: a running body is interrupted and its value discarded, a waiting one never runs"
    )
    func timeout() async throws {
        let pool = try OffloadPool(threads: 1)
        let bodyStarted = OffloadFlag()
        let bodyRelease = OffloadLatch()
        let discarded = OneShotRecorder<Int>()
        // The timer cannot be held back: on a loaded machine it can fire before the pool thread
        // takes the call. Both orders are checked, each for what it must do.
        let outcome = await oneShotOutcome {
            try await pool.run(
                timeout: .milliseconds(200), cancel: CancelHandle { bodyRelease.open() },
                onDiscard: { discarded.append($0) }
            ) { () -> Int in
                bodyStarted.set()
                bodyRelease.wait()
                return 3
            }
        }
        #expect(outcome == .timedOut(.milliseconds(200)))
        await pool.shutdown()  // every accepted call has ended once this returns
        if bodyStarted.isSet {
            #expect(bodyRelease.isOpen, "the running body was interrupted")
            #expect(discarded.values == [3])
        } else {
            #expect(discarded.values.isEmpty)
        }
    }

    // MARK: Queueing

    @Test("a full pool refuses the next call with queueFull at once; nothing else is lost")
    func queueBound() async throws {
        let pool = try OffloadPool(threads: 1, queueLimit: 2)
        let blocker = OffloadLatch()
        let calls = [
            OneShotCall {
                try await pool.run {
                    blocker.wait(); return 0
                }
            }
        ]
        #expect(await eventually { pool.offloadSnapshot.runningIDs.count == 1 })
        var waiting: [OneShotCall<Int>] = []
        for index in 1...2 {
            waiting.append(OneShotCall { try await pool.run { index } })
            #expect(await eventually { pool.offloadSnapshot.queuedIDs.count == index })
        }
        let refusedRan = OffloadFlag()
        await #expect(throws: OffloadError.queueFull(limit: 2)) { try await pool.run { refusedRan.set() } }
        #expect(throws: OffloadError.queueFull(limit: 2)) { try pool.execute { refusedRan.set() } }
        blocker.open()
        #expect(await calls[0].outcome() == .success(0))
        #expect(await waiting[0].outcome() == .success(1))
        #expect(await waiting[1].outcome() == .success(2))
        #expect(!refusedRan.isSet)
        await pool.shutdown()
    }

    @Test("waiting calls and posted closures run in the order they were submitted")
    func fifo() async throws {
        let pool = try OffloadPool(threads: 1)
        let blocker = OffloadLatch()
        let order = OneShotRecorder<Int>()
        let first = OneShotCall {
            try await pool.run {
                blocker.wait(); order.append(0); return 0
            }
        }
        #expect(await eventually { pool.offloadSnapshot.runningIDs.count == 1 })
        var calls: [OneShotCall<Int>] = []
        for index in 1...12 {
            if index.isMultiple(of: 3) {
                try pool.execute { order.append(index) }
            } else {
                calls.append(
                    OneShotCall {
                        try await pool.run {
                            order.append(index); return index
                        }
                    })
            }
            #expect(await eventually { pool.offloadSnapshot.queuedIDs.count == index })
        }
        blocker.open()
        _ = await first.outcome()
        for call in calls { _ = await call.outcome() }
        #expect(await eventually { order.values.count == 13 })
        #expect(order.values == Array(0...12))
        await pool.shutdown()
    }

    // MARK: Shutdown

    @Test("shutdown(.drain) runs what waits, refuses new work with shutDown, and returns once the threads left")
    func shutdownDrains() async throws {
        let pool = try OffloadPool(threads: 1)
        let blocker = OffloadLatch()
        let first = OneShotCall {
            try await pool.run {
                blocker.wait(); return 0
            }
        }
        #expect(await eventually { pool.offloadSnapshot.runningIDs.count == 1 })
        let queued = OneShotCall { try await pool.run { 1 } }
        #expect(await eventually { pool.offloadSnapshot.queuedIDs.count == 1 })
        let stopped = OffloadFlag()
        let shutdown = Task {
            await pool.shutdown(.drain)
            stopped.set()
        }
        #expect(await eventually { pool.offloadSnapshot.lifecycle == .draining })
        await #expect(throws: OffloadError.shutDown) { try await pool.run { 2 } }
        #expect(throws: OffloadError.shutDown) { try pool.execute {} }
        #expect(!stopped.isSet)
        blocker.open()
        #expect(await first.outcome() == .success(0))
        #expect(await queued.outcome() == .success(1))
        await shutdown.value
        #expect(pool.offloadSnapshot.lifecycle == .stopped)
        await pool.shutdown()  // again: returns at once
    }

    @Test("shutdown(.rejectQueued): waiting calls throw shutDown and never run; the running one finishes")
    func shutdownRejects() async throws {
        let pool = try OffloadPool(threads: 1)
        let blocker = OffloadLatch()
        let first = OneShotCall {
            try await pool.run {
                blocker.wait(); return 0
            }
        }
        #expect(await eventually { pool.offloadSnapshot.runningIDs.count == 1 })
        let ran = OffloadFlag()
        let queued = OneShotCall {
            try await pool.run {
                ran.set(); return 1
            }
        }
        let postedRan = OffloadFlag()
        try pool.execute { postedRan.set() }
        #expect(await eventually { pool.offloadSnapshot.queuedIDs.count == 2 })
        let shutdown = Task { await pool.shutdown(.rejectQueued) }
        let rejected = await queued.result()
        #expect(throws: OffloadError.shutDown) { try rejected?.get() }
        #expect(!blocker.isOpen)  // rejected at once, while the running call still blocks
        blocker.open()
        #expect(await first.outcome() == .success(0))
        await shutdown.value
        #expect(!ran.isSet && !postedRan.isSet)
    }

    @Test("releasing the last reference drains the pool in the background, then its threads end")
    func releaseDrains() async throws {
        let blocker = OffloadLatch()
        let done = OneShotCounter()
        let core: OneShotWeak
        do {
            let pool = try OffloadPool(threads: 1)
            core = OneShotWeak(pool.core)
            try pool.execute {
                blocker.wait(); done.increment()
            }
            for _ in 0..<3 { try pool.execute { done.increment() } }
        }
        blocker.open()
        #expect(await eventually { done.value == 4 })
        #expect(await eventually { core.object == nil })
    }

    // MARK: Isolation and the cooperative pool

    @Test("a caller on a custom actor resumes on it with at most one hop")
    func actorIsolation() async throws {
        let pool = try OffloadPool(threads: 1)
        let caller = OffloadIsolatedCaller()
        let observation = try #require(await OneShotCall { try await caller.call(pool) }.result()).get()
        #expect(observation.value == 11)
        #expect(observation.afterOnActor)
        #expect(observation.hops <= 1)
        await pool.shutdown()
    }

    @Test("a caller on the main actor resumes on the main actor's queue")
    func mainActorIsolation() async throws {
        let pool = try OffloadPool(threads: 1)
        let key = DispatchSpecificKey<Int>()
        DispatchQueue.main.setSpecific(key: key, value: 1)
        defer { DispatchQueue.main.setSpecific(key: key, value: nil) }
        let onMain = await oneShotOutcome { @MainActor in
            let value = try await pool.run { 12 }
            MainActor.assertIsolated()
            return DispatchQueue.getSpecific(key: key) == 1 ? value : -1
        }
        #expect(onMain == .success(12))
        await pool.shutdown()
    }

    @Test("with more blocking calls in flight than cores, an unrelated task still starts")
    func cooperativePoolStaysFree() async throws {
        let width = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let pool = try OffloadPool(threads: width)
        let blocker = OffloadLatch()
        let calls = (0..<width).map { index in
            OneShotCall {
                try await pool.run {
                    blocker.wait(); return index
                }
            }
        }
        #expect(await eventually { pool.offloadSnapshot.runningIDs.count == width })
        let started = OffloadFlag()
        let unrelated = Task { started.set() }
        #expect(await eventually { started.isSet })
        #expect(!blocker.isOpen)  // it started while every call was still blocked
        blocker.open()
        for (index, call) in calls.enumerated() { #expect(await call.outcome() == .success(index)) }
        await unrelated.value
        await pool.shutdown()
    }
}

/// An actor on a counting executor: every hop onto it is counted.
private actor OffloadIsolatedCaller {
    let executor = OneShotCountingExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }

    struct Observation: Sendable {
        var value: Int
        var afterOnActor: Bool
        var hops: Int
    }

    func call(_ pool: OffloadPool) async throws -> Observation {
        let before = self.executor.hops
        let value = try await pool.run { 11 }
        let hops = self.executor.hops - before
        self.assertIsolated()
        return Observation(value: value, afterOnActor: self.executor.isCurrent, hops: hops)
    }
}
