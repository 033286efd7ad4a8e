import LegacyBridge
import Synchronization

/// A Redis client over hiredis's asynchronous API, from async code: commands whose replies come
/// back in order, and channels that several consumers follow over one SUBSCRIBE.
///
/// hiredis's async context is not thread-safe and has no loop of its own: it tells an event
/// library, through five hooks, when to watch its socket for reading and writing. A connection
/// runs both of its contexts (one for commands, one for subscriptions, made on first use) on one
/// `SDKLoop(name:)`, whose descriptor watch the hooks drive. Every hiredis call runs there.
///
/// ```swift
/// let redis = try await RedisConnection.connect(port: 6379)
/// _ = try await redis.send("SET", "greeting", "hello")
/// let value = try await redis.send("GET", "greeting").text  // "hello"
/// for try await message in redis.messages(channel: "news") { … }
/// await redis.shutdown()
/// ```
///
/// Contract:
/// - ``send(_:timeout:)`` returns the reply to its command, whatever else is in flight: hiredis
///   matches replies by position, the connection by request id.
/// - A caller that times out or is cancelled is let go at once. hiredis cannot withdraw a command
///   it has written, so the server still runs it; its reply is counted as late and dropped.
/// - A lost connection fails every pending command and every subscription with
///   ``RedisError/connectionLost(_:)``, at once; later calls throw it too. The connection does
///   not reconnect.
/// - A channel has one SUBSCRIBE while it has consumers: the first consumer sends it, the last
///   one to leave sends UNSUBSCRIBE.
/// - Connecting ignores SIGPIPE in the process (hiredis writes with write(2)).
public final class RedisConnection: Sendable {
    private let loop: SDKLoop
    private let commands: HiredisDriver
    private let subscriber: HiredisDriver
    private let counters: RedisCounters
    private let replies: PendingRequests<UInt64, RedisReply>
    private let channels = LockedValue<[String: SharedSubscription<RedisMessage>]>([:])
    private let nextID = Atomic<UInt64>(0)
    private static let loopNumbers = Atomic<Int>(0)
    /// Numbers the runs of every channel's subscription, so that a late stop finds only its own run.
    private static let runs = Atomic<UInt64>(0)

    private init(loop: SDKLoop, commands: HiredisDriver, subscriber: HiredisDriver, counters: RedisCounters) {
        self.loop = loop
        self.commands = commands
        self.subscriber = subscriber
        self.counters = counters
        self.replies = commands.replies
    }

    /// Releasing the connection frees its contexts on the loop; the loop then ends in the background.
    deinit {
        try? loop.post { [commands, subscriber] in
            commands.close(.notConnected)
            subscriber.close(.notConnected)
        }
    }

    /// Starts a loop thread, connects to Redis and waits until the server answers a PING.
    ///
    /// - Parameters:
    ///   - host: The server's address (hiredis resolves names with getaddrinfo, blocking: give an
    ///     address).
    ///   - port: The server's port, 1 to 65535.
    ///   - timeout: How long to wait for the connection and the PING's reply; nil waits until
    ///     they come. A server that accepts and never answers fails the connect once it passes.
    /// - Returns: The connected client.
    /// - Throws: ``RedisError/connectFailed(_:)`` with hiredis's reason or the timeout, or
    ///   ``RedisError/notConnected`` if no loop thread could be started.
    /// - Precondition: `port` is 1 to 65535, a timeout is positive.
    public static func connect(
        host: String = "127.0.0.1", port: Int = 6379, timeout: Duration? = .seconds(10)
    ) async throws -> RedisConnection {
        precondition((1...65535).contains(port), "RedisConnection.connect: port must be 1 to 65535, not \(port)")
        if let timeout {
            precondition(timeout > .zero, "RedisConnection.connect: the timeout must be positive (nil waits forever)")
        }
        let counters = RedisCounters()
        // hiredis cannot withdraw a command (see the contract): the table's cancel only tells the
        // driver, on the loop, that the caller left.
        let target = AbandonTarget()
        let replies = PendingRequests<UInt64, RedisReply>(cancel: { id in
            let (loop, driver) = target.current
            guard let loop, let driver else { return }
            try? loop.post { driver.abandon(id: id) }
        })
        let commands = HiredisDriver(host: host, port: port, counters: counters, replies: replies)
        let subscriber = HiredisDriver(host: host, port: port, counters: counters, replies: PendingRequests())
        let loop: SDKLoop
        do {
            loop = try SDKLoop(name: "redis \(loopNumbers.add(1, ordering: .relaxed).newValue)")
        } catch {
            throw RedisError.notConnected
        }
        target.attach(loop: loop, driver: commands)
        let connection = RedisConnection(loop: loop, commands: commands, subscriber: subscriber, counters: counters)
        try await loop.run { [weak loop] in
            guard let loop else { throw RedisError.notConnected }
            try commands.connect(on: loop)
            subscriber.attach(to: loop)
        }
        do {
            _ = try await connection.send("PING", timeout: timeout)
        } catch RedisError.connectionLost(let reason) {
            throw RedisError.connectFailed(reason)
        } catch let error as BridgeTimeoutError {
            // The connection is dropped here: its deinit closes both contexts on the loop.
            throw RedisError.connectFailed("no answer to PING within \(error.timeout)")
        }
        return connection
    }

