/// Decides which ``StreamControl`` call (pause, resume, cancel) to make next,
/// so that the calls, which run outside the stream's lock, reach the producer
/// one at a time and in the order they were decided.
///
/// One thread at a time is the *deliverer*: the thread whose event made a call
/// due while nobody was delivering receives a ``Delivery``, makes the call
/// with no lock held, then reports ``deliveryCompleted()`` under the lock and
/// receives the next call due, if any. Events that arrive while a call is in
/// flight only update the wanted state; the deliverer picks them up. A resume
/// wanted and unwanted again while a call is in flight produces nothing, but a
/// pause is never dropped: the yield that decided it already answered
/// `.stopProducing`, so the producer may have stopped itself, and only a
/// later resume can restart it. So a pause wanted and unwanted again while a
/// call is in flight is made, then the resume; the producer always ends in
/// the last wanted state. `cancel` supersedes pending pause/resume and is the
/// last call ever made. Re-entrant events from inside a call never deliver
/// themselves (the caller is already the deliverer), so they cannot deadlock
/// or recurse.
///
/// Before `start` returns the control handle, decided pauses and a cancel are
/// recorded and delivered as soon as the handle arrives.
///
/// A stream keeps this machine behind its own small lock, not the stream's
/// element lock: a deliverer coming back from `resume` must not compete with
/// a producer that yields in a tight loop (an unfair mutex can starve it
/// while the producer overshoots `high`). Pause decisions therefore carry a
/// version assigned under the stream's lock; an older resume that arrives
/// late is ignored, an older pause is still made (see below).
///
/// Where a delivery runs (inline, on a library-owned thread, or as a job posted
/// through the control's `SDKScheduler`) is the storage's business; the
/// machine only guarantees one call in flight, in decided order.
///
/// A pause decision that arrives after a newer one (decisions are applied
/// after the stream's lock is released, so two threads can apply theirs out
/// of order) is not simply dropped: its yield answered `.stopProducing`, so
/// it is made, followed by the newest wanted state (see `stalePause()`).
@usableFromInline
struct ProducerControlStateMachine: Sendable {
    @usableFromInline
    enum Operation: Sendable, Hashable {
        case pause
        case resume
        case cancel
    }

    /// One call to make, outside the lock.
    @usableFromInline
    struct Delivery: Sendable {
        @usableFromInline let operation: Operation
        @usableFromInline let control: StreamControl

        @usableFromInline
        init(operation: Operation, control: StreamControl) {
            self.operation = operation
            self.control = control
        }

        /// Makes the call. Must be called with no lock held.
        @usableFromInline
        func perform() {
            switch operation {
            case .pause: control.pause?()
            case .resume: control.resume?()
            case .cancel: control.cancel.cancel()
            }
        }
    }

    /// What is wanted while the handle is missing or a call is in flight.
    @usableFromInline
    struct Pending: Sendable {
        /// The state the stream wants the producer in.
        @usableFromInline var wantPaused = false
        /// A pause was decided and not made yet: made even if it is no longer
        /// wanted (then followed by a resume).
        @usableFromInline var pauseDue = false
        @usableFromInline var cancelRequested = false
        @usableFromInline var producerFinished = false

        @usableFromInline init() {}
    }

    @usableFromInline
    enum State: Sendable {
        /// `start` has not returned its handle yet.
        case awaitingControl(Pending)
        /// Handle known, no call in flight; the producer was last told `paused`.
        case idle(control: StreamControl, paused: Bool)
        /// A deliverer is making `inFlight`; afterwards the producer counts as
        /// told `pausedAfterInFlight`.
        case delivering(control: StreamControl, inFlight: Operation, pausedAfterInFlight: Bool, pending: Pending)
        /// No call will ever be made again: cancel was delivered, the producer
        /// finished, or there is no handle.
        case closed
    }

    @usableFromInline var state: State
    /// Version of the newest pause decision applied by `setPaused`.
    @usableFromInline var version: UInt64 = 0
    /// Calls handed out so far.
    @usableFromInline var pauses: Int = 0
    @usableFromInline var resumes: Int = 0

    @usableFromInline
    init() {
        self.state = .awaitingControl(Pending())
    }

    /// `start` returned. The caller becomes the deliverer of the result.
    @usableFromInline
    mutating func controlArrived(_ control: StreamControl?) -> Delivery? {
        guard case .awaitingControl(let pending) = state else {
            preconditionFailure("StreamControl arrived twice")
        }
        guard let control else {
            state = .closed
            return nil
        }
        return next(control, told: false, pending)
    }

