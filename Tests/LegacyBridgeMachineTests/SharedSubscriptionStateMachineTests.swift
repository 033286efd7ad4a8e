// Drives SharedSubscriptionStateMachine through every sequence of its events up to a length, for
// every combination of linger, replay and restart policy, over two consumers that may come back
// once: joins, catching up, leaves, pauses and resumes, consumer B's buffer going over its limit
// (which ends B alone), the producer's start returning (or
// throwing), yields of the current and of a stale run, finishes, control calls returning, the
// linger timer being armed and firing, and `restart`. After every step the machine's answers must
// agree with the contract; after every sequence the world is run to rest (every start and call
// returns, every timer fires, every consumer leaves) and every run must have ended exactly once.

import Testing
@testable import LegacyBridge
import TestSupport

private typealias Machine = SharedSubscriptionStateMachine<Int, Int, Int>

private struct Configuration: CustomStringConvertible {
    var lingers: Bool
    var replay: Int
    var automatic: Bool

    var description: String { "lingers: \(lingers), replay: \(replay), automatic: \(automatic)" }

    static let all: [Configuration] = [false, true].flatMap { lingers in
        [0, 1].flatMap { replay in [false, true].map { Configuration(lingers: lingers, replay: replay, automatic: $0) }
        }
    }
}

private enum Event: CaseIterable {
    case joinA, joinB
    /// The consumer that is catching up takes its backlog.
    case drain
    case leaveA, leaveB
    /// Consumer A's buffer reaches high, or drains to low.
    case pauseA, resumeA
    /// Consumer B's buffer goes over its limit: B alone is ended with the slow-consumer error.
    case overflowB
    /// The oldest `start` in flight returns a control, returns nil, or throws.
    case startReturns, startReturnsNil, startThrows
    /// The newest started run yields or finishes; the run before it yields late.
    case yield, finish, staleYield
    /// The oldest control call in flight returns.
    case callReturns
    /// The oldest linger timer being armed is armed; the oldest armed one fires.
    case armTimer, fireTimer
    case restart
}

private enum Slot: Equatable {
    case out
    case catchingUp(id: Int)
    case live(id: Int)
}

private struct Consumer {
    var slot = Slot.out
    /// Times it joined.
    var joins = 0
    /// Terminals received in its current membership.
    var terminals = 0
    /// Elements received in its current membership, in order.
    var received: [Int] = []
    var paused = false
    /// Catching up, and a terminal waits behind its backlog.
    var ending = false
}

private struct Run {
    var startReturned = false
    var control = false
    var ended = false
    /// A stop was decided before it ended.
    var stopDecided = false
    var cancelsMade = 0
    var cancelReturned = false
    var callAfterCancel = false
}

private struct World {
    var machine: Machine
    var consumers = [Consumer(), Consumer()]
    var runs: [UInt64: Run] = [:]
    var startsInFlight: [UInt64] = []
    var callsInFlight: [(generation: UInt64, operation: ProducerControlStateMachine.Operation)] = []
    var arming: [UInt64] = []
    var armed: [Int] = []
    var cancelledTimers: Set<Int> = []
    var nextID = 0
    var nextElement = 0
    var lastStarted: UInt64 = 0
    var stopsSeen = 0
    let configuration: Configuration

    init(_ configuration: Configuration) {
        self.configuration = configuration
        self.machine = Machine(
            replayLimit: configuration.replay, lingers: configuration.lingers,
            restartsAutomatically: configuration.automatic)
    }

    static let control = StreamControl(cancel: CancelHandle {}, pause: {}, resume: {})

    var present: Int {
        consumers.count(where: { $0.slot != .out && !$0.ending })
    }

    func index(of id: Int) -> Int? {
        consumers.firstIndex(where: { $0.slot == .live(id: id) || $0.slot == .catchingUp(id: id) })
    }

    // MARK: Events

