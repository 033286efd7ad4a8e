// Drives CompletionStateMachine the way withCallback(scheduler:) does (a `start` posted to the
// SDK's thread) through EVERY ordering, and every subset, of its events: the posted start runs,
// start returns, the SDK calls back, the task is cancelled, the timeout fires, the caller waits.
// The actions are performed as the storage performs them, and the contract is checked after
// every step and at the end.

import Testing
@testable import LegacyBridge

private typealias Machine = CompletionStateMachine<Int>

/// What the posted `start` returns.
private enum StartResult: Hashable, CaseIterable {
    /// nil: the operation cannot be cancelled.
    case noHandle
    /// A handle that counts its calls.
    case handle
    /// A handle that counts its calls and calls the completion back with success(99).
    case reentrantHandle
    /// `start` throws OneShotTestError(code: 7).
    case throwsError
}

private enum Event: Hashable, CustomStringConvertible {
    /// The scheduler refused the post (the caller's first step when it happens).
    case postFails
    /// The posted job runs on the SDK's thread: `startBegins`, then `start` is running.
    case postedStartRuns
    /// `start` returns (or throws); only if it is running.
    case startReturns
    /// The SDK calls the completion with success(1); only once `start` began (it has the completion).
    case callback
    case cancel
    case timeout
    /// The caller installs its waiter.
    case install

    var description: String {
        switch self {
        case .postFails: "postFails"
        case .postedStartRuns: "postedStartRuns"
        case .startReturns: "startReturns"
        case .callback: "callback"
        case .cancel: "cancel"
        case .timeout: "timeout"
        case .install: "install"
        }
    }
}

private let reentrantValue = 99
private let postErrorCode = 5
private let startErrorCode = 7

/// One run against a fresh machine. Single-threaded: only the simulation's own handles capture it.
private final class Simulation: @unchecked Sendable {
    var machine = Machine(startPosted: true)
    let continuation: UnsafeContinuation<Int, any Error>
    let result: StartResult

    var step = 0
    var startRuns = 0
    var startRunning = false
    var startReturnedAt: Int?
    var handleCallSteps: [Int] = []
    var handleCalledWhileStartRan = false
    var deliveries: [OneShotOutcome] = []
    var discarded: [Int] = []
    /// (step, outcome) of the event that decided, as the machine reported it.
    var decided: [(Int, OneShotOutcome)] = []
    var executed: Set<Int> = []
    var postFailed = false

    init(continuation: UnsafeContinuation<Int, any Error>, result: StartResult) {
        self.continuation = continuation
        self.result = result
    }

    func makeHandle() -> CancelHandle? {
        switch self.result {
        case .noHandle, .throwsError:
            return nil
        case .handle:
            return CancelHandle { self.handleCalled() }
        case .reentrantHandle:
            return CancelHandle {
                self.handleCalled()
                // Handles run outside the lock, so one may call the completion back.
                self.finish(.success(reentrantValue))
            }
        }
    }

    func handleCalled() {
        self.handleCallSteps.append(self.step)
        if self.startRunning { self.handleCalledWhileStartRan = true }
    }

    func perform(_ decision: Machine.Decision) {
        if decision.waiter != nil { self.deliveries.append(OneShotOutcome(decision.outcome)) }
        decision.handleToCall?.cancel()
    }

    func finish(_ result: Result<Int, any Error>) {
        switch self.machine.finish(result) {
        case .decided(let decision):
            self.decided.append((self.step, OneShotOutcome(decision.outcome)))
            self.perform(decision)
        case .discard(let value):
            self.discarded.append(value)
        case .none:
            break
        }
    }

