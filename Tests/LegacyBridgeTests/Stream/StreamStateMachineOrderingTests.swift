// Drives CallbackStreamStateMachine through EVERY ordering of every sub-multiset of a
// representative event set: two single yields and one batch, two consumer returns, the handle's
// arrival, the producer's finish, the consumer's stop and the return of a call in flight. The
// actions are executed in a simulation, and the contract's invariants checked at the end.

import TestSupport
import Testing
@testable import LegacyBridge

private typealias Machine = CallbackStreamStateMachine<Int>
private typealias Operation = ProducerControlStateMachine.Operation

private enum Event: CaseIterable, CustomStringConvertible {
    case yield, yieldBatch, next, arrive, finish, stop, returnCall

    /// How many times the event occurs in the full set.
    var limit: Int {
        switch self {
        case .yield, .next: return 2
        case .yieldBatch, .arrive, .finish, .stop, .returnCall: return 1
        }
    }

    var description: String {
        switch self {
        case .yield: "yield"
        case .yieldBatch: "yield(contentsOf:)"
        case .next: "next"
        case .arrive: "arrive"
        case .finish: "finish"
        case .stop: "stop"
        case .returnCall: "return"
        }
    }
}

/// Where a simulation writes what it found: a reference, so that checks can read the simulation.
private final class ProblemLog {
    var problems: [String] = []
}

private let low = 0
private let high = 2

/// Runs one sequence against a fresh `.backpressure(low: 0, high: 2)` machine, performing its actions
/// like the storage does, and returns every broken invariant.
private struct Simulation {
    var machine = Machine(buffering: .backpressure(low: low, high: high), ordering: .arrival)
    let continuation: UnsafeContinuation<Void, Never>
    let handle: StreamControl
    let sequence: [Event]
    let log = ProblemLog()
    var problems: [String] { log.problems }

    var nextValue = 0
    var accepted: [Int] = []
    var delivered: [Int] = []
    var suspended = false
    var wakeUps = 0
    var terminal: String?
    var arrived = false
    var finishedFirst = false
    var stoppedFirst = false
    /// The consumer stopped before it saw a terminal.
    var stopped = false
    var inFlight: [Operation] = []
    var made: [Operation] = []
    var released = 0
    var discarded = 0
    /// Element by element, what acceptedWhilePaused must be.
    var wanted = false
    var expectedOvershoot = 0

    init(_ sequence: [Event], continuation: UnsafeContinuation<Void, Never>, handle: StreamControl) {
        self.sequence = sequence
        self.continuation = continuation
        self.handle = handle
    }