    mutating func apply(_ event: Event) -> String?? {
        switch event {
        case .joinA: return join(0)
        case .joinB: return join(1)
        case .drain:
            guard let index = consumers.firstIndex(where: { if case .catchingUp = $0.slot { true } else { false } }),
                case .catchingUp(let id) = consumers[index].slot
            else { return nil }
            return .some(drain(index, id))
        case .leaveA: return leave(0)
        case .leaveB: return leave(1)
        case .pauseA:
            guard case .live(let id) = consumers[0].slot, !consumers[0].paused else { return nil }
            consumers[0].paused = true
            return .some(perform(machine.consumerPaused(id), "pause"))
        case .resumeA:
            guard case .live(let id) = consumers[0].slot, consumers[0].paused else { return nil }
            consumers[0].paused = false
            return .some(perform(machine.consumerResumed(id), "resume"))
        case .overflowB:
            return overflow(1)
        case .startReturns, .startReturnsNil, .startThrows:
            guard !startsInFlight.isEmpty else { return nil }
            let generation = startsInFlight.removeFirst()
            runs[generation]!.startReturned = true
            runs[generation]!.control = event == .startReturns
            if let failure = perform(
                machine.startReturned(generation, event == .startReturns ? Self.control : nil), "startReturned")
            {
                return .some(failure)
            }
            if event == .startThrows { return .some(finish(generation)) }
            return .some(nil)
        case .yield:
            guard lastStarted > 0 else { return nil }
            return .some(yield(lastStarted))
        case .staleYield:
            guard lastStarted > 1 else { return nil }
            return .some(yield(lastStarted - 1))
        case .finish:
            guard lastStarted > 0, !runs[lastStarted]!.ended else { return nil }
            return .some(finish(lastStarted))
        case .callReturns:
            guard !callsInFlight.isEmpty else { return nil }
            let call = callsInFlight.removeFirst()
            if call.operation == .cancel { runs[call.generation]!.cancelReturned = true }
            return .some(perform(machine.callReturned(call.generation, call.operation), "callReturned"))
        case .armTimer:
            guard !arming.isEmpty else { return nil }
            let token = arming.removeFirst()
            if let timer = machine.lingerArmed(token, Int(token)) {
                cancelledTimers.insert(timer)
            } else {
                armed.append(Int(token))
            }
            return .some(nil)
        case .fireTimer:
            guard let index = armed.firstIndex(where: { !cancelledTimers.contains($0) }) else { return nil }
            let token = armed.remove(at: index)
            return .some(perform(machine.lingerFired(UInt64(token)), "lingerFired"))
        case .restart:
            _ = machine.restart()
            return .some(nil)
        }
    }

    mutating func join(_ index: Int) -> String?? {
        guard consumers[index].slot == .out, consumers[index].joins < 2 else { return nil }
        nextID += 1
        let id = nextID
        let armedBefore = armed.filter { !cancelledTimers.contains($0) }
        let stopsBefore = stopsSeen
        let action = machine.join(id, id)
        consumers[index].joins += 1
        consumers[index].terminals = 0
        consumers[index].received = []
        consumers[index].paused = false
        consumers[index].ending = false
        if let failure = perform(action.effects, "join") { return .some(failure) }
        if stopsSeen != stopsBefore || machine.statistics.stops != stopsBefore { return .some("a join decided a stop") }
        // A new consumer cancels a linger timer that is armed (one still arming finds itself stale).
        for timer in armedBefore where !cancelledTimers.contains(timer) {
            if case .ended = action.delivery { continue }
            return .some("a consumer arrived, but linger timer \(timer) was not cancelled")
        }
        if let generation = action.start, let failure = started(generation) { return .some(failure) }
        switch action.delivery {
        case .live:
            consumers[index].slot = .live(id: id)
        case .catchUp:
            consumers[index].slot = .catchingUp(id: id)
        case .ended(let replay, _):
            consumers[index].received = replay
            consumers[index].terminals = 1
        }
        return .some(nil)
    }

    mutating func drain(_ index: Int, _ id: Int) -> String? {
        switch machine.drain(id) {
        case .elements(let batch):
            consumers[index].received += batch
        case .caughtUp:
            if consumers[index].ending { return "a catching-up consumer lost its terminal" }
            consumers[index].slot = .live(id: id)
        case .ended(let batch, _):
            if !consumers[index].ending { return "a catching-up consumer ended without a terminal" }
            consumers[index].received += batch
            consumers[index].terminals += 1
            consumers[index].slot = .out
        case .gone:
            return "a catching-up consumer was forgotten"
        }
        return nil
    }

    mutating func leave(_ index: Int) -> String?? {
        guard case .live(let id) = consumers[index].slot else { return nil }
        consumers[index].slot = .out
        consumers[index].paused = false
        return .some(perform(machine.leave(id), "leave"))
    }

