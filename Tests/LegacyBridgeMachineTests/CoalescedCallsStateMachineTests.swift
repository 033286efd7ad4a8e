// Drives CoalescedCallsStateMachine through every sequence of its events up to a length, over two
// keys: callers joining, leaders creating their call's gate, callers' gates deciding by
// cancellation, their cancel handles leaving, the SDK completing a call, and the relay handing a
// call's outcome to the table. The callers' gates and each call's gate are simulated (first
// outcome wins). After every step the table must agree with a model of the contract; after every
// sequence the world is run to rest: nothing in flight, every caller ended once with the outcome
// of the call it joined, every call cancelled only when all its callers left, and every value
// delivered or discarded exactly once.

import Testing
@testable import LegacyBridge
import TestSupport

private struct WaiterTicket: Equatable {
    let caller: Int
}

private struct CallTicket: Equatable {
    let call: Int
}

private typealias Machine = CoalescedCallsStateMachine<Int, WaiterTicket, CallTicket>

private enum Event: CaseIterable, CustomStringConvertible {
    /// A caller asks for key 1 (or 2).
    case join1
    case join2
    /// The oldest leader that has not created its call's gate creates it and starts the call.
    case create
    /// The oldest waiting caller's gate decides by cancellation (or its timeout).
    case cancelOldest
    /// The cancel handle of the oldest caller whose gate decided by cancellation runs: it leaves.
    case leaveOldest
    /// The SDK completes the oldest started call of key 1 (or 2) with a fresh value.
    case complete1
    case complete2
    /// The outcome of the oldest decided call reaches the table (inline or through the relay).
    case relay

    var description: String {
        switch self {
        case .join1: "join1"
        case .join2: "join2"
        case .create: "create"
        case .cancelOldest: "cancelOldest"
        case .leaveOldest: "leaveOldest"
        case .complete1: "complete1"
        case .complete2: "complete2"
        case .relay: "relay"
        }
    }
}

private enum Outcome: Equatable {
    case value(Int)
    case cancelled
}

private struct Caller {
    let key: Int
    let token: UInt64
    /// The call it leads or joined.
    let call: Int
    let leads: Bool
    var outcome: Outcome?
    var cancelledFirst = false
    var left = false
    var handedOut = 0
}

private struct Call {
    let key: Int
    let token: UInt64
    var created = false
    var completed = false
    /// The call gate's outcome once decided.
    var outcome: Outcome?
    var relayed = false
    var cancelledByTable = 0
    var handleCalls = 0
}

private struct World {
    var machine = Machine()
    var callers: [Caller] = []
    var calls: [Call] = []
    /// The model: the call in flight per key.
    var inFlight: [Int: Int] = [:]
    var nextValue = 100
    var sent: [Int] = []
    var discarded: [Int] = []
    var deliveredValues: Set<Int> = []

    /// Callers of `call` that the table must still hold.
    func members(of call: Int) -> [Int] {
        callers.indices.filter { callers[$0].call == call && callers[$0].handedOut == 0 }
    }

    mutating func apply(_ event: Event) -> String? {
        switch event {
        case .join1: return join(1)
        case .join2: return join(2)
        case .create:
            guard let call = calls.indices.first(where: { !calls[$0].created }) else { return nil }
            machine.callCreated(calls[call].key, token: calls[call].token, call: CallTicket(call: call))
            calls[call].created = true
        case .cancelOldest:
            // A leader's cancellation decides only once its start returned, after it created its call.
            guard
                let caller = callers.indices.first(where: {
                    callers[$0].outcome == nil && (!callers[$0].leads || calls[callers[$0].call].created)
                })
            else { return nil }
            callers[caller].outcome = .cancelled
            callers[caller].cancelledFirst = true
        case .leaveOldest:
            guard let caller = callers.indices.first(where: { callers[$0].cancelledFirst && !callers[$0].left }) else {
                return nil
            }
            return leave(caller)
        case .complete1: return complete(1)
        case .complete2: return complete(2)
        case .relay:
            guard let call = calls.indices.first(where: { calls[$0].outcome != nil && !calls[$0].relayed }) else {
                return nil
            }
            return relay(call)
        }
        return check()
    }