    /// Sends a command and returns its reply.
    ///
    /// The command is written on the loop thread, behind every command sent before it from the
    /// same task, and pipelined with the commands of other tasks.
    ///
    /// - Parameters:
    ///   - arguments: The command and its arguments, e.g. `"SET", "key", "value"`.
    ///   - timeout: How long to wait for the reply; nil (the default) waits until it comes or the
    ///     connection is lost. The server still runs a command whose caller timed out.
    /// - Returns: The reply.
    /// - Throws: ``RedisError/server(_:)`` for an error reply, ``RedisError/connectionLost(_:)``,
    ///   ``RedisError/notConnected``, `CancellationError`, or `BridgeTimeoutError`.
    @discardableResult
    public func send(_ arguments: String..., timeout: Duration? = nil) async throws -> RedisReply {
        try await send(bytes: arguments.map { Array($0.utf8) }, timeout: timeout)
    }

    /// Sends a command with the conformance suite's probe on its SDK calls.
    ///
    /// - Parameters:
    ///   - arguments: The command and its arguments.
    ///   - timeout: As in ``send(_:timeout:)``.
    ///   - probe: The suite's probe; `.off` changes nothing.
    /// - Returns: The reply.
    /// - Throws: As ``send(_:timeout:)``.
    @discardableResult
    public func send(_ arguments: [String], timeout: Duration? = nil, probe: CallProbe<RedisReply>) async throws -> RedisReply {
        try await send(bytes: arguments.map { Array($0.utf8) }, timeout: timeout, probe: probe)
    }

    /// Sends a command given as binary arguments and returns its reply.
    ///
    /// - Parameters:
    ///   - arguments: The command and its arguments, as bytes; at least one.
    ///   - timeout: As in ``send(_:timeout:)``.
    ///   - probe: The conformance suite's probe; leave the default, `.off`, which changes nothing.
    /// - Returns: The reply.
    /// - Throws: As ``send(_:timeout:)``.
    /// - Precondition: `arguments` is not empty.
    @discardableResult
    public func send(
        bytes arguments: [[UInt8]], timeout: Duration? = nil, probe: CallProbe<RedisReply> = .off
    ) async throws -> RedisReply {
        precondition(!arguments.isEmpty, "RedisConnection.send: a command needs at least its name")
        let (loop, commands, replies) = (self.loop, self.commands, self.replies)
        // The id is registered before the job is posted, so the reply always finds it.
        let id = nextID.add(1, ordering: .relaxed).newValue
        return try await replies.request(id: id, timeout: timeout) { id in
            do {
                try loop.post {
                    probe.start {
                        let deliver = probe.callback { result in replies.complete(id, with: result) }
                        commands.command(arguments, id: id, probe: probe, deliver: deliver)
                    }
                }
            } catch {
                throw RedisError.notConnected
            }
        }
    }

