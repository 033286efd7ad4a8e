// The library's timer thread: its heap against a sorted model, cancellation that releases at once,
// an earlier deadline scheduled after a later one, timeouts that fire while every cooperative
// thread is blocked (the reason the timers do not live on the pool), where each kind of action
// runs, and the clock the thread sleeps on.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing

@testable import LegacyBridge

@Suite("Deadline timers: the library's timer thread")
struct DeadlineTimersTests {
    @Test("the heap gives timers back by deadline, then by scheduling order, through random inserts and removals")
    func heapMatchesModel() {
        var generator = SystemRandomNumberGenerator()
        let origin = ContinuousClock.now
        for round in 0..<200 {
            var heap = DeadlineHeap()
            var model: [DeadlineTimer] = []
            var order: UInt64 = 0
            for _ in 0..<Int.random(in: 1...80, using: &generator) {
                switch Int.random(in: 0..<10, using: &generator) {
                case 0..<6:  // insert, with many equal deadlines
                    order += 1
                    let timer = DeadlineTimer(
                        deadline: origin + .milliseconds(Int.random(in: 0..<8, using: &generator)), order: order)
                    heap.insert(timer)
                    model.append(timer)
                case 6..<8:  // remove one anywhere, as cancel does
                    guard let victim = model.randomElement(using: &generator) else { continue }
                    heap.remove(at: victim.heapIndex)
                    #expect(victim.heapIndex == -1)
                    model.removeAll { $0 === victim }
                default:  // take the earliest, as the timer thread does
                    guard let first = heap.timers.first else { continue }
                    let expected = model.min {
                        $0.deadline < $1.deadline || ($0.deadline == $1.deadline && $0.order < $1.order)
                    }
                    #expect(first === expected, "round \(round)")
                    heap.remove(at: 0)
                    model.removeAll { $0 === first }
                }
                #expect(heap.timers.count == model.count)
                for (index, timer) in heap.timers.enumerated() {
                    #expect(timer.heapIndex == index, "every timer knows its place")
                    if index > 0 {
                        let parent = heap.timers[(index - 1) / 2]
                        #expect(!timer.fires(before: parent), "heap order, round \(round)")
                    }
                }
            }
        }
    }

    @Test("a cancelled timer never fires and releases what its action captured at once")
    func cancelReleases() async {
        final class Captured: Sendable {}
        let fired = AtomicCell<Bool>(false)
        var captured: Captured? = Captured()
        weak let watch = captured
        let timer = DeadlineTimers.schedule(at: .now + .seconds(3600)) { [captured] in
            _ = captured
            fired.store(true, ordering: .relaxed)
        }
        captured = nil
        #expect(watch != nil, "the pending timer keeps its action")
        timer.cancel()
        #expect(watch == nil, "cancel released the action")
        #expect(timer.heapIndex == -1)
        timer.cancel()  // harmless again
        let didFire = fired.load(ordering: .relaxed)
        #expect(!didFire)
    }

    @Test("a deadline scheduled after a later one still fires at its own time")
    func earlierDeadlineWakesTheThread() async {
        let far = DeadlineTimers.schedule(at: .now + .seconds(3600)) {}
        let fired = DispatchSemaphore(value: 0)
        _ = DeadlineTimers.schedule(at: .now + .milliseconds(10)) { fired.signal() }
        let arrived = await onOwnThread { fired.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success }
        #expect(arrived)
        far.cancel()
    }

