/// The shared state of one call: the state machine and `onDiscard` behind one
/// lock, in one allocation (a `GateLockedBox`: a word lock on Linux). `Completion`, `CompletionGate`,
/// the cancellation handler and the timer all hold this same storage.
///
/// Every method locks, asks the machine for an action, unlocks, and only then
/// performs the action. Nothing the machine hands back (continuation, cancel
/// handle, timer, discarded value) is called or released under the lock.
@usableFromInline
struct CompletionGateStorage<Value: Sendable>: Sendable {
    @usableFromInline
    typealias Machine = CompletionStateMachine<Value>

    @usableFromInline
    struct Guarded {
        @usableFromInline var machine: Machine
        @usableFromInline let onDiscard: (@Sendable (Value) -> Void)?
        /// What the gate carries besides its machine: its diagnostics token while diagnostics are
        /// on, or the relay of a gate whose outcome goes to a function instead of a waiter; `nil`,
        /// and free, otherwise. One word either way.
        @usableFromInline let companion: GateCompanion<Value>?
        /// The timer `withCallback` arms once it waits: kept here, in the gate's one allocation,
        /// rather than in the caller's async frame (every suspended call pays for its frame).
        /// Two plain fields, `.seconds(0)` when no timer is planned: an optional tuple in this
        /// generic struct was copied and destroyed through the runtime's generic tuple code on
        /// every call; an optional struct's tag byte made the allocation 16 bytes larger; and
        /// `Duration.zero` is a call into the standard library (`.seconds(0)` is inlined).
        @usableFromInline var plannedTimeout: Duration
        /// The deadline, as its distance from `gateClockOrigin`.
        @usableFromInline var plannedDeadline: Duration

        /// The relay to hand a decision to when no waiter took it.
        @inlinable
        func relay(for decision: Machine.Decision) -> GateRelay<Value>? {
            guard decision.waiter == nil, case .relay(let relay)? = companion else { return nil }
            return relay
        }

        @inlinable
        init(onDiscard: (@Sendable (Value) -> Void)?, startPosted: Bool, relay: GateRelay<Value>? = nil) {
            self.machine = Machine(startPosted: startPosted)
            self.onDiscard = onDiscard
            if let relay {
                self.companion = .relay(relay)
            } else {
                self.companion = BridgeDiagnostics.isEnabled ? .diagnostics(BridgeDiagnostics.makeGateToken()) : nil
            }
            self.plannedTimeout = .seconds(0)
            self.plannedDeadline = .seconds(0)
        }
    }

    // `var` only for `startReturned`'s uniqueness check; never reassigned.
    @usableFromInline
    var box: GateLockedBox<Guarded>

    @inlinable
    init(onDiscard: (@Sendable (Value) -> Void)?) {
        self.box = GateLockedBox { Guarded(onDiscard: onDiscard, startPosted: false) }
    }

    /// A gate whose outcome goes to `relay`, on the thread that decides it, instead of to a
    /// waiter: no task has to wait for it. Nothing may install a waiter on it.
    @inlinable
    init(onDiscard: (@Sendable (Value) -> Void)?, relay: GateRelay<Value>) {
        self.box = GateLockedBox { Guarded(onDiscard: onDiscard, startPosted: false, relay: relay) }
    }

    /// A gate whose `start` is posted to the SDK's thread (see ``runPostedStart(_:scheduler:)``).
    @inlinable
    init(onDiscard: (@Sendable (Value) -> Void)?, startPosted: Bool) {
        self.box = GateLockedBox { Guarded(onDiscard: onDiscard, startPosted: startPosted) }
    }

    /// Runs the posted `start` on the SDK's thread, unless cancellation, the timeout or a failed
    /// post decided first. Its handle is attached as one that posts its call through `scheduler`,
    /// so that it too runs on the SDK's thread, and only after `start` has returned.
    @usableFromInline
    func runPostedStart(_ start: (Completion<Value>) throws -> CancelHandle?, scheduler: SDKScheduler) {
        let action = self.box.withLock { $0.machine.startBegins() }
        switch action {
        case .skip:
            return
        case .run:
            break
        }
        let handle: CancelHandle?
        do {
            handle = try start(Completion(storage: self))
        } catch {
            _ = self.finish(.failure(error))
            handle = nil
        }
        self.attach(handle?.posted(through: scheduler))
    }

    /// Records a result from the operation; true if it decided the outcome.
    @inlinable
    func finish(_ result: Result<Value, any Error>) -> Bool {
        let (action, onDiscard, relay) = self.box.withLock {
            guarded -> (Machine.FinishAction, (@Sendable (Value) -> Void)?, GateRelay<Value>?) in
            let action = guarded.machine.finish(result)
            switch action {
            case .discard: return (action, guarded.onDiscard, nil)
            case .decided(let decision): return (action, nil, guarded.relay(for: decision))
            case .none: return (action, nil, nil)
            }
        }
        switch action {
        case .decided(let decision):
            Self.perform(decision, relay: relay)
            return true
        case .discard(let value):
            onDiscard?(value)
            return false
        case .none:
            return false
        }
    }

    /// Records cancellation of the calling task; true if it decided the outcome.
    @inlinable
    @discardableResult
    func cancel() -> Bool {
        let (action, relay) = self.box.withLock { guarded -> (Machine.CancelAction, GateRelay<Value>?) in
            let action = guarded.machine.cancel()
            guard case .decided(let decision) = action else { return (action, nil) }
            return (action, guarded.relay(for: decision))
        }
        switch action {
        case .decided(let decision):
            Self.perform(decision, relay: relay)
            return true
        case .none:
            return false
        }
    }

