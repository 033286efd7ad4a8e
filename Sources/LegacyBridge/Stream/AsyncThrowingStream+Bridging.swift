extension AsyncThrowingStream where Failure == any Error, Element: Sendable {
    /// Builds an `AsyncThrowingStream` fed by a callback producer written against ``EventSink``,
    /// for APIs that must return the standard type.
    ///
    /// The stream is the standard type on the outside and a ``CallbackStream`` subscription on the
    /// inside, built with `AsyncThrowingStream(unfolding:)` over the same buffer, reorderer and
    /// producer control. So every policy works, backpressure included, and the whole
    /// ``CallbackStream`` contract holds:
    /// - The terminal arrives once, after the elements yielded before it, also on toolchains whose
    ///   `AsyncThrowingStream` re-throws an error to a consumer that was already waiting.
    /// - The producer's `cancel` is called exactly once, per the threading contract of
    ///   ``StreamControl``, also if the consumer goes away before `start` returned its handle, and
    ///   never after the producer finished.
    /// - Yields never block, and yields after termination return ``YieldOutcome/terminated`` and
    ///   are counted in ``EventSink/statistics``.
    /// - Sequenced producers are reordered under one lock.
    ///
    /// Differences from ``CallbackStream``:
    /// - `start` runs eagerly, right here, before this function returns: an `AsyncThrowingStream`
    ///   has a single consumer and no "first `next()`" hook.
    /// - Each `next()` takes one element under the stream's lock and, from an actor, hops off it
    ///   and back, because the unfolding closure is nonisolated. It is slower than
    ///   ``CallbackStream`` under load.
    /// - When the consuming task is cancelled, `next()` returns `nil`, the standard type's
    ///   behaviour, instead of throwing `CancellationError`. The producer is cancelled.
    /// - Leaving the loop cancels the producer once the stream value and its iterator are
    ///   released, as for any `AsyncThrowingStream`.
    ///
    /// - Parameters:
    ///   - elementType: The element type, for call sites that need to spell it.
    ///   - buffering: How elements wait for the consumer: see ``StreamBuffering``.
    ///   - ordering: Arrival order, or the order of sequence numbers: see
    ///     ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)``.
    ///   - start: Starts the producer with the sink its callbacks use, and returns its control
    ///     handle or `nil`. Throwing ends the stream with that error, after any elements it yielded.
    /// - Returns: The stream, to iterate once.
    public static func bridging(
        of elementType: Element.Type = Element.self,
        buffering: StreamBuffering = .unbounded,
        ordering: StreamOrdering = .arrival,
        _ start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) -> AsyncThrowingStream<Element, any Error> {
        buffering.validate()
        ordering.validate()
        let subscription = BridgedSubscription<Element>(buffering: buffering, ordering: ordering)
        subscription.storage.runStart(start)
        return AsyncThrowingStream(unfolding: { try await subscription.next() })
    }
}

/// The inside of a bridged `AsyncThrowingStream`: one `CallbackStream`
/// subscription and the consumer's current batch. The unfolding closure holds
/// it; when the stream and its iterator are released, its deinit tells the
/// subscription that the consumer went away.
final class BridgedSubscription<Element: Sendable>: Sendable {
    let storage: CallbackStreamStorage<Element>
    /// Elements taken from the stream and not yet handed out. Only the single
    /// consumer touches it; the box orders its calls for ThreadSanitizer.
    let batch = LockedBox(RingBuffer<Element>())

    init(buffering: StreamBuffering, ordering: StreamOrdering) {
        self.storage = CallbackStreamStorage(buffering: buffering, ordering: ordering)
    }

    deinit {
        storage.consumerTerminated(cancelled: true)
    }

    /// The unfolding closure: the next element, `nil` at the end (and, as the
    /// standard type does, when the consuming task is cancelled), or the
    /// producer's error, exactly once.
    func next() async throws -> Element? {
        while true {
            if Task.isCancelled {
                storage.consumerTerminated(cancelled: true)
                return nil
            }
            var local = batch.withLock { batch in
                var taken = RingBuffer<Element>()
                swap(&taken, &batch)
                return taken
            }
            if let element = local.popFirst() {
                batch.withLock { swap(&$0, &local) }
                return element
            }
            let storage = self.storage
            switch storage.next(into: &local) {
            case .batch:
                let element = local.popFirst()
                batch.withLock { swap(&$0, &local) }
                return element
            case .end, .cancelled:
                return nil
            case .fail(let error):
                throw error
            case .suspend:
                await withTaskCancellationHandler(
                    operation: {
                        await withUnsafeContinuation { continuation in
                            storage.suspend(continuation)
                        }
                    },
                    onCancel: { storage.consumerTerminated(cancelled: true) }
                )
            }
        }
    }
}
