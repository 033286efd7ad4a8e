// Drives CompletionStateMachine through EVERY ordering (and every subset) of
// representative event sets, executes the returned actions in a simulation,
// and checks the contract's invariants after every step and at the end.
// Randomised sequences (with repeated events) supplement the exhaustive sets.

import Testing
import TestSupport
@testable import LegacyBridge

private typealias Machine = CompletionStateMachine<Int>

/// What a cancel handle does when called.
private enum HandleKind: Hashable {
    /// No handle (the operation cannot be cancelled).
    case none
    /// Counts the call.
    case counting
    /// Counts the call and synchronously calls the completion with success(99).
    case reentrant
}

private enum Event: Hashable, CustomStringConvertible {
    case install
    case succeed(Int)
    case fail(Int)
    case cancel
    case timeout
    case attach(HandleKind)
    case startReturned(HandleKind)
    case armTimer

    var decides: Bool {
        switch self {
        case .succeed, .fail, .cancel, .timeout: true
        case .install, .attach, .startReturned, .armTimer: false
        }
    }

    var description: String {
        switch self {
        case .install: "install"
        case .succeed(let value): "succeed(\(value))"
        case .fail(let code): "fail(\(code))"
        case .cancel: "cancel"
        case .timeout: "timeout"
        case .attach(let kind): "attach(\(kind))"
        case .startReturned(let kind): "startReturned(\(kind))"
        case .armTimer: "armTimer"
        }
    }
}

/// How the events are driven.
private enum Flow {
    /// Every event goes to the machine as is (CompletionGate's freedom).
    case free
    /// As withCallback does it: install only if startReturned asked to wait,
    /// arm the timer only if install left the waiter waiting.
    case withCallback
}

private let reentrantValue = 99

/// Runs one sequence against a fresh machine, performing actions like the
/// storage does (handles are really called and may re-enter the machine).
/// Single-threaded: only the simulation's own handles capture it.
private final class Simulation: @unchecked Sendable {
    var machine = Machine()
    let continuation: UnsafeContinuation<Int, any Error>
    let timer: DeadlineTimer
    let flow: Flow

    var deliveries: [OneShotOutcome] = []
    var handleCalls = 0
    var discarded: [Int] = []
    var timerCancels = 0
    var decidingEvents: [Int] = []
    var reentrantDecided = false
    var waiting = true
    var installedWaiting = false
    var executed: Set<Int> = []

    init(continuation: UnsafeContinuation<Int, any Error>, timer: DeadlineTimer, flow: Flow) {
        self.continuation = continuation
        self.timer = timer
        self.flow = flow
    }

    func makeHandle(_ kind: HandleKind) -> CancelHandle? {
        switch kind {
        case .none:
            return nil
        case .counting:
            return CancelHandle { self.handleCalls += 1 }
        case .reentrant:
            return CancelHandle {
                self.handleCalls += 1
                // The storage calls handles outside its lock, so a handle may
                // call the completion back synchronously.
                switch self.machine.finish(.success(reentrantValue)) {
                case .decided: self.reentrantDecided = true
                case .discard(let value): self.discarded.append(value)
                case .none: break
                }
            }
        }
    }

    func perform(_ decision: Machine.Decision) {
        if decision.timerToCancel != nil { self.timerCancels += 1 }
        decision.handleToCall?.cancel()
        if decision.waiter != nil { self.deliveries.append(OneShotOutcome(decision.outcome)) }
    }

