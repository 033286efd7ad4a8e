// withCallback(scheduler:) on real threads: over a scheduler whose jobs the test runs by hand
// (so every order is forced, nothing sleeps) and over an SDKLoop.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// A scheduler whose posted jobs wait until the test drains them on the test's own thread.
/// `isCurrent` is true only on the thread draining it.
private final class ManualScheduler: Sendable {
    private let jobs = LockedBox<[@Sendable () -> Void]>([])
    private let drainer = LockedBox<pthread_t?>(nil)
    let refuses = AtomicCell<Bool>(false)
    let posts = AtomicCell<Int>(0)

    struct Refused: Error, Equatable {}

    var scheduler: SDKScheduler {
        SDKScheduler(
            post: { [self] job in
                if refuses.load(ordering: .acquiring) { throw Refused() }
                posts.add(1, ordering: .relaxed)
                jobs.withLock { $0.append(job) }
            },
            isCurrent: { [self] in
                drainer.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
            })
    }

    var pending: Int { jobs.withLock { $0.count } }

    /// Waits (polling, the hang bound as upper bound) until `count` jobs are queued.
    func hasQueued(_ count: Int) async -> Bool {
        await eventually { self.pending >= count }
    }

    /// Runs the queued jobs on the calling thread, as the SDK's thread would.
    func drain() {
        drainer.withLock { $0 = pthread_self() }
        let batch = jobs.withLock { queue -> [@Sendable () -> Void] in
            defer { queue = [] }
            return queue
        }
        for job in batch { job() }
        drainer.withLock { $0 = nil }
    }
}

/// What the SDK side saw.
private final class SDKSide: Sendable {
    let startRuns = AtomicCell<Int>(0)
    let startOnSDKThread = AtomicCell<Bool>(false)
    let startRunning = AtomicCell<Bool>(false)
    let handleCalls = AtomicCell<Int>(0)
    let handleOnSDKThread = AtomicCell<Bool>(false)
    let handleCalledDuringStart = AtomicCell<Bool>(false)
    let completion = LockedBox<Completion<Int>?>(nil)

    var starts: Int { startRuns.load(ordering: .acquiring) }
    var handles: Int { handleCalls.load(ordering: .acquiring) }
    var startWasOnSDKThread: Bool { startOnSDKThread.load(ordering: .acquiring) }
    var handleWasOnSDKThread: Bool { handleOnSDKThread.load(ordering: .acquiring) }
    var handleRanDuringStart: Bool { handleCalledDuringStart.load(ordering: .acquiring) }
}

private func outcome(_ task: Task<Int, any Error>) async -> Result<Int, any Error> {
    await task.result
}

@Suite("OneShot: withCallback(scheduler:) on real threads")
struct WithCallbackSchedulerTests {
    /// A call whose start records what it saw and returns a handle that does the same.
    private static func call(
        _ manual: ManualScheduler, _ side: SDKSide, timeout: Duration? = nil,
        during: (@Sendable () -> Void)? = nil
    ) -> Task<Int, any Error> {
        let scheduler = manual.scheduler
        return Task {
            try await withCallback(timeout: timeout, scheduler: scheduler) { completion in
                side.startRunning.store(true, ordering: .releasing)
                side.startRuns.add(1, ordering: .relaxed)
                side.startOnSDKThread.store(scheduler.isCurrent, ordering: .relaxed)
                side.completion.withLock { $0 = completion }
                during?()
                side.startRunning.store(false, ordering: .releasing)
                return CancelHandle {
                    side.handleCalls.add(1, ordering: .relaxed)
                    side.handleOnSDKThread.store(scheduler.isCurrent, ordering: .relaxed)
                    if side.startRunning.load(ordering: .acquiring) {
                        side.handleCalledDuringStart.store(true, ordering: .relaxed)
                    }
                }
            }
        }
    }

    @Test("start is posted and runs on the SDK's thread; the completion's value is returned")
    func startRunsThroughScheduler() async throws {
        let manual = ManualScheduler()
        let side = SDKSide()
        let task = Self.call(manual, side)
        #expect(await manual.hasQueued(1))
        #expect(side.starts == 0)
        manual.drain()
        #expect(side.starts == 1)
        #expect(side.startWasOnSDKThread)
        try #require(side.completion.withLock { $0 }).succeed(42)
        #expect(try await task.value == 42)
        #expect(side.handles == 0)
        side.completion.withLock { $0 = nil }
    }

    @Test("a cancel before the posted start ran: the caller throws CancellationError at once and start never runs")
    func cancelBeforeStart() async throws {
        let manual = ManualScheduler()
        let side = SDKSide()
        let task = Self.call(manual, side)
        #expect(await manual.hasQueued(1))
        task.cancel()
        // Nothing is drained: the caller is back without the SDK's thread.
        let result = await outcome(task)
        #expect(OneShotOutcome(result) == .cancelled)
        manual.drain()
        #expect(side.starts == 0)
        #expect(manual.pending == 0)
        #expect(side.handles == 0)
    }

    @Test("a timeout before the posted start ran: the caller throws BridgeTimeoutError and start never runs")
    func timeoutBeforeStart() async throws {
        let manual = ManualScheduler()
        let side = SDKSide()
        let task = Self.call(manual, side, timeout: .milliseconds(20))
        let result = await outcome(task)
        #expect(OneShotOutcome(result) == .timedOut(.milliseconds(20)))
        #expect(manual.pending == 1)
        manual.drain()
        #expect(side.starts == 0)
    }

