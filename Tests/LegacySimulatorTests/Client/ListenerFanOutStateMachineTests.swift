// The shared listener's state machine, driven directly: each rule in a few lines, then every
// ordering of a handful of events checked against the invariants, with a model of the SDK.

import Testing

@testable import LegacySimulator

private typealias Machine = ListenerFanOutStateMachine<String, Int>

/// A model SDK: which listeners were started and stopped, and whether each is paused.
private struct ModelSDK {
    var machine = Machine()
    var nextHandle = 0
    /// Generations started and not yet reported `started`.
    var pendingStarts: [UInt64] = []
    var stopped: [Int] = []
    var paused: [Int: Bool] = [:]
    var running: Int?
    /// The newest generation started (0 before any).
    var latestGeneration: UInt64 = 0
    /// Started listeners whose terminal came (running, or inside their start).
    var ended = 0
    var endedGenerations: Set<UInt64> = []
    var violations: [String] = []

    mutating func apply(_ action: Machine.StopAction) {
        switch action {
        case .none: break
        case .stop(let handle):
            if stopped.contains(handle) { violations.append("handle \(handle) stopped twice") }
            stopped.append(handle)
            if running == handle { running = nil }
        case .control:
            var steps = 0
            while true {
                steps += 1
                if steps > 10 { violations.append("the controller does not converge") }
                switch machine.nextControl() {
                case .pause(let handle):
                    if paused[handle] == true { violations.append("paused twice in a row") }
                    paused[handle] = true
                case .resume(let handle):
                    if paused[handle] != true { violations.append("resumed while not paused") }
                    paused[handle] = false
                case .done: return
                }
            }
        }
    }

    mutating func join(_ id: Int) {
        if case .start(let generation) = machine.join(id, "c\(id)") {
            pendingStarts.append(generation)
            latestGeneration = generation
        }
    }

    mutating func startReturns() {
        guard !pendingStarts.isEmpty else { return }
        let generation = pendingStarts.removeFirst()
        nextHandle += 1
        let handle = nextHandle
        let action = machine.started(generation: generation, handle: handle)
        switch action {
        case .stop: break
        case .none where endedGenerations.contains(generation):
            ended += 1  // it ended inside its start: the SDK is done with it
        default: running = handle
        }
        apply(action)
    }

    /// The terminal of `generation`: the consumers it finished.
    mutating func terminal(generation: UInt64) -> [String] {
        let terminalsBefore = machine.statistics.terminals
        let finished = machine.terminal(generation: generation)
        // It ended (consumers or not) when the machine took the terminal as its listener's.
        if machine.statistics.terminals > terminalsBefore {
            if running != nil {
                ended += 1
                running = nil
            } else {
                endedGenerations.insert(generation)
            }
        }
        return finished
    }
}

@Suite("ListenerFanOutStateMachine: one listener, many consumers")
struct ListenerFanOutStateMachineTests {
    @Test("The first consumer starts the listener; the next ones share it")
    func firstStarts() {
        var machine = Machine()
        guard case .start(let generation) = machine.join(1, "a") else {
            Issue.record("no start")
            return
        }
        guard case .none = machine.join(2, "b") else {
            Issue.record("a second start")
            return
        }
        guard case .none = machine.started(generation: generation, handle: 10) else {
            Issue.record("stopped a listener with consumers")
            return
        }
        #expect(Set(machine.event(generation: generation)) == ["a", "b"])
        #expect(machine.statistics.starts == 1)
    }

    @Test("The last consumer to leave stops the listener; one leaving before the start returned stops it then")
    func lastLeaves() {
        var machine = Machine()
        _ = machine.join(1, "a")
        guard case .none = machine.leave(1) else {
            Issue.record("stopped before the handle exists")
            return
        }
        guard case .stop(10) = machine.started(generation: 1, handle: 10) else {
            Issue.record("not stopped when its start returned")
            return
        }
        guard case .start(2) = machine.join(2, "b") else {
            Issue.record("no restart")
            return
        }
        _ = machine.started(generation: 2, handle: 11)
        _ = machine.join(3, "c")
        guard case .none = machine.leave(2) else {
            Issue.record("stopped with a consumer left")
            return
        }
        guard case .stop(11) = machine.leave(3) else {
            Issue.record("not stopped when the last left")
            return
        }
        #expect(machine.statistics.stops == 2)
    }

    @Test("A terminal finishes every consumer; events and terminals of an older listener reach nobody")
    func terminals() {
        var machine = Machine()
        _ = machine.join(1, "a")
        _ = machine.join(2, "b")
        _ = machine.started(generation: 1, handle: 10)
        #expect(Set(machine.terminal(generation: 1)) == ["a", "b"])
        #expect(machine.consumerCount == 0)
        guard case .none = machine.leave(1) else {
            Issue.record("a finished consumer's leave stopped something")
            return
        }
        _ = machine.join(3, "c")
        #expect(machine.event(generation: 1).isEmpty)
        #expect(machine.terminal(generation: 1).isEmpty)
        #expect(machine.event(generation: 2) == ["c"])
        #expect(machine.statistics.terminals == 1 && machine.statistics.starts == 2)
    }

