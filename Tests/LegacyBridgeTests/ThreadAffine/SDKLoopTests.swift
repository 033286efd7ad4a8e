// SDKLoop on a real thread, over two stand-in SDK loops: one the library iterates (its wait is a
// semaphore, its wake a sticky signal), one that runs itself and runs the library's jobs inside.
// Orders are forced with the loops' own events; nothing sleeps to guess a schedule.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// A stand-in for an iterable SDK loop (a GLib main context, libuv): `runOnce` waits until the
/// SDK has an event or a wake came, then dispatches the SDK's events. Counts iterations and wakes.
private final class IterableSDK: Sendable {
    private let signal = DispatchSemaphore(value: 0)
    private let events = LockedBox<[@Sendable () -> Void]>([])
    let iterations = AtomicCell<Int>(0)
    let wakes = AtomicCell<Int>(0)

    /// An SDK callback, to run on the loop thread at its next iteration.
    func raise(_ event: @escaping @Sendable () -> Void) {
        events.withLock { $0.append(event) }
        signal.signal()
    }

    var driver: SDKLoop.Driver {
        .iterating(
            runOnce: { [self] in
                signal.wait()
                iterations.add(1, ordering: .relaxed)
                for event in events.withLock({ queue -> [@Sendable () -> Void] in
                    defer { queue = [] }; return queue
                }) {
                    event()
                }
            },
            wake: { [self] in
                wakes.add(1, ordering: .relaxed)
                signal.signal()
            })
    }
}

/// A stand-in for an SDK whose loop only runs whole (`g_main_loop_run`): it runs what is scheduled
/// into it until stopped.
private final class RunningSDK: Sendable {
    private let signal = DispatchSemaphore(value: 0)
    /// When set, the loop takes its next batch of scheduled work only after the test signals it.
    let gate: DispatchSemaphore?
    let scheduledCount = AtomicCell<Int>(0)

    init(gated: Bool = false) {
        gate = gated ? DispatchSemaphore(value: 0) : nil
    }
    private let scheduled = LockedBox<[@Sendable () -> Void]>([])
    /// SDK callbacks to make on the loop thread, inside `run` and outside any drain.
    private let events = LockedBox<[@Sendable () -> Void]>([])
    private let stopped = AtomicCell<Bool>(false)

    /// Makes the SDK call `event` on its loop thread, as one of its own callbacks.
    func raise(_ event: @escaping @Sendable () -> Void) {
        events.withLock { $0.append(event) }
        signal.signal()
    }
    let stops = AtomicCell<Int>(0)

    var driver: SDKLoop.Driver {
        .running(
            run: { [self] in
                while !stopped.load(ordering: .acquiring) {
                    signal.wait()
                    gate?.wait()
                    for event in takeAll(events) { event() }
                    for job in scheduled.withLock({ queue -> [@Sendable () -> Void] in
                        defer { queue = [] }; return queue
                    }) {
                        job()
                    }
                }
                // A stopped loop lets go of what it was given, as a real one does when it is
                // freed: a drain kept here would hold the SDKLoop, which holds this driver.
                _ = takeAll(scheduled)
                _ = takeAll(events)
            },
            schedule: { [self] drain in
                scheduled.withLock { $0.append(drain) }
                scheduledCount.add(1, ordering: .relaxed)
                signal.signal()
            },
            stop: { [self] in
                stops.add(1, ordering: .relaxed)
                stopped.store(true, ordering: .releasing)
            })
    }
}

/// Empties a locked queue and returns what it held.
private func takeAll(_ queue: LockedBox<[@Sendable () -> Void]>) -> [@Sendable () -> Void] {
    queue.withLock { queue in
        defer { queue = [] }
        return queue
    }
}

private final class JobLog: Sendable {
    private let entries = LockedBox<[Int]>([])
    private let offLoop = AtomicCell<Int>(0)
    func record(_ value: Int, onLoop: Bool) {
        entries.withLock { $0.append(value) }
        if !onLoop { offLoop.add(1, ordering: .relaxed) }
    }
    /// A copy made inside the lock: the reader never shares a buffer a writer may still grow.
    var all: [Int] { entries.withLock { $0.map { $0 } } }
    var ranOffLoop: Int { offLoop.load(ordering: .relaxed) }
}

