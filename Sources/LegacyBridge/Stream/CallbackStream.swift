/// An `AsyncSequence` fed by a callback-based producer, such as a legacy C SDK
/// that reports events on its own threads.
///
/// The stream is cold: nothing happens until an iterator asks for its first
/// element. Then `start` runs (on the consumer's task, synchronously, with
/// no lock held) and receives an ``EventSink`` for the producer's callbacks;
/// it returns a ``StreamControl`` with which the stream cancels, pauses and
/// resumes the producer. Every iterator gets its own run of `start`.
///
/// ```swift
/// let events = CallbackStream(of: Event.self, buffering: .backpressure(low: 16, high: 64)) { sink in
///     let handle = try sdk.subscribe(onEvent: { sink.yield(Event(copying: $0)) },
///                                    onDone: { $0 == 0 ? sink.finish() : sink.finish(throwing: SDKError($0)) })
///     return StreamControl(cancel: { handle.cancel() }, pause: { handle.pause() }, resume: { handle.resume() })
/// }
/// for try await event in events { … }
/// ```
///
/// ## Contract
/// - The terminal (``EventSink/finish()`` / ``EventSink/finish(throwing:)``,
///   or an error thrown by `start`) is delivered once, after every element
///   yielded before it; no buffering policy drops it. Yields after it return
///   ``YieldOutcome/terminated`` and are counted in
///   ``StreamStatistics/yieldedAfterTermination``.
/// - If the consumer stops first (its task is cancelled, it leaves the loop,
///   or drops the iterator), buffered elements are dropped (counted in
///   ``StreamStatistics/discardedAtTermination``) and the producer's `cancel`
///   is called exactly once, outside every lock (it may call the sink
///   synchronously). If that happens while `start` is still running, `cancel`
///   is called as soon as `start` returns the handle. `cancel` is not called
///   once the producer has finished. A cancelled task's `next()` throws
///   `CancellationError` (also while it still holds a batch: cancellation is
///   checked for every element).
/// - Pause, resume and cancel are called one at a time (never concurrently
///   with each other), in the order the stream decided them, and nothing is
///   called after cancel. A pause due before `start` returned is made as soon
///   as the handle arrives.
///
/// ## Backpressure
/// With ``StreamBuffering/backpressure(low:high:)`` nothing is ever dropped.
/// `pause` is called once when `high` elements are held (waiting in the
/// stream plus the consumer's current batch, which counts until the consumer
/// comes back for more), `resume` once when fewer than `low` are held.
/// Elements that arrive while paused (the producer's in-flight ones) are
/// kept and counted in ``StreamStatistics/acceptedWhilePaused``; memory is
/// bounded by `high` plus that overshoot (see
/// ``StreamStatistics/peakBuffered``). The thread whose event changes the
/// wanted state makes the call itself, unless another thread is making one;
/// then that thread makes it right after its own. While a wanted pause is
/// held up by another thread — it is still making a `resume` call, or still
/// running `start` (the pause is made once the control arrives) — every
/// element yielded from other threads waits for that pause to land, at most
/// 10 ms per element, so a descheduled thread cannot let the producer run far
/// past `high`.
///
/// ## Ordering
/// With ``StreamOrdering/sequenced(window:firstSequence:gaps:)`` producers
/// call ``EventSink/yield(_:sequence:)`` from any thread; a
/// ``SequenceReorderer`` under the stream's lock restores the order.
///
/// ## Performance
/// The consumer takes all waiting elements in one batch under one lock and
/// hands them out without locking; it only suspends (one continuation) when
/// nothing is waiting. A yield takes one lock and appends to a reused ring buffer.
public struct CallbackStream<Element: Sendable>: AsyncSequence, Sendable {
    /// The error type of the sequence.
    public typealias Failure = any Error

    @usableFromInline let buffering: StreamBuffering
    @usableFromInline let ordering: StreamOrdering
    @usableFromInline let start: @Sendable (EventSink<Element>) throws -> StreamControl?

    /// Creates a stream that runs `start` for each iterator.
    ///
    /// - Parameters:
    ///   - elementType: The element type, for call sites that need to spell it.
    ///   - buffering: How elements wait for the consumer (see ``StreamBuffering``).
    ///     Invalid bounds stop the program with a message saying what to pass.
    ///   - ordering: ``StreamOrdering/arrival`` (the default), or
    ///     ``StreamOrdering/sequenced(window:firstSequence:gaps:)`` for
    ///     producers that number their events.
    ///   - start: Starts the producer. Called when an iterator first asks for
    ///     an element, with the sink the producer's callbacks use. Returns the
    ///     control handle, or `nil` if the producer cannot be cancelled or
    ///     paused. Throwing ends the stream with that error, after any
    ///     elements it yielded.
    public init(
        of elementType: Element.Type = Element.self,
        buffering: StreamBuffering = .unbounded,
        ordering: StreamOrdering = .arrival,
        _ start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) {
        buffering.validate()
        ordering.validate()
        self.buffering = buffering
        self.ordering = ordering
        self.start = start
    }