    /// The stream wants the producer paused (`true`) or running (`false`).
    /// `version` orders decisions: an older resume than the newest seen is
    /// ignored; an older pause is made, then the newest wanted state.
    @usableFromInline
    mutating func setPaused(_ paused: Bool, version: UInt64) -> Delivery? {
        guard version > self.version else {
            return paused ? stalePause() : nil
        }
        self.version = version
        switch state {
        case .awaitingControl(var pending):
            pending.wantPaused = paused
            if paused { pending.pauseDue = true }
            state = .awaitingControl(pending)
            return nil
        case .idle(let control, let current):
            guard paused != current else { return nil }
            var pending = Pending()
            pending.wantPaused = paused
            return deliver(paused ? .pause : .resume, control, pending)
        case .delivering(let control, let inFlight, let after, var pending):
            pending.wantPaused = paused
            if paused && !after { pending.pauseDue = true }
            state = .delivering(control: control, inFlight: inFlight, pausedAfterInFlight: after, pending: pending)
            return nil
        case .closed:
            return nil
        }
    }

    /// The consumer stopped: cancel the producer, exactly once. Ignored once
    /// the producer has finished.
    @usableFromInline
    mutating func requestCancel() -> Delivery? {
        switch state {
        case .awaitingControl(var pending):
            if pending.producerFinished || pending.cancelRequested { return nil }
            pending.cancelRequested = true
            state = .awaitingControl(pending)
            return nil
        case .idle(let control, let paused):
            var pending = Pending()
            pending.wantPaused = paused
            pending.cancelRequested = true
            return deliver(.cancel, control, pending, told: paused)
        case .delivering(let control, let inFlight, let after, var pending):
            if pending.producerFinished || pending.cancelRequested || inFlight == .cancel { return nil }
            pending.cancelRequested = true
            state = .delivering(control: control, inFlight: inFlight, pausedAfterInFlight: after, pending: pending)
            return nil
        case .closed:
            return nil
        }
    }

    /// A pause decided before the newest decision but applied after it. The
    /// yield that decided it answered `.stopProducing`, so the producer may
    /// have stopped itself; the newer decision (a resume) found the producer
    /// told "running" and made nothing. So the pause is made now, and the
    /// newest wanted state after it: a producer that stopped on an answer is
    /// always resumed when demand returns.
    private mutating func stalePause() -> Delivery? {
        switch state {
        case .awaitingControl(var pending):
            pending.pauseDue = true
            state = .awaitingControl(pending)
            return nil
        case .idle(let control, let paused):
            // Told paused already: a resume will follow when one is wanted.
            guard !paused else { return nil }
            var pending = Pending()
            pending.wantPaused = false
            return deliver(.pause, control, pending)
        case .delivering(let control, let inFlight, let after, var pending):
            if !after { pending.pauseDue = true }
            state = .delivering(control: control, inFlight: inFlight, pausedAfterInFlight: after, pending: pending)
            return nil
        case .closed:
            return nil
        }
    }

    /// The producer finished: no pause or resume is needed any more. A cancel
    /// requested before this is still delivered.
    @usableFromInline
    mutating func producerFinished() {
        switch state {
        case .awaitingControl(var pending):
            pending.producerFinished = true
            state = .awaitingControl(pending)
        case .idle:
            state = .closed
        case .delivering(let control, let inFlight, let after, var pending):
            pending.producerFinished = true
            state = .delivering(control: control, inFlight: inFlight, pausedAfterInFlight: after, pending: pending)
        case .closed:
            break
        }
    }

    /// The deliverer made its call; returns the next one due, or `nil` (the
    /// caller stops being the deliverer).
    @usableFromInline
    mutating func deliveryCompleted() -> Delivery? {
        guard case .delivering(let control, let inFlight, let after, let pending) = state else {
            preconditionFailure("deliveryCompleted() without a delivery in flight")
        }
        if inFlight == .cancel {
            state = .closed
            return nil
        }
        return next(control, told: after, pending)
    }

    /// What the producer was last told, counting a call in flight as made
    /// (`nil` before the handle arrives or once closed).
    @usableFromInline
    var pausedAsTold: Bool? {
        switch state {
        case .awaitingControl, .closed: return nil
        case .idle(_, let paused): return paused
        case .delivering(_, _, let after, _): return after
        }
    }

    /// The call due when nothing is in flight and the producer was last told `told`.
    private mutating func next(_ control: StreamControl, told: Bool, _ pending: Pending) -> Delivery? {
        if pending.cancelRequested {
            return deliver(.cancel, control, pending, told: told)
        }
        if pending.producerFinished {
            state = .closed
            return nil
        }
        var rest = pending
        rest.pauseDue = false
        if pending.pauseDue && !told {
            return deliver(.pause, control, rest)
        }
        if pending.wantPaused != told {
            return deliver(pending.wantPaused ? .pause : .resume, control, rest)
        }
        state = .idle(control: control, paused: told)
        return nil
    }

    private mutating func deliver(
        _ operation: Operation, _ control: StreamControl, _ pending: Pending, told: Bool = false
    ) -> Delivery {
        let after: Bool
        switch operation {
        case .pause:
            after = true
            pauses += 1
        case .resume:
            after = false
            resumes += 1
        case .cancel:
            after = told
        }
        state = .delivering(control: control, inFlight: operation, pausedAfterInFlight: after, pending: pending)
        return Delivery(operation: operation, control: control)
    }
}
