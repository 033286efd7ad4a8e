// Drives the offload pool's state machine together with the one-shot gate of each call, through
// EVERY ordering of representative event sets (submit, a worker starting or finishing a job,
// cancel, the interrupt starting and returning, shutdown), performing the returned actions the way
// OffloadPoolCore and withCallback do, and checks the contract after every step. After each
// sequence, the model lets the system run to rest using only real wake-ups (no spurious ones), so
// a job left waiting while every worker sleeps (a lost wake-up) is caught as well.

import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

private typealias Pool = OffloadPoolStateMachine<Int, Int>
private typealias Gate = CompletionStateMachine<Int>

private enum Event: Hashable, CustomStringConvertible {
    /// The caller of job n calls `run` (submit + the gate's startReturned + install).
    case call(Int)
    /// The caller's task of job n is cancelled.
    case cancel(Int)
    /// Worker k takes its next step (ask for work, wake up, or its body returns).
    case worker(Int)
    /// The scheduled interrupt of job n starts (on the Dispatch thread).
    case interruptStart(Int)
    /// The interrupt of job n returns.
    case interruptEnd(Int)
    /// Someone shuts the pool down.
    case shutdown(OffloadPool.ShutdownMode)

    var description: String {
        switch self {
        case .call(let job): "call(\(job))"
        case .cancel(let job): "cancel(\(job))"
        case .worker(let index): "worker(\(index))"
        case .interruptStart(let job): "interruptStart(\(job))"
        case .interruptEnd(let job): "interruptEnd(\(job))"
        case .shutdown(let mode): "shutdown(\(mode))"
        }
    }
}

/// What one caller saw.
private enum Delivered: Equatable, CustomStringConvertible {
    case value(Int)
    case cancelled
    case error(OffloadError)
    case other(String)

    init(_ result: Result<Int, any Error>) {
        switch result {
        case .success(let value): self = .value(value)
        case .failure(is CancellationError): self = .cancelled
        case .failure(let error as OffloadError): self = .error(error)
        case .failure(let error): self = .other("\(error)")
        }
    }

    var description: String {
        switch self {
        case .value(let value): "value(\(value))"
        case .cancelled: "cancelled"
        case .error(let error): "error(\(error))"
        case .other(let text): text
        }
    }
}

private enum WorkerState: Equatable {
    case idle
    case parked(signalled: Bool)
    case running(job: Int, id: OffloadJobID)
    case awaitingInterrupt(job: Int, id: OffloadJobID)
    case exited
}

/// The pool, one gate per job, and the bookkeeping the invariants need. Single-threaded: the
/// cancel handles capture the model only to call it back synchronously.
private final class Model: @unchecked Sendable {
    var pool: Pool
    var gates: [Gate]
    let interruptible: [Bool]
    let continuation: UnsafeContinuation<Int, any Error>
    let sequence: [Event]

    var ids: [OffloadJobID?]
    var called: [Bool]
    var cancelledBeforeCall: [Bool]
    var rejectedAtSubmit: [OffloadError?]
    var deliveries: [[Delivered]]
    var discards: [[Int]]
    var starts: [Int]
    var finishes: [Int]
    var dropped: [Int]
    var rejected: [Int]
    var interruptCalls: [Int]
    var cancelledWhileRunning: [Bool]
    var scheduled: Set<Int> = []
    var interrupting: Set<Int> = []
    var workers: [WorkerState]
    var lastJob: [Int?]
    var lastStartedID: OffloadJobID = 0
    var shutdownCalls = 0
    var shutdownResumes = 0
    var problems: [String] = []
    var step = -1

