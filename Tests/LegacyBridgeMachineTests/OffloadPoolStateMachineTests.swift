// The pool machine's rules, one at a time, driven directly (no threads).

import Testing
@testable import LegacyBridge

private typealias Machine = OffloadPoolStateMachine<String, Int>

private func accept(_ machine: inout Machine, _ job: String, interruptible: Bool = false) -> OffloadJobID? {
    if case .accepted(let id, _) = machine.submit(job, interruptible: interruptible) { return id }
    return nil
}

private func take(_ machine: inout Machine) -> (OffloadJobID, String)? {
    var slot: String? = nil
    if case .run(let id) = machine.workerNext(into: &slot), let job = slot { return (id, job) }
    return nil
}

@Suite("Offload: pool state machine rules")
struct OffloadPoolStateMachineTests {
    @Test("with a queue limit of 0, only one job per thread is accepted")
    func zeroQueueLimit() {
        var machine = Machine(width: 2, queueLimit: 0)
        #expect(accept(&machine, "a") != nil)
        #expect(accept(&machine, "b") != nil)
        guard case .rejected(.queueFull(limit: 0)) = machine.submit("c", interruptible: false) else {
            Issue.record("a third job on two threads with no waiting room was accepted")
            return
        }
        #expect(machine.queuedIDs.count == 2)
    }

