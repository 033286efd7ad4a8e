import Testing
import TestSupport
@testable import LegacyBridge

private typealias Machine = ProducerControlStateMachine
private typealias Operation = ProducerControlStateMachine.Operation

/// A handle without a scheduler: pause starts beside a returning resume.
private let direct = StreamControl(cancel: CancelHandle {}, pause: {}, resume: {})
/// A handle with a scheduler: one call in flight at a time.
private let posted = StreamControl(scheduler: SDKScheduler { _ in }, cancel: CancelHandle {}, pause: {}, resume: {})

/// Drives the machine like the storage does, but lets the test decide when each call in flight returns.
private struct Driver {
    var machine = Machine()
    /// Calls in flight, oldest first.
    var inFlight: [Operation] = []
    var made: [Operation] = []
    var released = 0
    /// Set when the machine handed out a call that may not start beside those in flight.
    var overlap: String?

    mutating func take(_ action: Machine.Action) {
        switch action {
        case .none:
            break
        case .make(let call):
            let serial = call.scheduler != nil
            let allowed =
                inFlight.isEmpty || (!serial && call.operation == .pause && inFlight == [.resume])
            if !allowed && overlap == nil { overlap = "\(call.operation) handed out beside \(inFlight)" }
            inFlight.append(call.operation)
            made.append(call.operation)
        case .release:
            released += 1
        }
    }

    mutating func want(_ paused: Bool) {
        take(paused ? machine.pauseDecided() : machine.resumeDecided())
    }

    /// The call in flight at `index` (oldest first) returns.
    mutating func complete(_ index: Int = 0, sourceLocation: SourceLocation = #_sourceLocation) {
        guard inFlight.indices.contains(index) else {
            Issue.record("no call \(index) in flight: \(inFlight)", sourceLocation: sourceLocation)
            return
        }
        let operation = inFlight.remove(at: index)
        take(machine.callReturned(operation))
    }

    mutating func completeAll() {
        while !inFlight.isEmpty { complete() }
    }
}

@Suite("Stream: producer control")
struct StreamProducerControlTests {
    @Test("without a scheduler, a pause decided while the resume before it still returns starts at once")
    func pauseStartsBesideReturningResume() {
        var driver = Driver()
        driver.take(driver.machine.handleArrived(direct))
        driver.want(true)
        driver.complete()
        driver.want(false)  // the consumer's thread is inside resume…
        #expect(driver.inFlight == [.resume])
        driver.want(true)  // …and the producer it woke reaches high: the pause may not wait for it
        #expect(driver.inFlight == [.resume, .pause], "the pause must be handed to the yield that decided it")
        driver.complete(0)  // the resume returns first: nothing follows
        #expect(driver.inFlight == [.pause])
        driver.completeAll()
        #expect(driver.made == [.pause, .resume, .pause])
        #expect(driver.machine.pausedAsTold == true)
        #expect(driver.overlap == nil)
    }

    @Test("with a scheduler, a pause decided while a resume is in flight waits for it; the producer ends paused")
    func serialPauseWaitsForResume() {
        var driver = Driver()
        driver.take(driver.machine.handleArrived(posted))
        driver.want(true)
        driver.complete()
        driver.want(false)
        driver.want(true)
        #expect(driver.made == [.pause, .resume], "the new pause must wait for the resume in flight")
        driver.complete()  // the resume returns; the same job makes the pause
        #expect(driver.made == [.pause, .resume, .pause])
        driver.completeAll()
        #expect(driver.machine.pausedAsTold == true)
        #expect(driver.overlap == nil)
    }

    @Test("a resume never starts while a pause is in flight: the pause's thread makes it when the pause returns")
    func resumeWaitsForPause() {
        for control in [direct, posted] {
            var driver = Driver()
            driver.take(driver.machine.handleArrived(control))
            driver.want(true)
            driver.want(false)
            #expect(driver.inFlight == [.pause])
            driver.complete()
            #expect(driver.inFlight == [.resume])
            driver.completeAll()
            #expect(driver.made == [.pause, .resume])
            #expect(driver.overlap == nil)
        }
    }

