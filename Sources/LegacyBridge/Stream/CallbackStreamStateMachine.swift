/// A decision about the producer, taken under the stream's lock and applied
/// to the stream's `ProducerControlStateMachine` (behind its own lock) after
/// the stream's lock is released.
@usableFromInline
enum StreamControlRequest: Sendable, Hashable {
    /// Want the producer paused / running; `version` orders the decisions.
    case setPaused(Bool, version: UInt64)
    /// The consumer stopped (or a gap failed the stream) while the producer runs.
    case cancel
    /// The producer finished: no more pause or resume.
    case producerFinished
}

/// Side effects an event asks for, performed by the storage after it released
/// the lock: wake the consumer, pass a control request on, and let dropped
/// elements go (their deinit may run user code, so never under the lock).
@usableFromInline
struct StreamEffects<Element: Sendable> {
    @usableFromInline
    typealias Continuation = UnsafeContinuation<Element?, any Error>

    @usableFromInline var wakeUp: (continuation: Continuation, result: Result<Element?, any Error>)?
    @usableFromInline var control: StreamControlRequest?
    @usableFromInline var evicted: Element?
    @usableFromInline var discarded: StreamRing<Element>
    /// An element was accepted while a pause is wanted: the producer should not run on while
    /// that pause is still held up behind another thread's resume call.
    @usableFromInline var acceptedWhilePauseWanted: Bool

    @inlinable
    init() {
        self.wakeUp = nil
        self.control = nil
        self.evicted = nil
        self.discarded = StreamRing()
        self.acceptedWhilePauseWanted = false
    }

    @inlinable
    mutating func setControl(_ request: StreamControlRequest) {
        precondition(self.control == nil, "two producer-control decisions in one event")
        self.control = request
    }
}

/// What a yield asks the storage to do. The common case carries no effects,
/// so the hot path has nothing to destroy or inspect.
@usableFromInline
enum StreamYieldAction<Element: Sendable> {
    case outcome(YieldOutcome)
    case effects(YieldOutcome, StreamEffects<Element>)
}

/// The buffer, terminal and producer-control decisions of one
/// `CallbackStream` subscription: a pure value, driven under the storage's
/// lock. Which control call to make, and when, is decided from these
/// requests by a `ProducerControlStateMachine`.
///
/// The element buffer and the reorderer live beside `State` (they exist in
/// both the streaming and the draining phase) so the hot path appends in
/// place instead of moving them through an enum payload.
@usableFromInline
struct CallbackStreamStateMachine<Element: Sendable> {
    @usableFromInline
    typealias Continuation = UnsafeContinuation<Element?, any Error>

    @usableFromInline
    enum State {
        /// The producer is live. `waiter` is the suspended consumer; it is
        /// only ever set while `buffer` is empty.
        case streaming(waiter: Continuation?)
        /// The producer finished (`failure == nil`) or failed; the terminal
        /// waits behind the buffered elements.
        case draining(failure: (any Error)?)
        /// The consumer received the terminal.
        case finished
        /// The consumer stopped before receiving the terminal.
        case cancelled
    }

    /// What the consumer does after asking for elements.
    @usableFromInline
    enum NextAction {
        /// A batch was swapped into the consumer's ring.
        case batch
        /// Nothing is waiting: suspend with `suspend(_:)`.
        case suspend
        /// The stream ended normally.
        case end
        /// The stream ended with this error.
        case fail(any Error)
    }