    @Test(
        "withCallback's timeout fires and calls the cancel handle while every cooperative thread is blocked",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func timeoutNeedsNoCooperativeThread() async throws {
        // Blocking every cooperative thread would stall every other test of this process, so this
        // runs in a child process of its own (an exit test), where nothing else needs the pool.
        //
        // The caller runs on a thread of its own (an actor on an SDKThreadExecutor), so the test can
        // block as many cooperative threads as there are cores while the call waits. A timer that
        // needed one of them (a sleeping task, a Dispatch timer on Linux) could not fire until they
        // are released. The cancel handle records whether every blocker held its thread when the
        // timer called it. The order is forced: on the caller's own thread, the call is made only
        // once every blocker holds a cooperative thread, so its 1 s timeout starts with the pool
        // full. An attempt in which a blocker gave up its thread before the timeout fired proves
        // nothing either way and is repeated.
        await #expect(processExitsWith: .success) {
            let executor = try! SDKThreadExecutor(name: "timer-test")
            let caller = DeadlineTestCaller(executor: executor)
            let blockers = ProcessInfo.processInfo.activeProcessorCount
            var conclusive = false
            for _ in 1...5 where !conclusive {
                let blocked = StreamShared(0)
                let release = DispatchSemaphore(value: 0)
                let cancelCalled = DispatchSemaphore(value: 0)
                let cancelledWhileAllBlocked = StreamShared(false)
                let blockerTasks = (0..<blockers).map { _ in
                    Task.detached {
                        blocked.update { $0 += 1 }
                        _ = release.wait(timeout: .now() + .seconds(60))
                        blocked.update { $0 -= 1 }
                    }
                }
                let watcher = Thread {
                    _ = cancelCalled.wait(timeout: .now() + .seconds(90))
                    for _ in 0..<blockers { release.signal() }
                }
                watcher.start()
                let outcome = await caller.callWithTimeout(
                    .seconds(1),
                    first: { _ = spinUntil(within: 50) { blocked.value == blockers } },
                    cancel: {
                        let all = blocked.value == blockers
                        cancelledWhileAllBlocked.value = all
                        cancelCalled.signal()
                    })
                for task in blockerTasks { await task.value }
                precondition(outcome == "timed out as asked", "the call ended with \(outcome)")
                conclusive = cancelledWhileAllBlocked.value
            }
            precondition(
                conclusive,
                "in five attempts the cancel handle was never called while every cooperative thread was blocked")
        }
    }
}

/// Calls a silent operation with a timeout from an actor whose executor is a thread of its own.
actor DeadlineTestCaller {
    let executor: SDKThreadExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(executor: SDKThreadExecutor) { self.executor = executor }

    /// Runs `first` on the actor's thread, then calls with `timeout`.
    func callWithTimeout(
        _ timeout: Duration, first: () -> Void = {}, cancel: @escaping @Sendable () -> Void
    ) async -> String {
        first()
        do {
            let value = try await withCallback(timeout: timeout) { (_: Completion<Int>) in
                CancelHandle(cancel)
            }
            return "value \(value)"
        } catch let error as BridgeTimeoutError where error == BridgeTimeoutError(timeout: timeout) {
            return "timed out as asked"
        } catch {
            return "\(error)"
        }
    }
}

@Suite("Deadline timers: which thread runs an action, and which clock the thread sleeps on")
struct DeadlineTimersThreadAndClockTests {
    @Test("a timer-thread action runs on the timer thread; any other action runs on a job thread")
    func actionsRunWhereScheduled() async {
        let onTimer = OffloadFlag()
        let onJob = OffloadFlag()
        _ = DeadlineTimers.schedule(at: .now, onTimerThread: true) {
            if DeadlineTimers.isCurrentThread && !BridgeThreadPool.shared.isCurrentThread { onTimer.set() }
        }
        _ = DeadlineTimers.schedule(at: .now) {
            if BridgeThreadPool.shared.isCurrentThread && !DeadlineTimers.isCurrentThread { onJob.set() }
        }
        #expect(await eventually { onTimer.isSet && onJob.isSet })
    }

    @Test("thousands of deadlines passing at once all fire, taken in batches by the one timer thread")
    func burstOfExpiries() async {
        let fired = OneShotCounter()
        let before = DeadlineTimers.firedOnTimerThread
        let now = ContinuousClock.now
        for index in 0..<5_000 {
            _ = DeadlineTimers.schedule(at: now + .microseconds(index % 7), onTimerThread: true) { fired.increment() }
        }
        #expect(await fired.reaches(5_000))
        #expect(DeadlineTimers.firedOnTimerThread - before >= 5_000)
    }

