import Testing
@testable import LegacyBridge

private typealias Machine = ProducerControlStateMachine
private typealias Operation = ProducerControlStateMachine.Operation

private let control = StreamControl(cancel: CancelHandle {}, pause: {}, resume: {})

/// Drives the machine like the storage does, but lets the test decide when an
/// in-flight call completes.
private struct Driver {
    var machine = Machine()
    var inFlight: Operation?
    var delivered: [Operation] = []
    var version: UInt64 = 0

    /// A new pause decision, newer than every earlier one.
    mutating func want(_ paused: Bool) {
        version += 1
        take(machine.setPaused(paused, version: version))
    }

    mutating func take(_ delivery: Machine.Delivery?, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let delivery else { return }
        #expect(inFlight == nil, "a second call was handed out while one is in flight", sourceLocation: sourceLocation)
        inFlight = delivery.operation
        delivered.append(delivery.operation)
    }

    /// The deliverer's call returns.
    mutating func complete() {
        precondition(inFlight != nil)
        inFlight = nil
        take(machine.deliveryCompleted())
    }

    mutating func completeAll() {
        while inFlight != nil { complete() }
    }
}

@Suite("Stream: producer control deliverer")
struct StreamProducerControlTests {
    @Test("a resume decided before a newer pause lands first; the producer ends paused")
    func resumeCannotOvertakePause() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.complete()
        driver.want(false)  // consumer thread starts delivering resume…
        #expect(driver.inFlight == .resume)
        driver.want(true)  // …producer drives the buffer back to high meanwhile
        #expect(driver.delivered == [.pause, .resume], "the new pause must wait for the resume in flight")
        driver.complete()  // resume returns; the same deliverer makes the pause
        #expect(driver.delivered == [.pause, .resume, .pause])
        driver.completeAll()
        #expect(driver.machine.pausedAsTold == true)
    }

    @Test("pause and resume wanted and unwanted while a call is in flight coalesce to nothing")
    func coalesces() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.want(false)
        driver.want(true)
        driver.completeAll()
        #expect(driver.delivered == [.pause])
        #expect(driver.machine.pausedAsTold == true)
    }

    @Test(
        "a pause decided while a resume is in flight is made even if unwanted again (the producer may have stopped on the yield's answer), then the resume"
    )
    func pauseIsNeverDropped() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.complete()
        driver.want(false)  // resume in flight
        driver.want(true)  // a yield answered stopProducing: a pull-style producer stops itself
        driver.want(false)  // the consumer drained again before the resume returned
        driver.completeAll()
        #expect(driver.delivered == [.pause, .resume, .pause, .resume])
        #expect(driver.machine.pausedAsTold == false)
    }

    @Test("a pause decided and undecided before the handle arrives is still made, then the resume")
    func pauseBeforeHandleIsNeverDropped() {
        var driver = Driver()
        driver.want(true)
        driver.want(false)
        driver.take(driver.machine.controlArrived(control))
        driver.completeAll()
        #expect(driver.delivered == [.pause, .resume])
        #expect(driver.machine.pausedAsTold == false)
    }

    @Test("a pause due before the handle arrives is made when it arrives; a cancel requested before it wins")
    func beforeControl() {
        var driver = Driver()
        driver.want(true)
        #expect(driver.delivered.isEmpty)
        driver.take(driver.machine.controlArrived(control))
        driver.completeAll()
        #expect(driver.delivered == [.pause])

        var cancelled = Driver()
        cancelled.want(true)
        cancelled.take(cancelled.machine.requestCancel())
        cancelled.take(cancelled.machine.requestCancel())
        cancelled.take(cancelled.machine.controlArrived(control))
        cancelled.completeAll()
        #expect(cancelled.delivered == [.cancel])
    }

    @Test("cancel supersedes pending pause/resume, is made once, and nothing follows it")
    func cancelIsLast() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.want(false)
        driver.take(driver.machine.requestCancel())
        driver.complete()
        #expect(driver.delivered == [.pause, .cancel])
        driver.want(true)
        driver.take(driver.machine.requestCancel())
        driver.completeAll()
        #expect(driver.delivered == [.pause, .cancel])
    }

    @Test(
        "a pause decision older than the newest one is ignored (decisions applied after the stream's lock was released may arrive out of order)"
    )
    func staleDecisionIgnored() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.take(driver.machine.setPaused(true, version: 1))
        driver.complete()
        // Decided under the stream's lock: resume (v2), then pause (v3); applied in the opposite order.
        driver.take(driver.machine.setPaused(true, version: 3))
        driver.take(driver.machine.setPaused(false, version: 2))
        driver.completeAll()
        #expect(driver.delivered == [.pause])
        #expect(driver.machine.pausedAsTold == true)
        #expect(driver.machine.pauses == 1)
        #expect(driver.machine.resumes == 0)
    }

    @Test("no handle, or a finished producer, means no calls at all")
    func noCalls() {
        var none = Driver()
        none.take(none.machine.requestCancel())
        none.take(none.machine.controlArrived(nil))
        #expect(none.delivered.isEmpty)

        var finished = Driver()
        finished.want(true)
        finished.machine.producerFinished()
        finished.take(finished.machine.requestCancel())
        finished.take(finished.machine.controlArrived(control))
        #expect(finished.delivered.isEmpty)
    }

    @Test(
        "every sequence of up to 7 events (control arrives or is nil, pause, resume, cancel, finish, a call returns) keeps the invariants"
    )
    func exhaustiveInvariants() async {
        // Seconds of CPU (a minute under ThreadSanitizer): computed on a thread of its own so that
        // it does not hold one of the cooperative pool's few threads meanwhile.
        let (checked, failures, recorded) = await onOwnThread { () -> (Int, Int, [String]) in
            var checked = 0
            var failures = 0
            var recorded: [String] = []
            var sequence: [ControlStep] = []
            func extend() {
                if !sequence.isEmpty {
                    checked += 1
                    if let problem = checkControlInvariants(sequence) {
                        failures += 1
                        if failures <= 10 { recorded.append("\(sequence): \(problem)") }
                        return
                    }
                }
                guard sequence.count < 7 else { return }
                for step in ControlStep.allCases {
                    if step.isArrival && sequence.contains(where: \.isArrival) { continue }  // the control arrives once
                    sequence.append(step)
                    extend()
                    sequence.removeLast()
                }
            }
            extend()
            return (checked, failures, recorded)
        }
        for problem in recorded { Issue.record(Comment(rawValue: problem)) }
        #expect(failures == 0, "\(failures) of \(checked) sequences broke an invariant (the first 10 are recorded)")
        // Sequences of length k with at most one of the 2 arrivals among 7 steps: 5^k + 2k·5^(k-1).
        let expected = (1...7).reduce(0) { sum, k in sum + pow5(k) + 2 * k * pow5(k - 1) }
        #expect(checked == expected && expected == 361_327)
    }

    @Test(
        "random event orders keep the invariants: one call in flight, alternating pause/resume, last wanted state reached, cancel once and last"
    )
    func randomisedInvariants() {
        var generator = StreamSplitMix(seed: 42)
        for _ in 0..<3000 {
            var steps: [ControlStep] = []
            for _ in 0..<Int.random(in: 1...14, using: &generator) {
                let step = ControlStep.allCases.randomElement(using: &generator)!
                if step.isArrival && steps.contains(where: \.isArrival) { continue }
                steps.append(step)
            }
            if let problem = checkControlInvariants(steps) { Issue.record("\(steps): \(problem)") }
        }
    }
}