    func run(_ event: Event, at index: Int) {
        switch event {
        case .install:
            if self.flow == .withCallback && !self.waiting { return }
            self.executed.insert(index)
            switch self.machine.install(self.continuation) {
            case .none: self.installedWaiting = true
            case .resume(_, let outcome): self.deliveries.append(OneShotOutcome(outcome))
            }
        case .succeed(let value):
            self.executed.insert(index)
            self.finish(.success(value), at: index)
        case .fail(let code):
            self.executed.insert(index)
            self.finish(.failure(OneShotTestError(code: code)), at: index)
        case .cancel:
            self.executed.insert(index)
            if case .decided(let decision) = self.machine.cancel() {
                self.decidingEvents.append(index)
                self.perform(decision)
            }
        case .timeout:
            self.executed.insert(index)
            if case .decided(let decision) = self.machine.timeOut(BridgeTimeoutError(timeout: .seconds(1))) {
                self.decidingEvents.append(index)
                self.perform(decision)
            }
        case .attach(let kind):
            self.executed.insert(index)
            switch self.machine.attach(self.makeHandle(kind)) {
            case .none: break
            case .call(let handle): handle.cancel()
            }
        case .startReturned(let kind):
            self.executed.insert(index)
            switch self.machine.startReturned(self.makeHandle(kind)) {
            case .wait:
                break
            case .deliver(let outcome, let call):
                self.waiting = false
                call?.cancel()
                self.deliveries.append(OneShotOutcome(outcome))
            }
        case .armTimer:
            if self.flow == .withCallback && !self.installedWaiting { return }
            self.executed.insert(index)
            switch self.machine.armTimer(self.timer) {
            case .none: break
            case .cancel: self.timerCancels += 1
            }
        }
    }

    func finish(_ result: Result<Int, any Error>, at index: Int) {
        switch self.machine.finish(result) {
        case .decided(let decision):
            self.decidingEvents.append(index)
            self.perform(decision)
        case .discard(let value):
            self.discarded.append(value)
        case .none:
            break
        }
    }
}

/// Runs `sequence` and returns every broken invariant (empty: all held).
private func check(_ sequence: [Event], flow: Flow, timer: DeadlineTimer) async -> [String] {
    var problems: [String] = []
    _ = try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Int, any Error>) in
        problems = checkSynchronously(sequence, flow: flow, continuation: continuation, timer: timer)
        // The machine only hands the continuation back; the test resumes it once, here.
        continuation.resume(returning: 0)
    }
    return problems
}