    init(
        width: Int, queueLimit: Int, interruptible: [Bool], continuation: UnsafeContinuation<Int, any Error>,
        sequence: [Event]
    ) {
        let jobs = interruptible.count
        self.pool = Pool(width: width, queueLimit: queueLimit)
        self.gates = Array(repeating: Gate(), count: jobs)
        self.interruptible = interruptible
        self.continuation = continuation
        self.sequence = sequence
        self.ids = Array(repeating: nil, count: jobs)
        self.called = Array(repeating: false, count: jobs)
        self.cancelledBeforeCall = Array(repeating: false, count: jobs)
        self.rejectedAtSubmit = Array(repeating: nil, count: jobs)
        self.deliveries = Array(repeating: [], count: jobs)
        self.discards = Array(repeating: [], count: jobs)
        self.starts = Array(repeating: 0, count: jobs)
        self.finishes = Array(repeating: 0, count: jobs)
        self.dropped = Array(repeating: 0, count: jobs)
        self.rejected = Array(repeating: 0, count: jobs)
        self.interruptCalls = Array(repeating: 0, count: jobs)
        self.cancelledWhileRunning = Array(repeating: false, count: jobs)
        self.workers = Array(repeating: .idle, count: width)
        self.lastJob = Array(repeating: nil, count: width)
    }

