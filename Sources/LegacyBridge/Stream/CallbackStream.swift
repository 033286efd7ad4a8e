/// An `AsyncSequence` fed by a callback-based producer, such as a legacy C SDK that reports events
/// on its own threads.
///
/// The stream is cold: nothing happens until an iterator asks for its first element. Then `start`
/// runs on the consumer's task (on the SDK's thread for a stream made with
/// ``init(of:buffering:ordering:scheduler:_:)``), synchronously and with no lock held, and
/// receives an ``EventSink`` for the producer's callbacks. It returns a ``StreamControl`` with which the stream cancels,
/// pauses and resumes the producer. Every iterator gets its own run of `start`.
///
/// ```swift
/// let events = CallbackStream(of: Event.self, buffering: .backpressure(low: 16, high: 64)) { sink in
///     let handle = try sdk.subscribe(onEvent: { sink.yield(Event(copying: $0)) },
///                                    onDone: { $0 == 0 ? sink.finish() : sink.finish(throwing: SDKError($0)) })
///     return StreamControl(cancel: CancelHandle { handle.cancel() }, pause: { handle.pause() }, resume: { handle.resume() })
/// }
/// for try await event in events { … }
/// ```
///
/// ## Contract
/// - The terminal is delivered once, after every element yielded before it, and no buffering
///   policy drops it. It comes from ``EventSink/finish()``, ``EventSink/finish(throwing:)`` or an
///   error thrown by `start`. Yields after it return ``YieldOutcome/terminated`` and are counted in
///   ``StreamStatistics/yieldedAfterTermination``.
/// - If the consumer stops first, buffered elements are dropped and counted in
///   ``StreamStatistics/discardedAtTermination``, and the producer's `cancel` is called exactly
///   once, outside every lock. The consumer stops when its task is cancelled, it leaves the loop,
///   drops the iterator, or calls ``stop()``. If that happens while `start` still runs, `cancel`
///   waits until `start` has returned the handle. It is not called once the producer has finished.
/// - A cancelled task's `next()` throws `CancellationError`. While it works through a batch it
///   already holds, cancellation is checked every 64 elements, because the check costs more than
///   handing out an element. After ``stop()``, `next()` returns `nil`.
/// - Producer control follows the threading contract of ``StreamControl``: calls in decided order,
///   nothing after `cancel`, every call on the control's ``SDKScheduler`` if it has one. Otherwise
///   `pause` runs inside the yield that reached `high`, and `cancel` on a thread of the library's
///   own, never inside a yield, a finish or the task runtime's cancellation handler.
/// - Nothing waits: a yield never blocks, on any thread, under any buffering policy, and the
///   consumer never spins. A consuming task whose cancel takes seconds in the SDK resumes at once
///   and delays no other task.
///
/// ## Backpressure
/// With ``StreamBuffering/backpressure(low:high:)`` nothing is ever dropped. Held elements are
/// those waiting in the stream plus the consumer's current batch, which counts until the consumer
/// comes back for more.
/// - Once `high` elements are held, every yield answers ``YieldOutcome/stopProducing`` and `pause`
///   is called once, inside the yield that reached `high`.
/// - When the consumer has brought the held count down to `low`, `resume` is called once.
/// - Elements that arrive meanwhile are kept and counted in
///   ``StreamStatistics/acceptedWhilePaused``. Memory is bounded by `high` plus that overshoot:
///   see ``StreamStatistics/peakBuffered``. Once `start` has returned, a producer that stops on
///   `.stopProducing`, or one without a scheduler that checks its paused flag before each event,
///   overshoots by less than the batch it was yielding.
///
/// ## Ordering
/// With ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)`` producers call
/// ``EventSink/yield(_:sequence:)`` from any thread, and the stream restores the order under its lock.
///
/// ## Statistics and explicit stop
/// The iterator's ``AsyncIterator/statistics`` and the stream's ``statistics`` say how many
/// elements were dropped, the peak buffered, pauses and resumes. The stream's are those of the most
/// recent subscription, kept after it ended, for a `for try await` loop that never shows its
/// iterator. ``stop()`` ends the subscriptions explicitly: at top level in `main.swift`, the
/// current toolchain never releases the iterator of a loop left with `break`, so leaving the loop
/// alone does not cancel the producer there.
///
/// ## Performance
/// The consumer takes all waiting elements in one batch under one lock and hands them out without
/// locking. It only suspends, with one continuation, when nothing is waiting. A yield takes one
/// lock and appends to a reused ring buffer; ``EventSink/yield(contentsOf:)`` appends a whole batch
/// under one lock.
public struct CallbackStream<Element: Sendable>: AsyncSequence, Sendable {
    /// The error type of the sequence.
    public typealias Failure = any Error