    #if os(Linux)
    @Test("on Linux the timer thread sleeps on ContinuousClock's own clock, CLOCK_BOOTTIME, in a timerfd")
    func sleepsOnTheDeadlinesClock() throws {
        #expect(TimerAlarm.clock == CLOCK_BOOTTIME)
        #expect(DeadlineTimers.alarm.usesDeadlineClock, "the timer fell back to the monotonic clock")
        // ContinuousClock's reading, taken through its public Codable form, matches that clock.
        // Where the machine has slept since boot (BOOTTIME ahead of MONOTONIC), this also tells
        // the two clocks apart; elsewhere they agree and the check above is what holds.
        // The reading is taken between two readings of the alarm clock, so that a thread put
        // aside between them (a busy machine, a sanitizer) widens the window instead of failing.
        let alarmBefore = Self.reading(TimerAlarm.clock)
        let continuous = try Self.reading(ContinuousClock.now)
        let alarmClock = Self.reading(TimerAlarm.clock)
        let monotonic = Self.reading(CLOCK_MONOTONIC)
        #expect(
            continuous >= alarmBefore - 0.001 && continuous <= alarmClock + 0.001,
            "ContinuousClock \(continuous) s, alarm clock \(alarmBefore) s to \(alarmClock) s")
        if abs(alarmClock - monotonic) > 1 {
            #expect(abs(continuous - monotonic) > 0.5, "ContinuousClock reads the monotonic clock")
        }
    }

    /// Seconds since the clock's origin.
    static func reading(_ clock: clockid_t) -> Double {
        var now = timespec()
        clock_gettime(clock, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Seconds since ContinuousClock's origin, from its encoded form (the Duration since its origin).
    static func reading(_ instant: ContinuousClock.Instant) throws -> Double {
        let object = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(instant)) as? [String: Any])
        let value = try #require(object.values.first)
        let duration = try JSONDecoder().decode(Duration.self, from: JSONSerialization.data(withJSONObject: value))
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
    #endif

    @Test(
        "the alarm rings once its deadline has passed, and a sooner setting wins over a later one a thread waits for",
        arguments: [true, false])
    func alarmRings(deadlineClock: Bool) async {
        let alarm = TimerAlarm(deadlineClock: deadlineClock)
        let deadline = ContinuousClock.now + .milliseconds(20)
        alarm.arm(at: deadline)
        let rangAfterDeadline = await onOwnThread { () -> Bool in
            while ContinuousClock.now < deadline { alarm.wait() }  // an early return is allowed
            return true
        }
        #expect(rangAfterDeadline)
        // A thread waits for an alarm an hour away; setting it sooner wakes that thread. The
        // fallback shows when the thread waits; the kernel keeps a timerfd's waiter, and a setting
        // made just before the thread waits must work as well.
        alarm.arm(at: .now + .seconds(3600))
        let woke = OffloadFlag()
        oneShotOnForeignThread {
            alarm.wait()
            woke.set()
        }
        if !alarm.usesDeadlineClock { #expect(await eventually { alarm.hasFallbackWaiter }) }
        alarm.arm(at: .now + .milliseconds(5))
        // Well inside the fallback's one-minute re-check, which would wake it anyway.
        #expect(await eventually(within: Double(30)) { woke.isSet })
    }
}

@Suite("Deadline timers: a refused timer thread")
struct DeadlineTimersRefusedThreadTests {
    /// The timer thread is the process's own, so this runs in a child process (an exit test).
    @Test(
        "a refused timer thread stops nothing and loses no deadline: the next schedule starts it, and both fire",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func refusedTimerThread() async {
        await #expect(processExitsWith: .success) {
            let refusing = AtomicCell<Bool>(true)
            let refused = AtomicCell<Int>(0)
            DeadlineTimers.setThreadStarter { name, body in
                if refusing.load(ordering: .acquiring) {
                    refused.add(1, ordering: .relaxed)
                    return 11  // EAGAIN
                }
                return startDetachedThread(name: name, body)
            }
            let fired = OneShotCounter()
            _ = DeadlineTimers.schedule(at: .now, onTimerThread: true) { fired.increment() }
            precondition(refused.load(ordering: .relaxed) == 1 && fired.value == 0)
            refusing.store(false, ordering: .releasing)
            _ = DeadlineTimers.schedule(at: .now + .milliseconds(1), onTimerThread: true) { fired.increment() }
            let both = await fired.reaches(2)
            precondition(both, "a deadline was lost")
        }
    }
}