    @Test("a resume overtaken by a new pause while a call is in flight is not made")
    func coalesces() {
        for control in [direct, posted] {
            var driver = Driver()
            driver.take(driver.machine.handleArrived(control))
            driver.want(true)
            driver.want(false)
            driver.want(true)
            driver.completeAll()
            #expect(driver.made == [.pause])
            #expect(driver.machine.pausedAsTold == true)
        }
    }

    @Test(
        "with a scheduler, a pause decided behind a resume is made even if unwanted again (the producer may have stopped on the yield's answer), then the resume"
    )
    func pauseIsNeverDropped() {
        var driver = Driver()
        driver.take(driver.machine.handleArrived(posted))
        driver.want(true)
        driver.complete()
        driver.want(false)  // resume in flight
        driver.want(true)  // a yield answered stopProducing: a pull-style producer stops itself
        driver.want(false)  // the consumer drained again before the resume returned
        driver.completeAll()
        #expect(driver.made == [.pause, .resume, .pause, .resume])
        #expect(driver.machine.pausedAsTold == false)
    }

    @Test("a pause decided and undecided before the handle arrives is still made, then the resume")
    func pauseBeforeHandleIsNeverDropped() {
        var driver = Driver()
        driver.want(true)
        driver.want(false)
        driver.take(driver.machine.handleArrived(direct))
        driver.completeAll()
        #expect(driver.made == [.pause, .resume])
        #expect(driver.machine.pausedAsTold == false)
    }

    @Test("a pause due before the handle arrives is made when it arrives; a cancel requested before it wins")
    func beforeHandle() {
        var driver = Driver()
        driver.want(true)
        #expect(driver.made.isEmpty)
        driver.take(driver.machine.handleArrived(direct))
        driver.completeAll()
        #expect(driver.made == [.pause])

        var cancelled = Driver()
        cancelled.want(true)
        cancelled.take(cancelled.machine.cancelRequested())
        cancelled.take(cancelled.machine.cancelRequested())
        cancelled.take(cancelled.machine.handleArrived(direct))
        cancelled.completeAll()
        #expect(cancelled.made == [.cancel])
        #expect(cancelled.released == 1)
    }

    @Test("cancel waits for every call in flight, is made once, nothing follows it, and then the handle is released")
    func cancelIsLast() {
        var driver = Driver()
        driver.take(driver.machine.handleArrived(direct))
        driver.want(true)
        driver.complete()
        driver.want(false)
        driver.want(true)
        #expect(driver.inFlight == [.resume, .pause])
        driver.take(driver.machine.cancelRequested())
        driver.complete(1)
        #expect(driver.inFlight == [.resume], "cancel must wait for the resume still in flight")
        driver.complete()
        #expect(driver.inFlight == [.cancel])
        driver.want(true)
        driver.take(driver.machine.cancelRequested())
        #expect(driver.released == 0)
        driver.completeAll()
        #expect(driver.made == [.pause, .resume, .pause, .cancel])
        #expect(driver.released == 1)
        #expect(driver.overlap == nil)
    }

