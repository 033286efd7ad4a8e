// Drives SDKLoopStateMachine through every sequence of its events up to a length, simulating the
// loop thread and the posters, and checks the contract after every step: FIFO, exactly once,
// nothing accepted is lost, no job from another thread waits without a wake, and shutdown
// resumes every waiter once.

import Testing
@testable import LegacyBridge
import TestSupport

private typealias Machine = SDKLoopStateMachine<Int, Int>

private enum Event: CaseIterable, CustomStringConvertible {
    /// Another thread posts the next job.
    case postFromOther
    /// The loop thread posts the next job: inside its drain if the last take handed it jobs
    /// (a job posting a job), inside one of the SDK's callbacks otherwise.
    case postFromLoop
    /// The loop thread asks what to do (and runs what it gets).
    case take
    /// Some thread requests shutdown with a waiter.
    case shutdown

    var description: String {
        switch self {
        case .postFromOther: "postFromOther"
        case .postFromLoop: "postFromLoop"
        case .take: "take"
        case .shutdown: "shutdown"
        }
    }
}

/// The world around the machine: what was posted, run, woken and resumed.
private struct World {
    var machine = Machine()
    var nextJob = 0
    var nextWaiter = 0
    var accepted: [Int] = []
    var rejected: [Int] = []
    var ran: [Int] = []
    /// Jobs posted by other threads, or by the loop thread outside its drain, not yet taken.
    var waitingFromOther: Set<Int> = []
    /// The loop thread is running the jobs the last take handed it.
    var inDrain = false
    var wakes = 0
    var wakeOutstanding = false
    var waiters: [Int] = []
    var resumed: [Int] = []
    var exited = false

    mutating func apply(_ event: Event) -> String? {
        switch event {
        case .postFromOther, .postFromLoop:
            let job = nextJob
            nextJob += 1
            switch machine.post(job, fromLoopThread: event == .postFromLoop) {
            case .accepted(let wake):
                accepted.append(job)
                if event == .postFromOther || !inDrain { waitingFromOther.insert(job) }
                if wake {
                    if event == .postFromLoop && inDrain { return "a post inside the loop's drain asked for a wake" }
                    wakes += 1
                    wakeOutstanding = true
                }
            case .rejected(let back):
                if back != job { return "rejected a different job" }
                rejected.append(job)
            }
        case .take:
            if exited { return nil }  // the loop thread is gone: it asks nothing more
            switch machine.takeJobs() {
            case .run(let jobs):
                if jobs.isEmpty { return "run with no jobs" }
                ran.append(contentsOf: jobs)
                for job in jobs { waitingFromOther.remove(job) }
                wakeOutstanding = false
                inDrain = true
            case .iterate:
                wakeOutstanding = false
                inDrain = false
            case .exit(let leaving):
                inDrain = false
                resumed.append(contentsOf: leaving)
                exited = true
            }
        case .shutdown:
            let waiter = nextWaiter
            nextWaiter += 1
            waiters.append(waiter)
            switch machine.shutdown(waiter: waiter) {
            case .wake:
                wakes += 1
                wakeOutstanding = true
            case .none:
                break
            case .resume(let now):
                if now != waiter { return "resumed a different waiter" }
                resumed.append(waiter)
            }
        }
        return check()
    }

    func check() -> String? {
        if ran != Array(accepted.prefix(ran.count)) { return "jobs ran out of order or twice: \(ran) of \(accepted)" }
        if Set(accepted).intersection(rejected).count > 0 { return "a job was both accepted and rejected" }
        if !waitingFromOther.isEmpty && !wakeOutstanding && !exited {
            return "jobs \(waitingFromOther.sorted()) posted outside the loop's drain wait with no wake outstanding"
        }
        if Set(resumed).count != resumed.count { return "a waiter was resumed twice" }
        if exited && ran != accepted { return "the loop exited with accepted jobs not run" }
        if exited && Set(resumed) != Set(waiters) { return "the loop exited without resuming every waiter" }
        return nil
    }

    /// The loop thread runs until it exits (after a shutdown): everything accepted runs.
    mutating func finish() -> String? {
        if let problem = apply(.shutdown) { return problem }
        for _ in 0..<3 {
            if let problem = apply(.take) { return problem }
        }
        if !exited { return "the loop did not exit after shutdown and two drains" }
        return check()
    }
}

