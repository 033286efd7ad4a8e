// Which `StreamControl` call a stream makes next, and which thread makes it. A pure value that the
// stream's machine keeps under the stream's one lock, so a decision and its call are one step.
//
// A call is made with no lock held by the thread the machine hands it to. That thread reports the
// return and receives the next call due, if any. Nothing here waits: a call that cannot start yet
// is made later by the thread whose call was in its way.

/// The producer-control decisions of one stream subscription.
///
/// Rules:
/// - Calls are handed out in the order the stream decided them. Pause and resume alternate from
///   pause, cancel is the last call, and nothing is called without a handle.
/// - A decided pause is always made, even if a resume was decided since: its yield answered
///   `stopProducing`, so the producer may have stopped itself. A resume overtaken by a new pause
///   before it was made is not made.
/// - With a scheduler, one call is in flight at a time.
/// - Without one, a pause starts as soon as it is decided, even while the previous resume is still
///   returning: a producer that the resume woke must be stoppable at once, and its pause can only
///   land after the resume that let it run. A resume never starts while a pause is in flight:
///   that pause's thread makes it afterwards.
/// - Cancel starts once nothing else is in flight, exactly once if requested before the producer
///   finished, and never once it finished first.
/// - Calls decided before the handle arrives are handed out when it arrives.
/// - When no call can follow, the handle is handed back, to be released outside the lock.
@usableFromInline
struct ProducerControlStateMachine: Sendable {
    @usableFromInline
    enum Operation: Sendable, Hashable {
        case pause
        case resume
        case cancel
    }

    /// The producer's handle, shared by reference so that calls and actions stay one word.
    @usableFromInline
    final class Handle: Sendable {
        @usableFromInline let control: StreamControl

        init(_ control: StreamControl) {
            self.control = control
        }
    }

    /// One call to make, with no lock held.
    @usableFromInline
    struct Call: Sendable {
        @usableFromInline let operation: Operation
        @usableFromInline let handle: Handle

        init(_ operation: Operation, _ handle: Handle) {
            self.operation = operation
            self.handle = handle
        }

        /// The control's scheduler, if every call must be posted through it.
        @usableFromInline var scheduler: SDKScheduler? { handle.control.scheduler }

        /// Calls the producer. Must be called with no lock held.
        @usableFromInline
        func make() {
            switch operation {
            case .pause: handle.control.pause?()
            case .resume: handle.control.resume?()
            case .cancel: handle.control.cancel.cancel()
            }
        }
    }

    /// What the stream wants beyond the calls already made or in flight.
    @usableFromInline
    enum Pending: Sendable, Hashable {
        /// Pause and resume as wanted. `pauseOwed`: a decided pause not made yet.
        case steer(wantPaused: Bool, pauseOwed: Bool)
        /// The consumer stopped: cancel, then nothing.
        case cancel
        /// The producer finished: nothing more.
        case finished
    }

    /// The calls being made right now.
    @usableFromInline
    enum InFlight: Sendable, Hashable {
        case nothing
        case pause
        case resume
        /// A pause that began while the resume before it was still returning.
        case resumeAndPause
        case cancel

        func adding(_ operation: Operation) -> InFlight {
            switch (self, operation) {
            case (.nothing, .pause): return .pause
            case (.nothing, .resume): return .resume
            case (.nothing, .cancel): return .cancel
            case (.resume, .pause): return .resumeAndPause
            case (.pause, _), (.resume, _), (.resumeAndPause, _), (.cancel, _):
                preconditionFailure("ProducerControlStateMachine: \(operation) cannot start beside \(self)")
            }
        }

        func removing(_ operation: Operation) -> InFlight {
            switch (self, operation) {
            case (.pause, .pause), (.resume, .resume), (.cancel, .cancel): return .nothing
            case (.resumeAndPause, .pause): return .resume
            case (.resumeAndPause, .resume): return .pause
            case (.nothing, _), (.pause, _), (.resume, _), (.resumeAndPause, .cancel), (.cancel, _):
                preconditionFailure(
                    "ProducerControlStateMachine: \(operation) returned but was not in flight (\(self))")
            }
        }
    }

    @usableFromInline
    enum State: Sendable {
        /// `start` has not returned its handle yet.
        case awaitingHandle(Pending)
        /// The handle is known. `told`: whether the producer was last told to pause, counting the
        /// calls in flight as made.
        case active(handle: Handle, told: Bool, inFlight: InFlight, pending: Pending)
        /// No call will ever be made again.
        case closed
    }

    /// The answer to every event.
    @usableFromInline
    enum Action: Sendable {
        /// Nothing to do.
        case none
        /// Make this call now, outside the lock, then report `callReturned`.
        case make(Call)
        /// No call can follow: release the handle outside the lock.
        case release(Handle)
    }

    @usableFromInline var state: State

    @usableFromInline
    init() {
        self.state = .awaitingHandle(.steer(wantPaused: false, pauseOwed: false))
    }

    // MARK: - Events

    /// `start` returned its handle, or `nil` when the producer cannot be controlled.
    @usableFromInline
    mutating func handleArrived(_ control: StreamControl?) -> Action {
        switch state {
        case .awaitingHandle(let pending):
            guard let control else {
                state = .closed
                return .none
            }
            return advance(Handle(control), told: false, .nothing, pending)
        case .active, .closed:
            preconditionFailure("ProducerControlStateMachine: the StreamControl arrived twice")
        }
    }

