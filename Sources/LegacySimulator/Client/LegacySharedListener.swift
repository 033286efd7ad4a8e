import LegacyBridge

/// One event of a ``LegacySharedListener``.
public struct ListenerEvent: Sendable, Hashable {
    /// The SDK's sequence number of the event within its listener.
    public var sequence: UInt64
    /// Where the bytes start in the listener's content.
    public var offset: UInt64
    /// The bytes (`bytes[i]` is the SDK's content byte at `offset + i` of the listener's request).
    public var bytes: [UInt8]
    /// The SDK listener's number within its client: a restart is a new listener.
    public var listenerID: UInt64
}

/// One subscription to a topic of the simulated SDK, shared by every consumer.
///
/// The SDK takes one listener per topic: a second start on the same topic fails with
/// ``LegacySDKError/alreadyListening``. This type shares that one listener through a
/// `SharedSubscription`:
/// - ``subscribe(buffering:)`` returns one stream per consumer. The first consumer to iterate
///   starts the SDK listener; later ones join it and get the events from then on, no replay.
/// - The last consumer to leave cancels the SDK listener, on a library thread. A consumer that
///   arrives meanwhile waits until that cancel returned, then starts a new listener.
/// - The listener's end finishes every current consumer, and its error is thrown to each. The next
///   consumer starts a new listener.
/// - Backpressure by the slowest: while any consumer's buffer is full the SDK listener is paused,
///   and it resumes when no consumer is full. Events in flight at the pause still arrive. A pause
///   asked for before the SDK's start returned its handle is made when it returns.
/// - Each consumer gets the events in the order they arrive; a behaviour with stream concurrency
///   above 1 delivers them out of order.
///
/// A listener whose cancel the SDK ignores keeps its topic until the client is destroyed.
public final class LegacySharedListener: Sendable {
    /// Counts of the shared SDK listener's life.
    public struct Statistics: Sendable, Hashable {
        /// SDK listeners started: the first consumer, and each one after a stop or an end.
        public var starts: Int
        /// SDK listeners cancelled because their last consumer left.
        public var stops: Int
        /// SDK listeners that ended by themselves, or failed to start.
        public var ends: Int
        /// Consumers now.
        public var consumers: Int
    }

    private let shared: SharedSubscription<ListenerEvent>

    /// Creates a shared listener; nothing starts until a consumer iterates.
    ///
    /// - Parameters:
    ///   - client: The client whose SDK threads deliver the events; kept alive by this one.
    ///   - topic: The topic: one listener per topic and client.
    ///   - eventCount: Data events before the listener ends; 0 (the default) never ends.
    ///   - behavior: How the SDK delivers: chunk size, pace, concurrency, how it ends, pause mode.
    public init(client: LegacyClient, topic: UInt64, eventCount: UInt64 = 0, behavior: SimulatedBehavior = .wellBehaved)
    {
        let sdk = client.sdk
        self.shared = SharedSubscription(restart: .automatic) { sink in
            let started = SDK.startListener(
                client: sdk, topic: topic, eventCount: eventCount, behavior: behavior,
                onEvent: { event in Self.deliver(event, to: sink) })
            switch started {
            case .success(let handle):
                return StreamControl(
                    cancel: CancelHandle { handle.cancel() },
                    pause: { try? handle.pause() },
                    resume: { try? handle.resume() })
            case .failure(let error):
                throw error
            }
        }
    }

    /// A stream for one consumer of the shared listener.
    ///
    /// - Parameter buffering: How this consumer's events wait (default: ask for a pause at 64
    ///   buffered events, resume below 16).
    /// - Returns: A cold stream: iterating it joins the listener, leaving it leaves.
    public func subscribe(
        buffering: StreamBuffering = .backpressure(low: 16, high: 64)
    ) -> CallbackStream<ListenerEvent> {
        shared.subscribe(buffering: buffering)
    }

    /// Counts of the shared SDK listener's life.
    public var statistics: Statistics {
        let counts = shared.statistics
        return Statistics(
            starts: counts.starts, stops: counts.cancels, ends: counts.finishes + counts.failures,
            consumers: counts.consumers)
    }

    /// Whether an SDK listener runs: its start returned, and it neither stopped nor ended.
    var isRunning: Bool { shared.isRunning }

    /// One SDK event (any SDK thread), for every consumer of its listener.
    private static func deliver(_ event: RawDownloadEvent, to sink: EventSink<ListenerEvent>) {
        switch event.kind {
        case .data:
            sink.yield(
                ListenerEvent(
                    sequence: event.sequence, offset: event.bytesDone, bytes: event.data, listenerID: event.requestID))
        case .end:
            if let error = event.error { sink.finish(throwing: error) } else { sink.finish() }
        case .progress:
            break  // listeners send none
        }
    }
}