    @usableFromInline var state: State
    @usableFromInline var buffer: StreamRing<Element>
    /// Elements handed to the consumer whose consumption it has not yet
    /// confirmed (it confirms by coming back for more); they count as buffered.
    @usableFromInline var inBatch: Int
    @usableFromInline let buffering: StreamBuffering
    @usableFromInline var reorderer: SequenceReorderer<Element>?
    @usableFromInline let isSequenced: Bool
    /// Backpressure: whether the stream currently wants the producer paused.
    @usableFromInline var pauseWanted: Bool
    /// Version of the latest pause decision (orders them across threads).
    @usableFromInline var pauseVersion: UInt64
    @usableFromInline var counters: StreamStatistics
    /// Wake-ups handed out whose `resume` call has not been confirmed yet
    /// (see `wakeUpDelivered()`).
    @usableFromInline var wakeUpsInFlight: Int = 0
    /// Batches handed to the consumer and times it had to suspend (for tests).
    @usableFromInline var batchesTaken: Int = 0
    @usableFromInline var suspensions: Int = 0

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering) {
        buffering.validate()
        ordering.validate()
        self.state = .streaming(waiter: nil)
        self.buffer = StreamRing()
        self.inBatch = 0
        self.buffering = buffering
        switch ordering {
        case .arrival:
            self.reorderer = nil
            self.isSequenced = false
        case .sequenced(let window, let first, let gaps):
            self.reorderer = SequenceReorderer(window: window, firstSequence: first, gapPolicy: gaps)
            self.isSequenced = true
        }
        self.pauseWanted = false
        self.pauseVersion = 0
        self.counters = StreamStatistics()
    }

    // MARK: Producer events

    /// One element from the producer (arrival-ordered streams).
    @inlinable
    mutating func yield(_ element: Element) -> StreamYieldAction<Element> {
        switch state {
        case .streaming(let waiter):
            precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
            if waiter == nil && appendIfSimple(element) {
                return .outcome(.enqueued)
            }
            var effects = StreamEffects<Element>()
            let outcome = accept(element, &effects)
            return .effects(outcome, effects)
        case .draining, .finished, .cancelled:
            counters.yieldedAfterTermination += 1
            return .outcome(.terminated)
        }
    }

    /// Several elements from the producer, in order (arrival-ordered streams).
    @usableFromInline
    mutating func yield(contentsOf elements: ContiguousArray<Element>) -> (YieldOutcome, StreamEffects<Element>) {
        var effects = StreamEffects<Element>()
        guard case .streaming = state else {
            counters.yieldedAfterTermination += elements.count
            return (.terminated, effects)
        }
        precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
        var outcome = YieldOutcome.enqueued
        for element in elements {
            if accept(element, &effects) == .dropped { outcome = .dropped }
        }
        return (outcome, effects)
    }

    /// One numbered element from the producer (sequenced streams). The
    /// reorder happens here, under the stream's lock, so concurrent producers
    /// cannot interleave the runs it releases.
    @usableFromInline
    mutating func yield(_ element: Element, sequence: UInt64) -> (YieldOutcome, StreamEffects<Element>) {
        var effects = StreamEffects<Element>()
        guard case .streaming = state else {
            counters.yieldedAfterTermination += 1
            return (.terminated, effects)
        }
        guard var reorderer = self.reorderer else {
            preconditionFailure("yield(_:sequence:) needs a stream created with ordering: .sequenced(window:)")
        }
        self.reorderer = nil  // keep the reorderer's storage uniquely referenced while it is mutated
        var outcome = YieldOutcome.enqueued
        let skippedBefore = reorderer.skippedSequences
        let placement = reorderer.insert(element, sequence: sequence) { released in
            if self.accept(released, &effects) == .dropped { outcome = .dropped }
        }
        counters.skippedSequences += reorderer.skippedSequences - skippedBefore
        self.reorderer = reorderer
        switch placement {
        case .released, .held:
            return (outcome, effects)
        case .stale:
            counters.droppedStale += 1
            return (.dropped, effects)
        case .rejected:
            failForGap(SequenceGapError(missingSequence: reorderer.nextSequence), &effects)
            return (.dropped, effects)
        }
    }

    /// The producer finished (`failure == nil`) or failed. Only the first
    /// terminal counts; later ones are ignored.
    @usableFromInline
    mutating func finish(_ failure: (any Error)?) -> StreamEffects<Element> {
        var effects = StreamEffects<Element>()
        guard case .streaming = state else { return effects }
        var failure = failure
        if var reorderer = self.reorderer, reorderer.heldCount > 0 {
            self.reorderer = nil
            switch reorderer.gapPolicy {
            case .skip:
                let skippedBefore = reorderer.skippedSequences
                reorderer.flush { _ = self.accept($0, &effects) }
                counters.skippedSequences += reorderer.skippedSequences - skippedBefore
            case .fail:
                let missing = reorderer.nextSequence
                discard(reorderer.removeAll(), &effects)
                if failure == nil { failure = SequenceGapError(missingSequence: missing) }
            }
            self.reorderer = reorderer
        }
        effects.control = .producerFinished  // supersedes a pause the final flush may have decided
        pauseWanted = false
        terminate(failure, &effects)
        return effects
    }

    // MARK: Consumer events

    /// The consumer has used up its previous batch and asks for more. On
    /// `.batch` the waiting elements were swapped into `batch` (which must be
    /// empty); the returned control request (a resume) must be passed on first.
    @inlinable
    mutating func next(into batch: inout StreamRing<Element>) -> (NextAction, StreamControlRequest?) {
        switch state {
        case .streaming(let waiter):
            precondition(waiter == nil, "next() called while another next() is suspended")
            inBatch = 0
            let delivery = checkLowWatermark()
            if buffer.isEmpty { return (.suspend, delivery) }
            swap(&buffer, &batch)
            inBatch = batch.count
            batchesTaken &+= 1
            return (.batch, delivery)
        case .draining(let failure):
            inBatch = 0
            if !buffer.isEmpty {
                swap(&buffer, &batch)
                inBatch = batch.count
                batchesTaken &+= 1
                return (.batch, nil)
            }
            state = .finished
            if let failure { return (.fail(failure), nil) }
            return (.end, nil)
        case .finished:
            return (.end, nil)
        case .cancelled:
            return (.fail(CancellationError()), nil)
        }
    }

    /// The consumer suspends after `next(into:)` returned `.suspend`;
    /// anything that happened in between wakes it at once.
    @usableFromInline
    mutating func suspend(_ continuation: Continuation) -> StreamEffects<Element> {
        var effects = StreamEffects<Element>()
        switch state {
        case .streaming(let waiter):
            precondition(waiter == nil, "next() called while another next() is suspended")
            if let element = buffer.popFirst() {
                inBatch = 1
                wake(continuation, .success(element), &effects)
            } else {
                state = .streaming(waiter: continuation)
                suspensions &+= 1
            }
        case .draining(let failure):
            if let element = buffer.popFirst() {
                inBatch = 1
                wake(continuation, .success(element), &effects)
            } else {
                state = .finished
                wake(continuation, failure.map { .failure($0) } ?? .success(nil), &effects)
            }
        case .finished:
            wake(continuation, .success(nil), &effects)
        case .cancelled:
            wake(continuation, .failure(CancellationError()), &effects)
        }
        return effects
    }

    /// The consumer stopped (task cancelled, loop left, iterator dropped):
    /// drop what is buffered and, if the producer is still running, cancel it.
    @usableFromInline
    mutating func consumerTerminated() -> StreamEffects<Element> {
        var effects = StreamEffects<Element>()
        switch state {
        case .streaming(let waiter):
            state = .cancelled
            discardBuffered(&effects)
            pauseWanted = false
            effects.setControl(.cancel)
            if let waiter { wake(waiter, .failure(CancellationError()), &effects) }
        case .draining:
            state = .cancelled
            discardBuffered(&effects)
        case .finished, .cancelled:
            break
        }
        return effects
    }

    /// The counters (`pauses` and `resumes` are kept by the control machine).
    @usableFromInline
    var statistics: StreamStatistics { counters }

    // MARK: Helpers

    /// Hands the suspended consumer's continuation out to be resumed.
    @inlinable
    mutating func wake(_ continuation: Continuation, _ result: Result<Element?, any Error>, _ effects: inout StreamEffects<Element>) {
        wakeUpsInFlight &+= 1
        effects.wakeUp = (continuation, result)
    }

    /// The storage made the `resume` call of a wake-up.
    @usableFromInline
    mutating func wakeUpDelivered() {
        wakeUpsInFlight &-= 1
    }

    /// The hot path of `accept`: appends when nothing but an append is
    /// needed (no policy drop, no watermark crossed); otherwise returns false
    /// and changes nothing.
    @inlinable
    mutating func appendIfSimple(_ element: Element) -> Bool {
        switch buffering {
        case .unbounded:
            break
        case .bufferingOldest(let limit), .bufferingNewest(let limit):
            guard buffer.count < limit else { return false }
        case .backpressure(_, let high):
            // While a pause is wanted, take the slow path: the yield may have to wait for it to land.
            if pauseWanted || buffer.count &+ inBatch &+ 1 >= high {
                return false
            }
        }
        buffer.append(element)
        counters.enqueued += 1
        let held = buffer.count &+ inBatch
        if held > counters.peakBuffered { counters.peakBuffered = held }
        return true
    }

    /// Stores an accepted element (the state is `.streaming`), applying the
    /// buffering policy and the high watermark.
    @inlinable
    mutating func accept(_ element: Element, _ effects: inout StreamEffects<Element>) -> YieldOutcome {
        var outcome = YieldOutcome.enqueued
        if case .streaming(let waiter?) = state {
            // Only possible while the buffer is empty: hand the element over.
            state = .streaming(waiter: nil)
            inBatch = 1
            wake(waiter, .success(element), &effects)
        } else {
            switch buffering {
            case .unbounded, .backpressure:
                buffer.append(element)
            case .bufferingOldest(let limit):
                if buffer.count >= limit {
                    counters.droppedByBuffering += 1
                    return .dropped
                }
                buffer.append(element)
            case .bufferingNewest(let limit):
                if buffer.count >= limit {
                    let oldest = buffer.popFirst()
                    if let previous = effects.evicted { effects.discarded.append(previous) }
                    effects.evicted = oldest
                    counters.droppedByBuffering += 1
                    outcome = .dropped
                }
                buffer.append(element)
            }
        }
        counters.enqueued += 1
        let held = buffer.count &+ inBatch
        if held > counters.peakBuffered { counters.peakBuffered = held }
        if case .backpressure(_, let high) = buffering {
            if pauseWanted {
                counters.acceptedWhilePaused += 1
                effects.acceptedWhilePauseWanted = true
            } else if held >= high {
                pauseWanted = true
                pauseVersion &+= 1
                effects.setControl(.setPaused(true, version: pauseVersion))
            }
        }
        return outcome
    }

    /// Backpressure: the consumer came back; resume the producer if the
    /// stream is paused and fewer than `low` elements are held.
    @inlinable
    mutating func checkLowWatermark() -> StreamControlRequest? {
        guard pauseWanted, case .backpressure(let low, _) = buffering, buffer.count &+ inBatch < low else {
            return nil
        }
        pauseWanted = false
        pauseVersion &+= 1
        return .setPaused(false, version: pauseVersion)
    }

    /// Enters the terminal phase from `.streaming`: a waiting consumer gets
    /// the terminal at once (the buffer is empty then) or the first element
    /// released by a final flush.
    mutating func terminate(_ failure: (any Error)?, _ effects: inout StreamEffects<Element>) {
        guard case .streaming(let waiter) = state else {
            preconditionFailure("terminate() outside the streaming phase")
        }
        if let waiter {
            if let element = buffer.popFirst() {
                inBatch = 1
                state = .draining(failure: failure)
                wake(waiter, .success(element), &effects)
            } else {
                state = .finished
                wake(waiter, failure.map { .failure($0) } ?? .success(nil), &effects)
            }
        } else {
            state = .draining(failure: failure)
        }
    }

    /// A gap under `SequenceGapPolicy.fail`: the stream fails after what it
    /// already released, held elements are discarded and the still running
    /// producer is cancelled.
    mutating func failForGap(_ error: SequenceGapError, _ effects: inout StreamEffects<Element>) {
        if var reorderer = self.reorderer {
            self.reorderer = nil
            discard(reorderer.removeAll(), &effects)
            self.reorderer = reorderer
        }
        pauseWanted = false
        effects.setControl(.cancel)
        terminate(error, &effects)
    }

    mutating func discardBuffered(_ effects: inout StreamEffects<Element>) {
        counters.discardedAtTermination += buffer.count
        swap(&buffer, &effects.discarded)
        if var reorderer = self.reorderer {
            self.reorderer = nil
            discard(reorderer.removeAll(), &effects)
            self.reorderer = reorderer
        }
    }

    mutating func discard(_ elements: [Element], _ effects: inout StreamEffects<Element>) {
        counters.discardedAtTermination += elements.count
        for element in elements { effects.discarded.append(element) }
    }
}