    func run(_ event: Event, at index: Int) {
        self.step = index
        switch event {
        case .postFails:
            // withCallback(scheduler:) records the scheduler's error and throws it; the job is dropped.
            self.executed.insert(index)
            self.postFailed = true
            self.finish(.failure(OneShotTestError(code: postErrorCode)))
        case .postedStartRuns:
            guard !self.postFailed else { return }
            self.executed.insert(index)
            switch self.machine.startBegins() {
            case .skip:
                break
            case .run:
                self.startRuns += 1
                self.startRunning = true
            }
        case .startReturns:
            guard self.startRunning else { return }
            self.executed.insert(index)
            if self.result == .throwsError {
                self.finish(.failure(OneShotTestError(code: startErrorCode)))
            }
            let handle = self.makeHandle()
            self.startRunning = false
            self.startReturnedAt = index
            switch self.machine.attach(handle) {
            case .none: break
            case .call(let handle): handle.cancel()
            }
        case .callback:
            guard self.startRuns == 1 else { return }
            self.executed.insert(index)
            self.finish(.success(1))
        case .cancel:
            self.executed.insert(index)
            if case .decided(let decision) = self.machine.cancel() {
                self.decided.append((index, .cancelled))
                self.perform(decision)
            }
        case .timeout:
            self.executed.insert(index)
            if case .decided(let decision) = self.machine.timeOut(BridgeTimeoutError(timeout: .seconds(1))) {
                self.decided.append((index, .timedOut(.seconds(1))))
                self.perform(decision)
            }
        case .install:
            self.executed.insert(index)
            switch self.machine.install(self.continuation) {
            case .none: break
            case .resume(_, let outcome): self.deliveries.append(OneShotOutcome(outcome))
            }
        }
    }
}

private func check(_ sequence: [Event], result: StartResult) async -> [String] {
    var problems: [String] = []
    _ = try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Int, any Error>) in
        problems = checkSynchronously(sequence, result: result, continuation: continuation)
        // The machine only hands the continuation back; the test resumes it once, here.
        continuation.resume(returning: 0)
    }
    return problems
}

private func checkSynchronously(
    _ sequence: [Event],
    result: StartResult,
    continuation: UnsafeContinuation<Int, any Error>
) -> [String] {
    var problems: [String] = []
    func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { problems.append("\(sequence) \(result): \(message())") }
    }
    let simulation = Simulation(continuation: continuation, result: result)

    // The model, computed from the sequence alone.
    var startBeganAt: Int?
    var returnedAt: Int?
    var expectedDecider: (index: Int, outcome: OneShotOutcome)?
    let postFails = sequence.contains(.postFails)
    for (index, event) in sequence.enumerated() {
        let decidedBefore = expectedDecider != nil
        switch event {
        case .postFails:
            if !decidedBefore { expectedDecider = (index, .failure(postErrorCode)) }
        case .postedStartRuns:
            if !postFails && !decidedBefore { startBeganAt = index }
        case .startReturns:
            if startBeganAt != nil && returnedAt == nil {
                returnedAt = index
                if result == .throwsError && !decidedBefore { expectedDecider = (index, .failure(startErrorCode)) }
            }
        case .callback:
            if startBeganAt != nil && !decidedBefore { expectedDecider = (index, .success(1)) }
        case .cancel:
            if !decidedBefore { expectedDecider = (index, .cancelled) }
        case .timeout:
            if !decidedBefore { expectedDecider = (index, .timedOut(.seconds(1))) }
        case .install:
            break
        }
    }
    let cancelDecides: Bool = {
        switch expectedDecider?.outcome {
        case .cancelled?, .timedOut?: true
        default: false
        }
    }()

    for (index, event) in sequence.enumerated() {
        simulation.run(event, at: index)
        let machine = simulation.machine
        let decidedNow = expectedDecider.map { index >= $0.index } ?? false
        expect(machine.isDecided == decidedNow, "after step \(index) isDecided should be \(decidedNow)")
        if decidedNow {
            expect(!machine.holdsWaiter, "after step \(index) (decided) the machine holds a waiter")
            expect(!machine.holdsHandle, "after step \(index) (decided) the machine holds a handle")
        }
        expect(simulation.startRuns <= 1, "start ran \(simulation.startRuns) times")
    }

    // Start runs only if its job ran before anything decided, and never after a failed post.
    expect(
        simulation.startRuns == (startBeganAt == nil ? 0 : 1),
        "start ran \(simulation.startRuns) times, expected \(startBeganAt == nil ? 0 : 1)"
    )

    // The first deciding event decides, and the machine says so exactly once.
    expect(
        simulation.decided.map(\.0) == (expectedDecider.map { [$0.index] } ?? []),
        "decided at \(simulation.decided.map(\.0)), expected \(String(describing: expectedDecider?.index))"
    )
    if let (_, outcome) = simulation.decided.first {
        expect(
            outcome == expectedDecider?.outcome, "decided \(outcome), expected \(String(describing: expectedDecider))")
    }

    // The waiter gets exactly one outcome, the first, once it waits and something decided.
    let installed = sequence.contains(.install)
    let expectedDeliveries = (installed && expectedDecider != nil) ? 1 : 0
    expect(
        simulation.deliveries.count == expectedDeliveries,
        "waiter got \(simulation.deliveries), expected \(expectedDeliveries) delivery"
    )
    if let delivered = simulation.deliveries.first {
        expect(
            delivered == expectedDecider?.outcome,
            "waiter got \(delivered), expected \(String(describing: expectedDecider))")
    }

    // The handle: exactly once if cancellation or the timeout decided and start ran and returned
    // one; never while start runs; never before start returned it.
    let hasHandle = result == .handle || result == .reentrantHandle
    let expectedCalls = (cancelDecides && startBeganAt != nil && returnedAt != nil && hasHandle) ? 1 : 0
    expect(
        simulation.handleCallSteps.count == expectedCalls,
        "handle called \(simulation.handleCallSteps.count) times, expected \(expectedCalls)"
    )
    expect(!simulation.handleCalledWhileStartRan, "the handle was called while start was running")
    if let call = simulation.handleCallSteps.first, let returnedAt {
        expect(call >= returnedAt, "the handle was called at step \(call), before start returned at \(returnedAt)")
    }

    // A decision before the posted start began leaves it nothing to do.
    if let decider = expectedDecider, let began = sequence.firstIndex(of: .postedStartRuns), decider.index < began {
        expect(simulation.startRuns == 0, "start ran although \(decider.outcome) decided first")
    }

    // onDiscard: every success that lost, never the winner.
    var expectedDiscards: [Int] = []
    if let decider = expectedDecider, let callbackIndex = sequence.firstIndex(of: .callback),
        callbackIndex > decider.index, startBeganAt != nil, callbackIndex > startBeganAt!
    {
        expectedDiscards.append(1)
    }
    if expectedCalls == 1 && result == .reentrantHandle { expectedDiscards.append(reentrantValue) }
    expect(
        simulation.discarded.sorted() == expectedDiscards.sorted(),
        "discarded \(simulation.discarded), expected \(expectedDiscards)"
    )

    // An undecided machine may hold a handle capturing the simulation: drop it (LeakSanitizer).
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