    @Test("decisions reach the control in the order the stream made them: a pause right after a resume is never lost")
    func decisionsInOrder() {
        // Both decisions and calls are made under the stream's one lock: a resume decided by the
        // consumer, then a pause decided by a producer before the resume was even made, reach
        // the control machine in that order, so the producer ends paused whatever returns first.
        var machine = CallbackStreamStateMachine<Int>(buffering: .backpressure(low: 0, high: 2), ordering: .arrival)
        guard case .none = machine.handleArrived(direct) else { Issue.record("no call was due"); return }
        _ = machine.yield(0)
        guard case .perform(let paused, .stopProducing) = machine.yield(1), case .make(let pause) = paused.producer
        else {
            Issue.record("reaching high hands out a pause")
            return
        }
        #expect(pause.operation == .pause)
        #expect(machine.callReturned(.pause).isNone)
        var batch = RingBuffer<Int>()
        guard case .batch(nil) = machine.next(into: &batch) else { Issue.record("a batch, no resume"); return }
        batch.removeAll()
        guard case .suspend(let resume?) = machine.next(into: &batch) else { Issue.record("a resume"); return }
        #expect(resume.operation == .resume)
        _ = machine.yield(2)
        guard case .perform(let effects, .stopProducing) = machine.yield(3), case .make(let second) = effects.producer
        else {
            Issue.record("the second pause is handed out beside the resume in flight")
            return
        }
        #expect(second.operation == .pause)
        #expect(machine.callReturned(.resume).isNone)
        #expect(machine.callReturned(.pause).isNone)
        #expect(machine.producer.pausedAsTold == true)
        #expect(machine.statistics.pauses == 2 && machine.statistics.resumes == 1)
    }

    @Test("no handle, or a finished producer, means no calls at all")
    func noCalls() {
        var none = Driver()
        none.take(none.machine.cancelRequested())
        none.take(none.machine.handleArrived(nil))
        #expect(none.made.isEmpty)
        #expect(none.released == 0)

        var finished = Driver()
        finished.want(true)
        finished.take(finished.machine.producerFinished())
        finished.take(finished.machine.cancelRequested())
        finished.take(finished.machine.handleArrived(direct))
        #expect(finished.made.isEmpty)
        #expect(finished.released == 1, "a handle that can never be called is released at once")
    }

    @Test(
        "every sequence of up to 6 events (the handle arrives or is nil, pause, resume, cancel, finish, the oldest or newest call in flight returns), with and without a scheduler, keeps the invariants"
    )
    func exhaustiveInvariants() async {
        // Seconds of CPU (a minute under ThreadSanitizer): computed on a thread of its own so that
        // it does not hold one of the cooperative pool's few threads meanwhile.
        let (checked, failures, recorded) = await onOwnThread { () -> (Int, Int, [String]) in
            var checked = 0
            var failures = 0
            var recorded: [String] = []
            for control in [direct, posted] {
                var sequence: [ControlStep] = []
                func extend() {
                    if !sequence.isEmpty {
                        checked += 1
                        if let problem = checkControlInvariants(sequence, control: control) {
                            failures += 1
                            if failures <= 10 { recorded.append("\(sequence): \(problem)") }
                            return
                        }
                    }
                    guard sequence.count < 6 else { return }
                    for step in ControlStep.allCases {
                        // The handle arrives once.
                        if step.isArrival && sequence.contains(where: \.isArrival) { continue }
                        sequence.append(step)
                        extend()
                        sequence.removeLast()
                    }
                }
                extend()
            }
            return (checked, failures, recorded)
        }
        for problem in recorded { Issue.record(Comment(rawValue: problem)) }
        #expect(failures == 0, "\(failures) of \(checked) sequences broke an invariant (the first 10 are recorded)")
        // Sequences of length k with at most one of the 2 arrivals among 8 steps: 6^k + 2k·6^(k-1), twice.
        let expected = 2 * (1...6).reduce(0) { sum, k in sum + power(6, k) + 2 * k * power(6, k - 1) }
        #expect(checked == expected && expected == 328_456)
    }

    @Test(
        "random event orders keep the invariants: allowed overlaps only, alternating pause/resume, every decided pause made, last wanted state reached, cancel once and last, the handle released once"
    )
    func randomisedInvariants() {
        var generator = SplitMix64(seed: 42)
        for round in 0..<6000 {
            var steps: [ControlStep] = []
            for _ in 0..<Int.random(in: 1...16, using: &generator) {
                let step = ControlStep.allCases.randomElement(using: &generator)!
                if step.isArrival && steps.contains(where: \.isArrival) { continue }
                steps.append(step)
            }
            let control = round % 2 == 0 ? direct : posted
            if let problem = checkControlInvariants(steps, control: control) { Issue.record("\(steps): \(problem)") }
        }
    }