    func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { problems.append("\(sequence) step \(step): \(message())") }
    }

    static func value(of job: Int) -> Int { 100 + job }

    // MARK: Events, performed as the storage does

    func run(_ event: Event) {
        switch event {
        case .call(let job): call(job)
        case .cancel(let job): cancel(job)
        case .worker(let index): stepWorker(index, allowSpurious: true)
        case .interruptStart(let job): interruptStart(job)
        case .interruptEnd(let job): interruptEnd(job)
        case .shutdown(let mode): shutdown(mode)
        }
    }

    func call(_ job: Int) {
        called[job] = true
        if cancelledBeforeCall[job] {
            // `run` checks Task.isCancelled first and throws without submitting.
            deliveries[job].append(.cancelled)
            return
        }
        switch pool.submit(job, interruptible: interruptible[job]) {
        case .accepted(let id, let wakeWorker):
            ids[job] = id
            if wakeWorker { signalOne() }
            let handle = CancelHandle { self.poolCancel(job) }
            switch gates[job].startReturned(handle) {
            case .wait: break
            case .deliver: expect(false, "job \(job): outcome decided before the call waited")
            }
            switch gates[job].install(continuation) {
            case .none: break
            case .resume: expect(false, "job \(job): outcome decided before install")
            }
        case .rejected(let error):
            rejectedAtSubmit[job] = error
            // withCallback: `start` threw, so the error finishes the gate, then startReturned(nil).
            finishGate(job, .failure(error))
            switch gates[job].startReturned(nil) {
            case .wait: expect(false, "job \(job): a rejected submission left the caller waiting")
            case .deliver(let outcome, let call):
                expect(call == nil, "job \(job): a rejected submission called a cancel handle")
                deliveries[job].append(Delivered(outcome))
            }
        }
    }

    func cancel(_ job: Int) {
        guard called[job] else {
            cancelledBeforeCall[job] = true
            return
        }
        let waiting = deliveries[job].isEmpty
        switch gates[job].cancel() {
        case .decided(let decision):
            perform(decision, job)
        case .none:
            break
        }
        if waiting {
            expect(
                deliveries[job] == [.cancelled],
                "job \(job): cancelling a waiting caller did not resume it at once with CancellationError: \(deliveries[job])"
            )
        }
    }

    func poolCancel(_ job: Int) {
        guard let id = ids[job] else {
            expect(false, "job \(job): cancel handle called for a job the pool never accepted")
            return
        }
        let bodyRunning = starts[job] == 1 && finishes[job] == 0
        switch pool.cancel(id) {
        case .none:
            expect(starts[job] == 1, "job \(job): cancelled while waiting, but the pool kept it")
            expect(
                !(bodyRunning && interruptible[job]),
                "job \(job): cancelled while running, but its interrupt was not scheduled")
        case .dropQueued(let dropped):
            expect(starts[job] == 0, "job \(job): dropped after it started")
            expect(dropped == job, "cancel(\(job)) dropped job \(dropped)")
            self.dropped[job] += 1
        case .scheduleInterrupt(let scheduledID):
            expect(bodyRunning, "job \(job): interrupt scheduled while its body is not running")
            expect(scheduledID == id, "cancel(\(job)) scheduled the interrupt of \(scheduledID)")
            expect(interruptible[job], "job \(job) has no interrupt but one was scheduled")
            expect(!scheduled.contains(job) && interruptCalls[job] == 0, "job \(job): interrupt scheduled twice")
            scheduled.insert(job)
            cancelledWhileRunning[job] = true
        }
    }

    func interruptStart(_ job: Int) {
        guard scheduled.contains(job), let id = ids[job] else { return }  // nothing scheduled yet
        scheduled.remove(job)
        switch pool.interruptDue(id) {
        case .none:
            expect(finishes[job] == 1, "job \(job): interrupt skipped although its body has not returned")
        case .call:
            let runningNow = workers.contains { $0 == .running(job: job, id: id) }
            expect(runningNow, "job \(job): interrupt called while its body is not running")
            interruptCalls[job] += 1
            expect(interruptCalls[job] == 1, "job \(job): interrupt called \(interruptCalls[job]) times")
            interrupting.insert(job)
        }
    }

    func interruptEnd(_ job: Int) {
        guard interrupting.contains(job), let id = ids[job] else { return }
        interrupting.remove(job)
        switch pool.interruptReturned(id) {
        case .none:
            expect(
                workers.contains { $0 == .running(job: job, id: id) },
                "job \(job): interrupt returned, no worker waits, but the body is not running")
        case .wakeWorker:
            expect(
                workers.contains { $0 == .awaitingInterrupt(job: job, id: id) },
                "job \(job): woke a worker that does not wait")
        }
    }

    func shutdown(_ mode: OffloadPool.ShutdownMode) {
        shutdownCalls += 1
        let action = pool.shutdown(mode, waiter: shutdownCalls)
        if action.wakeWorkers { signalAll() }
        for job in action.rejected {
            expect(mode == .rejectQueued, "shutdown(.drain) rejected job \(job)")
            rejected[job] += 1
            finishGate(job, .failure(OffloadError.shutDown))
        }
        noteResumes(action.resume.count)
    }

    func stepWorker(_ index: Int, allowSpurious: Bool) {
        switch workers[index] {
        case .idle:
            next(index)
        case .parked(let signalled):
            guard signalled || allowSpurious else { return }
            workers[index] = .idle
            pool.workerWoke()
            next(index)
        case .running(let job, let id):
            finishes[job] += 1
            finishGate(job, .success(Self.value(of: job)))
            switch pool.finish(id) {
            case .next:
                workers[index] = .idle
                next(index)
            case .awaitInterrupt:
                expect(interrupting.contains(job), "job \(job): worker waits for an interrupt that is not running")
                workers[index] = .awaitingInterrupt(job: job, id: id)
            }
        case .awaitingInterrupt(_, let id):
            if !pool.isAwaitingInterrupt(id) {
                workers[index] = .idle
                next(index)
            }
        case .exited:
            break
        }
    }

    func next(_ index: Int) {
        var slot: Int? = nil
        switch pool.workerNext(into: &slot) {
        case .run(let id):
            guard let job = slot else {
                expect(false, "run(\(id)) without a job in the slot")
                return
            }
            expect(ids[job] == id, "worker took job \(job) under id \(id)")
            expect(starts[job] == 0, "job \(job) started twice")
            expect(dropped[job] == 0 && rejected[job] == 0, "job \(job) started after it was dropped or rejected")
            expect(id > lastStartedID, "job \(job) (id \(id)) started out of FIFO order (after id \(lastStartedID))")
            if let previous = lastJob[index] {
                expect(
                    !interrupting.contains(previous),
                    "worker \(index) took job \(job) while job \(previous)'s interrupt runs")
            }
            lastStartedID = id
            lastJob[index] = job
            starts[job] += 1
            workers[index] = .running(job: job, id: id)
            let runningCount = workers.filter { if case .running = $0 { true } else { false } }.count
            expect(runningCount <= pool.width, "\(runningCount) bodies run on \(pool.width) workers")
        case .wait:
            workers[index] = .parked(signalled: false)
        case .exit(let waiters):
            workers[index] = .exited
            noteResumes(waiters.count)
        }
    }

    // MARK: Helpers

    func finishGate(_ job: Int, _ result: Result<Int, any Error>) {
        switch gates[job].finish(result) {
        case .decided(let decision):
            perform(decision, job)
        case .discard(let value):
            discards[job].append(value)
        case .none:
            break
        }
    }

    func perform(_ decision: Gate.Decision, _ job: Int) {
        decision.handleToCall?.cancel()
        if decision.waiter != nil { deliveries[job].append(Delivered(decision.outcome)) }
    }

    func signalOne() {
        if let index = workers.firstIndex(of: .parked(signalled: false)) {
            workers[index] = .parked(signalled: true)
        }
    }

    func signalAll() {
        for index in workers.indices where workers[index] == .parked(signalled: false) {
            workers[index] = .parked(signalled: true)
        }
    }

    func noteResumes(_ count: Int) {
        guard count > 0 else { return }
        shutdownResumes += count
        expect(
            workers.allSatisfy { $0 == .exited }, "shutdown waiter resumed while workers are still alive: \(workers)")
        expect(pool.lifecycle == .stopped, "shutdown waiter resumed before the pool stopped")
    }

    // MARK: Checks

    /// Checks that hold after every step.
    func checkStep() {
        let accepted = ids.indices.filter { ids[$0] != nil }
        let ended = accepted.filter { finishes[$0] + dropped[$0] + rejected[$0] > 0 }
        expect(
            accepted.count - ended.count <= pool.width + pool.queueLimit, "more jobs in flight than width + queueLimit")
        for job in ids.indices {
            expect(deliveries[job].count <= 1, "job \(job): caller resumed \(deliveries[job].count) times")
            expect(starts[job] <= 1, "job \(job): started \(starts[job]) times")
            expect(interruptCalls[job] <= 1, "job \(job): interrupted \(interruptCalls[job]) times")
            expect(starts[job] + dropped[job] + rejected[job] <= 1, "job \(job): ended more than one way")
        }
    }

    /// Lets everything that must happen happen, with real wake-ups only.
    func settle() {
        var progress = true
        var rounds = 0
        while progress && rounds < 100 {
            progress = false
            rounds += 1
            for job in scheduled.sorted() {
                interruptStart(job)
                progress = true
            }
            for job in interrupting.sorted() {
                interruptEnd(job)
                progress = true
            }
            for index in workers.indices {
                let before = workers[index]
                stepWorker(index, allowSpurious: false)
                if workers[index] != before { progress = true }
            }
        }
        expect(rounds < 100, "the system does not come to rest")
    }

    /// Checks that hold once the system is at rest.
    func checkEnd() {
        expect(pool.queuedIDs.isEmpty, "jobs \(pool.queuedIDs) wait while every worker sleeps (a lost wake-up)")
        expect(pool.runningIDs.isEmpty, "jobs \(pool.runningIDs) still count as running at rest")
        for job in ids.indices {
            if called[job] {
                expect(
                    deliveries[job].count == 1,
                    "job \(job): caller resumed \(deliveries[job].count) times, expected once")
            }
            if ids[job] != nil {
                expect(
                    starts[job] + dropped[job] + rejected[job] == 1,
                    "job \(job): accepted but neither ran, was dropped, nor rejected")
                expect(starts[job] == finishes[job], "job \(job): started \(starts[job]), finished \(finishes[job])")
            } else {
                expect(starts[job] == 0, "job \(job): ran without being accepted")
            }
            let delivered = deliveries[job].first
            switch delivered {
            case .value(let value)?:
                expect(
                    value == Self.value(of: job) && starts[job] == 1, "job \(job): delivered \(value) without running")
                expect(discards[job].isEmpty, "job \(job): the delivered value was also discarded")
            case .cancelled?:
                expect(sequence.contains(.cancel(job)), "job \(job): cancelled without a cancel")
                expect(
                    discards[job] == (starts[job] == 1 ? [Self.value(of: job)] : []),
                    "job \(job): late value went to onDiscard \(discards[job]) (started \(starts[job]))")
            case .error(.shutDown)?:
                expect(
                    rejected[job] == 1 || rejectedAtSubmit[job] == .shutDown, "job \(job): shutDown without a shutdown")
                expect(starts[job] == 0, "job \(job): rejected but ran")
            case .error(.queueFull)?:
                expect(rejectedAtSubmit[job] != nil, "job \(job): queueFull without a refused submission")
            case .error(let error)?:
                expect(false, "job \(job): unexpected error \(error)")
            case .other(let text)?:
                expect(false, "job \(job): unexpected outcome \(text)")
            case nil:
                break
            }
            if interruptCalls[job] == 1 {
                expect(
                    cancelledWhileRunning[job] && delivered == .cancelled,
                    "job \(job): interrupted without being cancelled while running")
            }
        }
        if shutdownCalls > 0 {
            expect(workers.allSatisfy { $0 == .exited }, "after shutdown, workers are still alive at rest: \(workers)")
            expect(
                shutdownResumes == shutdownCalls,
                "shutdown waiters resumed \(shutdownResumes) times for \(shutdownCalls) calls")
        } else {
            expect(shutdownResumes == 0, "a shutdown waiter was resumed without a shutdown")
            expect(!workers.contains(.exited), "a worker left without a shutdown")
        }
    }

    /// Drops every gate: an undecided one holds a handle that captures the model.
    func tearDown() {
        gates = gates.map { _ in Gate() }
    }
}