    mutating func overflow(_ index: Int) -> String?? {
        let id: Int
        switch consumers[index].slot {
        case .out: return nil
        case .live(let live): id = live
        case .catchingUp(let catching): id = catching
        }
        let others = consumers.indices.filter { $0 != index }.map { (consumers[$0].slot, consumers[$0].terminals) }
        let endedBefore = machine.statistics.slowConsumersEnded
        let ending = consumers[index].ending
        if !ending {
            // It is ended, with the error as its terminal, and gone.
            consumers[index].slot = .out
            consumers[index].terminals += 1
        }
        let effects = machine.consumerOverflowed(id)
        if let failure = perform(effects, "overflow") { return .some(failure) }
        if ending {
            // Its terminal waits behind its backlog: it keeps it.
            if effects.slowConsumer != nil { return .some("a consumer with a terminal due was ended as slow") }
            if machine.statistics.slowConsumersEnded != endedBefore { return .some("an overflow was counted twice") }
            return .some(nil)
        }
        guard effects.slowConsumer == id else { return .some("an overflowed consumer was not ended with the error") }
        if machine.statistics.slowConsumersEnded != endedBefore + 1 { return .some("a slow consumer was not counted") }
        let othersAfter = consumers.indices.filter { $0 != index }.map { (consumers[$0].slot, consumers[$0].terminals) }
        if !zip(others, othersAfter).allSatisfy({ $0.0 == $1.0 && $0.1 == $1.1 }) {
            return .some("a slow consumer's end touched another consumer")
        }
        return .some(nil)
    }

    mutating func yield(_ generation: UInt64) -> String? {
        nextElement += 1
        let element = nextElement
        let action = [element].withUnsafeBufferPointer { machine.yield(generation, $0) }
        switch action {
        case .stale:
            return nil
        case .deliver(let sinks, _, _):
            if runs[generation]!.ended { return "run \(generation) delivered after it ended" }
            for id in sinks {
                guard let index = index(of: id) else { return "an element went to consumer \(id), who left" }
                consumers[index].received.append(element)
            }
            return nil
        }
    }

    mutating func finish(_ generation: UInt64) -> String? {
        let before = consumers
        let effects = machine.finish(generation, .finished)
        if let failure = perform(effects, "finish") { return failure }
        if effects.terminal != nil {
            if generation != lastStarted { return "the terminal of run \(generation) ended a newer one" }
            runs[generation]!.ended = true
            // Every live consumer got its terminal from the finish; those catching up keep theirs.
            for (index, consumer) in before.enumerated() {
                if case .live = consumer.slot, consumers[index].terminals != 1 {
                    return "live consumer \(index) got no terminal from the finish"
                }
            }
        }
        return nil
    }

    /// A run was started: at most once, and never beside a stop of an earlier one.
    mutating func started(_ generation: UInt64) -> String? {
        guard generation == lastStarted + 1 else { return "run \(generation) started after \(lastStarted)" }
        for (id, run) in runs where run.stopDecided && !run.ended {
            let stopOver = run.cancelReturned || (run.startReturned && !run.control)
            if !stopOver { return "run \(generation) started while the stop of run \(id) was under way" }
        }
        lastStarted = generation
        runs[generation] = Run()
        startsInFlight.append(generation)
        return nil
    }

    /// Performs the effects the storage would, and checks them.
    mutating func perform(_ effects: Machine.Effects, _ event: String) -> String? {
        if let failure = noteStops() { return "\(event): \(failure)" }
        if let timer = effects.cancelTimer { cancelledTimers.insert(timer) }
        if let token = effects.armLinger {
            if present > 0 { return "\(event): linger armed with consumers present" }
            arming.append(token)
        }
        switch effects.call {
        case .none, .release:
            break
        case .make(let call):
            let generation = effects.callGeneration
            if runs[generation]!.cancelsMade > 0 { runs[generation]!.callAfterCancel = true }
            if call.operation == .cancel {
                runs[generation]!.cancelsMade += 1
                if !runs[generation]!.stopDecided { return "\(event): cancel made without a stop" }
            }
            callsInFlight.append((generation, call.operation))
        }
        if effects.terminal != nil {
            for index in consumers.indices {
                if case .catchingUp = consumers[index].slot { consumers[index].ending = true }
            }
            for id in effects.finish {
                guard let index = index(of: id) else { return "\(event): terminal for consumer \(id), who left" }
                consumers[index].terminals += 1
                consumers[index].slot = .out
            }
        }
        if effects.slowConsumer != nil && event != "overflow" {
            return "\(event): a slow-consumer error out of the blue"
        }
        if let generation = effects.start, let failure = started(generation) { return failure }
        return nil
    }