private func pow5(_ exponent: Int) -> Int { (0..<exponent).reduce(1) { product, _ in product * 5 } }

/// One event of the producer-control machine, in the order a test chooses.
private enum ControlStep: CaseIterable, CustomStringConvertible {
    case arrive, arriveNil, wantPause, wantResume, cancel, finish, complete

    var isArrival: Bool { self == .arrive || self == .arriveNil }

    var description: String {
        switch self {
        case .arrive: "arrive"
        case .arriveNil: "arrive(nil)"
        case .wantPause: "pause"
        case .wantResume: "resume"
        case .cancel: "cancel"
        case .finish: "finish"
        case .complete: "complete"
        }
    }
}

/// Runs `steps` (then lets the control arrive if it has not, and every call return) and
/// returns the first broken invariant: one call in flight at a time, pause and resume
/// alternating from pause, cancel made once and last (never without a control), and the
/// producer left in the last wanted state unless cancelled or finished.
private func checkControlInvariants(_ steps: [ControlStep]) -> String? {
    var machine = Machine()
    var inFlight: Operation?
    var delivered: [Operation] = []
    var secondInFlight = false
    var version: UInt64 = 0
    func take(_ delivery: Machine.Delivery?) {
        guard let delivery else { return }
        if inFlight != nil { secondInFlight = true }
        inFlight = delivery.operation
        delivered.append(delivery.operation)
    }
    var arrived = false
    var nilControl = false
    var wanted = false
    var cancelRequested = false
    var finished = false
    for step in steps {
        switch step {
        case .arrive, .arriveNil:
            arrived = true
            nilControl = step == .arriveNil
            take(machine.controlArrived(nilControl ? nil : control))
        case .wantPause, .wantResume:
            wanted = step == .wantPause
            version += 1
            take(machine.setPaused(wanted, version: version))
        case .cancel:
            if !finished { cancelRequested = true }
            take(machine.requestCancel())
        case .finish:
            finished = true
            machine.producerFinished()
        case .complete:
            if inFlight != nil {
                inFlight = nil
                take(machine.deliveryCompleted())
            }
        }
    }
    if !arrived { take(machine.controlArrived(control)) }
    var rounds = 0
    while inFlight != nil {
        inFlight = nil
        take(machine.deliveryCompleted())
        rounds += 1
        if rounds > 100 { return "calls keep coming after every step was taken: \(delivered)" }
    }

    if secondInFlight { return "a second call was handed out while one was in flight: \(delivered)" }
    let cancels = delivered.filter { $0 == .cancel }.count
    if cancels != (cancelRequested && !nilControl ? 1 : 0) { return "cancel made \(cancels) times: \(delivered)" }
    if let index = delivered.firstIndex(of: .cancel), index != delivered.count - 1 {
        return "a call followed the cancel: \(delivered)"
    }
    for (index, call) in delivered.filter({ $0 != .cancel }).enumerated()
    where call != (index % 2 == 0 ? .pause : .resume) {
        return "pause and resume do not alternate from pause: \(delivered)"
    }
    if !cancelRequested && !finished && !nilControl && machine.pausedAsTold != wanted {
        let told = machine.pausedAsTold.map { $0 ? "paused" : "running" } ?? "untold"
        return "the producer was left \(told), the last wish was \(wanted ? "paused" : "running"): \(delivered)"
    }
    return nil
}

