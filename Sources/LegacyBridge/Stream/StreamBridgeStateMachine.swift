/// Work for the bridge's single *emitter*: elements to pass to the
/// `AsyncThrowingStream` continuation in order, then possibly the terminal.
/// Performed with no lock held.
struct StreamBridgeEmission<Element> {
    var elements: StreamRing<Element>
    /// `.some(nil)`: finish normally; `.some(error)`: finish throwing.
    var terminal: (any Error)??
}

/// The state of an `AsyncThrowingStream` built with `bridging`: producer
/// control (cancel exactly once, also when the control handle arrives after
/// termination), reordering of sequenced elements and the counters.
///
/// The continuation is never called under the lock (its `finish` runs
/// `onTermination`, which takes the lock). To keep released runs of a
/// sequenced stream in order anyway, one thread at a time is the emitter: it
/// takes the pending elements under the lock, yields them outside it, and
/// comes back until nothing is pending.
struct StreamBridgeStateMachine<Element: Sendable> {
    enum State {
        /// The producer may yield; `emitting` is true while a thread passes
        /// pending elements to the continuation.
        case open(emitting: Bool)
        /// A terminal was decided while an emitter was busy; it finishes the
        /// continuation after the pending elements.
        case closing(failure: (any Error)?)
        /// The terminal was handed to the emitter, or the stream terminated.
        case closed
    }

    private var state: State
    private var pending: StreamRing<Element>
    private var reorderer: SequenceReorderer<Element>?
    private var control: ProducerControlStateMachine
    private var counters: StreamStatistics

    init(ordering: StreamOrdering) {
        ordering.validate()
        self.state = .open(emitting: false)
        self.pending = StreamRing()
        switch ordering {
        case .arrival:
            self.reorderer = nil
        case .sequenced(let window, let first, let gaps):
            self.reorderer = SequenceReorderer(window: window, firstSequence: first, gapPolicy: gaps)
        }
        self.control = ProducerControlStateMachine()
        self.counters = StreamStatistics()
    }

    var statistics: StreamStatistics { counters }

    /// `start` returned its handle (or `nil`, also when it threw).
    mutating func controlArrived(_ control: StreamControl?) -> ProducerControlStateMachine.Delivery? {
        self.control.controlArrived(control)
    }

    mutating func deliveryCompleted() -> ProducerControlStateMachine.Delivery? {
        control.deliveryCompleted()
    }

    /// Arrival ordering: `count` elements are about to be passed straight to
    /// the continuation. Returns false (and counts them as late) once the
    /// stream terminated: `onTermination` runs before the standard stream
    /// stops accepting elements, so its own answer would still be "enqueued"
    /// for a yield made from inside the cancel call. Optimistically counts
    /// them as enqueued otherwise; `correctYield` fixes that up.
    mutating func beginYield(count: Int) -> Bool {
        guard case .open = state else {
            counters.yieldedAfterTermination += count
            return false
        }
        counters.enqueued += count
        return true
    }

    /// The continuation did not enqueue `count` of the elements counted by `beginYield`.
    mutating func correctYield(_ outcome: YieldOutcome, count: Int = 1) {
        counters.enqueued -= count
        switch outcome {
        case .enqueued: counters.enqueued += count
        case .dropped: counters.droppedByBuffering += count
        case .terminated: counters.yieldedAfterTermination += count
        }
    }