    @Test("a queue limit of Int.max accepts without overflowing")
    func unboundedQueue() {
        var machine = Machine(width: 1, queueLimit: .max)
        for index in 0..<100 { #expect(accept(&machine, "\(index)") != nil) }
        #expect(machine.queuedIDs.count == 100)
    }

    @Test("a finished job frees its place for the next submission")
    func finishingFreesRoom() throws {
        var machine = Machine(width: 1, queueLimit: 0)
        _ = try #require(accept(&machine, "a"))
        #expect(accept(&machine, "b") == nil)
        let (id, job) = try #require(take(&machine))
        #expect(job == "a")
        #expect(accept(&machine, "b") == nil)  // running still counts
        guard case .next = machine.finish(id) else { throw OffloadMachineTestError.unexpected }
        #expect(accept(&machine, "b") != nil)
    }

    @Test("after shutdown began, a submission is rejected with shutDown and not kept")
    func submitAfterShutdown() {
        var machine = Machine(width: 1, queueLimit: 4)
        _ = machine.shutdown(.drain, waiter: 1)
        guard case .rejected(.shutDown) = machine.submit("late", interruptible: false) else {
            Issue.record("a job submitted after shutdown was accepted")
            return
        }
        #expect(machine.queuedIDs.isEmpty)
    }

    @Test("a parked worker is signalled once per parked worker, not once per submission")
    func wakeUpsAreCounted() {
        var machine = Machine(width: 2, queueLimit: 8)
        var slot: String? = nil
        guard case .wait = machine.workerNext(into: &slot) else { Issue.record("an idle worker did not park"); return }
        let first = machine.submit("a", interruptible: false)
        let second = machine.submit("b", interruptible: false)
        guard case .accepted(_, wakeWorker: true) = first, case .accepted(_, wakeWorker: false) = second else {
            Issue.record("expected one wake-up for one parked worker: \(first), \(second)")
            return
        }
        machine.workerWoke()
        #expect(machine.pendingWakeUps == 0 && machine.parkedWorkers == 0)
    }

    @Test("cancelling a waiting job removes it; cancelling a running one schedules its interrupt once")
    func cancelByState() throws {
        var machine = Machine(width: 1, queueLimit: 4)
        let a = try #require(accept(&machine, "a", interruptible: true))
        let b = try #require(accept(&machine, "b", interruptible: true))
        _ = try #require(take(&machine))
        guard case .dropQueued("b") = machine.cancel(b) else { Issue.record("waiting job was not dropped"); return }
        guard case .scheduleInterrupt(a) = machine.cancel(a) else {
            Issue.record("running job's interrupt was not scheduled"); return
        }
        guard case .none = machine.cancel(a) else {
            Issue.record("a second cancel scheduled the interrupt again"); return
        }
        #expect(machine.interruptState(of: a) == .requested)
    }

    @Test("a running job without an interrupt is left to finish when cancelled")
    func cancelWithoutInterrupt() throws {
        var machine = Machine(width: 1, queueLimit: 4)
        let a = try #require(accept(&machine, "a"))
        _ = try #require(take(&machine))
        guard case .none = machine.cancel(a) else { Issue.record("a job without interrupt got one scheduled"); return }
        #expect(machine.interruptState(of: a) == .unavailable)
    }

    @Test("an interrupt due after its body returned is not called")
    func lateInterruptIsSkipped() throws {
        var machine = Machine(width: 1, queueLimit: 4)
        let a = try #require(accept(&machine, "a", interruptible: true))
        _ = try #require(take(&machine))
        _ = machine.cancel(a)
        guard case .next = machine.finish(a) else {
            Issue.record("finish waited without an interrupt in progress"); return
        }
        guard case .none = machine.interruptDue(a) else {
            Issue.record("an interrupt was called after its body returned"); return
        }
    }

    @Test("a body that returns while its interrupt runs holds its worker until the interrupt returns")
    func bodyReturnsDuringInterrupt() throws {
        var machine = Machine(width: 1, queueLimit: 4)
        let a = try #require(accept(&machine, "a", interruptible: true))
        _ = try #require(take(&machine))
        _ = machine.cancel(a)
        guard case .call = machine.interruptDue(a) else { Issue.record("a due interrupt was not called"); return }
        guard case .awaitInterrupt = machine.finish(a) else {
            Issue.record("the worker did not wait for the interrupt"); return
        }
        #expect(machine.isAwaitingInterrupt(a))
        guard case .wakeWorker = machine.interruptReturned(a) else {
            Issue.record("the waiting worker was not woken"); return
        }
        #expect(!machine.isAwaitingInterrupt(a) && machine.runningIDs.isEmpty)
    }

    @Test("shutdown(.rejectQueued) hands back the waiting jobs; the last worker to leave hands back every waiter once")
    func rejectAndLeave() throws {
        var machine = Machine(width: 2, queueLimit: 4)
        _ = try #require(accept(&machine, "a"))
        _ = try #require(accept(&machine, "b"))
        _ = try #require(accept(&machine, "c"))
        let (running, _) = try #require(take(&machine))
        let first = machine.shutdown(.drain, waiter: 1)
        #expect(first.rejected.isEmpty && first.resume.isEmpty)
        let second = machine.shutdown(.rejectQueued, waiter: 2)
        #expect(second.rejected == ["b", "c"])
        var slot: String? = nil
        guard case .exit(let none) = machine.workerNext(into: &slot) else {
            Issue.record("idle worker did not leave"); return
        }
        #expect(none.isEmpty)
        _ = machine.finish(running)
        guard case .exit(let waiters) = machine.workerNext(into: &slot) else {
            Issue.record("last worker did not leave"); return
        }
        #expect(waiters == [1, 2])
        #expect(machine.lifecycle == .stopped)
        #expect(machine.shutdown(.drain, waiter: 3).resume == [3])
    }

    @Test("when no thread could be started, shutdown stops at once and nothing waits forever")
    func noWorkerStarted() {
        var machine = Machine(width: 2, queueLimit: 4)
        #expect(machine.workersNeverStarted(2).isEmpty)
        let action = machine.shutdown(.drain, waiter: 7)
        #expect(action.resume == [7])
        #expect(machine.lifecycle == .stopped)
    }

    @Test("threads that failed to start after shutdown began release the shutdown waiters")
    func failedStartAfterShutdown() {
        var machine = Machine(width: 2, queueLimit: 4)
        _ = machine.shutdown(.rejectQueued, waiter: 4)
        #expect(machine.workersNeverStarted(1).isEmpty)
        #expect(machine.workersNeverStarted(1) == [4])
    }
}

private enum OffloadMachineTestError: Error { case unexpected }