    @usableFromInline let buffering: StreamBuffering
    @usableFromInline let ordering: StreamOrdering
    @usableFromInline let start: @Sendable (EventSink<Element>) throws -> StreamControl?
    /// Where `start` runs, for a single-threaded SDK; nil: on the consumer's task.
    @usableFromInline let scheduler: SDKScheduler?
    @usableFromInline let registry: StreamRegistry<Element>

    /// Creates a stream that runs `start` for each iterator.
    ///
    /// - Parameters:
    ///   - elementType: The element type, for call sites that need to spell it.
    ///   - buffering: How elements wait for the consumer: see ``StreamBuffering``. Invalid bounds
    ///     stop the program with a message saying what to pass.
    ///   - ordering: ``StreamOrdering/arrival``, the default, or
    ///     ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)`` for producers that
    ///     number their events.
    ///   - start: Starts the producer. Called when an iterator first asks for an element, with the
    ///     sink the producer's callbacks use. Returns the control handle, or `nil` if the producer
    ///     cannot be cancelled or paused. Throwing ends the stream with that error, after any
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
        self.scheduler = nil
        self.registry = StreamRegistry()
    }

    /// Creates a stream over a single-threaded SDK: `start` runs on the SDK's thread, posted
    /// through `scheduler`, and so does every control call.
    ///
    /// Use this when the SDK must only be called from its own thread or event loop, for example
    /// an ``SDKLoop``'s ``SDKLoop/scheduler``. Every guarantee of the other initializer holds,
    /// and:
    /// - `start` is posted through the scheduler when an iterator first asks for an element, and
    ///   runs on the SDK's thread. A consumer already on that thread, as `scheduler.isCurrent`
    ///   tells, runs it inline with no hop. The consumer does not wait for `start`: it waits for
    ///   elements.
    /// - An SDK that delivers its events on that same thread cannot deliver one before `start`
    ///   has returned the control, so backpressure holds from the first event: the stream can
    ///   pause the producer as soon as `high` is reached.
    /// - A consumer that stops before the posted `start` began (its task is cancelled, it leaves,
    ///   or ``stop()`` is called) means `start` never runs. One that stops while `start` runs has
    ///   the returned control cancelled once, after `start` returned.
    /// - The returned ``StreamControl``'s calls go through `scheduler` too, unless the control
    ///   names a scheduler of its own.
    /// - When the scheduler refuses the post, for example because the loop was shut down, the
    ///   iteration throws the scheduler's error and `start` never runs.
    ///
    /// ```swift
    /// let messages = CallbackStream(of: Message.self, buffering: .backpressure(low: 16, high: 64),
    ///                               scheduler: loop.scheduler) { sink in
    ///     let subscription = client.subscribe(topic) { sink.yield(Message(copying: $0)) }
    ///     return StreamControl(cancel: CancelHandle { subscription.cancel() },
    ///                          pause: { subscription.pause() }, resume: { subscription.resume() })
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - elementType: The element type, for call sites that need to spell it.
    ///   - buffering: How elements wait for the consumer: see ``StreamBuffering``.
    ///   - ordering: ``StreamOrdering/arrival``, the default, or a sequenced ordering.
    ///   - scheduler: Runs `start`, and the control's calls unless it names its own scheduler,
    ///     on the SDK's thread.
    ///   - start: Starts the producer, on the SDK's thread, as in the other initializer.
    public init(
        of elementType: Element.Type = Element.self,
        buffering: StreamBuffering = .unbounded,
        ordering: StreamOrdering = .arrival,
        scheduler: SDKScheduler,
        _ start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) {
        buffering.validate()
        ordering.validate()
        self.buffering = buffering
        self.ordering = ordering
        self.start = start
        self.scheduler = scheduler
        self.registry = StreamRegistry()
    }

    /// Creates an iterator; `start` runs when it is first asked for an element.
    ///
    /// - Returns: A new iterator with its own subscription to the producer.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            subscription: StreamSubscription(
                buffering: buffering, ordering: ordering, start: start, scheduler: scheduler, registry: registry)
        )
    }

    /// The counters of the most recent subscription of this stream value, live or as they were
    /// when it ended. All zero before the first one.
    ///
    /// A `for try await` loop never shows its iterator: read these during or after the loop to see
    /// drops, the peak buffered, pauses and resumes.
    public var statistics: StreamStatistics {
        registry.statistics
    }

    /// Stops the stream: every subscription of this stream value that still runs ends, and later
    /// iterations end at once without running `start`.
    ///
    /// - Buffered elements are dropped, and the producer is cancelled per the contract.
    /// - `next()` returns `nil` once the iterator's current batch is used up.
    ///
    /// Leaving a `for try await` loop normally releases its iterator, which stops its
    /// subscription. Use this where that does not happen, at top level in `main.swift` where the
    /// toolchain keeps the loop's iterator alive, or to stop a stream from another task.
    public func stop() {
        registry.stopAll()
    }

    /// The iterator of a ``CallbackStream``: one subscription to the producer. Not `Sendable`: do
    /// not copy it and use the copies separately.
    public struct AsyncIterator: AsyncIteratorProtocol {
        /// The error type of the iterator.
        public typealias Failure = any Error

        /// Elements taken from the stream and not yet handed out.
        @usableFromInline var batch: RingBuffer<Element>
        @usableFromInline let subscription: StreamSubscription<Element>
        @usableFromInline var isDone: Bool
        /// Elements handed out from the current batch before cancellation is checked again.
        @usableFromInline var uncheckedElements: Int
        /// How many elements the last batch taken held: the emptied ring's storage is kept for
        /// the next swap while it is at most four times that (or small), so a producer that
        /// keeps far ahead does not regrow its buffer from nothing after every batch, and a burst
        /// does not pin its memory once traffic calms down.
        @usableFromInline var lastBatchCount: Int
        /// Trivial elements, unwrapped in the batch's storage, are handed out by index from a run
        /// `batch.plain[runStart ..< runEnd]`, the next at `cursor`: one compare, one load and one
        /// increment per element. The batch learns how far the run got when `nextSlow` runs, at
        /// the run's end: the storage's end, or the next cancellation check.
        @usableFromInline var cursor: Int
        @usableFromInline var runStart: Int
        @usableFromInline var runEnd: Int

        /// How many elements of a batch are handed out between two checks of
        /// `Task.isCancelled` (the check costs more than handing out an element).
        @usableFromInline static var cancellationCheckInterval: Int { 64 }

        @usableFromInline
        init(subscription: StreamSubscription<Element>) {
            self.batch = RingBuffer()
            self.subscription = subscription
            self.isDone = false
            self.uncheckedElements = 0
            self.lastBatchCount = 0
            self.cursor = 0
            self.runStart = 0
            self.runEnd = 0
        }

        /// The subscription's counters, all zero before the first `next()`.
        public var statistics: StreamStatistics {
            subscription.storage?.statistics ?? StreamStatistics()
        }

        /// Returns the next element, suspending while none is waiting.
        ///
        /// - Returns: The next element, or `nil` once the producer finished.
        /// - Throws: The producer's error, or `CancellationError` if the task was cancelled.
        @inlinable @inline(__always)
        public mutating func next() async throws -> Element? {
            try await next(isolation: nil)
        }

        /// Returns the next element without leaving the caller's isolation.
        ///
        /// - Parameter actor: The caller's isolation.
        /// - Returns: The next element, or `nil` once the producer finished.
        /// - Throws: The producer's error, or `CancellationError` if the task was cancelled.
        @inlinable @inline(__always)
        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
            if RingBuffer<Element>.isPlain {
                if cursor < runEnd {
                    let element = batch.plain[cursor]
                    cursor &+= 1
                    return element
                }
            } else if !batch.isEmpty && uncheckedElements > 0 {
                uncheckedElements &-= 1
                return batch.popFirst()
            }
            return try await nextSlow(isolation: actor)
        }

        /// Hands out the first element of the (non-empty) batch and sets how many more the
        /// fast path may hand out before the next cancellation check.
        @inlinable
        mutating func handOut() -> Element? {
            if RingBuffer<Element>.isPlain {
                runStart = batch.head
                runEnd = batch.plainRunEnd(limit: Self.cancellationCheckInterval)
                cursor = runStart &+ 1
                return batch.plain[runStart]
            }
            uncheckedElements = Self.cancellationCheckInterval &- 1
            return batch.popFirst()
        }

        /// Takes the next batch from the stream (one lock), starting the
        /// producer first if needed, and suspends only if nothing is waiting.
        @inlinable
        mutating func nextSlow(isolation actor: isolated (any Actor)?) async throws -> Element? {
            if RingBuffer<Element>.isPlain && cursor != runStart {
                batch.removeFirst(plain: cursor &- runStart)
            }
            cursor = 0
            runStart = 0
            runEnd = 0
            while true {
                if isDone { return nil }
                if !batch.isEmpty && !Task.isCancelled {
                    return handOut()
                }
                guard let storage = subscription.storage, !Task.isCancelled else {
                    try await startOrCancel(isolation: actor)
                    continue
                }
                // A ring that grew for a burst is given back, outside the lock, once the batches
                // no longer need it.
                let capacity = batch.capacity
                if capacity > RingBuffer<Element>.retainedCapacity && capacity / 4 > lastBatchCount {
                    batch = RingBuffer()
                }
                switch storage.next(into: &batch) {
                case .batch:
                    lastBatchCount = batch.count
                    return handOut()
                case .end:
                    isDone = true
                    return nil
                case .fail(let error):
                    isDone = true
                    throw error
                case .cancelled:
                    isDone = true
                    throw CancellationError()
                case .suspend:
                    await Self.waitForProducer(storage, isolation: actor)
                }
            }
        }

        /// The task is cancelled (stop, cancelling the producer if it runs),
        /// or this is the first request (run `start`).
        @usableFromInline
        mutating func startOrCancel(isolation actor: isolated (any Actor)?) async throws {
            if Task.isCancelled {
                isDone = true
                batch.removeAll()
                subscription.storage?.consumerTerminated(cancelled: true)
                throw CancellationError()
            }
            let storage = CallbackStreamStorage<Element>(
                buffering: subscription.buffering, ordering: subscription.ordering, registry: subscription.registry)
            // One step with `stop()`: either this subscription is live before `stop()` collects
            // the live ones (and is stopped with them), or `stop()` came first and `start` never runs.
            guard subscription.registry.admit(storage) else {
                isDone = true
                return
            }
            subscription.storage = storage
            let start = subscription.start
            let scheduler = subscription.scheduler
            if let scheduler, !scheduler.isCurrent {
                // The consumer does not wait for the posted `start`: it asks for elements next.
                storage.postStart(start, through: scheduler)
                return
            }
            await withTaskCancellationHandler(
                operation: { storage.runStart(start, scheduler: scheduler) },
                onCancel: { storage.consumerTerminated(cancelled: true) },
                isolation: actor
            )
        }

        /// Nothing is waiting: suspend until the producer yields or finishes,
        /// the task is cancelled, or the stream is stopped. The wake-up
        /// carries nothing; the caller asks the stream again.
        @usableFromInline
        static func waitForProducer(
            _ storage: CallbackStreamStorage<Element>, isolation actor: isolated (any Actor)?
        ) async {
            await withTaskCancellationHandler(
                operation: {
                    await withUnsafeContinuation(isolation: actor) { continuation in
                        storage.suspend(continuation)
                    }
                },
                onCancel: { storage.consumerTerminated(cancelled: true) },
                isolation: actor
            )
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
    @usableFromInline let scheduler: SDKScheduler?
    @usableFromInline let registry: StreamRegistry<Element>
    @usableFromInline var storage: CallbackStreamStorage<Element>?

    @usableFromInline
    init(
        buffering: StreamBuffering,
        ordering: StreamOrdering,
        start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?,
        scheduler: SDKScheduler?,
        registry: StreamRegistry<Element>
    ) {
        self.buffering = buffering
        self.ordering = ordering
        self.start = start
        self.scheduler = scheduler
        self.registry = registry
        self.storage = nil
    }

    deinit {
        storage?.consumerTerminated(cancelled: true)
    }
}