/// Every order in which the stream's alternating pause/resume decisions (versions 1, 2, … in the
/// order the stream's lock made them) can be applied to the machine, interleaved with the handle
/// arriving and with in-flight calls completing, checked against the contract a pull-style
/// producer relies on.
@Suite("Stream: producer control, every application order")
private struct StreamProducerControlOrderTests {
    /// One step of a schedule.
    enum Step: Hashable {
        case apply(Int)  // apply decision with this index (version = index + 1)
        case complete
        case controlArrives
    }

    /// Runs `schedule` (decisions alternate pause, resume, pause, … starting with pause) and
    /// returns the calls made, each with the step index at which it was handed out.
    static func run(_ schedule: [Step], decisions: Int) -> (calls: [(Operation, Int)], machine: Machine)? {
        var machine = Machine()
        var inFlight: Operation?
        var calls: [(Operation, Int)] = []
        func take(_ delivery: Machine.Delivery?, at step: Int) -> Bool {
            guard let delivery else { return true }
            if inFlight != nil { return false }
            inFlight = delivery.operation
            calls.append((delivery.operation, step))
            return true
        }
        for (index, step) in schedule.enumerated() {
            switch step {
            case .apply(let decision):
                let paused = decision % 2 == 0
                guard take(machine.setPaused(paused, version: UInt64(decision + 1)), at: index) else { return nil }
            case .complete:
                guard inFlight != nil else { return nil }  // not a valid schedule
                inFlight = nil
                guard take(machine.deliveryCompleted(), at: index) else { return nil }
            case .controlArrives:
                guard take(machine.controlArrived(control), at: index) else { return nil }
            }
        }
        while inFlight != nil {
            inFlight = nil
            guard take(machine.deliveryCompleted(), at: schedule.count) else { return nil }
        }
        return (calls, machine)
    }