private struct Setup {
    var width: Int
    var queueLimit: Int
    var interruptible: [Bool]
}

private func check(_ sequence: [Event], _ setup: Setup) async -> [String] {
    var problems: [String] = []
    _ = try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Int, any Error>) in
        let model = Model(
            width: setup.width, queueLimit: setup.queueLimit, interruptible: setup.interruptible,
            continuation: continuation, sequence: sequence)
        for (index, event) in sequence.enumerated() {
            model.step = index
            model.run(event)
            model.checkStep()
        }
        model.step = sequence.count
        model.settle()
        model.checkStep()
        model.checkEnd()
        model.tearDown()
        problems = model.problems
        // The machines only hand the continuation back; the test resumes it once, here.
        continuation.resume(returning: 0)
    }
    return problems
}

/// Every distinct ordering of the multiset `events` (repeated events are interchangeable).
private func distinctOrderings(of events: [Event]) -> [[Event]] {
    var counts: [Event: Int] = [:]
    var kinds: [Event] = []
    for event in events {
        if counts[event] == nil { kinds.append(event) }
        counts[event, default: 0] += 1
    }
    var result: [[Event]] = []
    var current: [Event] = []
    func extend() {
        if current.count == events.count {
            result.append(current)
            return
        }
        for kind in kinds where counts[kind]! > 0 {
            counts[kind]! -= 1
            current.append(kind)
            extend()
            current.removeLast()
            counts[kind]! += 1
        }
    }
    extend()
    return result
}

