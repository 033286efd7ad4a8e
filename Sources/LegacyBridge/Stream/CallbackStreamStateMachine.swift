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
/// the lock: wake the consumer, pass a control request on, arm a gap timer,
/// and let dropped elements go (their deinit may run user code, so never
/// under the lock).
@usableFromInline
struct StreamEffects<Element: Sendable> {
    @usableFromInline
    typealias Continuation = UnsafeContinuation<Void, Never>

    /// The suspended consumer, to resume: it then asks the machine again.
    @usableFromInline var wakeUp: Continuation?
    @usableFromInline var control: StreamControlRequest?
    /// Arm a gap timer for this reorderer generation.
    @usableFromInline var armGapTimer: UInt64?
    @usableFromInline var evicted: Element?
    @usableFromInline var discarded: StreamRing<Element>

    @inlinable
    init() {
        self.wakeUp = nil
        self.control = nil
        self.armGapTimer = nil
        self.evicted = nil
        self.discarded = StreamRing()
    }

    /// Whether there is nothing to do.
    @inlinable
    var isEmpty: Bool {
        wakeUp == nil && control == nil && armGapTimer == nil && evicted == nil && discarded.isEmpty
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
/// The consumer is woken with a plain `Void` continuation and then asks the
/// machine again under the lock: no element travels through the
/// continuation, so the consumer never has to wait for the resuming thread
/// to finish its `resume` call, and every hand-off is ordered by the lock.
///
/// The element buffer and the reorderer live beside `State` (they exist in
/// both the streaming and the draining phase) so the hot path appends in
/// place instead of moving them through an enum payload.
@usableFromInline
struct CallbackStreamStateMachine<Element: Sendable> {
    @usableFromInline
    typealias Continuation = UnsafeContinuation<Void, Never>

    @usableFromInline
    enum State {
        /// The producer is live. `waiter` is the suspended consumer; it is
        /// only ever set while `buffer` is empty.
        case streaming(waiter: Continuation?)
        /// The producer finished (`failure == nil`) or failed; the terminal
        /// waits behind the buffered elements.
        case draining(failure: (any Error)?)
        /// The consumer received the terminal, or ended the subscription
        /// itself (`stop()`): `next()` returns `nil`.
        case finished
        /// The consumer's task was cancelled or the consumer went away:
        /// `next()` throws `CancellationError`.
        case cancelled
    }

    /// What the consumer does after asking for elements.
    @usableFromInline
    enum NextAction {
        /// A batch was swapped into the consumer's ring.
        case batch
        /// Nothing is waiting: suspend with `suspend(_:)`, then ask again.
        case suspend
        /// The stream ended normally.
        case end
        /// The stream ended with this error.
        case fail(any Error)
        /// The consumer's task was cancelled, or the consumer went away.
        case cancelled
    }

    @usableFromInline var state: State
    @usableFromInline var buffer: StreamRing<Element>
    /// Elements handed to the consumer whose consumption it has not yet
    /// confirmed (it confirms by coming back for more); they count as buffered.
    @usableFromInline var inBatch: Int
    @usableFromInline let buffering: StreamBuffering
    @usableFromInline var reorderer: SequenceReorderer<Element>?
    @usableFromInline let isSequenced: Bool
    /// Whether gap timers are armed (the ordering has a gap timeout).
    @usableFromInline let armsGapTimers: Bool
    /// Backpressure: whether the stream currently wants the producer paused.
    @usableFromInline var pauseWanted: Bool
    /// Whether a yield may answer `.stopProducing`: until `start` returns,
    /// yes (a producer that obeys the answer must supply a `resume`, and its
    /// callbacks may run before `start` returns); then only if the handle
    /// has a `resume`, so a producer that stops can be restarted.
    @usableFromInline var canStopProducer: Bool
    /// Version of the latest pause decision (orders them across threads).
    @usableFromInline var pauseVersion: UInt64
    @usableFromInline var counters: StreamStatistics
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
        self.reorderer = ordering.makeReorderer()
        self.isSequenced = ordering.isSequenced
        self.armsGapTimers = ordering.effectiveGapTimeout != nil
        self.pauseWanted = false
        self.canStopProducer = true
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
            return .effects(answer(outcome), effects)
        case .draining, .finished, .cancelled:
            counters.yieldedAfterTermination += 1
            return .outcome(.terminated)
        }
    }