    /// Every schedule: the decisions in any order, the handle arriving at any point, and a
    /// `complete` allowed wherever a call could be in flight.
    static func schedules(decisions: Int) -> [[Step]] {
        var result: [[Step]] = []
        func extend(_ prefix: [Step], remaining: Set<Int>, controlDone: Bool, completes: Int) {
            if remaining.isEmpty && controlDone {
                result.append(prefix)
            }
            for decision in remaining.sorted() {
                extend(
                    prefix + [.apply(decision)], remaining: remaining.subtracting([decision]), controlDone: controlDone,
                    completes: completes)
            }
            if !controlDone {
                extend(prefix + [.controlArrives], remaining: remaining, controlDone: true, completes: completes)
            }
            // A complete step between others (invalid ones are discarded when run); bounded.
            if controlDone && completes < decisions + 1 && !remaining.isEmpty && prefix.last != .complete {
                extend(prefix + [.complete], remaining: remaining, controlDone: controlDone, completes: completes + 1)
            }
        }
        extend([], remaining: Set(0..<decisions), controlDone: false, completes: 0)
        return result
    }

    @Test(
        "for up to 4 decisions applied in every order: calls never overlap, the producer ends in the newest wanted state, and every applied pause (its yield said stop) is followed by a resume unless the newest decision is a pause"
    )
    func everyOrder() {
        var checked = 0
        for decisions in 1...4 {
            for schedule in Self.schedules(decisions: decisions) {
                guard let (calls, machine) = Self.run(schedule, decisions: decisions) else { continue }
                checked += 1
                let newestWantsPause = (decisions - 1) % 2 == 0
                #expect(machine.pausedAsTold == newestWantsPause, "\(schedule): \(calls.map(\.0))")
                if !newestWantsPause {
                    // Each pause decision's application step must be followed by a resume call.
                    for (index, step) in schedule.enumerated() {
                        guard case .apply(let decision) = step, decision % 2 == 0 else { continue }
                        let resumedAfter = calls.contains { $0.0 == .resume && $0.1 >= index }
                        let madeAnyCall = !calls.isEmpty
                        // Before the handle arrives nothing can be called; the pause is then due on arrival.
                        #expect(
                            resumedAfter && madeAnyCall,
                            "pause decision \(decision + 1) applied at step \(index) was never followed by a resume: \(schedule) → \(calls.map(\.0))"
                        )
                    }
                }
                // Calls alternate: a pause is never followed by another pause without a resume between.
                let operations = calls.map(\.0)
                for (first, second) in zip(operations, operations.dropFirst()) {
                    #expect(first != second, "\(schedule): two \(first) calls in a row: \(operations)")
                }
            }
        }
        #expect(checked > 400, "only \(checked) schedules were valid")
    }
}