    @Test("a cancel after start ran: the handle runs once, through the scheduler, on the SDK's thread")
    func cancelAfterStart() async throws {
        let manual = ManualScheduler()
        let side = SDKSide()
        let task = Self.call(manual, side)
        #expect(await manual.hasQueued(1))
        manual.drain()
        #expect(side.starts == 1)
        task.cancel()
        #expect(OneShotOutcome(await outcome(task)) == .cancelled)
        // The handle is posted, not called: it waits for the SDK's thread.
        #expect(await manual.hasQueued(1))
        #expect(side.handles == 0)
        manual.drain()
        #expect(side.handles == 1)
        #expect(side.handleWasOnSDKThread)
        side.completion.withLock { $0 = nil }
    }

    @Test("a cancel while start runs: the handle runs once, after start returned, on the SDK's thread")
    func cancelDuringStart() async throws {
        let manual = ManualScheduler()
        let side = SDKSide()
        let cancelTask = LockedBox<(@Sendable () -> Void)?>(nil)
        let task = Self.call(manual, side, during: { cancelTask.withLock { $0 }?() })
        cancelTask.withLock { $0 = { task.cancel() } }
        #expect(await manual.hasQueued(1))
        manual.drain()  // start runs, cancels the task inside, returns its handle
        #expect(OneShotOutcome(await outcome(task)) == .cancelled)
        #expect(await manual.hasQueued(1))
        manual.drain()
        #expect(side.handles == 1)
        #expect(!side.handleRanDuringStart)
        #expect(side.handleWasOnSDKThread)
        side.completion.withLock { $0 = nil }
    }

    @Test("a scheduler that refuses the post: the caller throws its error and start never runs")
    func refusedPost() async throws {
        let manual = ManualScheduler()
        manual.refuses.store(true, ordering: .releasing)
        let side = SDKSide()
        let result = await outcome(Self.call(manual, side))
        #expect(throws: ManualScheduler.Refused.self) { try result.get() }
        #expect(side.starts == 0)
    }

    @Test("a caller already on the SDK's thread runs start inline, without a post")
    func inlineOnSDKThread() async throws {
        let wakeups = DispatchSemaphore(value: 0)
        let loop = try SDKLoop(
            name: "wcb-inline", driver: .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() }))
        let posts = OneShotCounter()
        let scheduler = SDKScheduler(
            post: { job in
                posts.increment()
                try loop.post(job)
            },
            isCurrent: { loop.isCurrent })
        let bound = LoopActor(loop: loop)
        let (value, startOnLoop) = try await bound.call(scheduler: scheduler)
        #expect(value == 7)
        #expect(startOnLoop)
        #expect(posts.value == 0)
        await loop.shutdown()
    }

    @Test("a main-actor caller's start runs on the loop thread, and the caller resumes on the main actor")
    @MainActor
    func mainActorCaller() async throws {
        let wakeups = DispatchSemaphore(value: 0)
        let loop = try SDKLoop(
            name: "wcb-main", driver: .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() }))
        let startOnLoop = LockedBox(false)
        let value = try await withCallback(scheduler: loop.scheduler) { (completion: Completion<Int>) in
            startOnLoop.withLock { $0 = loop.isCurrent }
            completion.succeed(5)
            return nil
        }
        MainActor.assertIsolated()
        #expect(value == 5)
        #expect(startOnLoop.withLock { $0 })
        await loop.shutdown()
    }

    @Test("on an SDKLoop: start and the cancel handle run on the loop thread")
    func onSDKLoop() async throws {
        let wakeups = DispatchSemaphore(value: 0)
        let loop = try SDKLoop(
            name: "wcb-loop", driver: .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() }))
        let side = SDKSide()
        let scheduler = loop.scheduler
        let task = Task {
            try await withCallback(scheduler: scheduler) { (completion: Completion<Int>) in
                side.startRuns.add(1, ordering: .relaxed)
                side.startOnSDKThread.store(loop.isCurrent, ordering: .relaxed)
                side.completion.withLock { $0 = completion }
                return CancelHandle {
                    side.handleOnSDKThread.store(loop.isCurrent, ordering: .relaxed)
                    side.handleCalls.add(1, ordering: .releasing)
                }
            }
        }
        #expect(await eventually { side.starts == 1 })
        task.cancel()
        #expect(OneShotOutcome(await outcome(task)) == .cancelled)
        #expect(await eventually { side.handles == 1 })
        #expect(side.startWasOnSDKThread)
        #expect(side.handleWasOnSDKThread)
        side.completion.withLock { $0 = nil }
        await loop.shutdown()
        // Shut down: the next call is refused by the loop, and start never runs.
        let refused = await Task {
            try await withCallback(scheduler: scheduler) { (_: Completion<Int>) in
                side.startRuns.add(1, ordering: .relaxed)
                return nil
            }
        }.result
        #expect(throws: OffloadError.shutDown) { try refused.get() }
        #expect(side.starts == 1)
    }
}

/// An actor on the loop thread, so that its calls are already on the SDK's thread.
private actor LoopActor {
    let loop: SDKLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.executor.asUnownedSerialExecutor() }
    init(loop: SDKLoop) { self.loop = loop }

    func call(scheduler: SDKScheduler) async throws -> (Int, Bool) {
        let loop = self.loop
        let onLoop = LockedBox(false)
        let value = try await withCallback(scheduler: scheduler) { (completion: Completion<Int>) in
            onLoop.withLock { $0 = loop.isCurrent }
            completion.succeed(7)
            return nil
        }
        return (value, onLoop.withLock { $0 })
    }
}