    mutating func join(_ key: Int) -> String? {
        let caller = callers.count
        switch machine.join(key, waiter: WaiterTicket(caller: caller)) {
        case .lead(let waiter, let callToken):
            if inFlight[key] != nil { return "join(\(key)) led a new call while one is in flight" }
            let call = calls.count
            calls.append(Call(key: key, token: callToken))
            inFlight[key] = call
            callers.append(Caller(key: key, token: waiter, call: call, leads: true))
        case .joined(let waiter):
            guard let call = inFlight[key] else { return "join(\(key)) joined although no call is in flight" }
            callers.append(Caller(key: key, token: waiter, call: call, leads: false))
        }
        return check()
    }

    mutating func leave(_ caller: Int) -> String? {
        callers[caller].left = true
        let call = callers[caller].call
        let stillMember = callers[caller].handedOut == 0 && inFlight[callers[caller].key] == call
        let lastOne = stillMember && members(of: call).count == 1
        let action = machine.leave(callers[caller].key, waiter: callers[caller].token)
        if (action.removed != nil) != stillMember {
            return
                "caller \(caller) left: removed \(String(describing: action.removed)), expected it \(stillMember ? "" : "not ")"
        }
        if stillMember { callers[caller].handedOut += 1 }
        if action.cancel?.call != (lastOne ? call : nil) {
            return
                "caller \(caller) left: cancel \(String(describing: action.cancel)), expected \(lastOne ? "call \(call)" : "none")"
        }
        if lastOne {
            inFlight[callers[caller].key] = nil
            calls[call].cancelledByTable += 1
            // The storage cancels the call's gate: its handle runs if this decided it.
            if calls[call].outcome == nil {
                calls[call].outcome = .cancelled
                calls[call].handleCalls += 1
            }
        }
        return check()
    }

    mutating func complete(_ key: Int) -> String? {
        guard
            let call = calls.indices.first(where: { calls[$0].key == key && calls[$0].created && !calls[$0].completed })
        else { return nil }
        calls[call].completed = true
        let value = nextValue
        nextValue += 1
        sent.append(value)
        if calls[call].outcome == nil {
            calls[call].outcome = .value(value)
        } else {
            discarded.append(value)  // the call gate's onDiscard
        }
        return check()
    }

    mutating func relay(_ call: Int) -> String? {
        calls[call].relayed = true
        let expected = inFlight[calls[call].key] == call ? Set(members(of: call)) : []
        let waiters = machine.finished(calls[call].key, token: calls[call].token)
        if Set(waiters.map(\.caller)) != expected || waiters.count != expected.count {
            return "call \(call)'s outcome went to \(waiters.map(\.caller)), expected \(expected.sorted())"
        }
        if inFlight[calls[call].key] == call { inFlight[calls[call].key] = nil }
        let outcome = calls[call].outcome!
        var reached = 0
        for waiter in waiters {
            callers[waiter.caller].handedOut += 1
            if callers[waiter.caller].outcome == nil {
                callers[waiter.caller].outcome = outcome
                reached += 1
            }
        }
        if case .value(let value) = outcome {
            if reached == 0 { discarded.append(value) } else { deliveredValues.insert(value) }
        }
        return check()
    }

    func check() -> String? {
        for key in [1, 2] {
            let expectedToken = inFlight[key].map { calls[$0].token }
            if machine.callToken(for: key) != expectedToken {
                return
                    "key \(key): call in flight \(String(describing: machine.callToken(for: key))), expected \(String(describing: expectedToken))"
            }
            if let call = inFlight[key] {
                if machine.hasCall(for: key) != calls[call].created { return "key \(key): the call's gate disagrees" }
                let expectedWaiters = Set(members(of: call).map { callers[$0].token })
                if machine.waiters(for: key) != expectedWaiters {
                    return
                        "key \(key): waiters \(machine.waiters(for: key).sorted()), expected \(expectedWaiters.sorted())"
                }
            }
        }
        for (index, caller) in callers.enumerated() where caller.handedOut > 1 {
            return "caller \(index) handed out twice"
        }
        for (index, call) in calls.enumerated() {
            if call.cancelledByTable > 1 || call.handleCalls > 1 { return "call \(index) cancelled twice" }
            if call.cancelledByTable == 1 && !call.relayed && members(of: index).count != 0 {
                return "call \(index) cancelled while callers still wait for it"
            }
        }
        return nil
    }

