// Contract tests that drive CompletionStateMachine directly: every order is
// forced by the sequence of calls, no threads involved.

import Testing
@testable import LegacyBridge

private typealias Machine = CompletionStateMachine<Int>

/// A flat view of what an action asks for, for readable expectations.
private struct Effects: Equatable, CustomStringConvertible {
    var resumes: OneShotOutcome? = nil
    var callsHandle = false
    var releasesHandle = false
    var cancelsTimer = false
    var discards: Int? = nil

    static let nothing = Effects()

    init(
        resumes: OneShotOutcome? = nil,
        callsHandle: Bool = false,
        releasesHandle: Bool = false,
        cancelsTimer: Bool = false,
        discards: Int? = nil
    ) {
        self.resumes = resumes
        self.callsHandle = callsHandle
        self.releasesHandle = releasesHandle
        self.cancelsTimer = cancelsTimer
        self.discards = discards
    }

    init(_ decision: Machine.Decision) {
        if decision.waiter != nil { self.resumes = OneShotOutcome(decision.outcome) }
        self.callsHandle = decision.handleToCall != nil
        self.releasesHandle = decision.handleToRelease != nil
        self.cancelsTimer = decision.timerToCancel != nil
    }

    init(_ action: Machine.FinishAction) {
        switch action {
        case .decided(let decision): self.init(decision)
        case .discard(let value): self.init(discards: value)
        case .none: self.init()
        }
    }

    init(_ action: Machine.CancelAction) {
        switch action {
        case .decided(let decision): self.init(decision)
        case .none: self.init()
        }
    }

    init(_ action: Machine.InstallAction) {
        switch action {
        case .none: self.init()
        case .resume(_, let outcome): self.init(resumes: OneShotOutcome(outcome))
        }
    }

    init(_ action: Machine.AttachAction) {
        switch action {
        case .none: self.init()
        case .call: self.init(callsHandle: true)
        }
    }

    init(_ action: Machine.ArmTimerAction) {
        switch action {
        case .none: self.init()
        case .cancel: self.init(cancelsTimer: true)
        }
    }

    var description: String {
        "Effects(resumes: \(self.resumes.map(String.init(describing:)) ?? "-"), callsHandle: \(self.callsHandle), "
            + "releasesHandle: \(self.releasesHandle), cancelsTimer: \(self.cancelsTimer), discards: \(self.discards.map(String.init) ?? "-"))"
    }
}

/// Runs `body` with a real continuation for `install`, and resumes that
/// continuation itself afterwards (the machine only hands it back).
private func withProbeContinuation(_ body: (UnsafeContinuation<Int, any Error>) -> Void) async {
    _ = try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Int, any Error>) in
        body(continuation)
        continuation.resume(returning: 0)
    }
}

private let aHandle = CancelHandle {}
private let aTimeout = BridgeTimeoutError(timeout: .seconds(3))

