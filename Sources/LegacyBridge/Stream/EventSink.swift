/// The producer's end of a stream: hand it to the SDK's callbacks, which call
/// it from any thread.
///
/// The same sink type feeds a ``CallbackStream`` and an `AsyncThrowingStream`
/// built with `AsyncThrowingStream.bridging(of:buffering:ordering:_:)`, so a
/// producer is written once. Every method is thread-safe, never waits for the
/// consumer to consume, and may be called from inside the ``StreamControl``
/// closures. (One exception, backpressure only: while a wanted pause is held
/// up by another thread — still calling `resume`, or still running `start` —
/// a yield waits, at most 10 ms, for the pause to be made; see ``CallbackStream``.)
///
/// Keep payloads value-based: copy C buffers into `Sendable` Swift values
/// inside the callback before yielding them.
public struct EventSink<Element: Sendable>: Sendable {
    @usableFromInline
    enum Backend: Sendable {
        case stream(CallbackStreamStorage<Element>)
        case bridge(StreamBridge<Element>)
    }

    @usableFromInline let backend: Backend

    @usableFromInline
    init(backend: Backend) {
        self.backend = backend
    }

    /// Delivers one element (streams with ``StreamOrdering/arrival`` ordering).
    ///
    /// - Parameter element: The element.
    /// - Returns: Whether it was enqueued, dropped by the buffering policy
    ///   (for `bufferingNewest`: an older element was dropped to make room),
    ///   or the stream had already terminated.
    @inlinable
    @discardableResult
    public func yield(_ element: Element) -> YieldOutcome {
        switch backend {
        case .stream(let storage): return storage.yield(element)
        case .bridge(let bridge): return bridge.yield(element)
        }
    }

    /// Delivers several elements in order, under one lock (streams with
    /// ``StreamOrdering/arrival`` ordering).
    ///
    /// - Parameter elements: The elements.
    /// - Returns: ``YieldOutcome/dropped`` if the buffering policy dropped any
    ///   element, ``YieldOutcome/terminated`` if the stream had terminated,
    ///   otherwise ``YieldOutcome/enqueued``.
    @discardableResult
    public func yield(contentsOf elements: some Sequence<Element>) -> YieldOutcome {
        let elements = ContiguousArray(elements)  // iterate user code outside the lock
        switch backend {
        case .stream(let storage): return storage.yield(contentsOf: elements)
        case .bridge(let bridge): return bridge.yield(contentsOf: elements)
        }
    }

    /// Delivers one numbered element of a stream created with
    /// ``StreamOrdering/sequenced(window:firstSequence:gaps:)``; the stream
    /// delivers elements in sequence order. Several threads may call this concurrently.
    ///
    /// - Parameters:
    ///   - element: The element.
    ///   - sequence: Its sequence number.
    /// - Returns: ``YieldOutcome/enqueued`` if it was delivered or is held
    ///   until its predecessors arrive; ``YieldOutcome/dropped`` if it was
    ///   stale (a duplicate, or older than the next expected number), did not
    ///   fit the window under ``SequenceGapPolicy/fail``, or the buffering
    ///   policy dropped an element; ``YieldOutcome/terminated`` if the stream
    ///   had terminated.
    @discardableResult
    public func yield(_ element: Element, sequence: UInt64) -> YieldOutcome {
        switch backend {
        case .stream(let storage): return storage.yield(element, sequence: sequence)
        case .bridge(let bridge): return bridge.yield(element, sequence: sequence)
        }
    }

    /// Ends the stream normally after the elements yielded before. Only the
    /// first terminal counts.
    public func finish() {
        switch backend {
        case .stream(let storage): storage.finish(nil)
        case .bridge(let bridge): bridge.finish(nil)
        }
    }

    /// Ends the stream with an error, delivered after the elements yielded
    /// before. Only the first terminal counts.
    ///
    /// - Parameter error: The error the consumer's `next()` throws.
    public func finish(throwing error: any Error) {
        switch backend {
        case .stream(let storage): storage.finish(error)
        case .bridge(let bridge): bridge.finish(error)
        }
    }

    /// The stream's counters: drops by the buffering policy, stale and
    /// skipped sequence numbers, yields after termination, backpressure calls.
    public var statistics: StreamStatistics {
        switch backend {
        case .stream(let storage): return storage.statistics
        case .bridge(let bridge): return bridge.statistics
        }
    }
}
