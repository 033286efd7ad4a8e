extension AsyncThrowingStream where Failure == any Error, Element: Sendable {
    /// Builds an `AsyncThrowingStream` fed by a callback producer written
    /// against ``EventSink``, for APIs that must return the standard type.
    ///
    /// Differences from ``CallbackStream``:
    /// - `start` runs **eagerly**, right here, before this function returns:
    ///   an `AsyncThrowingStream` has a single consumer and no "first `next()`" hook.
    /// - **No backpressure**: ``StreamBuffering/backpressure(low:high:)``
    ///   cannot be expressed with `AsyncThrowingStream` and stops the program
    ///   (use ``CallbackStream``, or a dropping policy). `pause`/`resume` of
    ///   the returned ``StreamControl`` are never called.
    /// - The consumer resumes a continuation for every element, so it is much
    ///   slower than ``CallbackStream`` under load.
    /// - When the consuming task is cancelled, `next()` returns `nil` (the
    ///   standard type's behaviour) instead of throwing `CancellationError`.
    ///
    /// - As with any `AsyncThrowingStream`, leaving the loop terminates the
    ///   stream only once the stream value and its iterator are released.
    ///
    /// The rest of the contract holds: the terminal arrives once, after the
    /// elements yielded before it; when the stream terminates because the
    /// consumer went away (task cancelled, or stream and iterator released),
    /// the producer's `cancel` is called exactly once, outside every lock,
    /// also if that happens before `start` returned its handle, and never
    /// after the producer finished; yields after termination (also from inside
    /// `cancel`) return ``YieldOutcome/terminated`` and are counted in
    /// ``EventSink/statistics``; sequenced producers are reordered, and their
    /// runs reach the stream in order (one emitting thread at a time).
    ///
    /// - Parameters:
    ///   - elementType: The element type, for call sites that need to spell it.
    ///   - buffering: ``StreamBuffering/unbounded``, `bufferingOldest(n)` or
    ///     `bufferingNewest(n)`, mapped onto the stream's own policy.
    ///   - ordering: Arrival order, or sequence numbers restored with a
    ///     ``SequenceReorderer``.
    ///   - start: Starts the producer with the sink its callbacks use and
    ///     returns its control handle (or `nil`). Throwing ends the stream
    ///     with that error, after any elements it yielded.
    /// - Returns: The stream; iterate it once.
    public static func bridging(
        of elementType: Element.Type = Element.self,
        buffering: StreamBuffering = .unbounded,
        ordering: StreamOrdering = .arrival,
        _ start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) -> AsyncThrowingStream<Element, any Error> {
        buffering.validate()
        let policy: Continuation.BufferingPolicy
        switch buffering {
        case .unbounded:
            policy = .unbounded
        case .bufferingOldest(let n):
            policy = .bufferingOldest(n)
        case .bufferingNewest(let n):
            policy = .bufferingNewest(n)
        case .backpressure(let low, let high):
            preconditionFailure(
                "AsyncThrowingStream.bridging(buffering: .backpressure(low: \(low), high: \(high))): AsyncThrowingStream cannot pause a producer; use CallbackStream for backpressure, or a bufferingOldest/bufferingNewest policy"
            )
        }
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Element.self, throwing: (any Error).self, bufferingPolicy: policy
        )
        let bridge = StreamBridge(continuation: continuation, ordering: ordering)
        // Captures only the lock box, never the continuation: no reference cycle.
        let box = bridge.box
        continuation.onTermination = { termination in
            let cancelled: Bool
            switch termination {
            case .cancelled: cancelled = true
            case .finished: cancelled = false
            @unknown default: cancelled = true
            }
            let (delivery, dropped) = box.withLock { $0.terminated(cancelled: cancelled) }
            withExtendedLifetime(dropped) {}
            if let delivery { StreamBridge<Element>.deliver(delivery, box: box) }
        }
        bridge.runStart(start)
        return stream
    }
}

/// The ``EventSink`` backend of a bridged `AsyncThrowingStream`.
///
/// A class, so that `EventSink.Backend` has a fixed layout: the continuation
/// type is resilient, and a struct holding it inline would make every
/// `EventSink` operation (also for `CallbackStream`) go through runtime
/// metadata.
@usableFromInline
final class StreamBridge<Element: Sendable>: Sendable {
    let continuation: AsyncThrowingStream<Element, any Error>.Continuation
    let box: LockedBox<StreamBridgeStateMachine<Element>>
    let isSequenced: Bool