    /// Several elements from the producer, in order (arrival-ordered
    /// streams), under one lock: a bulk append, one wake-up, one watermark check.
    @inlinable
    mutating func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> (YieldOutcome, StreamEffects<Element>) {
        var effects = StreamEffects<Element>()
        guard case .streaming(let waiter) = state else {
            counters.yieldedAfterTermination += elements.count
            return (.terminated, effects)
        }
        precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
        guard !elements.isEmpty else { return (answer(.enqueued), effects) }
        var outcome = YieldOutcome.enqueued
        switch buffering.kind {
        case .unbounded, .backpressure:
            buffer.append(contentsOf: elements)
            counters.enqueued += elements.count
        case .bufferingOldest(let limit):
            let room = Swift.max(0, limit - buffer.count)
            let kept = Swift.min(room, elements.count)
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: elements[0..<kept]))
            counters.enqueued += kept
            if kept < elements.count {
                counters.droppedByBuffering += elements.count - kept
                outcome = .dropped
            }
        case .bufferingNewest(let limit):
            let kept = Swift.min(limit, elements.count)
            let skipped = elements.count - kept
            var overflow = buffer.count + kept - limit
            while overflow > 0, let oldest = buffer.popFirst() {
                effects.discarded.append(oldest)
                overflow -= 1
            }
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: elements[skipped...]))
            counters.enqueued += kept
            let dropped = effects.discarded.count + skipped
            if dropped > 0 {
                counters.droppedByBuffering += dropped
                outcome = .dropped
            }
        }
        let held = buffer.count &+ inBatch
        if held > counters.peakBuffered { counters.peakBuffered = held }
        if waiter != nil && !buffer.isEmpty {
            state = .streaming(waiter: nil)
            effects.wakeUp = waiter
        }
        checkHighWatermark(held: held, accepted: elements.count, &effects)
        return (answer(outcome), effects)
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
        let before = (reorderer.skippedSequences, reorderer.droppedStale, reorderer.gapGeneration)
        let placement = reorderer.insert(
            element, sequence: sequence,
            release: { released in
                if self.accept(released, &effects) == .dropped { outcome = .dropped }
            },
            discard: { effects.discarded.append($0) })
        self.reorderer = reorderer
        counters.skippedSequences &+= reorderer.skippedSequences &- before.0
        counters.droppedStale += reorderer.droppedStale - before.1
        counters.heldBehindGap = reorderer.heldCount
        switch placement {
        case .released, .held:
            if armsGapTimers && reorderer.heldCount > 0 && reorderer.gapGeneration != before.2 {
                effects.armGapTimer = reorderer.gapGeneration
            }
            return (answer(outcome), effects)
        case .stale:
            return (answer(.dropped), effects)
        case .rejected:
            failForGap(SequenceGapError(missingSequence: reorderer.nextSequence), &effects)
            return (.dropped, effects)
        }
    }

    /// The gap timer armed for `generation` fired: if that gap is still the
    /// one holding elements back, give it up (skip, or fail the stream).
    @usableFromInline
    mutating func gapTimerFired(generation: UInt64) -> StreamEffects<Element> {
        var effects = StreamEffects<Element>()
        guard case .streaming = state, var reorderer = self.reorderer,
            reorderer.gapGeneration == generation, reorderer.heldCount > 0
        else { return effects }
        self.reorderer = nil
        let skippedBefore = reorderer.skippedSequences
        let gaveUp = reorderer.giveUpGap { _ = self.accept($0, &effects) }
        self.reorderer = reorderer
        counters.gapsTimedOut += 1
        counters.skippedSequences &+= reorderer.skippedSequences &- skippedBefore
        counters.heldBehindGap = reorderer.heldCount
        if !gaveUp {
            failForGap(SequenceGapError(missingSequence: reorderer.nextSequence), &effects)
        } else if reorderer.heldCount > 0 {
            effects.armGapTimer = reorderer.gapGeneration
        }
        return effects
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
            switch reorderer.gapPolicy.kind {
            case .skip:
                let skippedBefore = reorderer.skippedSequences
                reorderer.flush { _ = self.accept($0, &effects) }
                counters.skippedSequences &+= reorderer.skippedSequences &- skippedBefore
            case .fail:
                let missing = reorderer.nextSequence
                discard(reorderer.removeAll(), &effects)
                if failure == nil { failure = SequenceGapError(missingSequence: missing) }
            }
            counters.heldBehindGap = 0
            self.reorderer = reorderer
        }
        effects.control = .producerFinished  // supersedes a pause the final flush may have decided
        pauseWanted = false
        terminate(failure, &effects)
        return effects
    }

    /// `start` returned its control handle: whether a stopped producer can be
    /// told to go on (the handle has a `resume`).
    @usableFromInline
    mutating func controlArrived(canResume: Bool) {
        canStopProducer = canResume
    }

    // MARK: Consumer events

    /// The consumer has used up its previous batch and asks for more. On
    /// `.batch` the waiting elements were swapped into `batch` (which must be
    /// empty); the returned control request (a resume) must be passed on.
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
            return (.cancelled, nil)
        }
    }

    /// The consumer suspends after `next(into:)` returned `.suspend`; if
    /// anything happened in between it is resumed at once (and asks again).
    @usableFromInline
    mutating func suspend(_ continuation: Continuation) -> Continuation? {
        switch state {
        case .streaming(let waiter):
            precondition(waiter == nil, "next() called while another next() is suspended")
            if !buffer.isEmpty { return continuation }
            state = .streaming(waiter: continuation)
            suspensions &+= 1
            return nil
        case .draining, .finished, .cancelled:
            return continuation
        }
    }

    /// The consumer stopped: its task was cancelled, it left the loop or
    /// dropped the iterator (`cancelled`), or it called `stop()`
    /// (`!cancelled`: its `next()` then returns `nil`). Drops what is
    /// buffered and, if the producer is still running, cancels it.
    @usableFromInline
    mutating func consumerTerminated(cancelled: Bool) -> StreamEffects<Element> {
        var effects = StreamEffects<Element>()
        switch state {
        case .streaming(let waiter):
            state = cancelled ? .cancelled : .finished
            discardBuffered(&effects)
            pauseWanted = false
            effects.setControl(.cancel)
            effects.wakeUp = waiter
        case .draining:
            state = cancelled ? .cancelled : .finished
            discardBuffered(&effects)
        case .finished, .cancelled:
            break
        }
        return effects
    }

    /// Whether the subscription has ended for the consumer (before `start` ran, only `stop()`
    /// or cancellation can have ended it).
    var hasEnded: Bool {
        switch state {
        case .finished, .cancelled: return true
        case .streaming, .draining: return false
        }
    }

    /// The counters (`pauses` and `resumes` are kept by the control machine).
    @usableFromInline
    var statistics: StreamStatistics { counters }

    // MARK: Helpers

    /// The answer for an accepted element: `.stopProducing` while a pause is
    /// wanted and the producer can be restarted.
    @inlinable
    func answer(_ outcome: YieldOutcome) -> YieldOutcome {
        if outcome == .enqueued && pauseWanted && canStopProducer { return .stopProducing }
        return outcome
    }

    /// The hot path of `accept`: appends when nothing but an append is
    /// needed (no policy drop, no watermark crossed); otherwise returns false
    /// and changes nothing.
    @inlinable
    mutating func appendIfSimple(_ element: Element) -> Bool {
        switch buffering.kind {
        case .unbounded:
            break
        case .bufferingOldest(let limit), .bufferingNewest(let limit):
            guard buffer.count < limit else { return false }
        case .backpressure(_, let high):
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
    /// buffering policy and the high watermark, and wakes a waiting consumer.
    @inlinable
    mutating func accept(_ element: Element, _ effects: inout StreamEffects<Element>) -> YieldOutcome {
        var outcome = YieldOutcome.enqueued
        switch buffering.kind {
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
        counters.enqueued += 1
        let held = buffer.count &+ inBatch
        if held > counters.peakBuffered { counters.peakBuffered = held }
        if case .streaming(let waiter?) = state {
            state = .streaming(waiter: nil)
            effects.wakeUp = waiter
        }
        checkHighWatermark(held: held, accepted: 1, &effects)
        return outcome
    }

    /// Backpressure: decides a pause when `held` reached `high`, and counts
    /// elements accepted while one is wanted.
    @inlinable
    mutating func checkHighWatermark(held: Int, accepted: Int, _ effects: inout StreamEffects<Element>) {
        guard case .backpressure(_, let high) = buffering.kind else { return }
        if pauseWanted {
            counters.acceptedWhilePaused += accepted
        } else if held >= high {
            pauseWanted = true
            pauseVersion &+= 1
            effects.setControl(.setPaused(true, version: pauseVersion))
        }
    }

    /// Backpressure: the consumer came back; resume the producer if the
    /// stream is paused and at most `low` elements are held.
    @inlinable
    mutating func checkLowWatermark() -> StreamControlRequest? {
        guard pauseWanted, case .backpressure(let low, _) = buffering.kind, buffer.count &+ inBatch <= low else {
            return nil
        }
        pauseWanted = false
        pauseVersion &+= 1
        return .setPaused(false, version: pauseVersion)
    }

    /// Enters the terminal phase from `.streaming` and wakes a waiting consumer.
    mutating func terminate(_ failure: (any Error)?, _ effects: inout StreamEffects<Element>) {
        guard case .streaming(let waiter) = state else {
            preconditionFailure("terminate() outside the streaming phase")
        }
        state = .draining(failure: failure)
        if let waiter { effects.wakeUp = waiter }
    }

    /// A gap under `GapPolicy.fail`: the stream fails after what it
    /// already released, held elements are discarded and the still running
    /// producer is cancelled.
    mutating func failForGap(_ error: SequenceGapError, _ effects: inout StreamEffects<Element>) {
        if var reorderer = self.reorderer {
            self.reorderer = nil
            discard(reorderer.removeAll(), &effects)
            self.reorderer = reorderer
        }
        counters.heldBehindGap = 0
        pauseWanted = false
        effects.setControl(.cancel)
        terminate(error, &effects)
    }

    mutating func discardBuffered(_ effects: inout StreamEffects<Element>) {
        counters.discardedAtTermination += buffer.count
        if effects.discarded.isEmpty {
            swap(&buffer, &effects.discarded)
        } else {
            while let element = buffer.popFirst() { effects.discarded.append(element) }
        }
        if var reorderer = self.reorderer {
            self.reorderer = nil
            discard(reorderer.removeAll(), &effects)
            self.reorderer = reorderer
        }
        counters.heldBehindGap = 0
    }

    mutating func discard(_ elements: [Element], _ effects: inout StreamEffects<Element>) {
        counters.discardedAtTermination += elements.count
        for element in elements { effects.discarded.append(element) }
    }
}

extension CallbackStreamStateMachine: Sendable {}
extension CallbackStreamStateMachine.State: Sendable {}
