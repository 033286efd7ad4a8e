// Where a one-shot call's cancel handle runs, and what waits for it: nothing. Each test holds the
// handle open on a latch and checks that the caller is already back, that the handle runs on a
// job thread (never in the canceller, never on the timer thread), and that a timeout resumes its
// caller while every job thread is stuck in a cancel.

import Dispatch
import TestSupport
import Testing

@testable import LegacyBridge

/// What a blocking cancel handle saw.
private final class HandleProbe: Sendable {
    let calls = OneShotCounter()
    let onJobThread = OffloadFlag()
    let onTimerThread = OffloadFlag()
    private let opened = OffloadFlag()
    private let semaphore = DispatchSemaphore(value: 0)
    /// How long a handle waits for the latch at most: the tests open it right after their checks,
    /// so only a broken build (a handle run inside the canceller, which then waits for it) ever
    /// reaches this, and it then fails in seconds instead of hanging.
    let bound: Int

    init(boundSeconds: Int = 10) { self.bound = boundSeconds }

    /// Lets every handle, blocked or to come, return.
    func open() {
        if !opened.isSet {
            opened.set()
            semaphore.signal()
        }
    }

    var isOpen: Bool { opened.isSet }

    /// A handle that records where it runs, then blocks until the latch opens.
    func handle() -> CancelHandle {
        CancelHandle {
            if BridgeThreadPool.shared.isCurrentThread { self.onJobThread.set() }
            if DeadlineTimers.isCurrentThread { self.onTimerThread.set() }
            self.calls.increment()
            if !self.opened.isSet, self.semaphore.wait(timeout: .now() + .seconds(self.bound)) == .success {
                self.semaphore.signal()  // let the next waiter through as well
            }
        }
    }
}

@Suite("OneShot: the cancel handle runs on a job thread and delays nobody", .timeLimit(.minutes(10)))
struct CancelHandleThreadingTests {
    @Test("Task.cancel() resumes the caller while its SDK cancel is still blocked, on a job thread")
    func cancelDoesNotWaitForTheHandle() async {
        let probe = HandleProbe()
        let stored = OneShotSlot<Completion<Int>>()
        let call = OneShotCall {
            try await withCallback { (completion: Completion<Int>) in
                stored.store(completion)
                return probe.handle()
            }
        }
        #expect(await eventually { stored.value?.oneShotHasWaiter ?? false })
        call.cancel()  // with the handle inside the canceller, this would block on the latch
        #expect(await call.outcome() == .cancelled)
        #expect(!probe.isOpen)
        #expect(await probe.calls.reaches(1))
        #expect(probe.onJobThread.isSet, "the handle ran outside the job threads")
        probe.open()
    }

    @Test("one cancelAll() over many pending calls brings every caller back while their handles block")
    func cancelAllDoesNotWaitForHandles() async {
        let count = 16
        let probe = HandleProbe()
        let started = OneShotCounter()
        let outcomes = await withTaskGroup(of: Bool.self) { group -> [Bool] in
            for _ in 0..<count {
                group.addTask {
                    do {
                        _ = try await withCallback { (_: Completion<Int>) in
                            started.increment()
                            return probe.handle()
                        }
                        return false
                    } catch {
                        return error is CancellationError
                    }
                }
            }
            _ = await eventually { started.value == count }
            group.cancelAll()
            var outcomes: [Bool] = []
            for await cancelled in group { outcomes.append(cancelled) }
            return outcomes
        }
        #expect(outcomes == Array(repeating: true, count: count))
        #expect(!probe.isOpen, "every caller came back before any handle was let go")
        probe.open()
        #expect(await probe.calls.reaches(count))
        #expect(probe.onJobThread.isSet)
    }

    @Test("a timeout resumes its caller from the timer thread; its handle runs on a job thread")
    func timeoutHandleOnAJobThread() async {
        let probe = HandleProbe()
        probe.open()
        let outcome = await oneShotOutcome {
            try await withCallback(timeout: .milliseconds(5)) { (_: Completion<Int>) in probe.handle() }
        }
        #expect(outcome == .timedOut(.milliseconds(5)))
        #expect(await probe.calls.reaches(1))
        #expect(probe.onJobThread.isSet)
        #expect(!probe.onTimerThread.isSet, "the SDK's cancel ran on the timer thread")
    }