@Suite("OneShot: CompletionStateMachine contract")
struct OneShotStateMachineTests {
    @Test("finish before install: the outcome waits in the machine and install resumes at once")
    func finishBeforeInstall() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            #expect(Effects(machine.finish(.success(7))) == .nothing)
            #expect(machine.isDecided && machine.holdsOutcome)
            #expect(Effects(machine.install(continuation)) == Effects(resumes: .success(7)))
            #expect(!machine.holdsOutcome && !machine.holdsWaiter)
        }
    }

    @Test("install before finish: finish resumes the installed waiter")
    func installBeforeFinish() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            #expect(Effects(machine.install(continuation)) == .nothing)
            #expect(machine.holdsWaiter)
            #expect(Effects(machine.finish(.success(7))) == Effects(resumes: .success(7)))
            #expect(!machine.holdsWaiter && !machine.holdsOutcome)
        }
    }

    @Test("success then error: the success wins and the error is ignored")
    func successThenError() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            _ = machine.install(continuation)
            #expect(Effects(machine.finish(.success(1))) == Effects(resumes: .success(1)))
            #expect(Effects(machine.finish(.failure(OneShotTestError(code: 2)))) == .nothing)
        }
    }

    @Test("error then success: the error wins and the late success is discarded")
    func errorThenSuccess() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            _ = machine.install(continuation)
            #expect(Effects(machine.finish(.failure(OneShotTestError(code: 2)))) == Effects(resumes: .failure(2)))
            #expect(Effects(machine.finish(.success(1))) == Effects(discards: 1))
        }
    }

    @Test("first recorded outcome wins: cancellation and timeout after a success are ignored")
    func cancelAfterSuccessIgnored() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            _ = machine.attach(aHandle)
            #expect(Effects(machine.finish(.success(1))) == Effects(releasesHandle: true))
            #expect(Effects(machine.cancel()) == .nothing)
            #expect(Effects(machine.timeOut(aTimeout)) == .nothing)
            // The waiter, arriving after all of them, still gets the first outcome.
            #expect(Effects(machine.install(continuation)) == Effects(resumes: .success(1)))
        }
    }

    @Test("first recorded outcome wins: a success after cancellation is discarded, not delivered")
    func successAfterCancelDiscarded() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            _ = machine.install(continuation)
            _ = machine.attach(aHandle)
            #expect(Effects(machine.cancel()) == Effects(resumes: .cancelled, callsHandle: true))
            #expect(Effects(machine.finish(.success(5))) == Effects(discards: 5))
            #expect(Effects(machine.cancel()) == .nothing)
        }
    }

    @Test("cancel before the handle is returned: the handle is called when it arrives, once")
    func cancelBeforeHandle() {
        var machine = Machine()
        #expect(Effects(machine.cancel()) == .nothing)  // no waiter, no handle yet
        #expect(machine.isDecided)
        #expect(Effects(machine.attach(aHandle)) == Effects(callsHandle: true))
        #expect(Effects(machine.cancel()) == .nothing)  // a second cancel does not call it again
    }

    @Test("cancel before start returns: startReturned delivers CancellationError and calls the handle")
    func cancelBeforeStartReturned() {
        var machine = Machine()
        _ = machine.cancel()
        guard case .deliver(let outcome, let call) = machine.startReturned(aHandle) else {
            Issue.record("expected the outcome to be delivered")
            return
        }
        #expect(OneShotOutcome(outcome) == .cancelled)
        #expect(call != nil)
        #expect(!machine.holdsHandle)
    }

    @Test("handle arrives first: the cancel path takes it and calls it")
    func handleBeforeCancel() {
        var machine = Machine()
        #expect(Effects(machine.attach(aHandle)) == .nothing)
        #expect(machine.holdsHandle)
        #expect(Effects(machine.cancel()) == Effects(callsHandle: true))
        #expect(!machine.holdsHandle)
    }

    @Test("a completion decided before the handle arrived: the handle is never called")
    func completionBeforeHandle() {
        var machine = Machine()
        _ = machine.finish(.success(1))
        #expect(Effects(machine.attach(aHandle)) == .nothing)
        #expect(Effects(machine.cancel()) == .nothing)
    }

    @Test("a completion decided while start ran: startReturned delivers it and does not call the handle")
    func completionBeforeStartReturned() {
        var machine = Machine()
        _ = machine.finish(.success(4))
        guard case .deliver(let outcome, let call) = machine.startReturned(aHandle) else {
            Issue.record("expected the outcome to be delivered")
            return
        }
        #expect(OneShotOutcome(outcome) == .success(4))
        #expect(call == nil)
    }

    @Test("nothing decided when start returns: startReturned keeps the handle and asks to wait")
    func startReturnedPending() {
        var machine = Machine()
        guard case .wait = machine.startReturned(aHandle) else {
            Issue.record("expected to wait")
            return
        }
        #expect(machine.holdsHandle && !machine.isDecided)
    }

    @Test("timeout decides like cancellation: calls the handle, and does not cancel the timer that fired")
    func timeoutDecides() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            _ = machine.install(continuation)
            _ = machine.attach(aHandle)
            _ = machine.armTimer(DeadlineTimer(deadline: .now))
            #expect(machine.holdsTimer)
            #expect(Effects(machine.timeOut(aTimeout)) == Effects(resumes: .timedOut(.seconds(3)), callsHandle: true))
            #expect(!machine.holdsTimer && !machine.holdsHandle && !machine.holdsWaiter)
            #expect(Effects(machine.finish(.success(9))) == Effects(discards: 9))
        }
    }

    @Test("timeout before the handle arrives: the handle is called on arrival")
    func timeoutBeforeHandle() {
        var machine = Machine()
        _ = machine.timeOut(aTimeout)
        #expect(Effects(machine.attach(aHandle)) == Effects(callsHandle: true))
    }

    @Test("timeout loses to an earlier success, and the success cancels the timer")
    func timeoutLosesToSuccess() {
        var machine = Machine()
        _ = machine.attach(aHandle)
        _ = machine.armTimer(DeadlineTimer(deadline: .now))
        #expect(Effects(machine.finish(.success(1))) == Effects(releasesHandle: true, cancelsTimer: true))
        #expect(Effects(machine.timeOut(aTimeout)) == .nothing)
    }

    @Test("a timer armed after the decision is cancelled at once")
    func armAfterDecision() {
        var machine = Machine()
        _ = machine.finish(.success(1))
        #expect(Effects(machine.armTimer(DeadlineTimer(deadline: .now))) == Effects(cancelsTimer: true))
        #expect(!machine.holdsTimer)
    }

    @Test("once decided, the machine holds no waiter, handle or timer")
    func holdsNothingAfterDecision() async {
        await withProbeContinuation { continuation in
            var machine = Machine()
            _ = machine.install(continuation)
            _ = machine.attach(aHandle)
            _ = machine.armTimer(DeadlineTimer(deadline: .now))
            #expect(machine.holdsWaiter && machine.holdsHandle && machine.holdsTimer)
            #expect(
                Effects(machine.finish(.failure(OneShotTestError(code: 1))))
                    == Effects(resumes: .failure(1), releasesHandle: true, cancelsTimer: true))
            #expect(!machine.holdsWaiter && !machine.holdsHandle && !machine.holdsTimer && !machine.holdsOutcome)
        }
    }

    @Test("a nil handle is accepted and never called")
    func nilHandle() {
        var machine = Machine()
        _ = machine.attach(nil)
        #expect(Effects(machine.cancel()) == .nothing)
        var other = Machine()
        _ = other.cancel()
        #expect(Effects(other.attach(nil)) == .nothing)
    }
}