private func checkAll(_ events: [Event], _ setup: Setup) async -> Int {
    var checked = 0
    var problems: [String] = []
    for sequence in distinctOrderings(of: events) {
        checked += 1
        problems += await check(sequence, setup)
        // `check` never really suspends: give the cooperative pool back now and then, so that
        // tests running beside this one are not starved for seconds.
        if checked.isMultiple(of: 64) { await Task.yield() }
    }
    let broken = problems.count
    #expect(broken == 0, "broken invariants, first: \(problems.prefix(6).joined(separator: "\n"))")
    return checked
}

/// Whether the process runs under ThreadSanitizer. These tests drive a pure value on one thread:
/// TSan adds nothing to them but a 10× slowdown that starves the thread tests running beside them,
/// so under TSan the largest set and most random rounds are left to the plain run.

@Suite("Offload: every ordering of submit, start, finish, cancel, interrupt and shutdown")
struct OffloadOrderingTests {
    @Test("one thread: two calls, cancel of the first, its interrupt starting and returning, worker steps")
    func cancelAndInterrupt() async {
        let events: [Event] = [
            .call(0), .call(1), .cancel(0), .interruptStart(0), .interruptEnd(0), .worker(0), .worker(0), .worker(0),
        ]
        let count = await checkAll(events, Setup(width: 1, queueLimit: 4, interruptible: [true, false]))
        #expect(count == 6_720)  // 8! / 3!
    }

