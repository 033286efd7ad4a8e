// The pure state machine behind every one-shot call.
//
// It owns no lock, calls no closure and resumes nothing: each event returns an
// action, and the storage (CompletionGateStorage) performs that action after it
// has released its lock. That split is what lets a cancel handle call the
// completion back synchronously without deadlocking, and what lets the tests
// drive every ordering of events without threads.
//
// The types below are `@usableFromInline` rather than `private` so that the
// generic entry points (`withCallback`, `Completion`) can be `@inlinable` and
// get specialised in the caller's module. Nothing outside OneShot/ uses them.

/// The decision logic of one call: who decides the outcome, and what must
/// happen to the waiter, the cancel handle and the timer when it is decided.
///
/// Rules:
/// - The first of finish / cancel / timeout decides; later ones are ignored
///   (a late success value is handed back for discarding).
/// - The waiter is resumed exactly once: at decision if it is installed, else
///   when it is installed (or the outcome is taken on the synchronous path).
/// - The cancel handle is called at most once, and only when cancellation or
///   the timeout decided. If it arrives after that decision it is called on
///   arrival; if a completion decided, it is never called.
/// - Once decided, the machine holds no waiter, handle or timer.
/// - A `start` posted to the SDK's thread runs only if nothing decided before it began; then
///   nothing can arrive from it. Once it began, the rules above hold as for a `start` on the caller.
@usableFromInline
struct CompletionStateMachine<Value: Sendable> {
    @usableFromInline typealias Continuation = UnsafeContinuation<Value, any Error>
    @usableFromInline typealias Outcome = Result<Value, any Error>
    @usableFromInline typealias Timer = DeadlineTimer

    /// The cancel handle before the outcome is decided.
    @usableFromInline
    enum PendingHandle {
        /// `start` was posted to the SDK's thread and has not begun: a decision now means it never runs.
        case startPosted
        /// `start` has not returned (or `attach` was not called) yet.
        case awaiting
        /// The handle (nil: the operation cannot be cancelled) is held until decision.
        case attached(CancelHandle?)
    }

    /// The cancel handle after the outcome is decided. The gate never holds one
    /// at this point: a handle is either called, dropped, or not arrived yet.
    @usableFromInline
    enum DecidedHandle {
        /// Cancellation or the timeout decided before the handle arrived: call it on arrival.
        case callOnArrival
        /// A completion decided before the handle arrived: drop it on arrival.
        case dropOnArrival
        /// Decided before the posted `start` began: `start` must not run, and no handle will come.
        case skipStart
        /// The handle has arrived and was dealt with.
        case settled
    }

    @usableFromInline
    enum State {
        /// Nothing decided. Holds the waiter (once installed), the handle
        /// (once attached) and the timer (once armed).
        case pending(waiter: Continuation?, handle: PendingHandle, timer: Timer?)
        /// Decided, but no waiter has received the outcome yet: the outcome waits here.
        case decided(outcome: Outcome, handle: DecidedHandle)
        /// Decided and handed to the waiter. Only late events can arrive now.
        case delivered(handle: DecidedHandle)
    }

    /// What the event that decided the outcome asks the storage to do, outside
    /// the lock, in this order: cancel the timer, resume the waiter, hand the
    /// handle to a job thread.
    @usableFromInline
    struct Decision {
        /// The outcome that won.
        @usableFromInline var outcome: Outcome
        /// The installed waiter, to resume with `outcome` (nil: the outcome stays in the machine).
        @usableFromInline var waiter: Continuation?
        /// The operation's cancel handle, to call (decided by cancellation or timeout).
        @usableFromInline var handleToCall: CancelHandle?
        /// A handle that will not be called; the storage releases it after unlocking
        /// (releasing it may run user deinit code, which must not run under the lock).
        @usableFromInline var handleToRelease: CancelHandle?
        /// The timer to cancel (decided by anything but the timer itself).
        @usableFromInline var timerToCancel: Timer?

        @inlinable
        init(outcome: Outcome, waiter: Continuation?) {
            self.outcome = outcome
            self.waiter = waiter
        }
    }

    /// Result of `finish`.
    @usableFromInline
    enum FinishAction {
        /// This completion decided the outcome.
        case decided(Decision)
        /// The outcome was already decided; this success value lost and must be discarded.
        case discard(Value)
        /// The outcome was already decided; this failure is ignored.
        case none
    }

    /// Result of `cancel` and `timeOut`.
    @usableFromInline
    enum CancelAction {
        case decided(Decision)
        /// The outcome was already decided.
        case none
    }

    /// Result of `install`.
    @usableFromInline
    enum InstallAction {
        /// Not decided yet; the machine keeps the waiter.
        case none
        /// Already decided: resume the waiter at once.
        case resume(Continuation, Outcome)
    }