    /// Records that the timer fired; true if the timeout decided the outcome.
    @usableFromInline
    @discardableResult
    func timeOut(_ error: BridgeTimeoutError) -> Bool {
        let (action, relay) = self.box.withLock { guarded -> (Machine.CancelAction, GateRelay<Value>?) in
            let action = guarded.machine.timeOut(error)
            guard case .decided(let decision) = action else { return (action, nil) }
            return (action, guarded.relay(for: decision))
        }
        switch action {
        case .decided(let decision):
            Self.perform(decision, relay: relay)
            return true
        case .none:
            return false
        }
    }

    /// Installs the waiter, resuming it at once if the outcome is already
    /// decided. Returns true if the waiter is left waiting.
    @inlinable
    @discardableResult
    func install(_ continuation: UnsafeContinuation<Value, any Error>) -> Bool {
        if BridgeDiagnostics.isEnabled { BridgeDiagnostics.noteSuspension() }
        let action = self.box.withLock { $0.machine.install(continuation) }
        switch action {
        case .none:
            return true
        case .resume(let continuation, let outcome):
            if BridgeDiagnostics.isEnabled { BridgeDiagnostics.noteResume() }
            continuation.resume(with: outcome)
            return false
        }
    }

    /// Attaches the operation's cancel handle, calling it at once if
    /// cancellation or the timeout already decided.
    @inlinable
    func attach(_ handle: CancelHandle?) {
        let action = self.box.withLock { $0.machine.attach(handle) }
        switch action {
        case .none:
            break
        case .call(let handle):
            handle.callOnJobThread()
        }
    }

    /// `start` returned `handle`: attaches it and returns the outcome, if it was decided
    /// meanwhile (after handing the handle to a job thread if it must be called). If the caller's
    /// completion is the only reference left to the gate (the SDK kept no copy, whether or not it
    /// already called it), no other thread can reach the gate: the machine is asked without the
    /// lock.
    @inlinable
    mutating func startReturned(_ handle: CancelHandle?) -> Result<Value, any Error>? {
        let action =
            self.box.isAlone()
            ? self.box.withLockAlone { $0.machine.startReturned(handle) }
            : self.box.withLock { $0.machine.startReturned(handle) }
        switch action {
        case .wait:
            return nil
        case .deliver(let outcome, let call):
            call?.callOnJobThread()
            return outcome
        }
    }

    /// Records the timer to arm once the call waits (see ``armPlannedTimer()``).
    @usableFromInline
    func planTimer(timeout: Duration, deadline: ContinuousClock.Instant) {
        let offset = gateClockOrigin.duration(to: deadline)
        self.box.withLock {
            $0.plannedTimeout = timeout
            $0.plannedDeadline = offset
        }
    }

    /// Arms the timer ``planTimer(timeout:deadline:)`` recorded, if any.
    @usableFromInline
    func armPlannedTimer() {
        let (timeout, offset) = self.box.withLock { ($0.plannedTimeout, $0.plannedDeadline) }
        guard timeout > .seconds(0) else { return }
        armTimer(timeout: timeout, deadline: gateClockOrigin + offset)
    }

    /// Starts a timer that decides the outcome with `BridgeTimeoutError` at
    /// `deadline`, unless something decides first (the timer is then cancelled
    /// and lets go of this storage promptly).
    @usableFromInline
    func armTimer(timeout: Duration, deadline: ContinuousClock.Instant) {
        let storage = self
        // Deciding and resuming is short and runs no user code: the timer thread does it, so the
        // caller is back on time even while every job thread is stuck in an SDK's cancel.
        let timer = DeadlineTimers.schedule(at: deadline, onTimerThread: true) {
            storage.timeOut(BridgeTimeoutError(timeout: timeout))
        }
        let action = self.box.withLock { $0.machine.armTimer(timer) }
        switch action {
        case .none:
            break
        case .cancel(let timer):
            timer.cancel()
        }
    }

    /// Performs a decision outside the lock: cancel the timer, resume the waiter, then hand the
    /// cancel handle to a job thread. The handle never runs here: this may be the task runtime's
    /// cancellation handler, a task group's `cancelAll()` or the timer thread, none of which may
    /// wait for an SDK. A handle that is not called is released when `decision` goes out of
    /// scope, also outside the lock.
    @inlinable
    static func perform(_ decision: Machine.Decision, relay: GateRelay<Value>? = nil) {
        decision.timerToCancel?.cancel()
        if let waiter = decision.waiter {
            if BridgeDiagnostics.isEnabled { BridgeDiagnostics.noteResume() }
            waiter.resume(with: decision.outcome)
        } else if let relay {
            relay.deliver(decision.outcome)
        }
        decision.handleToCall?.callOnJobThread()
    }

    /// Whether the outcome is decided.
    @usableFromInline
    var isDecided: Bool {
        self.box.withLock { $0.machine.isDecided }
    }

    /// A snapshot of the machine (tests and debugging).
    var machine: Machine {
        self.box.withLock { $0.machine }
    }
}

/// The instant planned deadlines are measured from (any fixed instant would do; a generic type
/// cannot hold a static stored property).
let gateClockOrigin = ContinuousClock.now

/// What a gate carries besides its machine, in one word.
@usableFromInline
enum GateCompanion<Value: Sendable>: Sendable {
    /// Counts the gate's life while diagnostics are on.
    case diagnostics(BridgeDiagnostics.GateToken)
    /// Receives the gate's outcome instead of a waiter.
    case relay(GateRelay<Value>)
}

/// Where a relay gate hands its outcome: called once, on the thread that decided it, outside
/// the gate's lock.
@usableFromInline
final class GateRelay<Value: Sendable>: Sendable {
    @usableFromInline let deliver: @Sendable (Result<Value, any Error>) -> Void

    @inlinable
    init(_ deliver: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        self.deliver = deliver
    }
}
