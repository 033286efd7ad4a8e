/// One subscription of a callback-based producer, shared by many consumers: an SDK listener that
/// several parts of a program want to follow.
///
/// Many SDKs take one listener per topic or per client and refuse a second one, and iterating one
/// `AsyncStream` from several tasks splits its elements among them. A shared subscription runs the
/// producer once and gives each consumer its own stream of every element.
///
/// ```swift
/// let quotes = SharedSubscription(of: Quote.self, replay: .latest, linger: .seconds(2)) { sink in
///     let listener = try sdk.listen(topic: "quotes",
///                                   onEvent: { sink.yield(Quote(copying: $0)) },
///                                   onEnd: { $0 == 0 ? sink.finish() : sink.finish(throwing: SDKError($0)) })
///     return StreamControl(cancel: CancelHandle { listener.cancel() })
/// }
/// for try await quote in quotes.subscribe(buffering: .bufferingNewest(100)) { … }
/// ```
///
/// ## Contract
/// - Each iterator of a stream from ``subscribe(buffering:)`` is one consumer. The first consumer
///   runs `start` on its task. Later ones join the running producer.
/// - When the last consumer leaves, the producer is stopped through its control's `cancel`,
///   exactly once, per the threading contract of ``StreamControl``. With a `linger`, the stop
///   waits that long, and a consumer arriving meanwhile keeps the producer running.
/// - A new run of `start` never overlaps the stop of the one before: a consumer that arrives while
///   a stop is under way waits, and `start` runs again on a thread of the library's own once the
///   stop returned.
/// - Each consumer gets the elements in the order the producer's yields were accepted, from the
///   moment it joined, after its ``Replay``. The terminal reaches every consumer after the elements
///   before it.
/// - Yields and the terminal may come from several threads at once. They are accepted one at a
///   time, and every consumer gets them in that one order. One thread at a time hands elements to
///   the consumers: a yield made while another thread does is queued behind what it hands over and
///   returns ``YieldOutcome/enqueued`` at once, and that thread delivers it (and answers the
///   producer with what the consumers answered).
/// - After the producer ended, by finishing, failing or `start` throwing, the ``RestartPolicy``
///   says what a later consumer gets: that replay and terminal, or a new run of `start`.
/// - A slow consumer never blocks the producer or the other consumers. Its policy decides: the
///   dropping ``StreamBuffering`` policies drop for that consumer only, counted in its stream's
///   statistics. ``StreamBuffering/backpressure(low:high:)`` pauses the producer for everyone
///   while that consumer holds `high` elements. ``subscribe(failingAbove:)`` ends that consumer
///   alone with ``SlowConsumerError``, counted in ``statistics``.
/// - Yields of a stopped or ended run return ``YieldOutcome/terminated`` and reach nobody.
public final class SharedSubscription<Element: Sendable>: Sendable {
    /// What a new consumer receives before the live elements.
    public struct Replay: Sendable, Hashable {
        let count: Int

        /// Nothing: a consumer gets the elements yielded after it joined.
        public static var none: Replay { Replay(count: 0) }

        /// The last element yielded, if any.
        public static var latest: Replay { Replay(count: 1) }

        /// The last `n` elements yielded by the current run of the producer.
        ///
        /// - Parameter n: How many elements to keep; at least 1.
        /// - Returns: The policy.
        public static func last(_ n: Int) -> Replay {
            precondition(
                n >= 1, "SharedSubscription.Replay.last(\(n)): n must be at least 1 (use .none to replay nothing)")
            return Replay(count: n)
        }
    }

    /// What a consumer that arrives after the producer ended receives.
    ///
    /// A stop because the last consumer left is not an end: the next consumer always starts the
    /// producer again, with an empty replay.
    public struct RestartPolicy: Sendable, Hashable {
        let automatic: Bool

        /// Every later consumer gets the replay, then the terminal, until ``SharedSubscription/restart()``.
        /// Like a finished stream, the subscription stays finished.
        public static var manual: RestartPolicy { RestartPolicy(automatic: false) }

        /// The next consumer runs `start` again. Consumers present at the end got its terminal,
        /// later ones start afresh.
        public static var automatic: RestartPolicy { RestartPolicy(automatic: true) }
    }

    let storage: SharedSubscriptionStorage<Element>