private func checkSynchronously(
    _ sequence: [Event],
    flow: Flow,
    continuation: UnsafeContinuation<Int, any Error>,
    timer: DeadlineTimer
) -> [String] {
    var problems: [String] = []
    func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { problems.append("\(sequence): \(message())") }
    }

    let simulation = Simulation(continuation: continuation, timer: timer, flow: flow)

    // The model: the first deciding event wins.
    let deciderIndex = sequence.firstIndex(where: \.decides)
    let expectedOutcome: OneShotOutcome? = deciderIndex.map { index in
        switch sequence[index] {
        case .succeed(let value): .success(value)
        case .fail(let code): .failure(code)
        case .cancel: .cancelled
        case .timeout: .timedOut(.seconds(1))
        case .install, .attach, .startReturned, .armTimer: .other("not a decider")
        }
    }
    let cancelDecides: Bool =
        deciderIndex.map { index in
            switch sequence[index] {
            case .cancel, .timeout: true
            default: false
            }
        } ?? false

    var handleKind: HandleKind? = nil
    for event in sequence {
        switch event {
        case .attach(let kind), .startReturned(let kind): handleKind = kind
        default: break
        }
    }

    for (index, event) in sequence.enumerated() {
        simulation.run(event, at: index)
        let machine = simulation.machine
        let decidedNow = deciderIndex.map { index >= $0 } ?? false
        expect(machine.isDecided == decidedNow, "after step \(index) isDecided should be \(decidedNow)")
        if decidedNow {
            expect(!machine.holdsWaiter, "after step \(index) (decided) the machine still holds a waiter")
            expect(!machine.holdsHandle, "after step \(index) (decided) the machine still holds a handle")
            expect(!machine.holdsTimer, "after step \(index) (decided) the machine still holds a timer")
            expect(
                machine.holdsOutcome == simulation.deliveries.isEmpty,
                "after step \(index) the outcome should wait in the machine only until delivered"
            )
        } else {
            let prefix = sequence[...index].indices.filter { simulation.executed.contains($0) }.map { sequence[$0] }
            expect(machine.holdsWaiter == prefix.contains(.install), "after step \(index) holdsWaiter is wrong")
            let attached = prefix.contains { event in
                switch event {
                case .attach(let kind), .startReturned(let kind): kind != .none
                default: false
                }
            }
            expect(machine.holdsHandle == attached, "after step \(index) holdsHandle is wrong")
            expect(machine.holdsTimer == prefix.contains(.armTimer), "after step \(index) holdsTimer is wrong")
            expect(!machine.holdsOutcome, "after step \(index) an undecided machine holds an outcome")
        }
    }

    // The waiter: resumed (or delivered) exactly once with the first outcome,
    // or never if no waiter ever came or nothing decided.
    let installed = sequence.indices.contains { sequence[$0] == .install && simulation.executed.contains($0) }
    let deliveredBySR = sequence.indices.contains { index in
        if case .startReturned = sequence[index], let decider = deciderIndex { return decider < index }
        return false
    }
    let expectedDeliveries = (deciderIndex != nil && (installed || deliveredBySR)) ? 1 : 0
    expect(
        simulation.deliveries.count == expectedDeliveries,
        "waiter received \(simulation.deliveries) but expected \(expectedDeliveries) delivery"
    )
    if let delivered = simulation.deliveries.first {
        expect(
            delivered == expectedOutcome,
            "waiter got \(delivered), first outcome was \(String(describing: expectedOutcome))")
    }
    if flow == .withCallback, sequence.contains(where: { if case .startReturned = $0 { true } else { false } }) {
        expect(simulation.deliveries.count <= 1, "withCallback's caller saw more than one outcome")
    }

    // Exactly the event that decided reported so.
    expect(
        simulation.decidingEvents == (deciderIndex.map { [$0] } ?? []),
        "deciding events \(simulation.decidingEvents), expected \(String(describing: deciderIndex))"
    )
    expect(!simulation.reentrantDecided, "a completion from inside the cancel handle decided the outcome")

    // The handle: called at most once, only if cancellation/timeout decided and a handle exists.
    let expectedHandleCalls = (cancelDecides && handleKind != nil && handleKind != HandleKind.none) ? 1 : 0
    expect(
        simulation.handleCalls == expectedHandleCalls,
        "handle called \(simulation.handleCalls) times, expected \(expectedHandleCalls)"
    )

    // onDiscard: exactly the success values that lost, never the winner.
    var expectedDiscards: [Int] = []
    if let deciderIndex {
        for index in sequence.indices where index > deciderIndex {
            if case .succeed(let value) = sequence[index] { expectedDiscards.append(value) }
        }
    }
    if expectedHandleCalls == 1 && handleKind == .reentrant { expectedDiscards.append(reentrantValue) }
    expect(
        simulation.discarded.sorted() == expectedDiscards.sorted(),
        "discarded \(simulation.discarded), expected \(expectedDiscards)"
    )
    if case .success(let winner) = expectedOutcome {
        expect(!simulation.discarded.contains(winner), "the winning value \(winner) was discarded")
    }

    // The timer: cancelled once if armed and something other than itself decided.
    let armIndex = sequence.indices.first { sequence[$0] == .armTimer && simulation.executed.contains($0) }
    var expectedTimerCancels = 0
    if let armIndex, let deciderIndex {
        let firedWhileArmed = sequence[deciderIndex] == .timeout && armIndex < deciderIndex
        expectedTimerCancels = firedWhileArmed ? 0 : 1
    }
    expect(
        simulation.timerCancels == expectedTimerCancels,
        "timer cancelled \(simulation.timerCancels) times, expected \(expectedTimerCancels)"
    )
    // An undecided machine still holds the simulation's handle, which captures the simulation:
    // drop it so that sequences without a decider do not leak (LeakSanitizer reports them).
    simulation.machine = Machine()
    return problems
}

/// Every ordering of every subset of `events` (all k-permutations, k = 0...n).
private func allOrderings<T>(of events: [T]) -> [[T]] {
    var result: [[T]] = []
    var current: [T] = []
    var used = [Bool](repeating: false, count: events.count)
    func extend() {
        result.append(current)
        for index in events.indices where !used[index] {
            used[index] = true
            current.append(events[index])
            extend()
            current.removeLast()
            used[index] = false
        }
    }
    extend()
    return result
}