    @Test(
        "one thread, one waiting slot: a third call overflows; cancel of the second; shutdown drains",
        arguments: [
            OffloadPool.ShutdownMode.drain, .rejectQueued,
        ])
    func queueBoundAndShutdown(mode: OffloadPool.ShutdownMode) async {
        let events: [Event] = [
            .call(0), .call(1), .call(2), .cancel(1), .shutdown(mode), .worker(0), .worker(0), .worker(0),
        ]
        let count = await checkAll(events, Setup(width: 1, queueLimit: 1, interruptible: [false, false, false]))
        #expect(count == 6_720)
    }

    @Test(
        "two threads: both calls cancelled and interrupted, shutdown, each worker stepping",
        .disabled(if: testsUnderSanitizer, "pure state machine: run without sanitizers"))
    func twoWorkers() async {
        // Seconds of CPU: on a thread of its own, so the cooperative pool stays free for the
        // tests that wait with a bound.
        await onOwnThread {
            let events: [Event] = [
                .call(0), .call(1), .cancel(0), .cancel(1), .interruptStart(0), .interruptStart(1), .worker(0),
                .worker(1),
            ]
            let count = await checkAll(events, Setup(width: 2, queueLimit: 0, interruptible: [true, true]))
            #expect(count == 40_320)  // 8!
        }
    }

    @Test("the body returns while its interrupt runs: the worker waits before taking the next call")
    func interruptOverlapsReturn() async {
        let events: [Event] = [
            .call(0), .call(1), .cancel(0), .interruptStart(0), .interruptEnd(0), .worker(0), .worker(0), .worker(0),
            .worker(0),
        ]
        let count = await checkAll(events, Setup(width: 1, queueLimit: 2, interruptible: [true, true]))
        #expect(count == 15_120)  // 9! / 4!
    }

    @Test(
        "shutdown racing calls, a cancel and a parked worker, with interrupts",
        arguments: [
            OffloadPool.ShutdownMode.drain, .rejectQueued,
        ])
    func shutdownRaces(mode: OffloadPool.ShutdownMode) async {
        let events: [Event] = [
            .worker(0), .call(0), .call(1), .cancel(0), .interruptStart(0), .shutdown(mode), .worker(0), .worker(0),
        ]
        let count = await checkAll(events, Setup(width: 1, queueLimit: 1, interruptible: [true, true]))
        #expect(count == 6_720)
    }

    @Test("random long sequences over three threads and five calls (supplement)")
    func randomSequences() async {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        var problems: [String] = []
        for round in 0..<(testsUnderThreadSanitizer ? 300 : 3_000) {
            if round.isMultiple(of: 64) { await Task.yield() }
            var sequence: [Event] = []
            for _ in 0..<Int.random(in: 0...30, using: &generator) {
                let job = Int.random(in: 0..<5, using: &generator)
                let event: Event
                switch Int.random(in: 0..<10, using: &generator) {
                case 0: event = .call(job)
                case 1: event = .cancel(job)
                case 2: event = .interruptStart(job)
                case 3: event = .interruptEnd(job)
                case 4 where Int.random(in: 0..<4, using: &generator) == 0:
                    event = .shutdown(Bool.random(using: &generator) ? .drain : .rejectQueued)
                default: event = .worker(Int.random(in: 0..<3, using: &generator))
                }
                // A caller calls once.
                if case .call(let job) = event, sequence.contains(.call(job)) { continue }
                sequence.append(event)
            }
            let setup = Setup(
                width: 3, queueLimit: Int.random(in: 0...2, using: &generator),
                interruptible: (0..<5).map { _ in Bool.random(using: &generator) })
            problems += await check(sequence, setup)
        }
        let broken = problems.count
        #expect(broken == 0, "seed \(seed): \(problems.prefix(6).joined(separator: "\n"))")
    }
}
