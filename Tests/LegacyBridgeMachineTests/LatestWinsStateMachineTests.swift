// Drives LatestWinsStateMachine through every sequence of its events up to a length: runs
// beginning, registering their gate before the SDK call, completing, timing out and coming back,
// and cancel(). Each run's one-shot gate is simulated (first outcome wins, a losing value goes to
// onDiscard, the cancel handle is called only when cancellation decided). After every step the
// machine must agree with a model of the contract; after every sequence the world is run to rest:
// nothing held, every run ended once, only runs that stayed the newest committed, and every value
// returned or discarded exactly once.

import Testing
@testable import LegacyBridge
import TestSupport

private struct Ticket: Equatable {
    let run: Int
}

private typealias Machine = LatestWinsStateMachine<Ticket>

private enum Event: CaseIterable, CustomStringConvertible {
    /// A new run begins (and cancels the gate the machine hands back).
    case begin
    /// The oldest run that has not registered its gate does so, before its SDK call.
    case register
    /// The SDK completes the oldest run that made its call, with a fresh value.
    case complete
    /// The oldest run that made its call times out.
    case timeOut
    /// The oldest run whose outcome is decided comes back to its caller.
    case end
    /// `LatestWins.cancel()`.
    case cancel

    var description: String {
        switch self {
        case .begin: "begin"
        case .register: "register"
        case .complete: "complete"
        case .timeOut: "timeOut"
        case .end: "end"
        case .cancel: "cancel"
        }
    }
}

private enum Seen: Equatable {
    case value(Int)
    case superseded
    case cancelled
    case timedOut
}

private struct Run {
    let revision: UInt64
    var registered = false
    var madeCall = false
    var completed = false
    /// The gate's outcome once decided: a value, cancellation or timeout; or refused at register.
    var decided: Seen?
    var handleCalls = 0
    var cancelledByMachine = 0
    var ended = false
    var seen: Seen?
}

private struct World {
    var machine = Machine()
    var runs: [Run] = []
    /// The revision of the newest `begin` or `cancel`, in the model.
    var latest: UInt64 = 0
    var nextValue = 100
    var sent: [Int] = []
    var returned: [Int] = []
    var discarded: [Int] = []

    /// The run the machine must hand back on the next supersession: the newest, if it registered
    /// and has not ended.
    var expectedHeld: Int? {
        guard let last = runs.indices.last, runs[last].revision == latest, runs[last].registered,
            !runs[last].ended
        else { return nil }
        return last
    }

    mutating func gateDecide(_ run: Int, _ outcome: Seen, value: Int? = nil) -> Bool {
        if runs[run].decided == nil {
            runs[run].decided = outcome
            return true
        }
        if let value { discarded.append(value) }
        return false
    }

    /// The storage's cancel of a superseded run's gate: decides cancellation, calls the handle.
    mutating func cancelGate(_ ticket: Ticket?) {
        guard let ticket else { return }
        runs[ticket.run].cancelledByMachine += 1
        if gateDecide(ticket.run, .cancelled), runs[ticket.run].madeCall { runs[ticket.run].handleCalls += 1 }
    }

    mutating func apply(_ event: Event) -> String? {
        switch event {
        case .begin:
            let held = expectedHeld
            let action = machine.begin()
            latest += 1
            if action.revision != latest { return "begin gave revision \(action.revision), expected \(latest)" }
            if action.superseded?.run != held {
                return
                    "begin handed back \(String(describing: action.superseded)), expected \(String(describing: held))"
            }
            runs.append(Run(revision: action.revision))
            cancelGate(action.superseded)
        case .cancel:
            let held = expectedHeld
            let superseded = machine.cancel()
            latest += 1
            if superseded?.run != held {
                return "cancel handed back \(String(describing: superseded)), expected \(String(describing: held))"
            }
            cancelGate(superseded)
        case .register:
            guard let run = runs.indices.first(where: { !runs[$0].registered && runs[$0].decided == nil }) else {
                return nil
            }
            return register(run)
        case .complete:
            guard let run = runs.indices.first(where: { runs[$0].madeCall && !runs[$0].completed }) else { return nil }
            runs[run].completed = true
            let value = nextValue
            nextValue += 1
            sent.append(value)
            _ = gateDecide(run, .value(value), value: value)
        case .timeOut:
            guard let run = runs.indices.first(where: { runs[$0].madeCall && runs[$0].decided == nil }) else {
                return nil
            }
            if gateDecide(run, .timedOut) { runs[run].handleCalls += 1 }
        case .end:
            guard let run = runs.indices.first(where: { runs[$0].decided != nil && !runs[$0].ended }) else {
                return nil
            }
            return end(run)
        }
        return check()
    }