    @Test("A terminal inside the start: the handle that returns later is for nobody")
    func terminalInsideStart() {
        var machine = Machine()
        _ = machine.join(1, "a")
        #expect(machine.terminal(generation: 1) == ["a"])
        guard case .none = machine.started(generation: 1, handle: 10) else {
            Issue.record("acted on an ended listener")
            return
        }
        guard case .start(2) = machine.join(2, "b") else {
            Issue.record("no new listener after the end")
            return
        }
    }

    @Test("A failed start finishes every consumer that waited for it")
    func failedStart() {
        var machine = Machine()
        _ = machine.join(1, "a")
        _ = machine.join(2, "b")
        #expect(Set(machine.startFailed(generation: 1)) == ["a", "b"])
        guard case .start = machine.join(3, "c") else {
            Issue.record("no new start after a failure")
            return
        }
    }

    @Test("Paused while any consumer asks, resumed when none does; one controller at a time")
    func pauseBySlowest() {
        var sdk = ModelSDK()
        sdk.join(1)
        sdk.join(2)
        sdk.startReturns()
        sdk.apply(sdk.machine.pause(1))
        #expect(sdk.paused[1] == true)
        sdk.apply(sdk.machine.pause(2))
        sdk.apply(sdk.machine.resume(1))
        #expect(sdk.paused[1] == true)  // 2 still asks
        sdk.apply(sdk.machine.resume(2))
        #expect(sdk.paused[1] == false)
        // While a controller works, nobody else becomes one; it applies what was asked meanwhile.
        var machine = Machine()
        _ = machine.join(1, "a")
        _ = machine.join(2, "b")
        _ = machine.started(generation: 1, handle: 5)
        guard case .control = machine.pause(1) else {
            Issue.record("no controller")
            return
        }
        guard case .none = machine.pause(2) else {
            Issue.record("a second controller")
            return
        }
        guard case .none = machine.resume(1) else {
            Issue.record("a second controller")
            return
        }
        guard case .pause(5) = machine.nextControl() else {
            Issue.record("the controller did not pause")
            return
        }
        guard case .done = machine.nextControl() else {
            Issue.record("the controller went on though the state matches")
            return
        }
    }

    @Test("Every ordering of joins, leaves, a pause and resume, the start's return and a terminal keeps the invariants")
    func exhaustiveOrderings() {
        enum Event: CaseIterable { case join1, join2, leave1, leave2, pause1, resume1, startReturns, terminal }
        func permutations(_ events: [Event]) -> [[Event]] {
            guard events.count > 1 else { return [events] }
            var all: [[Event]] = []
            for (index, event) in events.enumerated() {
                var rest = events
                rest.remove(at: index)
                for tail in permutations(rest) { all.append([event] + tail) }
            }
            return all
        }
        var orderings = 0
        var failures: [String] = []
        func check(_ condition: Bool, _ order: [Event], _ what: String) {
            if !condition && failures.count < 10 { failures.append("\(order): \(what)") }
        }
        for order in permutations(Event.allCases) {
            // A consumer leaves, pauses and resumes only after it joined, and resumes after pausing.
            let position = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
            guard position[.join1]! < position[.leave1]!, position[.join2]! < position[.leave2]!,
                position[.join1]! < position[.pause1]!, position[.pause1]! < position[.resume1]!
            else { continue }
            orderings += 1
            var sdk = ModelSDK()
            var live: Set<Int> = []
            var asks = false  // consumer 1 asks for a pause
            for event in order {
                switch event {
                case .join1, .join2:
                    let id = event == .join1 ? 1 : 2
                    sdk.join(id)
                    live.insert(id)
                case .leave1, .leave2:
                    let id = event == .leave1 ? 1 : 2
                    sdk.apply(sdk.machine.leave(id))
                    live.remove(id)
                    if id == 1 { asks = false }
                case .pause1:
                    sdk.apply(sdk.machine.pause(1))
                    asks = live.contains(1)
                case .resume1:
                    sdk.apply(sdk.machine.resume(1))
                    asks = false
                case .startReturns:
                    sdk.startReturns()
                case .terminal:
                    // The SDK's end of the newest listener, started or still starting.
                    let finished = sdk.terminal(generation: sdk.latestGeneration)
                    check(Set(finished) == Set(live.map { "c\($0)" }), order, "the terminal missed a consumer")
                    if !finished.isEmpty {
                        live.removeAll()
                        asks = false
                    }
                }
                // Invariants after every step.
                check(sdk.violations.isEmpty, order, "\(sdk.violations)")
                check(sdk.machine.consumerCount == live.count, order, "consumer count")
                if let running = sdk.running {
                    check(!live.isEmpty, order, "a listener runs with no consumer")
                    check((sdk.paused[running] ?? false) == asks, order, "the SDK's pause does not match")
                    check(
                        sdk.machine.event(generation: sdk.latestGeneration).count == live.count, order,
                        "events miss a consumer")
                }
            }
            // Drain: the pending starts return, everyone leaves.
            while !sdk.pendingStarts.isEmpty { sdk.startReturns() }
            for id in [1, 2] { sdk.apply(sdk.machine.leave(id)) }
            check(sdk.running == nil, order, "a listener runs after everyone left")
            check(sdk.machine.consumerCount == 0, order, "consumers left")
            check(sdk.violations.isEmpty, order, "\(sdk.violations)")
            check(
                sdk.nextHandle == sdk.stopped.count + sdk.ended, order,
                "a started listener was neither stopped nor ended")
        }
        #expect(failures.isEmpty, "\(failures)")
        #expect(orderings > 1_000)
    }
}