    /// Creates a shared subscription; nothing starts until a consumer iterates.
    ///
    /// - Parameters:
    ///   - elementType: The element type, for call sites that need to spell it.
    ///   - replay: What each new consumer receives first: see ``Replay``.
    ///   - linger: How long the producer keeps running once the last consumer left; zero stops it
    ///     at once. Must not be negative.
    ///   - restart: What a consumer gets after the producer ended: see ``RestartPolicy``.
    ///   - start: Starts the producer, like a ``CallbackStream``'s `start`, with the sink its
    ///     callbacks use. Returns the control handle, or `nil` if the producer cannot be stopped or
    ///     paused. Throwing ends the run with that error.
    public init(
        of elementType: Element.Type = Element.self,
        replay: Replay = .none,
        linger: Duration = .zero,
        restart: RestartPolicy = .manual,
        _ start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) {
        precondition(linger >= .zero, "SharedSubscription(linger: \(linger)): the linger must not be negative")
        self.storage = SharedSubscriptionStorage(
            replayLimit: replay.count, linger: linger, restartsAutomatically: restart.automatic, start: start)
    }

    /// A stream whose iterators are consumers of this subscription.
    ///
    /// - Parameter buffering: How elements wait for each consumer: see ``StreamBuffering``. Invalid
    ///   bounds stop the program with a message saying what to pass.
    /// - Returns: A cold stream: each iterator joins when first asked for an element, and leaves when
    ///   its task is cancelled, it leaves its loop, or it goes away.
    public func subscribe(buffering: StreamBuffering = .unbounded) -> CallbackStream<Element> {
        let storage = self.storage
        return CallbackStream(buffering: buffering) { sink in storage.join(sink, failingAbove: nil) }
    }

    /// A stream whose iterators are consumers that are ended, alone, when they fall behind.
    ///
    /// - A consumer with more than `limit` elements waiting reads the elements it holds, then
    ///   throws ``SlowConsumerError``. Elements count as ``StreamBuffering/backpressure(low:high:)``
    ///   counts them: a batch the consumer took counts until it asks for more.
    /// - The other consumers and the producer go on. A consumer ended this way leaves, and if it
    ///   was the last one the producer stops as when a consumer leaves.
    /// - Each ending is counted in ``SharedSubscriptionStatistics/slowConsumersEnded``.
    /// - A replay longer than `limit` ends a new consumer at once: keep `limit` above it.
    ///
    /// - Parameter limit: How many elements may wait for a consumer; at least 1. A smaller value
    ///   stops the program with a message saying what to pass.
    /// - Returns: A cold stream, like the one from ``subscribe(buffering:)``.
    public func subscribe(failingAbove limit: Int) -> CallbackStream<Element> {
        precondition(
            limit >= 1,
            "SharedSubscription.subscribe(failingAbove: \(limit)): the limit must be at least 1 (use subscribe(buffering: .unbounded) for no limit)"
        )
        let storage = self.storage
        return CallbackStream(buffering: .backpressure(low: 0, high: limit + 1)) { sink in
            storage.join(sink, failingAbove: limit)
        }
    }

    /// Forgets the terminal of an ended subscription under ``RestartPolicy/manual``: the next
    /// consumer runs `start` again. Does nothing while the producer runs.
    public func restart() {
        storage.restart()
    }

    /// Counts of the subscription's life.
    public var statistics: SharedSubscriptionStatistics {
        storage.statistics
    }

    /// Whether a run of the producer is going: its `start` returned, and it neither stopped nor ended.
    package var isRunning: Bool { storage.isRunning }
}

/// Counters of a ``SharedSubscription``. Each consumer's own drops and peak are in its stream's
/// ``CallbackStream/statistics``.
public struct SharedSubscriptionStatistics: Sendable, Hashable {
    /// Runs of `start`.
    public var starts: Int = 0
    /// Runs stopped because their last consumer left.
    public var stops: Int = 0
    /// Runs that finished normally.
    public var finishes: Int = 0
    /// Runs that failed, or whose `start` threw.
    public var failures: Int = 0
    /// Consumers now.
    public var consumers: Int = 0
    /// Consumers that joined a run, or waited for one.
    public var consumersJoined: Int = 0
    /// Elements the producer yielded to a running run.
    public var yielded: Int = 0
    /// Elements handed to new consumers as replay.
    public var replayed: Int = 0
    /// Consumers that arrived after the end and were handed its terminal.
    public var terminalsReplayed: Int = 0
    /// Elements yielded by a run that was stopped or had ended: they reached nobody.
    public var yieldedWhileStopped: Int = 0
    /// Terminals of a run that was stopped or had ended: ignored.
    public var terminalsIgnored: Int = 0
    /// Linger timers made moot by a consumer arriving in time.
    public var lingerRescues: Int = 0
    /// Calls made to the control's `pause`.
    public var pauses: Int = 0
    /// Calls made to the control's `resume`.
    public var resumes: Int = 0
    /// Calls made to the control's `cancel`.
    public var cancels: Int = 0
    /// Consumers ended with ``SlowConsumerError`` because their buffer went over its limit.
    public var slowConsumersEnded: Int = 0

    /// Creates all-zero statistics.
    public init() {}
}