/// Runs every ordering and reports the first few broken ones.
private func checkAll(_ events: [Event], flow: Flow, where keep: ([Event]) -> Bool = { _ in true }) async -> Int {
    let timer = DeadlineTimer(deadline: .now)
    var checked = 0
    var problems: [String] = []
    for sequence in allOrderings(of: events) where keep(sequence) {
        checked += 1
        problems += await check(sequence, flow: flow, timer: timer)
    }
    let broken = problems.count
    #expect(broken == 0, "broken invariants, first: \(problems.prefix(8).joined(separator: "\n"))")
    return checked
}

/// withCallback's own order: startReturned, then install, then armTimer.
private func inWithCallbackOrder(_ sequence: [Event]) -> Bool {
    let rank: (Event) -> Int? = { event in
        switch event {
        case .startReturned: 0
        case .install: 1
        case .armTimer: 2
        default: nil
        }
    }
    let ranks = sequence.compactMap(rank)
    return ranks == ranks.sorted()
}

@Suite("OneShot: every ordering of gate events")
struct OneShotOrderingTests {
    @Test("all orderings of install, success, failure, cancel, timeout and attach(handle)")
    func withHandle() async {
        let count = await checkAll(
            [.install, .succeed(1), .fail(2), .cancel, .timeout, .attach(.counting)], flow: .free)
        #expect(count == 1957)  // all k-permutations of 6 events
    }

    @Test("all orderings with attach(nil): nothing to cancel")
    func withNilHandle() async {
        let count = await checkAll([.install, .succeed(1), .fail(2), .cancel, .timeout, .attach(.none)], flow: .free)
        #expect(count == 1957)
    }

    @Test("all orderings with repeated successes and a handle that calls the completion back")
    func repeatedAndReentrant() async {
        let count = await checkAll(
            [.install, .succeed(1), .succeed(2), .fail(3), .cancel, .attach(.reentrant), .timeout],
            flow: .free
        )
        #expect(count == 13_700)  // all k-permutations of 7 events
    }

    @Test("all orderings including arming the timer")
    func withTimer() async {
        let count = await checkAll(
            [.install, .succeed(1), .fail(2), .cancel, .timeout, .attach(.counting), .armTimer],
            flow: .free
        )
        #expect(count == 13_700)
    }

    @Test(
        "all interleavings of withCallback's steps with completions, cancel and timeout",
        arguments: [HandleKind.counting, .none, .reentrant]
    )
    fileprivate func withCallbackFlow(handle: HandleKind) async {
        let events: [Event] = [.startReturned(handle), .install, .armTimer, .succeed(1), .fail(2), .cancel, .timeout]
        let count = await checkAll(events, flow: .withCallback, where: inWithCallbackOrder)
        #expect(count > 840)  // includes the 840 full interleavings
    }

    @Test("random sequences with repeated completions, cancels and timeouts (supplement)")
    func randomSequences() async {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        let timer = DeadlineTimer(deadline: .now)
        var problems: [String] = []
        for _ in 0..<5_000 {
            var once: [Event] = [.install, .armTimer]
            once.append(.attach([HandleKind.none, .counting, .reentrant].randomElement(using: &generator)!))
            var sequence: [Event] = []
            for step in 0..<Int.random(in: 0...10, using: &generator) {
                // Distinct values, so "the winner is never discarded" is checkable.
                let repeated: Event = [.succeed(step + 1), .fail(step + 1), .cancel, .timeout]
                    .randomElement(using: &generator)!
                sequence.append(repeated)
            }
            for event in once where Bool.random(using: &generator) {
                sequence.insert(event, at: Int.random(in: 0...sequence.count, using: &generator))
            }
            problems += await check(sequence, flow: .free, timer: timer)
        }
        let broken = problems.count
        #expect(broken == 0, "seed \(seed): \(problems.prefix(8).joined(separator: "\n"))")
    }
}