    /// The stream wants the producer paused.
    @usableFromInline
    mutating func pauseDecided() -> Action {
        switch state {
        case .awaitingHandle(.steer):
            state = .awaitingHandle(.steer(wantPaused: true, pauseOwed: true))
            return .none
        case .active(let handle, let told, let inFlight, .steer(_, let owed)):
            return advance(handle, told: told, inFlight, .steer(wantPaused: true, pauseOwed: owed || !told))
        case .awaitingHandle(.cancel), .awaitingHandle(.finished), .active(_, _, _, .cancel),
            .active(_, _, _, .finished), .closed:
            return .none
        }
    }

    /// The stream wants the producer running again.
    @usableFromInline
    mutating func resumeDecided() -> Action {
        switch state {
        case .awaitingHandle(.steer(_, let owed)):
            state = .awaitingHandle(.steer(wantPaused: false, pauseOwed: owed))
            return .none
        case .active(let handle, let told, let inFlight, .steer(_, let owed)):
            return advance(handle, told: told, inFlight, .steer(wantPaused: false, pauseOwed: owed))
        case .awaitingHandle(.cancel), .awaitingHandle(.finished), .active(_, _, _, .cancel),
            .active(_, _, _, .finished), .closed:
            return .none
        }
    }

    /// The consumer stopped: cancel the producer, once, unless it finished first.
    @usableFromInline
    mutating func cancelRequested() -> Action {
        switch state {
        case .awaitingHandle(.steer):
            state = .awaitingHandle(.cancel)
            return .none
        case .active(let handle, let told, let inFlight, .steer):
            return advance(handle, told: told, inFlight, .cancel)
        case .awaitingHandle(.cancel), .awaitingHandle(.finished), .active(_, _, _, .cancel),
            .active(_, _, _, .finished), .closed:
            return .none
        }
    }

    /// The producer finished: no pause or resume any more. A cancel requested before is still made.
    @usableFromInline
    mutating func producerFinished() -> Action {
        switch state {
        case .awaitingHandle(.steer):
            state = .awaitingHandle(.finished)
            return .none
        case .active(let handle, let told, let inFlight, .steer):
            return advance(handle, told: told, inFlight, .finished)
        case .awaitingHandle(.cancel), .awaitingHandle(.finished), .active(_, _, _, .cancel),
            .active(_, _, _, .finished), .closed:
            return .none
        }
    }

    /// A call handed out by this machine returned.
    @usableFromInline
    mutating func callReturned(_ operation: Operation) -> Action {
        switch state {
        case .active(let handle, _, .cancel, _):
            precondition(operation == .cancel, "ProducerControlStateMachine: \(operation) returned during cancel")
            state = .closed
            return .release(handle)
        case .active(let handle, let told, let inFlight, let pending):
            return advance(handle, told: told, inFlight.removing(operation), pending)
        case .awaitingHandle, .closed:
            preconditionFailure("ProducerControlStateMachine: \(operation) returned but no call was handed out")
        }
    }

    // MARK: - Queries

    /// Whether a yield may answer `stopProducing`: until the handle arrives, yes, because the
    /// producer's callbacks may run before `start` returns. Then only if the handle has a
    /// `resume`, so that a producer that stopped can be restarted.
    @usableFromInline
    var acceptsStopAnswers: Bool {
        switch state {
        case .awaitingHandle: return true
        case .active(let handle, _, _, _): return handle.control.resume != nil
        case .closed: return false
        }
    }

    /// What the producer was last told, counting calls in flight as made: `nil` before the handle
    /// arrives and once closed.
    var pausedAsTold: Bool? {
        switch state {
        case .awaitingHandle, .closed: return nil
        case .active(_, let told, _, _): return told
        }
    }

    /// Whether no call will ever be made again.
    var isClosed: Bool {
        switch state {
        case .closed: return true
        case .awaitingHandle, .active: return false
        }
    }

    // MARK: - Helpers

    /// Starts the call due, if it can start beside `inFlight`, and records the new state.
    private mutating func advance(
        _ handle: Handle, told: Bool, _ inFlight: InFlight, _ pending: Pending
    ) -> Action {
        let serial = handle.control.scheduler != nil
        switch pending {
        case .cancel:
            guard inFlight == .nothing else { break }
            state = .active(handle: handle, told: told, inFlight: .cancel, pending: .cancel)
            return .make(Call(.cancel, handle))
        case .finished:
            guard inFlight == .nothing else { break }
            state = .closed
            return .release(handle)
        case .steer(let wantPaused, let owed):
            if !told && (owed || wantPaused) {
                // Beside a resume still returning, unless the scheduler runs calls one at a time.
                guard inFlight == .nothing || (inFlight == .resume && !serial) else { break }
                state = .active(
                    handle: handle, told: true, inFlight: inFlight.adding(.pause),
                    pending: .steer(wantPaused: wantPaused, pauseOwed: false))
                return .make(Call(.pause, handle))
            }
            if told && !wantPaused {
                guard inFlight == .nothing else { break }
                state = .active(handle: handle, told: false, inFlight: .resume, pending: pending)
                return .make(Call(.resume, handle))
            }
        }
        state = .active(handle: handle, told: told, inFlight: inFlight, pending: pending)
        return .none
    }
}