    @Test(
        "a handle attached after cancellation decided runs on a job thread, not in start's caller nor in attach",
        arguments: ["cancelled inside start", "CompletionGate.attach after cancel()"])
    func lateHandleOnAJobThread(path: String) async {
        let probe = HandleProbe()
        if path == "cancelled inside start" {
            let outcome = await oneShotOutcome {
                try await withCallback { (_: Completion<Int>) in
                    withUnsafeCurrentTask { $0?.cancel() }
                    return probe.handle()
                }
            }
            #expect(outcome == .cancelled)
        } else {
            let gate = CompletionGate<Int>()
            #expect(gate.cancel())
            gate.attach(probe.handle())  // would block here if the handle ran inline
            #expect(await oneShotOutcome { try await gate.value() } == .cancelled)
        }
        #expect(!probe.isOpen)
        #expect(await probe.calls.reaches(1))
        #expect(probe.onJobThread.isSet)
        probe.open()
    }

    /// Holding every job thread of the process would stall every other test that needs one, so
    /// this runs in a child process of its own (an exit test), where nothing else does.
    @Test(
        "a timeout resumes its caller while every job thread is stuck in a slow SDK cancel",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func timeoutWhileEveryJobThreadIsBlocked() async {
        await #expect(processExitsWith: .success) {
            // Fill every job thread the limit allows with a cancel that blocks on a latch.
            let limit = BridgeThreads.limit
            let probe = HandleProbe(boundSeconds: 60)
            let blockers = (0..<limit).map { _ in
                OneShotCall {
                    try await withCallback { (_: Completion<Int>) in probe.handle() }
                }
            }
            for blocker in blockers { blocker.cancel() }
            for blocker in blockers {
                let outcome = await blocker.outcome(within: 60)
                precondition(outcome == .cancelled)
            }
            // Every job thread is now inside one of these handles.
            let allRunning = await eventually(within: Double(60)) { probe.calls.value == limit }
            precondition(allRunning, "the handles never all ran")
            precondition(BridgeThreadPool.shared.snapshot.threads == limit)
            // This caller needs the timer thread alone; its own cancel waits for a free job thread.
            let outcome = await oneShotOutcome(within: 60) {
                try await withCallback(timeout: .milliseconds(20)) { (_: Completion<Int>) in probe.handle() }
            }
            precondition(outcome == .timedOut(.milliseconds(20)), "the caller was not back in time: \(outcome)")
            precondition(!probe.isOpen && probe.calls.value == limit, "a job thread was free after all")
            probe.open()
            let lastRan = await probe.calls.reaches(limit + 1)
            precondition(lastRan)
        }
    }

    /// The offload pool's cancel handle, which drops a waiting call, may reach the job threads
    /// late; the worker that takes the call first must still not run it. Every job thread is
    /// held (in a child process, as above) so that the worker comes first.
    @Test(
        "an offload call cancelled while it waits never runs, even when its cancel handle is held up",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func cancelledWaitingOffloadCallNeverRuns() async {
        await #expect(processExitsWith: .success) {
            let limit = BridgeThreads.limit
            let probe = HandleProbe(boundSeconds: 60)
            let blockers = (0..<limit).map { _ in
                OneShotCall {
                    try await withCallback { (_: Completion<Int>) in probe.handle() }
                }
            }
            for blocker in blockers { blocker.cancel() }
            let allRunning = await eventually(within: Double(60)) { probe.calls.value == limit }
            precondition(allRunning, "the handles never all ran")
            // The pool's only thread is busy; the second call waits, and is cancelled there.
            let pool = try! OffloadPool(threads: 1)
            let busy = OffloadLatch()
            let first = OneShotCall { try await pool.run { busy.wait() ? 1 : 0 } }
            let firstRunning = await eventually(within: Double(60)) { pool.offloadSnapshot.runningIDs.count == 1 }
            precondition(firstRunning)
            let ran = OffloadFlag()
            let second = OneShotCall {
                try await pool.run {
                    ran.set(); return 2
                }
            }
            let secondQueued = await eventually(within: Double(60)) { pool.offloadSnapshot.queuedIDs.count == 1 }
            precondition(secondQueued)
            second.cancel()
            let secondOutcome = await second.outcome(within: 60)
            precondition(secondOutcome == .cancelled)
            // Its cancel handle waits behind the held job threads: the worker reaches it first.
            busy.open()
            let firstOutcome = await first.outcome(within: 60)
            precondition(firstOutcome == .success(1))
            let third = try! await pool.run { 3 }  // runs after the worker passed the cancelled call
            precondition(third == 3 && !ran.isSet, "the cancelled call ran")
            probe.open()
            await pool.shutdown()
        }
    }
}