    /// Sends a command and reports its reply to `completion`, on the connection's loop thread: the
    /// one-shot SDK call to build the library's other patterns on (`LatestWins`, `CoalescedCalls`).
    ///
    /// hiredis cannot withdraw a written command, so there is nothing to cancel: give those patterns
    /// no cancel handle. The reply of a caller that left still comes, and the pattern discards it.
    ///
    /// ```swift
    /// let search = LatestWins<RedisReply>()
    /// let hits = try await search.run { completion in
    ///     redis.send(bytes: [Array("GET".utf8), Array("hits:\(text)".utf8)]) { _ = completion($0) }
    ///     return nil
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - arguments: The command and its arguments, as bytes; at least one.
    ///   - probe: The conformance suite's probe; leave the default, `.off`, which changes nothing.
    ///   - completion: Gets the reply, or ``RedisError/server(_:)``, ``RedisError/connectionLost(_:)``
    ///     or ``RedisError/notConnected``; exactly once.
    /// - Precondition: `arguments` is not empty.
    public func send(
        bytes arguments: [[UInt8]], probe: CallProbe<RedisReply> = .off,
        completion: @escaping @Sendable (Result<RedisReply, any Error>) -> Void
    ) {
        precondition(!arguments.isEmpty, "RedisConnection.send: a command needs at least its name")
        let commands = self.commands
        let id = nextID.add(1, ordering: .relaxed).newValue
        do {
            try loop.post {
                probe.start {
                    commands.command(arguments, id: id, probe: probe, deliver: probe.callback(completion))
                }
            }
        } catch {
            completion(.failure(RedisError.notConnected))
        }
    }

    /// The messages published to `channel` from now on, for every iterator of the returned stream.
    ///
    /// All streams of one channel share one SUBSCRIBE, on the connection's subscriber context
    /// (connected on first use). Each iterator gets every message, in the server's order. A lost
    /// connection ends every iterator with ``RedisError/connectionLost(_:)``.
    ///
    /// - Parameters:
    ///   - channel: The channel's exact name.
    ///   - buffering: How messages wait for each iterator: see `StreamBuffering`.
    /// - Returns: The stream.
    public func messages(channel: String, buffering: StreamBuffering = .unbounded) -> CallbackStream<RedisMessage> {
        let subscription = channels.withLock { channels in
            if let existing = channels[channel] { return existing }
            let made = makeSubscription(channel)
            channels[channel] = made
            return made
        }
        return subscription.subscribe(buffering: buffering)
    }

    private func makeSubscription(_ channel: String) -> SharedSubscription<RedisMessage> {
        // The scheduler, not the loop: a subscription must not keep the loop thread alive.
        let scheduler = loop.scheduler
        let subscriber = self.subscriber
        return SharedSubscription(of: RedisMessage.self, restart: .automatic) { sink in
            let run = Self.runs.add(1, ordering: .relaxed).newValue
            do {
                try scheduler.post { subscriber.subscribe(channel: channel, run: run, sink: sink) }
            } catch {
                throw RedisError.notConnected
            }
            return StreamControl(
                scheduler: scheduler, cancel: CancelHandle { subscriber.unsubscribe(channel: channel, run: run) })
        }
    }

    /// The consumers of `channel` now, over every stream ``messages(channel:buffering:)`` returned.
    package func consumerCount(channel: String) -> Int {
        channels.withLock { $0[channel] }?.statistics.consumers ?? 0
    }

    /// Commands written to the server and not answered yet, including those whose caller left
    /// (hiredis cannot withdraw them; each entry goes with its late reply).
    package var commandsAwaitingReply: Int { commands.awaitingReply.load(ordering: .relaxed) }

    /// The loop thread every hiredis call of this connection runs on, as a scheduler.
    package var scheduler: SDKScheduler { loop.scheduler }

    /// What the connection has done so far.
    public var statistics: RedisStatistics {
        counters.snapshot(replies.statistics)
    }

    /// The version of hiredis in use, e.g. "0.14.1".
    public static var libraryVersion: String {
        Hiredis.version
    }

    /// Frees both contexts on the loop thread. Pending commands and subscriptions fail with
    /// ``RedisError/notConnected``, and later calls throw it at once.
    public func shutdown() async {
        let (commands, subscriber) = (self.commands, self.subscriber)
        _ = try? await loop.run {
            commands.close(.notConnected)
            subscriber.close(.notConnected)
        }
    }
}

/// Where the command table's cancel goes, set once the loop exists.
///
/// Weak: the loop's watch holds the driver, which holds the table, and a strong reference back
/// would keep the loop thread alive forever.
private final class AbandonTarget: Sendable {
    private struct Target: Sendable {
        weak var loop: SDKLoop?
        weak var driver: HiredisDriver?
    }

    private let target = LockedValue(Target())

    var current: (SDKLoop?, HiredisDriver?) {
        let target = self.target.withLock { $0 }
        return (target.loop, target.driver)
    }

    func attach(loop: SDKLoop, driver: HiredisDriver) {
        target.withLock { $0 = Target(loop: loop, driver: driver) }
    }
}
