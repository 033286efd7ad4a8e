/// Decides which ``StreamControl`` call (pause, resume, cancel) to make next,
/// so that the calls, which run outside the stream's lock, reach the producer
/// one at a time and in the order they were decided.
///
/// One thread at a time is the *deliverer*: the thread whose event made a call
/// due while nobody was delivering receives a ``Delivery``, makes the call
/// with no lock held, then reports ``deliveryCompleted()`` under the lock and
/// receives the next call due, if any. Events that arrive while a call is in
/// flight only update the wanted state; the deliverer picks them up. Pause
/// and resume are coalesced (a pause wanted and then unwanted while a call is
/// in flight produces nothing), so a resume decided before a newer pause can
/// never land after it, and the producer always ends in the last wanted
/// state. `cancel` supersedes pending pause/resume and is the last call ever
/// made. Re-entrant events from inside a call never deliver themselves (the
/// caller is already the deliverer), so they cannot deadlock or recurse.
///
/// Before `start` returns the control handle, wanted pause and cancel are
/// recorded and delivered as soon as the handle arrives.
///
/// A stream keeps this machine behind its own small lock, not the stream's
/// element lock: a deliverer coming back from `resume` must not compete with
/// a producer that yields in a tight loop (an unfair mutex can starve it
/// while the producer overshoots `high`). Pause decisions therefore carry a
/// version assigned under the stream's lock; an older decision that arrives
/// late is ignored.
///
/// Where a delivery runs (inline, on a Dispatch worker, or as a job posted
/// through the control's `ControlScheduler`) is the storage's business; the
/// machine only guarantees one call in flight, in decided order.
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
            case .cancel: control.cancel()
            }
        }
    }

    @usableFromInline
    enum State: Sendable {
        /// `start` has not returned its handle yet.
        case awaitingControl(wantPaused: Bool, cancelRequested: Bool, producerFinished: Bool)
        /// Handle known, no call in flight; the producer was last told `paused`.
        case idle(control: StreamControl, paused: Bool)
        /// A deliverer is making `inFlight`.
        case delivering(
            control: StreamControl,
            inFlight: Operation,
            pausedAfterInFlight: Bool,
            wantPaused: Bool,
            cancelRequested: Bool,
            producerFinished: Bool
        )
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
        self.state = .awaitingControl(wantPaused: false, cancelRequested: false, producerFinished: false)
    }

    /// `start` returned. The caller becomes the deliverer of the result.
    @usableFromInline
    mutating func controlArrived(_ control: StreamControl?) -> Delivery? {
        switch state {
        case .awaitingControl(let wantPaused, let cancelRequested, let producerFinished):
            guard let control else {
                state = .closed
                return nil
            }
            if cancelRequested {
                return deliver(.cancel, control, paused: false, wantPaused: false, cancel: true, finished: producerFinished)
            }
            if producerFinished {
                state = .closed
                return nil
            }
            if wantPaused {
                return deliver(.pause, control, paused: false, wantPaused: true, cancel: false, finished: false)
            }
            state = .idle(control: control, paused: false)
            return nil
        case .idle, .delivering, .closed:
            preconditionFailure("StreamControl arrived twice")
        }
    }

    /// The stream wants the producer paused (`true`) or running (`false`).
    /// `version` orders decisions: one older than the newest seen is ignored.
    @usableFromInline
    mutating func setPaused(_ paused: Bool, version: UInt64) -> Delivery? {
        guard version > self.version else { return nil }
        self.version = version
        switch state {
        case .awaitingControl(_, let cancelRequested, let producerFinished):
            state = .awaitingControl(wantPaused: paused, cancelRequested: cancelRequested, producerFinished: producerFinished)
            return nil
        case .idle(let control, let current):
            guard paused != current else { return nil }
            return deliver(paused ? .pause : .resume, control, paused: current, wantPaused: paused, cancel: false, finished: false)
        case .delivering(let control, let inFlight, let after, _, let cancelRequested, let producerFinished):
            state = .delivering(
                control: control, inFlight: inFlight, pausedAfterInFlight: after,
                wantPaused: paused, cancelRequested: cancelRequested, producerFinished: producerFinished
            )
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
        case .awaitingControl(let wantPaused, let cancelRequested, let producerFinished):
            if producerFinished || cancelRequested { return nil }
            state = .awaitingControl(wantPaused: wantPaused, cancelRequested: true, producerFinished: false)
            return nil
        case .idle(let control, let paused):
            return deliver(.cancel, control, paused: paused, wantPaused: paused, cancel: true, finished: false)
        case .delivering(let control, let inFlight, let after, let wantPaused, let cancelRequested, let producerFinished):
            if producerFinished || cancelRequested || inFlight == .cancel { return nil }
            state = .delivering(
                control: control, inFlight: inFlight, pausedAfterInFlight: after,
                wantPaused: wantPaused, cancelRequested: true, producerFinished: false
            )
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
        case .awaitingControl(let wantPaused, let cancelRequested, _):
            state = .awaitingControl(wantPaused: wantPaused, cancelRequested: cancelRequested, producerFinished: true)
        case .idle:
            state = .closed
        case .delivering(let control, let inFlight, let after, let wantPaused, let cancelRequested, _):
            state = .delivering(
                control: control, inFlight: inFlight, pausedAfterInFlight: after,
                wantPaused: wantPaused, cancelRequested: cancelRequested, producerFinished: true
            )
        case .closed:
            break
        }
    }

    /// The deliverer made its call; returns the next one due, or `nil` (the
    /// caller stops being the deliverer).
    @usableFromInline
    mutating func deliveryCompleted() -> Delivery? {
        switch state {
        case .delivering(let control, let inFlight, let after, let wantPaused, let cancelRequested, let producerFinished):
            if inFlight == .cancel {
                state = .closed
                return nil
            }
            if cancelRequested {
                return deliver(.cancel, control, paused: after, wantPaused: wantPaused, cancel: true, finished: producerFinished)
            }
            if producerFinished {
                state = .closed
                return nil
            }
            if wantPaused != after {
                return deliver(wantPaused ? .pause : .resume, control, paused: after, wantPaused: wantPaused, cancel: false, finished: false)
            }
            state = .idle(control: control, paused: after)
            return nil
        case .awaitingControl, .idle, .closed:
            preconditionFailure("deliveryCompleted() without a delivery in flight")
        }
    }

    /// What the producer was last told, counting a call in flight as made
    /// (`nil` before the handle arrives or once closed).
    @usableFromInline
    var pausedAsTold: Bool? {
        switch state {
        case .awaitingControl, .closed: return nil
        case .idle(_, let paused): return paused
        case .delivering(_, _, let after, _, _, _): return after
        }
    }

    private mutating func deliver(
        _ operation: Operation, _ control: StreamControl,
        paused: Bool, wantPaused: Bool, cancel: Bool, finished: Bool
    ) -> Delivery {
        let after: Bool
        switch operation {
        case .pause: after = true
        case .resume: after = false
        case .cancel: after = paused
        }
        state = .delivering(
            control: control, inFlight: operation, pausedAfterInFlight: after,
            wantPaused: wantPaused, cancelRequested: cancel, producerFinished: finished
        )
        switch operation {
        case .pause: pauses += 1
        case .resume: resumes += 1
        case .cancel: break
        }
        return Delivery(operation: operation, control: control)
    }
}
