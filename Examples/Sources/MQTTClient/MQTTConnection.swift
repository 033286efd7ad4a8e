import LegacyBridge
import Synchronization

/// An MQTT client over libmosquitto, from async code: QoS 1 publishes that return once the broker
/// acknowledged them, and topics that several consumers follow over one broker subscription.
///
/// libmosquitto's client is not thread-safe unless the library runs a thread of its own. A
/// connection runs the client's network loop on an `SDKLoop`, and every libmosquitto call runs
/// there. The library reports acknowledgements and messages through one global callback each:
/// - `on_publish` completes the publish with that message id in a `PendingRequests` table,
/// - `on_message` fans the message out to the consumers of each matching topic, one
///   `SharedSubscription` per topic.
///
/// ```swift
/// let connection = try await MQTTConnection.connect(.init(host: "127.0.0.1", port: 1883))
/// try await connection.publish(topic: "sensors/1", payload: Array("21.5".utf8))
/// for try await message in connection.messages(topic: "sensors/#") { … }
/// await connection.shutdown()
/// ```
///
/// Contract:
/// - ``publish(topic:payload:qos:retain:timeout:probe:)`` returns once the broker acknowledged
///   the message. A cancelled or timed-out caller is let go at once. libmosquitto cannot withdraw
///   the message, and its late acknowledgement is counted.
/// - A lost connection fails every pending publish and every subscription with
///   ``MQTTError/connectionLost``, at once. The connection does not reconnect.
/// - A topic has one broker subscription while it has consumers: the first consumer sends
///   SUBSCRIBE, the last one to leave sends UNSUBSCRIBE.
public final class MQTTConnection: Sendable {
    /// Where to connect and how.
    public struct Configuration: Sendable {
        /// The broker's host name or address.
        public var host: String
        /// The broker's port.
        public var port: Int
        /// The client id; nil lets libmosquitto make a random one.
        public var clientID: String?
        /// The keep-alive interval; the client pings the broker when idle that long.
        public var keepAlive: Duration

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - host: The broker's host name or address.
        ///   - port: The broker's port, 1 to 65535.
        ///   - clientID: The client id, or nil for a random one.
        ///   - keepAlive: The keep-alive interval, at least 5 seconds.
        public init(host: String, port: Int, clientID: String? = nil, keepAlive: Duration = .seconds(60)) {
            self.host = host
            self.port = port
            self.clientID = clientID
            self.keepAlive = keepAlive
        }
    }

    private let loop: SDKLoop
    private let driver: MosquittoDriver
    private let counters: MQTTCounters
    private let publisher: LoopActor
    private let topics = LockedValue<[String: SharedSubscription<MQTTMessage>]>([:])
    /// Numbers the loop threads, whose names say which connection they serve.
    private static let loopNumbers = Atomic<Int>(0)
    /// Numbers the runs of every topic's subscription, so that a late stop finds only its own run.
    private static let runs = Atomic<UInt64>(0)

    private init(loop: SDKLoop, driver: MosquittoDriver, counters: MQTTCounters) {
        self.loop = loop
        self.driver = driver
        self.counters = counters
        self.publisher = LoopActor(executor: loop.executor, driver: driver)
    }

    /// Releasing the connection closes the client on its loop, then the loop ends in the background.
    deinit {
        try? loop.post { [driver] in driver.close(MQTTError.noConnection) }
    }

    /// Starts a loop thread, connects to the broker and waits for its CONNACK.
    ///
    /// - Parameter configuration: The broker and the client's settings.
    /// - Returns: The connected client.
    /// - Throws: ``MQTTError``: ``MQTTError/connectionRefused`` if the broker refused, the status of
    ///   a failed `mosquitto_connect`, or ``MQTTError/noMemory`` if no thread could be started.
    /// - Precondition: `port` is 1 to 65535 and `keepAlive` at least 5 seconds.
    public static func connect(_ configuration: Configuration) async throws -> MQTTConnection {
        precondition(
            (1...65535).contains(configuration.port),
            "MQTTConnection.Configuration.port must be 1 to 65535, not \(configuration.port)")
        precondition(
            configuration.keepAlive >= .seconds(5),
            "MQTTConnection.Configuration.keepAlive must be at least 5 seconds (libmosquitto's minimum)")
        try Mosquitto.initializeLibrary()
        let counters = MQTTCounters()
        let table = PublishTable()
        let driver = MosquittoDriver(counters: counters, publishes: table.publishes)
        let loop: SDKLoop
        do {
            // The loop waits on the client's socket, for what libmosquitto wants before each wait.
            loop = try SDKLoop(
                name: "mqtt \(loopNumbers.add(1, ordering: .relaxed).newValue)",
                beforeWait: { driver.prepareWait() })
            try loop.post { [weak loop] in if let loop { driver.attach(to: loop) } }
        } catch {
            throw MQTTError.noMemory
        }
        table.attach(loop: loop, driver: driver)
        let connection = MQTTConnection(loop: loop, driver: driver, counters: counters)
        try await withCallback(scheduler: loop.scheduler) { completion in
            driver.connect(configuration, completion: completion)
            return nil
        }
        return connection
    }