    mutating func register(_ run: Int) -> String? {
        switch machine.register(runs[run].revision, entry: Ticket(run: run)) {
        case .start:
            if runs[run].revision != latest { return "run \(run) may start although it was superseded" }
            runs[run].registered = true
            runs[run].madeCall = true
        case .superseded:
            if runs[run].revision == latest { return "run \(run) was refused although it is the newest" }
            runs[run].decided = .superseded  // start throws SupersededError: no SDK call
        }
        return check()
    }

    mutating func end(_ run: Int) -> String? {
        let newest = runs[run].revision == latest
        runs[run].ended = true
        let outcome = runs[run].decided!
        switch machine.end(runs[run].revision) {
        case .commit:
            if !newest { return "run \(run) committed although a newer run began" }
            runs[run].seen = outcome
            if case .value(let value) = outcome { returned.append(value) }
        case .superseded:
            if newest { return "run \(run) was refused although it is the newest" }
            runs[run].seen = .superseded
            if case .value(let value) = outcome { discarded.append(value) }  // only the newest may commit
        }
        return check()
    }

    func check() -> String? {
        if machine.holdsEntry != (expectedHeld != nil) {
            return "the machine holds a gate: \(machine.holdsEntry), expected \(expectedHeld != nil)"
        }
        if machine.revision != latest { return "revision \(machine.revision), expected \(latest)" }
        for (index, run) in runs.enumerated() {
            if run.cancelledByMachine > 1 { return "run \(index)'s gate was handed back twice" }
            if run.handleCalls > 1 { return "run \(index)'s cancel handle was called twice" }
        }
        return nil
    }

    mutating func runToRest() -> String? {
        for run in runs.indices where runs[run].decided == nil {
            if !runs[run].registered, let problem = register(run) { return problem }
            if runs[run].decided == nil { _ = gateDecide(run, .timedOut) }
        }
        for run in runs.indices where !runs[run].ended {
            if let problem = end(run) { return problem }
        }
        if machine.holdsEntry || machine.hasNewestRun { return "the machine still holds a run after every run ended" }
        if machine.runs != runs.count { return "runs \(machine.runs), expected \(runs.count)" }
        let superseded = runs.filter { $0.seen == .superseded }.count
        if machine.supersededRuns != superseded {
            return "superseded \(machine.supersededRuns), expected \(superseded)"
        }
        if (returned + discarded).sorted() != sent.sorted() {
            return "values returned \(returned) + discarded \(discarded) != sent \(sent)"
        }
        return nil
    }
}

@Suite(
    "LatestWins: state machine, every ordering",
    .disabled(
        if: testsUnderSanitizer,
        "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
)
struct LatestWinsStateMachineTests {
    @Test(
        "every sequence of begins, registrations, completions, timeouts, ends and cancels up to length 7 keeps the contract"
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
                guard prefix.count < 7, problems.count < 8 else { return }
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
                    == (0...7).reduce(0) { total, length in total + (0..<length).reduce(1) { product, _ in product * 6 }
                    })
        }
    }

    @Test("a run superseded before it registered never makes its SDK call")
    func supersededBeforeRegistering() {
        var machine = Machine()
        let first = machine.begin()
        let second = machine.begin()
        #expect(first.superseded == nil && second.superseded == nil)
        guard case .superseded = machine.register(first.revision, entry: Ticket(run: 0)) else {
            Issue.record("the first run must be told it was superseded")
            return
        }
        guard case .start = machine.register(second.revision, entry: Ticket(run: 1)) else {
            Issue.record("the second run is the newest")
            return
        }
        guard case .superseded = machine.end(first.revision), case .commit = machine.end(second.revision) else {
            Issue.record("only the newest run commits")
            return
        }
        #expect(!machine.holdsEntry)
    }
}
