// The job threads' state machine, driven without threads: a storm of submissions against a small
// limit, refused thread starts, lowered and raised limits, in random orders checked against its
// rules, and the hand-picked orderings that matter most.

import Testing
import TestSupport

@testable import LegacyBridge

@Suite("Job threads: the state machine")
struct BridgeThreadPoolStateMachineTests {
    typealias Machine = BridgeThreadPoolStateMachine<Int>

    @Test("a storm of jobs starts at most limit threads; the rest wait and are taken in order")
    func stormStaysWithinTheLimit() {
        var machine = Machine(limit: 4)
        var actions: [Machine.SubmitAction] = []
        for job in 0..<100 { actions.append(machine.submit(job)) }
        #expect(actions.filter { $0 == .startThread }.count == 4)
        #expect(actions.dropFirst(4).allSatisfy { $0 == .queued })
        #expect(machine.threads == 4 && machine.queuedJobs == 100, "the new threads take theirs from the queue")
        // One thread works through everything, in submission order.
        var slot: Int? = nil
        var taken: [Int] = []
        while case .run = machine.workerNext(into: &slot) {
            taken.append(slot.take()!)
        }
        #expect(taken == Array(0..<100))
        #expect(machine.peakThreads == 4)
    }

    @Test("after shutdown every thread ends once idle: the parked are woken, the busy end after their job")
    func shutdownEndsIdleThreads() {
        var machine = Machine(limit: 4)
        var slot: Int? = nil
        #expect(machine.submit(1) == .startThread)
        #expect(machine.submit(2) == .startThread)
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))  // thread A runs job 1
        #expect(slot.take() == 1)
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))  // thread B runs job 2
        #expect(slot.take() == 2)
        #expect(machine.workerNext(into: &slot) == .park)  // A parks
        #expect(machine.shutdown() == true, "a parked thread must be woken to end")
        #expect(machine.workerWoke(into: &slot) == .exit(wakeParked: false))  // A ends
        #expect(machine.submit(3) == .startThread, "B is busy and none is parked: a job still gets a thread")
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))  // the new thread C runs job 3
        #expect(slot.take() == 3)
        #expect(machine.workerNext(into: &slot) == .exit(wakeParked: false), "idle after shutdown: B ends")
        #expect(machine.workerNext(into: &slot) == .exit(wakeParked: false), "idle after shutdown: C ends")
        #expect(machine.threads == 0 && machine.parked == 0 && machine.queuedJobs == 0)
        #expect(machine.submit(4) == .startThread, "a job after shutdown still gets a thread")
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
        #expect(slot.take() == 4)
        #expect(machine.workerNext(into: &slot) == .exit(wakeParked: false))
        #expect(machine.shutdown() == false, "nothing parked: nothing to wake")
    }

    @Test("a refused start with other threads alive loses nothing: a busy thread takes the job after its own")
    func refusedStartWithThreadsAlive() {
        var machine = Machine(limit: 4)
        var slot: Int? = nil
        #expect(machine.submit(1) == .startThread)
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))  // the first thread runs job 1
        #expect(slot.take() == 1)
        #expect(machine.submit(2) == .startThread)
        #expect(machine.threadStartFailed() == .none, "a thread exists: no retry needed")
        #expect(machine.threads == 1 && machine.refusedStarts == 1)
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
        #expect(slot.take() == 2)
    }

    @Test("a refused start with no thread left asks for a retry, and the retry or the next job starts one")
    func refusedStartWithNoThread() {
        var machine = Machine(limit: 4)
        #expect(machine.submit(1) == .startThread)
        #expect(machine.threadStartFailed() == .retryLater)
        #expect(machine.threads == 0 && machine.queuedJobs == 1)
        #expect(machine.retry() == .startThread)
        #expect(machine.threadStartFailed() == .retryLater, "refused again: ask again")
        #expect(machine.submit(2) == .startThread, "the next job starts a thread itself")
        #expect(machine.retry() == .none, "a thread is on its way: the pending retry does nothing")
        var slot: Int? = nil
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
        #expect(slot.take() == 1)
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
        #expect(slot.take() == 2)
    }

    @Test("a burst of jobs wakes one parked thread; each woken thread that sees more waiting wakes the next")
    func burstWakesOneAtATime() {
        var machine = Machine(limit: 4)
        var slot: Int? = nil
        for job in 0..<4 { _ = machine.submit(job) }
        for _ in 0..<4 {
            #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
            slot = nil
        }
        for _ in 0..<4 { #expect(machine.workerNext(into: &slot) == .park) }
        // Four parked threads, a burst of ten jobs: one wake-up, not ten.
        var actions: [Machine.SubmitAction] = []
        for job in 10..<20 { actions.append(machine.submit(job)) }
        #expect(actions == [.wakeParked] + Array(repeating: .queued, count: 9))
        // The woken thread takes the first and passes the rest on, one wake-up at a time.
        #expect(machine.workerWoke(into: &slot) == .run(wakeParked: true))
        #expect(slot.take() == 10)
        #expect(machine.workerWoke(into: &slot) == .run(wakeParked: true))
        #expect(slot.take() == 11)
        // A thread back from its job takes the next one itself; the wake-up already given stays.
        #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
        #expect(slot.take() == 12)
    }

    @Test("a thread above a lowered limit leaves, and hands the job it leaves to a parked thread")
    func loweredLimitHandsOver() {
        var machine = Machine(limit: 2)
        var slot: Int? = nil
        _ = machine.submit(0)
        _ = machine.submit(1)
        #expect(machine.threads == 2)
        // Both threads run their job, then park.
        for _ in 0..<2 {
            #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
            slot = nil
        }
        #expect(machine.workerNext(into: &slot) == .park)
        #expect(machine.workerNext(into: &slot) == .park)
        let lowered = machine.setLimit(1)
        #expect(lowered.wakeAllParked)
        #expect(machine.submit(2) == .wakeParked)
        // The woken thread is one too many: it leaves and passes the job on.
        #expect(machine.workerWoke(into: &slot) == .exit(wakeParked: true))
        #expect(machine.workerWoke(into: &slot) == .run(wakeParked: false))
        #expect(slot.take() == 2)
        #expect(machine.threads == 1)
    }

    @Test("a raised limit starts threads for the jobs that wait")
    func raisedLimitStartsThreads() {
        var machine = Machine(limit: 1)
        for job in 0..<5 { _ = machine.submit(job) }
        #expect(machine.threads == 1 && machine.queuedJobs == 5)
        #expect(machine.setLimit(3) == Machine.LimitAction(start: 2, wakeAllParked: false))
        #expect(machine.threads == 3)
    }

    @Test("a parked thread stays for later work: no thread ends while the limit does not go down")
    func parkedThreadsStay() {
        var machine = Machine(limit: 8)
        var slot: Int? = nil
        for job in 0..<3 { _ = machine.submit(job) }
        for _ in 0..<3 {
            #expect(machine.workerNext(into: &slot) == .run(wakeParked: false))
            slot = nil
        }
        for _ in 0..<3 { #expect(machine.workerNext(into: &slot) == .park) }
        for _ in 0..<3 { #expect(machine.workerWoke(into: &slot) == .park, "a spurious wake-up keeps it") }
        #expect(machine.threads == 3 && machine.parked == 3)
        #expect(machine.submit(9) == .wakeParked, "later work goes to a kept thread, not a new one")
    }

    /// A model of the threads around the machine: each is starting, running a job, or parked
    /// (signalled or not). Random events, then a drain that only uses real wake-ups (signals and
    /// the retries the machine asked for): every job must have run, once, in order.
    @Test("random storms, refusals and limit changes: within the limit, in order, no job lost", arguments: 0..<40)
    func randomModel(seed: UInt64) {
        enum Worker {
            case starting
            case running(Int)
            case parked(signalled: Bool)
        }
        var random = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        var machine = Machine(limit: 1 + Int(random.next() % 4))
        var workers: [Int: Worker] = [:]
        var nextWorker = 0
        var submitted = 0
        var taken: [Int] = []
        var retryPending = false
        var refuseStarts = false

        func signal() {
            // The machine hands out a wake-up only while a thread is parked: one still waiting
            // takes the signal; if every parked thread was already woken (a broadcast), one of
            // them takes the wake-up when it runs.
            let parked = workers.filter {
                if case .parked = $0.value { return true }
                return false
            }
            #expect(!parked.isEmpty, "seed \(seed): a wake-up with nobody parked to take it")
            let waiting = parked.filter {
                if case .parked(signalled: false) = $0.value { return true }
                return false
            }.keys.sorted()
            if let chosen = waiting.randomElement(using: &random) { workers[chosen] = .parked(signalled: true) }
        }
        func start() {
            if refuseStarts && random.next() % 2 == 0 {
                if machine.threadStartFailed() == .retryLater { retryPending = true }
            } else {
                workers[nextWorker] = .starting
                nextWorker += 1
            }
            #expect(machine.threads <= machine.limit, "seed \(seed): a start beyond the limit")
        }
        func act(_ worker: Int, _ action: Machine.NextAction, _ slot: inout Int?) {
            switch action {
            case .run(let wakeParked):
                taken.append(slot.take()!)
                workers[worker] = .running(taken.last!)
                if wakeParked { signal() }
            case .park:
                workers[worker] = .parked(signalled: false)
            case .exit(let wakeParked):
                workers[worker] = nil
                #expect(machine.threads >= machine.limit, "seed \(seed): a thread ended below the limit")
                if wakeParked { signal() }
            }
        }
        func step(_ worker: Int) {
            var slot: Int? = nil
            switch workers[worker]! {
            case .starting, .running:
                act(worker, machine.workerNext(into: &slot), &slot)
            case .parked:
                act(worker, machine.workerWoke(into: &slot), &slot)
            }
        }

        for _ in 0..<400 {
            switch random.next() % 10 {
            case 0...2:
                switch machine.submit(submitted) {
                case .queued: break
                case .wakeParked: signal()
                case .startThread: start()
                }
                submitted += 1
            case 3:
                let action = machine.setLimit(1 + Int(random.next() % 5))
                if action.wakeAllParked {
                    for (id, worker) in workers {
                        if case .parked = worker { workers[id] = .parked(signalled: true) }
                    }
                }
                for _ in 0..<action.start { start() }
            case 4:
                refuseStarts.toggle()
            case 5 where retryPending:
                retryPending = false
                if machine.retry() == .startThread { start() }
            default:
                // Any worker takes a step; a parked one may wake spuriously.
                guard let worker = workers.keys.sorted().randomElement(using: &random) else { continue }
                step(worker)
            }
            #expect(machine.threads == workers.count, "seed \(seed): the machine lost count of its threads")
        }

        // Drain: no more refusals, no spurious wake-ups.
        refuseStarts = false
        var rounds = 0
        func isParked(_ worker: Worker) -> Bool {
            if case .parked = worker { return true }
            return false
        }
        while taken.count < submitted || !workers.values.allSatisfy(isParked) {
            rounds += 1
            guard rounds < 100_000 else { break }
            if retryPending {
                retryPending = false
                if machine.retry() == .startThread { start() }
            }
            let movable = workers.filter {
                if case .parked(signalled: false) = $0.value { return false }
                return true
            }.keys.sorted()
            guard let worker = movable.first else { break }
            step(worker)
        }
        #expect(taken == Array(0..<submitted), "seed \(seed): jobs lost, repeated or out of order")
        #expect(machine.queuedJobs == 0)
    }
}
