import LegacyBridge

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs SQLite queries from async code, on an `OffloadPool`, with one connection per pool thread.
///
/// `sqlite3_step` blocks. A `Database` runs each query on a thread of its `OffloadPool`, never on
/// the cooperative pool, and gives every pool thread a connection of its own: a connection is
/// never shared across threads, and interrupting one query never touches another's connection.
///
/// ```swift
/// let database = try Database(path: path, threads: 4)
/// let rows = try await database.query("SELECT name FROM users", timeout: .seconds(2))
/// await database.close()
/// ```
///
/// Cancelling the calling task, or the timeout, throws at once and interrupts the query:
/// - A query still waiting for a pool thread never runs.
/// - A running query's interrupt is remembered and checked before the first `sqlite3_step` and,
///   through `sqlite3_progress_handler`, while it steps. It also calls `sqlite3_interrupt` on that
///   query's connection. An interrupt that lands before the first step is not lost.
/// - The interrupt usually runs after the cancelled caller has resumed, on one of LegacyBridge's
///   job threads. The pool thread takes its next query only once the interrupt has returned.
public final class Database: Sendable {
    private let pool: OffloadPool
    private let connections: ConnectionTable
    private let counters = DatabaseCounters()
    private let beforeFirstStep: @Sendable () -> Void

    /// Opens the database at `path` for queries on `threads` pool threads.
    ///
    /// - Parameters:
    ///   - path: A file path, created if missing. Every pool thread opens it on its first query.
    ///   - threads: How many queries run at once.
    /// - Throws: `OffloadError` if the pool cannot be created.
    public convenience init(path: String, threads: Int = 4) throws {
        try self.init(path: path, threads: threads, beforeFirstStep: {})
    }

    /// The tests' seam: `beforeFirstStep` runs on the pool thread right before the first
    /// `sqlite3_step`, after the flag was checked.
    init(path: String, threads: Int, beforeFirstStep: @escaping @Sendable () -> Void) throws {
        self.pool = try OffloadPool(threads: threads, name: "sqlite")
        self.connections = ConnectionTable(path: path, counters: counters)
        self.beforeFirstStep = beforeFirstStep
    }

    /// Runs `sql` and returns its rows.
    ///
    /// - Parameters:
    ///   - sql: One SQL statement.
    ///   - timeout: How long to wait, measured from the call; nil (the default) waits as long as
    ///     the query takes.
    ///   - isolation: The caller's isolation; leave the default.
    /// - Returns: The rows, each column as text, nil for NULL.
    /// - Throws: ``SQLiteError`` from SQLite, `CancellationError`, `BridgeTimeoutError`, or
    ///   `OffloadError` once the database is closed.
    public func query(
        _ sql: String, timeout: Duration? = nil, isolation: isolated (any Actor)? = #isolation
    ) async throws -> [[String?]] {
        let interrupt = QueryInterrupt(counters: counters)
        let connections = self.connections
        let beforeFirstStep = self.beforeFirstStep
        return try await pool.run(isolation: isolation, timeout: timeout, cancel: CancelHandle { interrupt.request() })
        {
            let connection = try connections.forCurrentThread()
            return try connection.query(sql, interrupt: interrupt, beforeFirstStep: beforeFirstStep)
        }
    }

    /// Waits for the queries already accepted, stops the pool and closes every connection.
    public func close() async {
        await pool.shutdown()
        connections.closeAll()
    }

    /// What the database has done so far.
    public var statistics: DatabaseStatistics {
        counters.snapshot
    }
}

/// The pool threads' connections, each opened by its thread on first use.
final class ConnectionTable: Sendable {
    private let path: String
    private let counters: DatabaseCounters
    private let byThread = LockedValue<[UInt: Connection]>([:])

    init(path: String, counters: DatabaseCounters) {
        self.path = path
        self.counters = counters
    }

    /// The calling pool thread's connection, opened now if it has none.
    func forCurrentThread() throws -> Connection {
        // A pool thread lives as long as the pool, so its id is never reused meanwhile.
        let key = currentThreadKey()
        if let connection = byThread.withLock({ $0[key] }) { return connection }
        // Opened outside the lock: only this thread asks for this key.
        let connection = try Connection(path: path, counters: counters)
        byThread.withLock { $0[key] = connection }
        return connection
    }

    /// Releases every connection, which closes it. After the pool stopped: nothing uses them.
    func closeAll() {
        let all = byThread.withLock { table -> [UInt: Connection] in
            defer { table = [:] }
            return table
        }
        _ = all  // released outside the lock
    }
}

/// The calling thread's id, as a dictionary key.
private func currentThreadKey() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}