    /// Result of `attach`.
    @usableFromInline
    enum AttachAction {
        /// Keep waiting (pending), or the handle is not to be called.
        case none
        /// Cancellation or the timeout already decided: call the handle now.
        case call(CancelHandle)
    }

    /// Result of `startReturned`.
    @usableFromInline
    enum StartReturnedAction {
        /// Not decided yet: the caller must install a waiter.
        case wait
        /// Decided while `start` ran: return this outcome without a continuation,
        /// after calling the handle if cancellation or the timeout decided.
        case deliver(Outcome, call: CancelHandle?)
    }

    /// Result of `startBegins`.
    @usableFromInline
    enum StartBeginsAction {
        /// Nothing decided: run `start` now.
        case run
        /// Cancellation, the timeout or a failed post decided first: `start` must never run.
        case skip
    }

    /// Result of `armTimer`.
    @usableFromInline
    enum ArmTimerAction {
        /// The machine keeps the timer until it decides.
        case none
        /// Already decided: cancel the timer that was just created.
        case cancel(Timer)
    }

    @usableFromInline
    var state: State

    @inlinable
    init() {
        self.state = .pending(waiter: nil, handle: .awaiting, timer: nil)
    }

    /// A machine whose `start` is posted to the SDK's thread: it must report ``startBegins()``
    /// before it runs.
    @inlinable
    init(startPosted: Bool) {
        self.state = .pending(waiter: nil, handle: startPosted ? .startPosted : .awaiting, timer: nil)
    }

    // MARK: - Events

    /// The operation reported `result` (success or failure).
    @inlinable
    mutating func finish(_ result: Outcome) -> FinishAction {
        if let decision = self.decide(result, cancelling: false, byTimer: false) {
            return .decided(decision)
        }
        switch result {
        case .success(let value):
            return .discard(value)
        case .failure:
            return .none
        }
    }

    /// The calling task was cancelled.
    @inlinable
    mutating func cancel() -> CancelAction {
        if let decision = self.decide(.failure(CancellationError()), cancelling: true, byTimer: false) {
            return .decided(decision)
        }
        return .none
    }

    /// The timer fired.
    @inlinable
    mutating func timeOut(_ error: BridgeTimeoutError) -> CancelAction {
        if let decision = self.decide(.failure(error), cancelling: true, byTimer: true) {
            return .decided(decision)
        }
        return .none
    }

    /// A waiter arrived. At most one per machine.
    @inlinable
    mutating func install(_ continuation: Continuation) -> InstallAction {
        switch self.state {
        case .pending(waiter: .none, let handle, let timer):
            self.state = .pending(waiter: continuation, handle: handle, timer: timer)
            return .none
        case .pending(waiter: .some, _, _):
            preconditionFailure(
                "CompletionGate: a waiter is already installed. A gate serves exactly one call: "
                    + "install (or await value()) once, and create a new gate for every call."
            )
        case .decided(let outcome, let handle):
            self.state = .delivered(handle: handle)
            return .resume(continuation, outcome)
        case .delivered:
            preconditionFailure(
                "CompletionGate: the outcome was already delivered to a waiter. A gate serves exactly "
                    + "one call: install (or await value()) once, and create a new gate for every call."
            )
        }
    }

    /// The posted `start` is about to run on the SDK's thread. At most once, only for a machine
    /// created with `startPosted: true`.
    @inlinable
    mutating func startBegins() -> StartBeginsAction {
        switch self.state {
        case .pending(let waiter, .startPosted, let timer):
            self.state = .pending(waiter: waiter, handle: .awaiting, timer: timer)
            return .run
        case .pending(_, .awaiting, _), .pending(_, .attached, _):
            Self.startNotPosted()
        case .decided(let outcome, .skipStart):
            self.state = .decided(outcome: outcome, handle: .settled)
            return .skip
        case .delivered(.skipStart):
            self.state = .delivered(handle: .settled)
            return .skip
        case .decided(_, .callOnArrival), .decided(_, .dropOnArrival), .decided(_, .settled),
            .delivered(.callOnArrival), .delivered(.dropOnArrival), .delivered(.settled):
            Self.startNotPosted()
        }
    }

    /// The operation's cancel handle arrived (nil: it cannot be cancelled). At most once per machine.
    @inlinable
    mutating func attach(_ handle: CancelHandle?) -> AttachAction {
        switch self.state {
        case .pending(let waiter, .awaiting, let timer):
            self.state = .pending(waiter: waiter, handle: .attached(handle), timer: timer)
            return .none
        case .pending(_, .startPosted, _):
            Self.startNotBegun()
        case .pending(_, .attached, _):
            Self.attachedTwice()
        case .decided(let outcome, let slot):
            let action = Self.arrival(of: handle, at: slot)
            self.state = .decided(outcome: outcome, handle: .settled)
            return action
        case .delivered(let slot):
            let action = Self.arrival(of: handle, at: slot)
            self.state = .delivered(handle: .settled)
            return action
        }
    }