    @Test(
        "for up to 5 alternating decisions interleaved in every way with the handle's arrival and the calls' returns: a producer that stopped on a pause is always resumed when the newest decision is a resume"
    )
    func everyInterleaving() {
        var checked = 0
        for control in [direct, posted] {
            for decisions in 1...5 {
                var schedule: [ScheduleStep] = []
                func extend(decided: Int, arrived: Bool, returns: Int) {
                    if decided == decisions && arrived {
                        checked += 1
                        if let problem = checkSchedule(schedule, decisions: decisions, control: control) {
                            Issue.record("\(schedule): \(problem)")
                        }
                    }
                    var next: [ScheduleStep] = []
                    if decided < decisions { next.append(.decide) }
                    if !arrived { next.append(.arrive) }
                    // Returns between decisions, at most two in a row (two calls can be in flight).
                    let trailingReturns = schedule.reversed().prefix { $0 == .returnOldest || $0 == .returnNewest }
                        .count
                    if arrived && decided < decisions && trailingReturns < 2 && returns <= decisions {
                        next += [.returnOldest, .returnNewest]
                    }
                    for step in next {
                        let isReturn = step == .returnOldest || step == .returnNewest
                        schedule.append(step)
                        extend(
                            decided: decided + (step == .decide ? 1 : 0), arrived: arrived || step == .arrive,
                            returns: returns + (isReturn ? 1 : 0))
                        schedule.removeLast()
                    }
                }
                extend(decided: 0, arrived: false, returns: 0)
            }
        }
        #expect(checked > 10_000, "only \(checked) schedules")
    }
}

private func power(_ base: Int, _ exponent: Int) -> Int { (0..<exponent).reduce(1) { product, _ in product * base } }

extension ProducerControlStateMachine.Action {
    var isNone: Bool {
        switch self {
        case .none: return true
        case .make, .release: return false
        }
    }
}

/// One event of the producer-control machine, in the order a test chooses.
private enum ControlStep: CaseIterable, CustomStringConvertible {
    case arrive, arriveNil, wantPause, wantResume, cancel, finish, returnOldest, returnNewest

    var isArrival: Bool { self == .arrive || self == .arriveNil }

    var description: String {
        switch self {
        case .arrive: "arrive"
        case .arriveNil: "arrive(nil)"
        case .wantPause: "pause"
        case .wantResume: "resume"
        case .cancel: "cancel"
        case .finish: "finish"
        case .returnOldest: "return(oldest)"
        case .returnNewest: "return(newest)"
        }
    }
}