    init(continuation: AsyncThrowingStream<Element, any Error>.Continuation, ordering: StreamOrdering) {
        self.continuation = continuation
        self.box = LockedBox(StreamBridgeStateMachine(ordering: ordering))
        if case .sequenced = ordering { self.isSequenced = true } else { self.isSequenced = false }
    }

    func runStart(_ start: (EventSink<Element>) throws -> StreamControl?) {
        let sink = EventSink(backend: .bridge(self))
        do {
            let control = try start(sink)
            if let delivery = box.withLock({ $0.controlArrived(control) }) {
                Self.deliver(delivery, box: box)
            }
        } catch {
            _ = box.withLock { $0.controlArrived(nil) }
            finish(error)
        }
    }

    @usableFromInline
    func yield(_ element: Element) -> YieldOutcome {
        precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
        guard box.withLock({ $0.beginYield(count: 1) }) else { return .terminated }
        let outcome = Self.outcome(continuation.yield(element))
        if outcome != .enqueued { box.withLock { $0.correctYield(outcome) } }
        return outcome
    }

    func yield(contentsOf elements: ContiguousArray<Element>) -> YieldOutcome {
        precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
        guard box.withLock({ $0.beginYield(count: elements.count) }) else { return .terminated }
        var dropped = 0
        var terminated = 0
        for element in elements {
            switch Self.outcome(continuation.yield(element)) {
            case .enqueued: break
            case .dropped: dropped += 1
            case .terminated: terminated += 1
            }
        }
        if dropped + terminated > 0 {
            box.withLock {
                $0.correctYield(.dropped, count: dropped)
                $0.correctYield(.terminated, count: terminated)
            }
        }
        if terminated == elements.count && !elements.isEmpty { return .terminated }
        return dropped > 0 ? .dropped : .enqueued
    }

    func yield(_ element: Element, sequence: UInt64) -> YieldOutcome {
        var discarded: [Element] = []
        let (outcome, emission, delivery) = box.withLock {
            $0.yield(element, sequence: sequence, discarded: &discarded)
        }
        if let emission { emit(emission) }
        if let delivery { Self.deliver(delivery, box: box) }
        return outcome
    }

    func finish(_ failure: (any Error)?) {
        var discarded: [Element] = []
        if let emission = box.withLock({ $0.finish(failure, discarded: &discarded) }) {
            emit(emission)
        }
    }

    var statistics: StreamStatistics {
        box.withLock { $0.statistics }
    }

    /// The emitter loop: passes elements (and the terminal) to the
    /// continuation with no lock held, until nothing more is pending.
    private func emit(_ first: StreamBridgeEmission<Element>) {
        var work: StreamBridgeEmission<Element>? = first
        while var emission = work {
            var enqueued = 0
            var dropped = 0
            var terminated = 0
            while let element = emission.elements.popFirst() {
                switch Self.outcome(continuation.yield(element)) {
                case .enqueued: enqueued += 1
                case .dropped: dropped += 1
                case .terminated: terminated += 1
                }
            }
            if let terminal = emission.terminal {
                if let failure = terminal {
                    continuation.finish(throwing: failure)
                } else {
                    continuation.finish()
                }
            }
            work = box.withLock { $0.emitted((enqueued, dropped, terminated)) }
        }
    }

    /// Single-deliverer loop for producer-control calls (only `cancel` here).
    static func deliver(_ first: ProducerControlStateMachine.Delivery, box: LockedBox<StreamBridgeStateMachine<Element>>) {
        var next: ProducerControlStateMachine.Delivery? = first
        while let delivery = next {
            delivery.perform()
            next = box.withLock { $0.deliveryCompleted() }
        }
    }

    private static func outcome(_ result: AsyncThrowingStream<Element, any Error>.Continuation.YieldResult) -> YieldOutcome {
        switch result {
        case .enqueued: return .enqueued
        case .dropped: return .dropped
        case .terminated: return .terminated
        @unknown default: return .dropped
        }
    }
}
