import LegacyBridge
import Synchronization

/// A PostgreSQL client over libpq's asynchronous API, from async code: a small pool of
/// connections on one loop thread, queries that can be cancelled or time out, and LISTEN/NOTIFY
/// channels that several consumers follow over one LISTEN.
///
/// libpq's connections are not thread-safe and have no loop of their own: the application waits on
/// each connection's socket and calls back in. A client runs every connection of its pool on one
/// `SDKLoop(name:)`, which watches their sockets; every libpq call runs there, except `PQcancel`,
/// which blocks on the network and runs on an `OffloadPool` thread.
///
/// ```swift
/// let db = try await PostgresClient.connect(.init(port: 5432, user: "app", database: "app"))
/// let rows = try await db.query("SELECT name FROM users WHERE id = $1", ["42"]).rows
/// for try await note in db.notifications(channel: "jobs") { … }
/// await db.shutdown()
/// ```
///
/// Contract:
/// - ``query(_:_:timeout:probe:)`` returns its own statement's result. Each connection runs one
///   statement at a time; a query goes to the connection with the fewest queries waiting.
/// - A caller that is cancelled or times out is let go at once. Its query leaves the queue if it
///   was not sent; if it is running, the server is asked to cancel it (`PQcancel`, off the loop),
///   and the connection sends its next query only once that cancel request reached the server:
///   a cancel stops whatever the connection runs when it arrives, so it never lands on the next
///   caller's query.
/// - `Configuration.statementTimeout` is the server's `statement_timeout`: a statement running
///   longer fails with ``PostgresError/server(sqlState:message:)``, SQLSTATE 57014.
/// - A lost connection fails its running and queued queries, and the subscriptions, with
///   ``PostgresError/connectionLost(_:)``. It leaves the pick: new queries go to connections
///   that are up (``PostgresStatistics/connectionsUp`` counts them), and fail only once none is.
///   Nothing reconnects.
/// - A channel has one LISTEN while it has consumers (on the pool's first connection): the first
///   consumer sends it, the last to leave sends UNLISTEN.
public final class PostgresClient: Sendable {
    /// Where to connect and how.
    public struct Configuration: Sendable {
        /// The server's address (an address: libpq would resolve a name with a blocking call).
        public var host: String
        /// The server's port.
        public var port: Int
        /// The user to connect as.
        public var user: String
        /// The database.
        public var database: String
        /// The password, or nil.
        public var password: String?
        /// The server's `statement_timeout` for every statement, or nil for the server's default.
        public var statementTimeout: Duration?
        /// Connections in the pool, at least 1.
        public var connections: Int

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - host: The server's address.
        ///   - port: The server's port, 1 to 65535.
        ///   - user: The user.
        ///   - database: The database.
        ///   - password: The password, or nil.
        ///   - statementTimeout: The server-side statement timeout, at least 1 ms, or nil.
        ///   - connections: Connections in the pool, 1 to 64.
        public init(
            host: String = "127.0.0.1", port: Int = 5432, user: String, database: String, password: String? = nil,
            statementTimeout: Duration? = nil, connections: Int = 4
        ) {
            self.host = host
            self.port = port
            self.user = user
            self.database = database
            self.password = password
            self.statementTimeout = statementTimeout
            self.connections = connections
        }

        /// The libpq connection string, each value quoted.
        var conninfo: String {
            func quoted(_ value: String) -> String {
                "'" + value.flatMap { $0 == "'" || $0 == "\\" ? ["\\", $0] : [$0] } + "'"
            }
            var parts = [
                "hostaddr=\(quoted(host))", "port=\(port)", "user=\(quoted(user))", "dbname=\(quoted(database))",
                "sslmode=disable",
            ]
            if let password { parts.append("password=\(quoted(password))") }
            if let statementTimeout {
                let milliseconds = statementTimeout.components.seconds * 1000
                    + statementTimeout.components.attoseconds / 1_000_000_000_000_000
                parts.append("options=\(quoted("-c statement_timeout=\(milliseconds)"))")
            }
            return parts.joined(separator: " ")
        }
    }

    private let loop: SDKLoop
    private let drivers: [LibpqDriver]
    private let counters: PostgresCounters
    private let cancelPool: OffloadPool
    private let results: PendingRequests<UInt64, PostgresResult>
    private let channels = LockedValue<[String: SharedSubscription<PostgresNotification>]>([:])
    private let nextID = Atomic<UInt64>(0)
    private static let loopNumbers = Atomic<Int>(0)
    private static let runs = Atomic<UInt64>(0)

    private init(
        loop: SDKLoop, drivers: [LibpqDriver], counters: PostgresCounters, cancelPool: OffloadPool,
        results: PendingRequests<UInt64, PostgresResult>
    ) {
        self.loop = loop
        self.drivers = drivers
        self.counters = counters
        self.cancelPool = cancelPool
        self.results = results
    }