    /// `start` returned `handle` (or threw: nil) and no waiter is installed yet.
    /// One event for "attach, then take the outcome if it is already decided",
    /// so the synchronous path needs a single critical section.
    @inlinable
    mutating func startReturned(_ handle: CancelHandle?) -> StartReturnedAction {
        switch self.state {
        case .pending(waiter: .none, .awaiting, timer: .none):
            self.state = .pending(waiter: nil, handle: .attached(handle), timer: nil)
            return .wait
        case .pending:
            preconditionFailure("startReturned must be the first of attach/install/armTimer")
        case .decided(let outcome, let slot):
            let call: CancelHandle?
            switch Self.arrival(of: handle, at: slot) {
            case .call(let handle): call = handle
            case .none: call = nil
            }
            self.state = .delivered(handle: .settled)
            return .deliver(outcome, call: call)
        case .delivered:
            preconditionFailure("startReturned after the outcome was delivered")
        }
    }

    /// A timer was created for this call. At most once per machine.
    @inlinable
    mutating func armTimer(_ timer: Timer) -> ArmTimerAction {
        switch self.state {
        case .pending(let waiter, let handle, timer: .none):
            self.state = .pending(waiter: waiter, handle: handle, timer: timer)
            return .none
        case .pending(_, _, timer: .some):
            preconditionFailure(
                "CompletionGate: a timeout is already armed. Await value(timeout:) once per gate."
            )
        case .decided, .delivered:
            return .cancel(timer)
        }
    }

    // MARK: - Helpers

    /// Decides `outcome` if nothing decided yet; nil if something already did.
    @inlinable
    mutating func decide(_ outcome: Outcome, cancelling: Bool, byTimer: Bool) -> Decision? {
        switch self.state {
        case .pending(let waiter, let handle, let timer):
            var decision = Decision(outcome: outcome, waiter: waiter)
            // The timer calling timeOut is finishing anyway; the others cancel it.
            decision.timerToCancel = byTimer ? nil : timer
            let slot: DecidedHandle
            switch handle {
            case .startPosted:
                // Whatever decided, the posted `start` must not run any more.
                slot = .skipStart
            case .awaiting:
                slot = cancelling ? .callOnArrival : .dropOnArrival
            case .attached(let handle):
                slot = .settled
                if cancelling {
                    decision.handleToCall = handle
                } else {
                    decision.handleToRelease = handle
                }
            }
            if waiter == nil {
                self.state = .decided(outcome: outcome, handle: slot)
            } else {
                self.state = .delivered(handle: slot)
            }
            return decision
        case .decided, .delivered:
            return nil
        }
    }

    @inlinable
    static func arrival(of handle: CancelHandle?, at slot: DecidedHandle) -> AttachAction {
        switch slot {
        case .callOnArrival:
            if let handle { return .call(handle) }
            return .none
        case .dropOnArrival:
            return .none
        case .skipStart:
            Self.startNotBegun()
        case .settled:
            Self.attachedTwice()
        }
    }

    @usableFromInline
    static func startNotBegun() -> Never {
        preconditionFailure("a posted start's handle arrived before startBegins() let it run")
    }

    @usableFromInline
    static func startNotPosted() -> Never {
        preconditionFailure("startBegins() is for a machine created with startPosted: true, once")
    }

    @usableFromInline
    static func attachedTwice() -> Never {
        preconditionFailure(
            "CompletionGate: a cancel handle was already attached. Attach the operation's "
                + "CancelHandle (or nil) at most once per gate."
        )
    }

    // MARK: - Introspection (tests and debugging)

    /// Whether the outcome is decided (an offload worker asks before it runs a call).
    @usableFromInline
    var isDecided: Bool {
        switch self.state {
        case .pending: return false
        case .decided, .delivered: return true
        }
    }

    /// Whether a waiter is installed and not yet resumed.
    var holdsWaiter: Bool {
        switch self.state {
        case .pending(let waiter, _, _): return waiter != nil
        case .decided, .delivered: return false
        }
    }

    /// Whether a cancel handle is held.
    var holdsHandle: Bool {
        switch self.state {
        case .pending(_, .attached(let handle), _): return handle != nil
        case .pending(_, .awaiting, _), .pending(_, .startPosted, _), .decided, .delivered: return false
        }
    }

    /// Whether a timer is held.
    var holdsTimer: Bool {
        switch self.state {
        case .pending(_, _, let timer): return timer != nil
        case .decided, .delivered: return false
        }
    }

    /// Whether a decided outcome waits for its waiter.
    var holdsOutcome: Bool {
        switch self.state {
        case .decided: return true
        case .pending, .delivered: return false
        }
    }
}