    /// Publishes a message and returns once the broker acknowledged it.
    ///
    /// The call hops to the loop thread, where `mosquitto_publish` runs and its message id is
    /// registered before libmosquitto can report its acknowledgement.
    ///
    /// - Parameters:
    ///   - topic: The topic, without wildcards.
    ///   - payload: The payload bytes.
    ///   - qos: 1 (the default) waits for the broker's PUBACK. 0 returns once the message is written.
    ///   - retain: Whether the broker keeps the message for later subscribers.
    ///   - timeout: How long to wait for the acknowledgement; nil (the default) waits until it
    ///     comes or the connection is lost.
    ///   - probe: The conformance suite's probe; leave the default, `.off`, which changes nothing.
    /// - Throws: ``MQTTError`` (``MQTTError/connectionLost``, ``MQTTError/noConnection``,
    ///   ``MQTTError/invalidArgument`` for a bad topic), `CancellationError`, or `BridgeTimeoutError`.
    /// - Precondition: `qos` is 0 or 1.
    public func publish(
        topic: String, payload: [UInt8], qos: Int = 1, retain: Bool = false, timeout: Duration? = nil,
        probe: CallProbe<Void> = .off
    ) async throws {
        precondition(qos == 0 || qos == 1, "MQTTConnection.publish: qos must be 0 or 1, not \(qos)")
        try await publisher.publish(
            topic: topic, payload: payload, qos: Int32(qos), retain: retain, timeout: timeout, probe: probe)
    }

    /// The messages published to `topic` from now on, for every iterator of the returned stream.
    ///
    /// All streams of one topic share one broker subscription: the first iterator to ask for a
    /// message sends SUBSCRIBE, the last one to leave sends UNSUBSCRIBE. Each iterator gets every
    /// message, in the broker's order. A lost connection ends every iterator with
    /// ``MQTTError/connectionLost``.
    ///
    /// - Parameters:
    ///   - topic: A topic filter; `+` and `#` wildcards match as MQTT defines them.
    ///   - buffering: How messages wait for each iterator: see `StreamBuffering`.
    /// - Returns: The stream.
    public func messages(topic: String, buffering: StreamBuffering = .unbounded) -> CallbackStream<MQTTMessage> {
        let subscription = topics.withLock { topics in
            if let existing = topics[topic] { return existing }
            let made = makeSubscription(topic)
            topics[topic] = made
            return made
        }
        return subscription.subscribe(buffering: buffering)
    }

    private func makeSubscription(_ topic: String) -> SharedSubscription<MQTTMessage> {
        // The scheduler, not the loop: a subscription must not keep the loop thread alive.
        let scheduler = loop.scheduler
        let driver = self.driver
        return SharedSubscription(of: MQTTMessage.self, restart: .automatic) { sink in
            let run = Self.runs.add(1, ordering: .relaxed).newValue
            do {
                try scheduler.post { driver.subscribe(topic: topic, run: run, sink: sink) }
            } catch {
                throw MQTTError.noConnection
            }
            // The last consumer left: on the loop thread, after the subscribe posted above.
            return StreamControl(
                scheduler: scheduler, cancel: CancelHandle { driver.unsubscribe(topic: topic, run: run) })
        }
    }

    /// What the connection has done so far.
    public var statistics: MQTTStatistics {
        counters.snapshot(driver.publishes.statistics)
    }

    /// The consumers of `topic` now, over every stream ``messages(topic:buffering:)`` returned.
    package func consumerCount(topic: String) -> Int {
        topics.withLock { $0[topic] }?.statistics.consumers ?? 0
    }

    /// The version of libmosquitto in use, e.g. "2.0.11".
    public static var libraryVersion: String {
        Mosquitto.version
    }

    /// The loop thread's name, "mqtt" and a number (at most 15 bytes, as Linux keeps it).
    package var loopName: String { loop.name }

    /// The loop thread every libmosquitto call of this connection runs on, as a scheduler.
    package var scheduler: SDKScheduler { loop.scheduler }

    /// Disconnects and destroys the client on its loop thread. Pending publishes and
    /// subscriptions fail with ``MQTTError/noConnection``, and later calls throw it at once.
    /// The loop thread ends when the connection is released.
    public func shutdown() async {
        let driver = self.driver
        _ = try? await loop.run { driver.close(MQTTError.noConnection) }
    }
}

/// The loop thread as an actor: publishes run there, so `mosquitto_publish` and the
/// registration of its id happen in one job, and `on_publish` runs in a later one or inside it.
private actor LoopActor {
    private let executor: SDKThreadExecutor
    private let driver: MosquittoDriver

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(executor: SDKThreadExecutor, driver: MosquittoDriver) {
        self.executor = executor
        self.driver = driver
    }

    func publish(
        topic: String, payload: [UInt8], qos: Int32, retain: Bool, timeout: Duration?, probe: CallProbe<Void>
    ) async throws {
        let driver = self.driver
        // The SDK assigns the id: PendingRequests keeps an acknowledgement that comes inside
        // mosquitto_publish (QoS 0 does) for the start that returns its id.
        try await driver.publishes.request(timeout: timeout) { () throws -> Int32 in
            try probe.start {
                try driver.publish(topic: topic, payload: payload, qos: qos, retain: retain, probe: probe)
            }
        }
    }
}

/// The publish table and the cancel it calls, which needs the loop made after the table.
///
/// It holds the loop and the driver weakly: the loop's iterations hold the driver, which holds
/// this table, and a strong reference back would keep the loop thread alive forever.
private final class PublishTable: Sendable {
    private struct Target: Sendable {
        weak var loop: SDKLoop?
        weak var driver: MosquittoDriver?
    }

    private let target = LockedValue(Target())
    let publishes: PendingRequests<Int32, Void>

    init() {
        let target = self.target
        self.publishes = PendingRequests(cancel: { mid in
            let current = target.withLock { $0 }
            guard let loop = current.loop, let driver = current.driver else { return }
            try? loop.post { driver.abandon(mid: mid) }
        })
    }

    func attach(loop: SDKLoop, driver: MosquittoDriver) {
        target.withLock { $0 = Target(loop: loop, driver: driver) }
    }
}