    mutating func runToRest() -> String? {
        while let call = calls.indices.first(where: { !calls[$0].created }) {
            machine.callCreated(calls[call].key, token: calls[call].token, call: CallTicket(call: call))
            calls[call].created = true
        }
        for caller in callers.indices where callers[caller].cancelledFirst && !callers[caller].left {
            if let problem = leave(caller) { return problem }
        }
        for key in [1, 2] {
            while calls.contains(where: { $0.key == key && !$0.completed }) {
                if let problem = complete(key) { return problem }
            }
        }
        while let call = calls.indices.first(where: { calls[$0].outcome != nil && !calls[$0].relayed }) {
            if let problem = relay(call) { return problem }
        }
        if machine.inFlightCount != 0 || machine.waiterCount != 0 {
            return "left in the table: \(machine.inFlightCount) calls, \(machine.waiterCount) callers"
        }
        for (index, caller) in callers.enumerated() {
            guard let outcome = caller.outcome else { return "caller \(index) never ended" }
            let call = calls[caller.call]
            if outcome != .cancelled && outcome != call.outcome {
                return "caller \(index) got \(outcome), its call's outcome was \(String(describing: call.outcome))"
            }
        }
        for (index, call) in calls.enumerated() {
            let everyCallerLeft = callers.filter { $0.call == index }.allSatisfy(\.cancelledFirst)
            if call.cancelledByTable == 1 && !everyCallerLeft {
                return "call \(index) cancelled though a caller stayed"
            }
        }
        let counters = machine.counters
        if counters.calls != calls.count || counters.joined != callers.count - calls.count {
            return "counters \(counters), expected \(calls.count) calls, \(callers.count - calls.count) joined"
        }
        if counters.abandoned != calls.filter({ $0.cancelledByTable == 1 }).count { return "abandoned miscounted" }
        if (Array(deliveredValues) + discarded).sorted() != sent.sorted() {
            return "values delivered \(deliveredValues.sorted()) + discarded \(discarded) != sent \(sent)"
        }
        return nil
    }
}

@Suite(
    "Coalesced: CoalescedCalls state machine, every ordering",
    .disabled(
        if: testsUnderSanitizer,
        "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
)
struct CoalescedCallsStateMachineTests {
    @Test(
        "every sequence of joins, creations, cancellations, leaves, completions and relays up to length 6 keeps the contract"
    )
    func everyOrdering() async {
        // Seconds of CPU: on a thread of its own, so the cooperative pool stays free for the
        // tests that wait with a bound.
        await onOwnThread {
            var checked = 0
            var problems: [String] = []
            func explore(_ world: World, _ prefix: [Event]) {
                var rest = world
                checked += 1
                if let problem = rest.runToRest() {
                    problems.append("\(prefix) then run to rest: \(problem)")
                    return
                }
                guard prefix.count < 6, problems.count < 8 else { return }
                for event in Event.allCases {
                    var next = world
                    if let problem = next.apply(event) {
                        problems.append("\(prefix + [event]): \(problem)")
                        continue
                    }
                    explore(next, prefix + [event])
                }
            }
            explore(World(), [])
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
            #expect(
                checked
                    == (0...6).reduce(0) { total, length in total + (0..<length).reduce(1) { product, _ in product * 8 }
                    })
        }
    }

    @Test("a caller arriving after the result was handed out leads a new call")
    func arrivalAfterResultLeads() {
        var machine = Machine()
        guard case .lead(_, let first) = machine.join(1, waiter: WaiterTicket(caller: 0)) else {
            Issue.record("the first caller leads")
            return
        }
        machine.callCreated(1, token: first, call: CallTicket(call: 0))
        guard case .joined = machine.join(1, waiter: WaiterTicket(caller: 1)) else {
            Issue.record("the second caller joins")
            return
        }
        #expect(machine.finished(1, token: first).count == 2)
        guard case .lead(_, let second) = machine.join(1, waiter: WaiterTicket(caller: 2)) else {
            Issue.record("a caller after the result leads a new call")
            return
        }
        #expect(second != first)
        #expect(machine.finished(1, token: first).isEmpty, "a stale result reaches nobody")
    }
}