    func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { log.problems.append("\(sequence): \(message())") }
    }

    var held: Int { machine.handoff.held }

    mutating func take(_ action: ProducerControlStateMachine.Action) {
        switch action {
        case .none:
            break
        case .make(let call):
            let serial = call.scheduler != nil
            let allowed = inFlight.isEmpty || (!serial && call.operation == .pause && inFlight == [.resume])
            expect(allowed, "\(call.operation) handed out beside \(inFlight)")
            inFlight.append(call.operation)
            made.append(call.operation)
        case .release:
            released += 1
        }
    }

    mutating func perform(_ effects: Machine.Effects) {
        if effects.wakeUp != nil {
            expect(suspended, "a wake-up for a consumer that is not suspended")
            suspended = false
            wakeUps += 1
        }
        discarded += effects.discarded.count
        take(effects.producer)
    }

    mutating func answered(_ action: Machine.YieldAction) -> YieldOutcome {
        switch action {
        case .answer(let outcome):
            return outcome
        case .evicted:
            expect(false, "backpressure never evicts")
            return .dropped
        case .perform(let effects, let outcome):
            perform(effects)
            return outcome
        }
    }

    /// The producer yields `count` elements, singly or as one batch.
    mutating func yield(_ count: Int, batched: Bool) {
        let streaming = machine.isStreaming
        let values = Array(nextValue..<(nextValue + count))
        nextValue += count
        var outcome: YieldOutcome = .enqueued
        if batched {
            outcome = answered(values.withUnsafeBufferPointer { machine.yield(contentsOf: $0) })
        } else {
            for value in values { outcome = answered(machine.yield(value)) }
        }
        guard streaming else {
            expect(outcome == .terminated, "a yield after the end answered \(outcome)")
            return
        }
        accepted += values
        // The reference, element by element: overshoot beyond the one that reached high.
        var count = held - values.count
        for _ in values {
            count += 1
            if wanted { expectedOvershoot += 1 } else if count >= high { wanted = true }
        }
        let wantsStop = machine.wantsPause && machine.producer.acceptsStopAnswers
        expect(outcome == (wantsStop ? .stopProducing : .enqueued), "answered \(outcome), stop wanted: \(wantsStop)")
    }

    mutating func next() {
        guard !suspended, terminal == nil else { return }
        let wasWanted = machine.wantsPause
        var batch = RingBuffer<Int>()
        switch machine.next(into: &batch) {
        case .batch(let resume):
            if let resume { take(.make(resume)) }
            while let element = batch.popFirst() { delivered.append(element) }
        case .suspend(let resume):
            if let resume { take(.make(resume)) }
            switch machine.suspend(continuation) {
            case .suspended: suspended = true
            case .resume: wakeUps += 1
            }
        case .end:
            terminal = "end"
        case .fail(let error):
            terminal = "\(error)"
        case .cancelled:
            terminal = "cancelled"
        }
        if wasWanted && !machine.wantsPause {
            expect(machine.handoff.held <= low || !machine.isStreaming, "resumed above low")
            wanted = false
        }
    }

    mutating func returnCall() {
        guard !inFlight.isEmpty else { return }
        let operation = inFlight.removeFirst()
        take(machine.callReturned(operation))
    }

    mutating func run() {
        for event in sequence {
            switch event {
            case .yield: yield(1, batched: false)
            case .yieldBatch: yield(2, batched: true)
            case .next: next()
            case .arrive:
                arrived = true
                take(machine.handleArrived(handle))
            case .finish:
                if machine.isStreaming && !stoppedFirst { finishedFirst = true }
                switch machine.finish(nil) {
                case .none: break
                case .perform(let effects): perform(effects)
                }
            case .stop:
                if machine.isStreaming && !finishedFirst { stoppedFirst = true }
                if terminal == nil { stopped = true }
                switch machine.consumerTerminated(cancelled: true) {
                case .none: break
                case .perform(let effects): perform(effects)
                }
            case .returnCall: returnCall()
            }
        }
        // Settle: the handle arrives, every call returns, the consumer reads to the end.
        if !arrived { take(machine.handleArrived(handle)) }
        while !inFlight.isEmpty { returnCall() }
        if !finishedFirst && !stoppedFirst {
            finishedFirst = true
            if case .perform(let effects) = machine.finish(nil) { perform(effects) }
        }
        if suspended {
            expect(false, "the consumer was left suspended after the producer finished")
            suspended = false
        }
        var rounds = 0
        while terminal == nil && rounds < 10 {
            next()
            if suspended { break }
            rounds += 1
        }
        checkEnd()
    }

    mutating func checkEnd() {
        expect(!suspended, "the consumer was left suspended")
        if !stopped {
            expect(terminal == "end", "the consumer got \(terminal ?? "nothing") after a finish")
            expect(delivered == accepted, "delivered \(delivered), accepted \(accepted)")
        } else {
            expect(terminal == "cancelled", "the consumer got \(terminal ?? "nothing") after its stop")
            expect(delivered == Array(accepted.prefix(delivered.count)), "delivered \(delivered) out of order")
            expect(
                delivered.count + discarded == accepted.count, "\(accepted.count - delivered.count - discarded) lost")
        }
        let statistics = machine.statistics
        expect(
            statistics.acceptedWhilePaused == expectedOvershoot,
            "overshoot \(statistics.acceptedWhilePaused), one by one \(expectedOvershoot)")
        expect(statistics.peakBuffered <= high + statistics.acceptedWhilePaused, "peak \(statistics.peakBuffered)")
        expect(statistics.pauses == made.filter { $0 == .pause }.count, "pauses counted \(statistics.pauses): \(made)")
        expect(
            statistics.resumes == made.filter { $0 == .resume }.count, "resumes counted \(statistics.resumes): \(made)")
        let cancels = made.filter { $0 == .cancel }.count
        expect(cancels == (stoppedFirst ? 1 : 0), "cancel made \(cancels) times: \(made)")
        if let index = made.firstIndex(of: .cancel) { expect(index == made.count - 1, "a call after cancel: \(made)") }
        for (index, call) in made.filter({ $0 != .cancel }).enumerated()
        where call != (index % 2 == 0 ? .pause : .resume) {
            expect(false, "pause and resume do not alternate from pause: \(made)")
        }
        expect(released == 1, "the handle was released \(released) times")
    }
}

@Suite("Stream: state machine, every ordering")
struct StreamStateMachineOrderingTests {
    @Test(
        "every ordering of every subset of {2 yields, 1 batch, 2 consumer returns, handle, finish, stop, a call returns}, with and without a scheduler, keeps the contract",
        .disabled(
            if: testsUnderSanitizer,
            "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
    )
    func everyOrdering() async {
        let handles = [
            StreamControl(cancel: CancelHandle {}, pause: {}, resume: {}),
            StreamControl(scheduler: SDKScheduler { _ in }, cancel: CancelHandle {}, pause: {}, resume: {}),
        ]
        let result = StreamShared<(checked: Int, problems: [String])>((0, []))
        // Seconds of CPU: computed on a thread of its own. The machines only hand the consumer's
        // continuation back; it is one real continuation, resumed once, when all are checked.
        await withUnsafeContinuation { (waiter: UnsafeContinuation<Void, Never>) in
            let rc = startDetachedThread(name: "test-compute") {
                var checked = 0
                var problems: [String] = []
                for handle in handles {
                    var sequence: [Event] = []
                    var used: [Event: Int] = [:]
                    func extend() {
                        checked += 1
                        var simulation = Simulation(sequence, continuation: waiter, handle: handle)
                        simulation.run()
                        problems += simulation.problems
                        if problems.count > 10 { return }
                        for event in Event.allCases where used[event, default: 0] < event.limit {
                            used[event, default: 0] += 1
                            sequence.append(event)
                            extend()
                            sequence.removeLast()
                            used[event, default: 0] -= 1
                        }
                    }
                    extend()
                }
                result.value = (checked, problems)
                waiter.resume()
            }
            precondition(rc == 0, "pthread_create failed: \(rc)")
        }
        let (checked, problems) = result.value
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
        #expect(checked == 2 * 253_534)
    }
}