    /// A numbered element: reorder it and, if nobody is emitting, become the
    /// emitter. Elements discarded by a gap failure go to `discarded`, to be
    /// released outside the lock.
    mutating func yield(_ element: Element, sequence: UInt64, discarded: inout [Element])
        -> (YieldOutcome, StreamBridgeEmission<Element>?, ProducerControlStateMachine.Delivery?)
    {
        guard case .open(let emitting) = state else {
            counters.yieldedAfterTermination += 1
            return (.terminated, nil, nil)
        }
        guard var reorderer = self.reorderer else {
            preconditionFailure("yield(_:sequence:) needs a stream created with ordering: .sequenced(window:)")
        }
        self.reorderer = nil
        let skippedBefore = reorderer.skippedSequences
        let placement = reorderer.insert(element, sequence: sequence) { pending.append($0) }
        counters.skippedSequences += reorderer.skippedSequences - skippedBefore
        self.reorderer = reorderer
        switch placement {
        case .released, .held:
            guard !emitting, !pending.isEmpty else { return (.enqueued, nil, nil) }
            state = .open(emitting: true)
            return (.enqueued, takePending(terminal: nil), nil)
        case .stale:
            counters.droppedStale += 1
            return (.dropped, nil, nil)
        case .rejected:
            let error = SequenceGapError(missingSequence: reorderer.nextSequence)
            discarded = discardHeld()
            let delivery = control.requestCancel()
            return (.dropped, close(failure: error, emitting: emitting), delivery)
        }
    }

    /// The producer finished or failed: flush (or fail on) held elements and
    /// hand the terminal to the emitter. Only the first terminal counts.
    mutating func finish(_ failure: (any Error)?, discarded: inout [Element]) -> StreamBridgeEmission<Element>? {
        guard case .open(let emitting) = state else { return nil }
        var failure = failure
        if var reorderer = self.reorderer, reorderer.heldCount > 0 {
            self.reorderer = nil
            switch reorderer.gapPolicy {
            case .skip:
                let skippedBefore = reorderer.skippedSequences
                reorderer.flush { pending.append($0) }
                counters.skippedSequences += reorderer.skippedSequences - skippedBefore
                self.reorderer = reorderer
            case .fail:
                let missing = reorderer.nextSequence
                self.reorderer = reorderer
                discarded = discardHeld()
                if failure == nil { failure = SequenceGapError(missingSequence: missing) }
            }
        }
        return close(failure: failure, emitting: emitting)
    }

    /// The emitter passed its elements on (and the terminal, if it had one);
    /// returns more work, or `nil` when it may stop.
    mutating func emitted(_ outcomes: (enqueued: Int, dropped: Int, terminated: Int)) -> StreamBridgeEmission<Element>? {
        counters.enqueued += outcomes.enqueued
        counters.droppedByBuffering += outcomes.dropped
        counters.yieldedAfterTermination += outcomes.terminated
        switch state {
        case .open(let emitting):
            precondition(emitting, "emitted() without an emitter")
            if pending.isEmpty {
                state = .open(emitting: false)
                return nil
            }
            return takePending(terminal: nil)
        case .closing(let failure):
            state = .closed
            return takePending(terminal: .some(failure))
        case .closed:
            return nil
        }
    }

    /// `onTermination` ran: the consumer went away (`cancelled`) or the
    /// stream finished. Returns the cancel call if the producer must be
    /// cancelled now, and the elements to drop outside the lock.
    mutating func terminated(cancelled: Bool) -> (ProducerControlStateMachine.Delivery?, StreamRing<Element>) {
        var dropped = StreamRing<Element>()
        switch state {
        case .open, .closing:
            state = .closed
            counters.discardedAtTermination += pending.count
            swap(&pending, &dropped)
            for element in discardHeld() { dropped.append(element) }
        case .closed:
            break
        }
        if cancelled {
            return (control.requestCancel(), dropped)
        }
        control.producerFinished()
        return (nil, dropped)
    }

    private mutating func close(failure: (any Error)?, emitting: Bool) -> StreamBridgeEmission<Element>? {
        if emitting {
            state = .closing(failure: failure)
            return nil
        }
        state = .closed
        return takePending(terminal: .some(failure))
    }

    private mutating func takePending(terminal: (any Error)??) -> StreamBridgeEmission<Element> {
        var elements = StreamRing<Element>()
        swap(&elements, &pending)
        return StreamBridgeEmission(elements: elements, terminal: terminal)
    }

    private mutating func discardHeld() -> [Element] {
        guard var reorderer = self.reorderer else { return [] }
        self.reorderer = nil
        let removed = reorderer.removeAll()
        counters.discardedAtTermination += removed.count
        self.reorderer = reorderer
        return removed
    }
}