private func checkAll(
    _ events: [Event], result: StartResult, where keep: ([Event]) -> Bool = { _ in true }
) async -> Int {
    var checked = 0
    var problems: [String] = []
    for sequence in allOrderings(of: events) where keep(sequence) {
        checked += 1
        problems += await check(sequence, result: result)
    }
    let broken = problems.count
    #expect(broken == 0, "broken invariants, first: \(problems.prefix(8).joined(separator: "\n"))")
    return checked
}

@Suite("OneShot: every ordering of a start posted to the SDK's thread")
struct PostedStartOrderingTests {
    @Test(
        "all orderings of posted start runs, start returns, callback, cancel, timeout and the caller's wait",
        arguments: StartResult.allCases
    )
    fileprivate func everyOrdering(result: StartResult) async {
        let count = await checkAll(
            [.postedStartRuns, .startReturns, .callback, .cancel, .timeout, .install], result: result)
        #expect(count == 1957)  // all k-permutations of 6 events
    }

    @Test(
        "a refused post decides with its error, and start never runs whatever follows",
        arguments: StartResult.allCases
    )
    fileprivate func refusedPost(result: StartResult) async {
        // The post is the caller's first step: it comes before anything else can happen.
        let count = await checkAll(
            [.postFails, .postedStartRuns, .startReturns, .callback, .cancel, .timeout, .install],
            result: result,
            where: { $0.first == .postFails }
        )
        #expect(count == 1957)
    }

    @Test("a machine whose start was posted holds no handle until start returned one")
    func holdsNoHandleBeforeStart() {
        var machine = Machine(startPosted: true)
        #expect(!machine.holdsHandle)
        #expect(machine.startBegins() == .run)
        let attached: Bool
        if case .none = machine.attach(CancelHandle {}) { attached = true } else { attached = false }
        #expect(attached)
        #expect(machine.holdsHandle)
        _ = machine.finish(.success(1))
    }
}