    /// Releasing the client closes its connections on the loop; the loop ends in the background.
    deinit {
        try? loop.post { [drivers] in for driver in drivers { driver.close() } }
    }

    /// Starts a loop thread and the pool's connections, and waits until every one is ready.
    ///
    /// - Parameter configuration: The server and the pool's settings.
    /// - Returns: The connected client.
    /// - Throws: ``PostgresError/connectFailed(_:)`` with libpq's message (the first connection's
    ///   to fail), or ``PostgresError/notConnected`` if no thread could be started.
    /// - Precondition: `port` is 1 to 65535, `connections` 1 to 64, a statement timeout at least 1 ms.
    public static func connect(_ configuration: Configuration) async throws -> PostgresClient {
        precondition(
            (1...65535).contains(configuration.port),
            "PostgresClient.Configuration.port must be 1 to 65535, not \(configuration.port)")
        precondition(
            (1...64).contains(configuration.connections),
            "PostgresClient.Configuration.connections must be 1 to 64, not \(configuration.connections)")
        if let timeout = configuration.statementTimeout {
            precondition(
                timeout >= .milliseconds(1),
                "PostgresClient.Configuration.statementTimeout must be at least 1 ms (0 turns it off: pass nil)")
        }
        let loop: SDKLoop
        let cancelPool: OffloadPool
        do {
            loop = try SDKLoop(name: "postgres \(loopNumbers.add(1, ordering: .relaxed).newValue)")
            cancelPool = try OffloadPool(threads: 1, name: "pg cancel")
        } catch {
            throw PostgresError.notConnected
        }
        let counters = PostgresCounters()
        let drivers = (0..<configuration.connections).map { _ in
            LibpqDriver(conninfo: configuration.conninfo, counters: counters, cancelPool: cancelPool)
        }
        // The table's cancel: on the loop, the driver that holds the query withdraws it.
        let target = WithdrawTarget()
        let results = PendingRequests<UInt64, PostgresResult>(cancel: { id in
            guard let loop = target.loop else { return }
            try? loop.post { for driver in drivers { driver.withdraw(id: id) } }
        })
        target.attach(loop)
        let client = PostgresClient(
            loop: loop, drivers: drivers, counters: counters, cancelPool: cancelPool, results: results)
        let scheduler = loop.scheduler
        try await withThrowingTaskGroup(of: Void.self) { group in
            for driver in drivers {
                group.addTask {
                    try await withCallback(scheduler: scheduler) { completion in
                        driver.start(on: loop) { result in _ = completion(result.mapError { $0 }) }
                        return nil
                    }
                }
            }
            try await group.waitForAll()
        }
        return client
    }

    /// Runs one SQL statement with text parameters (`$1`, `$2`, …) and returns its result.
    ///
    /// - Parameters:
    ///   - sql: One statement.
    ///   - parameters: The values of `$1`, `$2`, … in text form; nil for NULL.
    ///   - timeout: How long to wait for the result; nil (the default) waits until it comes. A
    ///     query still running when it passes is cancelled on the server.
    ///   - probe: The conformance suite's probe; leave the default, `.off`, which changes nothing.
    /// - Returns: The statement's result.
    /// - Throws: ``PostgresError`` (the server's error, a lost connection, shutdown),
    ///   `CancellationError`, or `BridgeTimeoutError`.
    @discardableResult
    public func query(
        _ sql: String, _ parameters: [String?] = [], timeout: Duration? = nil, probe: CallProbe<PostgresResult> = .off
    ) async throws -> PostgresResult {
        let (loop, results) = (self.loop, self.results)
        let id = nextID.add(1, ordering: .relaxed).newValue
        let driver = pick(id)
        // The id is registered before the job is posted, so the result always finds it.
        return try await results.request(id: id, timeout: timeout) { id in
            do {
                try loop.post {
                    probe.start {
                        let deliver = probe.callback { result in results.complete(id, with: result) }
                        driver.enqueue(sql, parameters, id: id, probe: probe, done: deliver)
                    }
                }
            } catch {
                throw PostgresError.notConnected
            }
        }
    }

    /// The connection that is up with the fewest queries waiting; ties go round-robin from the
    /// request's id, so that queries that run one after another spread over the pool too. A lost
    /// connection is never picked while another is up (it has no queries waiting, and would take
    /// every new one only to fail it). The pick is counted at once, before the query reaches the loop.
    private func pick(_ id: UInt64) -> LibpqDriver {
        let count = drivers.count
        let start = Int(id % UInt64(count))
        var best = start
        var bestIsUp = drivers[start].isUp.load(ordering: .relaxed)
        for step in 1..<max(count, 1) {
            let index = (start + step) % count
            let isUp = drivers[index].isUp.load(ordering: .relaxed)
            if isUp && !bestIsUp {
                (best, bestIsUp) = (index, true)
            } else if isUp == bestIsUp,
                drivers[index].outstanding.load(ordering: .relaxed) < drivers[best].outstanding.load(ordering: .relaxed)
            {
                best = index
            }
        }
        drivers[best].outstanding.add(1, ordering: .relaxed)
        return drivers[best]
    }