private actor LoopBound {
    let loop: SDKLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.executor.asUnownedSerialExecutor() }
    init(loop: SDKLoop) { self.loop = loop }
    func onLoopThread() -> Bool { loop.isCurrent }
}

@Suite("ThreadAffine: SDKLoop on a real thread")
struct SDKLoopTests {
    @Test("jobs posted from one thread run in order, on the loop thread, each once")
    func fifoOnLoopThread() async throws {
        let sdk = IterableSDK()
        let loop = try SDKLoop(name: "loop-fifo", driver: sdk.driver)
        let log = JobLog()
        for value in 0..<200 {
            try loop.post { log.record(value, onLoop: loop.isCurrent) }
        }
        await loop.shutdown()
        #expect(log.all == Array(0..<200))
        #expect(log.ranOffLoop == 0)
        #expect(!loop.isCurrent)
    }

    @Test(
        "a job posted from an SDK callback on the loop thread wakes the loop once; a job posted by that job runs in the same drain, with no wake"
    )
    func postFromLoopThreadWakesOutsideDrain() async throws {
        let sdk = IterableSDK()
        let loop = try SDKLoop(name: "loop-self", driver: sdk.driver)
        let log = JobLog()
        let done = DispatchSemaphore(value: 0)
        sdk.raise {
            try? loop.post {
                log.record(1, onLoop: loop.isCurrent)
                try? loop.post {
                    log.record(2, onLoop: loop.isCurrent)
                    done.signal()
                }
            }
        }
        #expect(await eventually(within: Double(testHangBoundSeconds)) { done.wait(timeout: .now()) == .success })
        #expect(log.all == [1, 2])
        #expect(log.ranOffLoop == 0)
        let wakes = sdk.wakes.load(ordering: .relaxed)
        #expect(wakes == 1, "the SDK callback's post wakes the loop once; the job's own post needs no wake")
        await loop.shutdown()
    }

    @Test("a running driver runs a job posted from inside one of the SDK's callbacks, though no other thread posts")
    func runningDriverPostFromCallback() async throws {
        let sdk = RunningSDK()
        let loop = try SDKLoop(name: "loop-run-cb", driver: sdk.driver)
        let ran = DispatchSemaphore(value: 0)
        // Outside the library's drain the SDK's loop waits next: unless this post wakes it, the
        // job waits for some other thread's post, which never comes.
        sdk.raise {
            try? loop.post { ran.signal() }
        }
        #expect(await eventually(within: Double(testHangBoundSeconds)) { ran.wait(timeout: .now()) == .success })
        await loop.shutdown()
    }

    @Test(
        "shutdown runs every job accepted before it, refuses later ones with shutDown, and returns after the thread left"
    )
    func shutdownDrains() async throws {
        let sdk = IterableSDK()
        let loop = try SDKLoop(name: "loop-drain", driver: sdk.driver)
        let log = JobLog()
        let gate = DispatchSemaphore(value: 0)
        // The first job holds the loop thread, so the others are still queued when shutdown begins.
        try loop.post {
            gate.wait()
            log.record(0, onLoop: true)
        }
        for value in 1...5 { try loop.post { log.record(value, onLoop: loop.isCurrent) } }
        let shutdown = Task { await loop.shutdown() }
        #expect(await eventually(within: Double(testHangBoundSeconds)) { !loop.core.acceptsJobs })
        #expect(throws: OffloadError.shutDown) { try loop.post { log.record(99, onLoop: true) } }
        gate.signal()
        await shutdown.value
        #expect(log.all == [0, 1, 2, 3, 4, 5])
        #expect(loop.core.isGone)
        await loop.shutdown()  // harmless again
        await #expect(throws: OffloadError.shutDown) { try await loop.run { 1 } }
    }

