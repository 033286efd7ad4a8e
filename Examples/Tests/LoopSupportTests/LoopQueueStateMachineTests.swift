import LoopSupport
import Testing

/// The loop's job queue, driven directly: each order below is forced, no threads.
@Suite("loop job queue state machine")
struct LoopQueueStateMachineTests {
    @Test("the first post wakes the loop; later posts do not until the loop has taken the jobs")
    func wakesOncePerTake() {
        var machine = LoopQueueStateMachine<Int>()
        #expect(machine.post(1) == .wake)
        #expect(machine.post(2) == .none)
        let taken = machine.take()
        #expect(taken.jobs == [1, 2] && !taken.closed)
        #expect(machine.post(3) == .wake, "a post after the take must wake the loop again")
    }

    @Test("closing keeps the queued jobs for the loop, rejects later posts, and reports closed")
    func closeKeepsQueuedJobs() {
        var machine = LoopQueueStateMachine<Int>()
        _ = machine.post(1)
        #expect(machine.close() == true)
        #expect(machine.close() == false, "a second close does not wake the loop again")
        #expect(machine.post(2) == .rejected)
        let taken = machine.take()
        #expect(taken.jobs == [1] && taken.closed)
        #expect(machine.take().jobs.isEmpty)
        #expect(machine.finish().isEmpty)
        #expect(machine.isFinished)
        #expect(machine.post(3) == .rejected)
    }
}