    /// Creates an iterator; `start` runs when it is first asked for an element.
    ///
    /// - Returns: A new iterator with its own subscription to the producer.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: StreamSubscription(buffering: buffering, ordering: ordering, start: start))
    }

    /// The iterator of a ``CallbackStream``: one subscription to the producer.
    /// Not `Sendable`; do not copy it and use the copies separately.
    public struct AsyncIterator: AsyncIteratorProtocol {
        /// The error type of the iterator.
        public typealias Failure = any Error

        /// Elements taken from the stream and not yet handed out.
        @usableFromInline var batch: StreamRing<Element>
        @usableFromInline let subscription: StreamSubscription<Element>
        @usableFromInline var isDone: Bool

        @usableFromInline
        init(subscription: StreamSubscription<Element>) {
            self.batch = StreamRing()
            self.subscription = subscription
            self.isDone = false
        }

        /// The subscription's counters (all zero before the first `next()`).
        public var statistics: StreamStatistics {
            subscription.storage?.statistics ?? StreamStatistics()
        }

        /// Returns the next element, suspending while none is waiting.
        ///
        /// - Returns: The next element, or `nil` once the producer finished.
        /// - Throws: The producer's error, or `CancellationError` if the task was cancelled.
        @inlinable
        public mutating func next() async throws -> Element? {
            try await next(isolation: nil)
        }

        /// Returns the next element without leaving the caller's isolation.
        ///
        /// - Parameter actor: The caller's isolation.
        /// - Returns: The next element, or `nil` once the producer finished.
        /// - Throws: The producer's error, or `CancellationError` if the task was cancelled.
        @inlinable
        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
            if !batch.isEmpty && !Task.isCancelled {
                return batch.popFirst()
            }
            return try await nextSlow(isolation: actor)
        }

        /// Takes the next batch from the stream (one lock), starting the
        /// producer first if needed, and suspends only if nothing is waiting.
        @inlinable
        mutating func nextSlow(isolation actor: isolated (any Actor)?) async throws -> Element? {
            if isDone { return nil }
            guard let storage = subscription.storage, !Task.isCancelled else {
                return try await startOrCancel(isolation: actor)
            }
            // A ring that grew for a burst is given back, outside the lock.
            if batch.slots.count > StreamRing<Element>.retainedCapacity { batch = StreamRing() }
            let (action, request) = storage.box.withLock { $0.next(into: &batch) }
            if let request { storage.apply(request) }
            switch action {
            case .batch:
                return batch.popFirst()
            case .end:
                isDone = true
                return nil
            case .fail(let error):
                isDone = true
                throw error
            case .suspend:
                return try await waitForElement(storage, isolation: actor)
            }
        }

        /// The task is cancelled (stop, cancelling the producer if it runs),
        /// or this is the first request (run `start`, then fetch).
        @usableFromInline
        mutating func startOrCancel(isolation actor: isolated (any Actor)?) async throws -> Element? {
            if Task.isCancelled {
                isDone = true
                batch.removeAll()
                subscription.storage?.consumerTerminated()
                throw CancellationError()
            }
            let storage = CallbackStreamStorage<Element>(buffering: subscription.buffering, ordering: subscription.ordering)
            subscription.storage = storage
            let start = subscription.start
            await withTaskCancellationHandler(
                operation: { storage.runStart(start) },
                onCancel: { storage.consumerTerminated() },
                isolation: actor
            )
            return try await nextSlow(isolation: actor)
        }

        /// Nothing is waiting: suspend until the producer yields or finishes,
        /// or the task is cancelled.
        @usableFromInline
        mutating func waitForElement(
            _ storage: CallbackStreamStorage<Element>,
            isolation actor: isolated (any Actor)?
        ) async throws -> Element? {
            do {
                let element = try await withTaskCancellationHandler(
                    operation: {
                        try await withUnsafeThrowingContinuation(isolation: actor) { continuation in
                            storage.suspend(continuation)
                        }
                    },
                    onCancel: { storage.consumerTerminated() },
                    isolation: actor
                )
                storage.awaitWakeUpConfirmed()
                if element == nil { isDone = true }
                return element
            } catch {
                storage.awaitWakeUpConfirmed()
                isDone = true
                throw error
            }
        }
    }
}

@available(*, unavailable)
extension CallbackStream.AsyncIterator: Sendable {}

/// Holds one iterator's subscription; when the iterator goes away (loop left
/// with `break`, iterator dropped) its deinit tells the stream the consumer stopped.
@usableFromInline
final class StreamSubscription<Element: Sendable> {
    @usableFromInline let buffering: StreamBuffering
    @usableFromInline let ordering: StreamOrdering
    @usableFromInline let start: @Sendable (EventSink<Element>) throws -> StreamControl?
    @usableFromInline var storage: CallbackStreamStorage<Element>?

    @usableFromInline
    init(
        buffering: StreamBuffering,
        ordering: StreamOrdering,
        start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) {
        self.buffering = buffering
        self.ordering = ordering
        self.start = start
        self.storage = nil
    }

    deinit {
        storage?.consumerTerminated()
    }
}