@Suite(
    "ThreadAffine: SDKLoop state machine, every ordering",
    .disabled(
        if: testsUnderSanitizer,
        "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
)
struct SDKLoopStateMachineTests {
    @Test("every sequence of posts, takes and shutdowns up to length 7 keeps the contract")
    func everyOrdering() {
        var sequences: [[Event]] = [[]]
        var checked = 0
        for _ in 0..<7 {
            sequences = sequences.flatMap { prefix in Event.allCases.map { prefix + [$0] } }
            for sequence in sequences {
                var world = World()
                for (index, event) in sequence.enumerated() {
                    if let problem = world.apply(event) {
                        Issue.record("\(sequence.prefix(index + 1)): \(problem)")
                        return
                    }
                }
                if let problem = world.finish() {
                    Issue.record("\(sequence) then shutdown and drain: \(problem)")
                    return
                }
                checked += 1
            }
        }
        #expect(checked == (1...7).reduce(0) { $0 + Int(pow4($1)) })
    }

    @Test("a second post from another thread rides on the first one's wake until the loop takes the batch")
    func oneWakePerBatch() {
        var machine = Machine()
        guard case .accepted(wake: true) = machine.post(1, fromLoopThread: false) else {
            Issue.record("the first post must wake the loop")
            return
        }
        guard case .accepted(wake: false) = machine.post(2, fromLoopThread: false) else {
            Issue.record("the second post must not wake again")
            return
        }
        guard case .run(let jobs) = machine.takeJobs() else {
            Issue.record("the loop must get the batch")
            return
        }
        #expect(jobs == [1, 2])
        guard case .accepted(wake: true) = machine.post(3, fromLoopThread: false) else {
            Issue.record("after the batch was taken, a post wakes again")
            return
        }
    }

    @Test("a post from the loop thread wakes the loop unless the loop is running posted jobs")
    func loopThreadPostOutsideDrainWakes() {
        var machine = Machine()
        // Inside one of the SDK's callbacks: the loop may wait next, so it must be woken.
        guard case .iterate = machine.takeJobs() else {
            Issue.record("an empty queue means iterate")
            return
        }
        guard case .accepted(wake: true) = machine.post(1, fromLoopThread: true) else {
            Issue.record("a post from an SDK callback on the loop thread must wake the loop")
            return
        }
        // Inside the drain: the drain asks again before the loop waits.
        guard case .run([1]) = machine.takeJobs() else {
            Issue.record("the loop must get the job")
            return
        }
        guard case .accepted(wake: false) = machine.post(2, fromLoopThread: true) else {
            Issue.record("a job posting a job inside the drain must not wake the loop")
            return
        }
        guard case .run([2]) = machine.takeJobs(), case .iterate = machine.takeJobs() else {
            Issue.record("the drain must take the job it posted, then iterate")
            return
        }
    }

    @Test("between two bounded batches a post from the loop thread needs no wake, and the loop must not block")
    func boundedBatches() {
        var machine = Machine()
        _ = machine.post(1, fromLoopThread: false)
        guard case .run([1]) = machine.takeJobs() else {
            Issue.record("the loop must get the job")
            return
        }
        // The loop still holds jobs it took: it looks at its descriptors without blocking.
        let holding = machine.endBatch(holdingJobs: true)
        #expect(holding)
        guard case .accepted(wake: false) = machine.post(2, fromLoopThread: true) else {
            Issue.record("the loop takes jobs again before it blocks: no wake")
            return
        }
        // Nothing held, but a job is queued: still no blocking.
        let queued = machine.endBatch(holdingJobs: false)
        #expect(queued)
        guard case .run([2]) = machine.takeJobs(), case .iterate = machine.takeJobs() else {
            Issue.record("the loop must take the queued job, then iterate")
            return
        }
        let busy = machine.endBatch(holdingJobs: false)
        #expect(!busy, "nothing held or queued: the loop may block")
        guard case .accepted(wake: true) = machine.post(3, fromLoopThread: true) else {
            Issue.record("a post from an SDK callback while the loop may block must wake it")
            return
        }
        // Shutdown with a job queued: after running it the loop must not block, but ask again.
        _ = machine.shutdown(waiter: 10)
        guard case .run([3]) = machine.takeJobs() else {
            Issue.record("the loop must get the last job")
            return
        }
        let draining = machine.endBatch(holdingJobs: false)
        #expect(draining, "after shutdown the loop must ask again before blocking, to leave")
        guard case .exit([10]) = machine.takeJobs() else {
            Issue.record("the loop must leave, resuming the waiter")
            return
        }
    }

    @Test("after shutdown a post is rejected and handed back; what was accepted before still runs")
    func shutdownRejectsLaterPosts() {
        var machine = Machine()
        _ = machine.post(1, fromLoopThread: false)
        guard case .wake = machine.shutdown(waiter: 10) else {
            Issue.record("shutdown of a running loop must wake it")
            return
        }
        guard case .rejected(4) = machine.post(4, fromLoopThread: true) else {
            Issue.record("a post after shutdown must be rejected")
            return
        }
        guard case .run([1]) = machine.takeJobs(), case .exit([10]) = machine.takeJobs() else {
            Issue.record("the loop must run the accepted job, then exit resuming the waiter")
            return
        }
        guard case .exit([]) = machine.takeJobs() else {
            Issue.record("a drain asked for after the exit finds nothing")
            return
        }
        guard case .resume(11) = machine.shutdown(waiter: 11) else {
            Issue.record("a shutdown after the loop left resumes its waiter at once")
            return
        }
    }
}

private func pow4(_ exponent: Int) -> Int {
    (0..<exponent).reduce(1) { product, _ in product * 4 }
}
