import LegacyBridge
import Synchronization

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
/// ``LegacySDKError/alreadyListening``. This type shares that one listener:
/// - ``subscribe(buffering:)`` returns one stream per consumer. The first consumer to iterate
///   starts the SDK listener; later ones join it and get the events from then on, no replay.
/// - The last consumer to leave cancels the SDK listener.
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
        /// SDK listeners that ended by themselves.
        public var ends: Int
        /// Consumers now.
        public var consumers: Int
    }

    private let storage: ListenerFanOut

    /// Creates a shared listener; nothing starts until a consumer iterates.
    ///
    /// - Parameters:
    ///   - client: The client whose SDK threads deliver the events; kept alive by this one.
    ///   - topic: The topic: one listener per topic and client.
    ///   - eventCount: Data events before the listener ends; 0 (the default) never ends.
    ///   - behavior: How the SDK delivers: chunk size, pace, concurrency, how it ends, pause mode.
    public init(client: LegacyClient, topic: UInt64, eventCount: UInt64 = 0, behavior: SimulatedBehavior = .wellBehaved)
    {
        self.storage = ListenerFanOut(sdk: client.sdk, topic: topic, eventCount: eventCount, behavior: behavior)
    }

    /// A stream for one consumer of the shared listener.
    ///
    /// - Parameter buffering: How this consumer's events wait (default: ask for a pause at 64
    ///   buffered events, resume below 16).
    /// - Returns: A cold stream: iterating it joins the listener, leaving it leaves.
    public func subscribe(
        buffering: StreamBuffering = .backpressure(low: 16, high: 64)
    ) -> CallbackStream<ListenerEvent> {
        let storage = self.storage
        return CallbackStream(buffering: buffering) { sink in storage.join(sink) }
    }

    /// Counts of the shared SDK listener's life.
    public var statistics: Statistics { storage.statistics }

    /// Whether an SDK listener runs: its start returned, and it neither stopped nor ended.
    var isRunning: Bool { storage.isRunning }
}

/// The storage of a shared listener: the fan-out machine behind a lock, and the SDK calls it asks
/// for, made after the lock is released.
private final class ListenerFanOut: Sendable {
    private let sdk: SDKClient
    private let topic: UInt64
    private let eventCount: UInt64
    private let behavior: SimulatedBehavior
    private let machine = LockedBox(ListenerFanOutStateMachine<EventSink<ListenerEvent>, SDKHandle>())
    private let consumerIDs = Atomic<Int>(0)

    init(sdk: SDKClient, topic: UInt64, eventCount: UInt64, behavior: SimulatedBehavior) {
        self.sdk = sdk
        self.topic = topic
        self.eventCount = eventCount
        self.behavior = behavior
    }

    var statistics: LegacySharedListener.Statistics {
        machine.withLock {
            LegacySharedListener.Statistics(
                starts: $0.statistics.starts, stops: $0.statistics.stops, ends: $0.statistics.terminals,
                consumers: $0.consumerCount)
        }
    }

    var isRunning: Bool { machine.withLock { $0.isRunning } }

    /// A consumer joins (on its task, as the stream's start).
    func join(_ sink: EventSink<ListenerEvent>) -> StreamControl {
        let id = consumerIDs.add(1, ordering: .relaxed).newValue
        if case .start(let generation) = machine.withLock({ $0.join(id, sink) }) {
            start(generation)
        }
        return StreamControl(
            cancel: CancelHandle { self.act(self.machine.withLock { $0.leave(id) }) },
            pause: { self.act(self.machine.withLock { $0.pause(id) }) },
            resume: { self.act(self.machine.withLock { $0.resume(id) }) })
    }

    private func start(_ generation: UInt64) {
        let started = SDK.startListener(
            client: sdk, topic: topic, eventCount: eventCount, behavior: behavior,
            onEvent: { event in self.deliver(event, generation: generation) })
        switch started {
        case .success(let handle):
            act(machine.withLock { $0.started(generation: generation, handle: handle) })
        case .failure(let error):
            for sink in machine.withLock({ $0.startFailed(generation: generation) }) {
                sink.finish(throwing: error)
            }
        }
    }

    /// One SDK event (any SDK thread): fanned out to the consumers of its listener.
    private func deliver(_ event: RawDownloadEvent, generation: UInt64) {
        switch event.kind {
        case .data:
            let element = ListenerEvent(
                sequence: event.sequence, offset: event.bytesDone, bytes: event.data, listenerID: event.requestID)
            for sink in machine.withLock({ $0.event(generation: generation) }) {
                _ = sink.yield(element)
            }
        case .end:
            let error = event.error
            for sink in machine.withLock({ $0.terminal(generation: generation) }) {
                if let error { sink.finish(throwing: error) } else { sink.finish() }
            }
        case .progress:
            break  // listeners send none
        }
    }

    private func act(_ action: ListenerFanOutStateMachine<EventSink<ListenerEvent>, SDKHandle>.StopAction) {
        switch action {
        case .none:
            break
        case .stop(let handle):
            handle.cancel()
        case .control:
            // The controller: pause and resume, one call at a time, until the SDK's state matches.
            while true {
                switch machine.withLock({ $0.nextControl() }) {
                case .pause(let handle): try? handle.pause()
                case .resume(let handle): try? handle.resume()
                case .done: return
                }
            }
        }
    }
}