    /// The notifications sent to `channel` from now on, for every iterator of the returned stream.
    ///
    /// All streams of one channel share one LISTEN: the first iterator to ask for a notification
    /// sends it, the last one to leave sends UNLISTEN. Each iterator gets every notification, in
    /// the server's order. A lost connection ends every iterator with
    /// ``PostgresError/connectionLost(_:)``.
    ///
    /// - Parameters:
    ///   - channel: The channel's exact name (case kept).
    ///   - buffering: How notifications wait for each iterator: see `StreamBuffering`.
    /// - Returns: The stream.
    public func notifications(channel: String, buffering: StreamBuffering = .unbounded)
        -> CallbackStream<PostgresNotification>
    {
        let subscription = channels.withLock { channels in
            if let existing = channels[channel] { return existing }
            let made = makeSubscription(channel)
            channels[channel] = made
            return made
        }
        return subscription.subscribe(buffering: buffering)
    }

    private func makeSubscription(_ channel: String) -> SharedSubscription<PostgresNotification> {
        // The scheduler, not the loop: a subscription must not keep the loop thread alive.
        let scheduler = loop.scheduler
        let listener = drivers[0]
        return SharedSubscription(of: PostgresNotification.self, restart: .automatic) { sink in
            let run = Self.runs.add(1, ordering: .relaxed).newValue
            do {
                try scheduler.post { listener.listen(channel: channel, run: run, sink: sink) }
            } catch {
                throw PostgresError.notConnected
            }
            return StreamControl(
                scheduler: scheduler, cancel: CancelHandle { listener.unlisten(channel: channel, run: run) })
        }
    }

    /// The consumers of `channel` now, over every stream ``notifications(channel:buffering:)`` returned.
    package func consumerCount(channel: String) -> Int {
        channels.withLock { $0[channel] }?.statistics.consumers ?? 0
    }

    /// The server processes serving the pool's connections (`PQbackendPID`), in pool order.
    package var backendPIDs: [Int32] { drivers.map { $0.backendPID.load(ordering: .relaxed) } }

    /// The loop thread every libpq call but `PQcancel` runs on, as a scheduler.
    package var scheduler: SDKScheduler { loop.scheduler }

    /// What the client has done so far.
    public var statistics: PostgresStatistics {
        let table = results.statistics
        var s = PostgresStatistics()
        s.statementsPerConnection = drivers.map { $0.statements.load(ordering: .relaxed) }
        s.statements = s.statementsPerConnection.reduce(0, +)
        s.pendingQueries = table.pending
        s.lateResults = table.lateReplies + table.unknownReplies
        s.withdrawnBeforeSending = counters.withdrawnBeforeSending.load(ordering: .relaxed)
        s.cancelRequests = counters.cancelRequests.load(ordering: .relaxed)
        s.cancelRequestsOnLoopThread = counters.cancelRequestsOnLoopThread.load(ordering: .relaxed)
        s.listens = counters.listens.load(ordering: .relaxed)
        s.unlistens = counters.unlistens.load(ordering: .relaxed)
        s.notifications = counters.notifications.load(ordering: .relaxed)
        s.connectionsLost = counters.connectionsLost.load(ordering: .relaxed)
        s.connectionsUp = drivers.filter { $0.isUp.load(ordering: .relaxed) }.count
        s.callsOffLoopThread = counters.callsOffLoopThread.load(ordering: .relaxed)
        return s
    }

    /// The version of libpq in use, e.g. 150020 for 15.20.
    public static var libraryVersion: Int {
        Libpq.version
    }

    /// Closes every connection on the loop thread. Pending queries and subscriptions fail with
    /// ``PostgresError/notConnected``, and later queries throw it. Cancel requests already sent
    /// finish first.
    public func shutdown() async {
        let drivers = self.drivers
        _ = try? await loop.run { for driver in drivers { driver.close() } }
        await cancelPool.shutdown()
    }
}

/// Where the result table's cancel goes, set once the loop exists.
///
/// Weak: the loop's watches hold the drivers, and a strong reference back from the table they
/// hold would keep the loop thread alive forever.
private final class WithdrawTarget: Sendable {
    private struct Target: Sendable {
        weak var loop: SDKLoop?
    }

    private let target = LockedValue(Target())

    var loop: SDKLoop? { target.withLock { $0.loop } }

    func attach(_ loop: SDKLoop) {
        target.withLock { $0.loop = loop }
    }
}
