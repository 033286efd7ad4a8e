/// The producer's end of a stream: hand it to the SDK's callbacks, which call it from any thread.
///
/// The same sink type feeds a ``CallbackStream`` and an `AsyncThrowingStream` built with
/// `AsyncThrowingStream.bridging(of:buffering:ordering:_:)`, so a producer is written once.
/// - Every method is thread-safe and may be called from inside the ``StreamControl`` closures.
/// - Nothing waits: a method takes the stream's lock for a few instructions and returns. A yield
///   that reaches the high watermark makes the `pause` call itself before it returns.
/// - The answer of a yield tells the producer synchronously whether the stream wants it to go on:
///   see ``YieldOutcome``.
///
/// Keep payloads value-based: copy C buffers into `Sendable` Swift values inside the callback
/// before yielding them.
public struct EventSink<Element: Sendable>: Sendable {
    /// Where the events go: one stream's buffer, or else a shared subscription's consumers.
    /// Two stored references rather than an enum: a yield reaches `stream` through optional
    /// chaining, which reads it in place. Binding it, with a `switch` over an enum payload or an
    /// `if let`, copies the reference: a retain and a release on the stream per element.
    @usableFromInline let stream: CallbackStreamStorage<Element>?
    @usableFromInline let shared: SharedSubscriptionProducer<Element>?

    @usableFromInline
    init(storage: CallbackStreamStorage<Element>) {
        self.stream = storage
        self.shared = nil
    }

    init(shared producer: SharedSubscriptionProducer<Element>) {
        self.stream = nil
        self.shared = producer
    }

    /// The stream this sink feeds; a shared subscription's sink has none.
    var storage: CallbackStreamStorage<Element> {
        guard let stream else {
            preconditionFailure("EventSink: a shared subscription's sink feeds no single stream")
        }
        return stream
    }

    /// The shared subscription's producer, when the sink feeds no single stream.
    @usableFromInline
    var sharedProducer: SharedSubscriptionProducer<Element> {
        guard let shared else { preconditionFailure("EventSink: a sink feeds a stream or a shared subscription") }
        return shared
    }

    /// Delivers one element, for streams with ``StreamOrdering/arrival`` ordering.
    ///
    /// - Parameter element: The element.
    /// - Returns: ``YieldOutcome/enqueued``, or ``YieldOutcome/stopProducing`` if it was accepted but
    ///   the stream wants the producer to stop. ``YieldOutcome/dropped`` if the buffering policy
    ///   dropped an element, for `bufferingNewest` an older one to make room.
    ///   ``YieldOutcome/terminated`` if the stream had terminated.
    @inlinable
    @discardableResult
    public func yield(_ element: Element) -> YieldOutcome {
        if let outcome = stream?.yield(element) { return outcome }
        return sharedProducer.yield(element)
    }

    /// Delivers several elements in order under one lock, for streams with ``StreamOrdering/arrival``
    /// ordering.
    ///
    /// - The batch is appended at once, with at most one wake-up of the consumer.
    /// - The watermarks count it as its elements yielded one by one: a batch that crosses `high`
    ///   makes the pause due and counts the elements beyond `high` in
    ///   ``StreamStatistics/acceptedWhilePaused``.
    /// - Arrays and other contiguous collections are appended without a copy; any other sequence is
    ///   copied first, outside the lock.
    ///
    /// - Parameter elements: The elements.
    /// - Returns: ``YieldOutcome/terminated`` if the stream had terminated,
    ///   ``YieldOutcome/dropped`` if the buffering policy dropped any element,
    ///   ``YieldOutcome/stopProducing`` if the stream wants the producer to
    ///   stop, otherwise ``YieldOutcome/enqueued``.
    @inlinable
    @discardableResult
    public func yield(contentsOf elements: some Sequence<Element>) -> YieldOutcome {
        if let outcome = elements.withContiguousStorageIfAvailable({ yield(contentsOf: $0) }) {
            return outcome
        }
        let copy = ContiguousArray(elements)  // iterate user code outside the lock
        return copy.withUnsafeBufferPointer { yield(contentsOf: $0) }
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldOutcome {
        if let outcome = stream?.yield(contentsOf: elements) { return outcome }
        return sharedProducer.yield(contentsOf: elements)
    }

    /// Delivers one numbered element of a stream created with
    /// ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)``. The stream delivers
    /// elements in sequence order, and several threads may call this at once.
    ///
    /// - Parameters:
    ///   - element: The element.
    ///   - sequence: Its sequence number, any value. How stale, wrapped and garbage numbers are
    ///     handled is documented on ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)``.
    /// - Returns: ``YieldOutcome/enqueued`` if it was delivered or is held until its predecessors
    ///   arrive, ``YieldOutcome/stopProducing`` instead under backpressure.
    ///   ``YieldOutcome/dropped`` if it was stale, did not fit the window under
    ///   ``StreamOrdering/GapPolicy/fail``, or the buffering policy dropped an element.
    ///   ``YieldOutcome/terminated`` if the stream had terminated.
    @discardableResult
    public func yield(_ element: Element, sequence: UInt64) -> YieldOutcome {
        guard let stream else {
            preconditionFailure(
                "yield(_:sequence:) needs a CallbackStream created with ordering: .sequenced(window:); a SharedSubscription takes yield(_:)"
            )
        }
        return stream.yield(element, sequence: sequence)
    }

    /// Ends the stream normally, after the elements yielded before. Only the first terminal counts.
    public func finish() {
        if let stream { stream.finish(nil) } else { sharedProducer.finish(.finished) }
    }

    /// Ends the stream with an error, delivered after the elements yielded before. Only the first
    /// terminal counts.
    ///
    /// - Parameter error: The error the consumer's `next()` throws.
    public func finish(throwing error: any Error) {
        if let stream { stream.finish(error) } else { sharedProducer.finish(.failed(error)) }
    }

    /// The stream's counters: drops by the buffering policy, stale and skipped sequence numbers,
    /// yields after termination, backpressure calls. For a ``SharedSubscription``: the elements
    /// accepted, those yielded after its generation ended, and the pauses and resumes. Each
    /// consumer's drops are in its own stream's statistics.
    public var statistics: StreamStatistics {
        if let stream { return stream.statistics }
        return sharedProducer.statistics
    }
}