    /// Records a stop decided by the last event (the machine counts it).
    mutating func noteStops() -> String? {
        guard machine.statistics.stops > stopsSeen else { return nil }
        stopsSeen = machine.statistics.stops
        if present > 0 { return "a stop was decided with consumers present" }
        if runs[lastStarted]!.stopDecided { return "run \(lastStarted) stopped twice" }
        runs[lastStarted]!.stopDecided = true
        return nil
    }

    func check() -> String? {
        if machine.replayKeptWithoutRun > 0 {
            return
                "\(machine.replayKeptWithoutRun) replay element(s) kept after the run stopped, which no later run delivers"
        }
        for (id, run) in runs {
            if run.cancelsMade > 1 { return "run \(id) cancelled \(run.cancelsMade) times" }
            if run.callAfterCancel { return "run \(id) got a call after its cancel" }
        }
        for (index, consumer) in consumers.enumerated() {
            if consumer.terminals > 1 { return "consumer \(index) got \(consumer.terminals) terminals" }
            if zip(consumer.received, consumer.received.dropFirst()).contains(where: { $0 >= $1 }) {
                return "consumer \(index) got \(consumer.received): out of order or twice"
            }
        }
        if machine.consumerCount != present {
            return "the machine counts \(machine.consumerCount) consumers, the world \(present)"
        }
        return nil
    }

    /// Every start and call returns, every consumer catches up, then leaves, and every timer fires.
    mutating func runToRest() -> String? {
        var rounds = 0
        while true {
            rounds += 1
            if rounds > 50 { return "the world never came to rest" }
            var progressed = false
            for event in [Event.startReturns, .callReturns, .drain, .armTimer] {
                if case .some(let failure) = apply(event) {
                    if let failure { return "at rest, \(event): \(failure)" }
                    if let failure = noteStops() { return failure }
                    progressed = true
                }
            }
            if progressed { continue }
            // Nothing is in flight: a consumer still present must have a run going for it.
            if present > 0 && !machine.isRunning { return "consumers wait, but no run is going" }
            for (index, event) in [(0, Event.leaveA), (1, Event.leaveB)] where consumers[index].slot != .out {
                if case .live = consumers[index].slot {
                    if case .some(let failure?) = apply(event) { return "at rest, leave: \(failure)" }
                    if let failure = noteStops() { return failure }
                    progressed = true
                }
            }
            if progressed { continue }
            if case .some(let failure) = apply(.fireTimer) {
                if let failure { return "at rest, fire: \(failure)" }
                if let failure = noteStops() { return failure }
                continue
            }
            break
        }
        if machine.consumerCount != 0 || machine.isRunning { return "at rest, a run is still going" }
        for (id, run) in runs {
            guard run.startReturned else { return "run \(id) never returned from start" }
            if run.ended { continue }
            if run.control && run.cancelsMade != 1 { return "run \(id) neither ended nor was cancelled once" }
        }
        for (index, consumer) in consumers.enumerated() where consumer.terminals > 1 {
            return "consumer \(index) got \(consumer.terminals) terminals"
        }
        return nil
    }
}

@Suite(
    "SharedSubscriptionStateMachine",
    .disabled(
        if: testsUnderSanitizer,
        "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
)
struct SharedSubscriptionStateMachineTests {
    static var length: Int { testsUnderSanitizer ? 5 : 6 }

    @Test(
        "every sequence of joins, leaves, pauses, slow-consumer ends, starts, yields, finishes, calls, linger timers and restarts keeps the contract",
        arguments: Configuration.all)
    fileprivate func everyOrdering(_ configuration: Configuration) async {
        // Seconds of CPU: on a thread of its own, so the cooperative pool stays free for the
        // tests that wait with a bound.
        await onOwnThread {
            var sequences = 0
            var failures: [String] = []
            func explore(_ world: World, _ prefix: [Event]) {
                guard failures.isEmpty else { return }
                var rested = world
                if let failure = rested.runToRest() {
                    failures.append("\(prefix): \(failure)")
                    return
                }
                sequences += 1
                guard prefix.count < Self.length else { return }
                for event in Event.allCases {
                    var next = world
                    guard case .some(let failure) = next.apply(event) else { continue }
                    if let failure = failure ?? next.noteStops() ?? next.check() {
                        failures.append("\(prefix + [event]): \(failure)")
                        return
                    }
                    explore(next, prefix + [event])
                }
            }
            explore(World(configuration), [])
            #expect(failures.isEmpty, "\(configuration): \(failures.first ?? "")")
            #expect(sequences > 1000, "\(sequences) sequences")
        }
    }
}