    @Test("releasing the loop shuts it down in the background; accepted jobs still run")
    func releaseDrains() async throws {
        let sdk = IterableSDK()
        let log = JobLog()
        let core: SDKLoopCore
        do {
            let loop = try SDKLoop(name: "loop-release", driver: sdk.driver)
            core = loop.core
            for value in 0..<10 { try loop.post { log.record(value, onLoop: core.isCurrent) } }
        }
        #expect(await eventually(within: Double(testHangBoundSeconds)) { core.isGone })
        #expect(log.all == Array(0..<10))
        #expect(log.ranOffLoop == 0)
    }

    @Test("run returns the closure's value from the loop thread; an actor on its executor runs there")
    func runAndExecutor() async throws {
        let sdk = IterableSDK()
        let loop = try SDKLoop(name: "loop-run", driver: sdk.driver)
        #expect(try await loop.run { loop.isCurrent })
        await #expect(throws: CancellationError.self) {
            try await loop.run { () throws -> Int in throw CancellationError() }
        }
        let bound = LoopBound(loop: loop)
        #expect(await bound.onLoopThread())
        #expect(loop.scheduler.knowsCurrentThread)
        let posted = DispatchSemaphore(value: 0)
        let onLoop = AtomicCell<Bool>(false)
        try loop.scheduler.post {
            onLoop.store(loop.scheduler.isCurrent, ordering: .relaxed)
            posted.signal()
        }
        #expect(await eventually(within: Double(testHangBoundSeconds)) { posted.wait(timeout: .now()) == .success })
        let ranOnLoop = onLoop.load(ordering: .relaxed)
        #expect(ranOnLoop)
        await loop.shutdown()
    }

    @Test("a running driver runs the jobs inside the SDK's own loop and is stopped once, after the last job")
    func runningDriver() async throws {
        let sdk = RunningSDK()
        let loop = try SDKLoop(name: "loop-running", driver: sdk.driver)
        let log = JobLog()
        for value in 0..<50 { try loop.post { log.record(value, onLoop: loop.isCurrent) } }
        #expect(try await loop.run { loop.isCurrent })
        await loop.shutdown()
        #expect(log.all == Array(0..<50))
        #expect(log.ranOffLoop == 0)
        let stops = sdk.stops.load(ordering: .relaxed)
        #expect(stops == 1)
    }

    @Test("a running driver that runs two drains in one batch, the second after the exit: shutdown still returns")
    func staleDrainAfterExit() async throws {
        let sdk = RunningSDK(gated: true)
        let loop = try SDKLoop(name: "loop-stale", driver: sdk.driver)
        let log = JobLog()
        try loop.post { log.record(1, onLoop: loop.isCurrent) }  // schedules drain #1
        let shutdown = Task { await loop.shutdown() }  // schedules drain #2
        #expect(
            await eventually(within: Double(testHangBoundSeconds)) { sdk.scheduledCount.load(ordering: .relaxed) == 2 })
        sdk.gate?.signal()  // both drains run in one batch: #1 runs the job and exits, #2 finds nothing
        await shutdown.value
        #expect(log.all == [1])
        #expect(loop.core.isGone)
    }

    @Test("many threads post at once: every job runs exactly once, each poster's jobs in its order")
    func concurrentPosters() async throws {
        let sdk = IterableSDK()
        let loop = try SDKLoop(name: "loop-many", driver: sdk.driver)
        let log = JobLog()
        let posters = 4
        let perPoster = 2_000
        DispatchQueue.concurrentPerform(iterations: posters) { poster in
            for index in 0..<perPoster {
                try? loop.post { log.record(poster * perPoster + index, onLoop: loop.isCurrent) }
            }
        }
        await loop.shutdown()
        let all = log.all
        #expect(all.count == posters * perPoster)
        #expect(Set(all).count == all.count)
        for poster in 0..<posters {
            let mine = all.filter { $0 / perPoster == poster }
            #expect(mine == mine.sorted())
        }
        #expect(log.ranOffLoop == 0)
    }
}