/// Runs `steps` (then lets the handle arrive if it has not, and every call return) and returns
/// the first broken invariant.
private func checkControlInvariants(_ steps: [ControlStep], control: StreamControl) -> String? {
    var driver = Driver()
    var arrived = false
    var nilHandle = false
    var wanted = false
    var cancelRequested = false
    var finished = false
    /// Indexes into `made` from which a pause is owed: decided while the producer counted as running.
    var owedPauses: [Int] = []
    for step in steps {
        switch step {
        case .arrive, .arriveNil:
            arrived = true
            nilHandle = step == .arriveNil
            driver.take(driver.machine.handleArrived(nilHandle ? nil : control))
        case .wantPause:
            if !cancelRequested && !finished && driver.machine.pausedAsTold != true {
                owedPauses.append(driver.made.count)
            }
            wanted = true
            driver.want(true)
        case .wantResume:
            wanted = false
            driver.want(false)
        case .cancel:
            if !finished { cancelRequested = true }
            driver.take(driver.machine.cancelRequested())
        case .finish:
            finished = true
            driver.take(driver.machine.producerFinished())
        case .returnOldest:
            if !driver.inFlight.isEmpty { driver.complete(0) }
        case .returnNewest:
            if !driver.inFlight.isEmpty { driver.complete(driver.inFlight.count - 1) }
        }
    }
    if !arrived { driver.take(driver.machine.handleArrived(control)) }
    var rounds = 0
    while !driver.inFlight.isEmpty {
        driver.complete()
        rounds += 1
        if rounds > 100 { return "calls keep coming after every step was taken: \(driver.made)" }
    }

    let made = driver.made
    if let overlap = driver.overlap { return "\(overlap): \(made)" }
    let cancels = made.filter { $0 == .cancel }.count
    if cancels != (cancelRequested && !nilHandle ? 1 : 0) { return "cancel made \(cancels) times: \(made)" }
    if let index = made.firstIndex(of: .cancel), index != made.count - 1 {
        return "a call followed the cancel: \(made)"
    }
    for (index, call) in made.filter({ $0 != .cancel }).enumerated() where call != (index % 2 == 0 ? .pause : .resume) {
        return "pause and resume do not alternate from pause: \(made)"
    }
    // A cancel or the producer's end supersedes a pause not made yet.
    if !nilHandle && !cancelRequested && !finished {
        for start in owedPauses where !made[start...].contains(.pause) {
            return "a pause decided while running was never made: \(made)"
        }
    }
    if !cancelRequested && !finished && !nilHandle && driver.machine.pausedAsTold != wanted {
        let told = driver.machine.pausedAsTold.map { $0 ? "paused" : "running" } ?? "untold"
        return "the producer was left \(told), the last wish was \(wanted ? "paused" : "running"): \(made)"
    }
    let shouldRelease = !nilHandle && (cancelRequested || finished)
    if driver.released != (shouldRelease ? 1 : 0) { return "the handle was released \(driver.released) times: \(made)" }
    return nil
}

/// One step of an interleaving of alternating decisions (pause, resume, pause, …).
private enum ScheduleStep: Hashable, CustomStringConvertible {
    case decide, arrive, returnOldest, returnNewest

    var description: String {
        switch self {
        case .decide: "decide"
        case .arrive: "arrive"
        case .returnOldest: "return(oldest)"
        case .returnNewest: "return(newest)"
        }
    }
}

/// Runs one interleaving and checks what a pull-style producer relies on: it stops on a pause
/// decision's answer, so when the newest decision is a resume, a resume call must come after
/// every pause decision; and the producer ends in the newest wanted state.
private func checkSchedule(_ schedule: [ScheduleStep], decisions: Int, control: StreamControl) -> String? {
    var driver = Driver()
    var decided = 0
    var pauseDecisionAt: [Int] = []
    for step in schedule {
        switch step {
        case .decide:
            let pause = decided % 2 == 0
            if pause { pauseDecisionAt.append(driver.made.count) }
            driver.want(pause)
            decided += 1
        case .arrive:
            driver.take(driver.machine.handleArrived(control))
        case .returnOldest:
            if !driver.inFlight.isEmpty { driver.complete(0) }
        case .returnNewest:
            if !driver.inFlight.isEmpty { driver.complete(driver.inFlight.count - 1) }
        }
    }
    driver.completeAll()
    if let overlap = driver.overlap { return overlap }
    let newestWantsPause = (decisions - 1) % 2 == 0
    if driver.machine.pausedAsTold != newestWantsPause {
        return "ended \(driver.made), wanted paused: \(newestWantsPause)"
    }
    if !newestWantsPause {
        for start in pauseDecisionAt where !driver.made[start...].contains(.resume) {
            return "a pause decision was never followed by a resume: \(driver.made)"
        }
    }
    for (first, second) in zip(driver.made, driver.made.dropFirst()) where first == second {
        return "two \(first) calls in a row: \(driver.made)"
    }
    return nil
}
