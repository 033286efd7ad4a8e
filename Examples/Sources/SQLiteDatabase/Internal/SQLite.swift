// The one file of SQLiteDatabase that calls C (SQLite).
//
// It is the only place with Unmanaged, raw pointers and the @convention(c) progress handler.
// Everything above it speaks Swift values: Connection.query, QueryInterrupt, SQLiteError.
//
// Threading: a connection is opened on a pool thread the first time that thread runs a query, and
// only that thread uses it afterwards (SQLITE_OPEN_NOMUTEX: SQLite does not lock it for us). The
// one call made from another thread is sqlite3_interrupt, which SQLite allows from any thread.
//
// The interrupt is remembered: sqlite3_interrupt has no effect on a statement that starts after it
// (SQLite clears it when no statement runs), so a cancel landing between "the pool thread took the
// call" and the first sqlite3_step would be lost. Each query has a QueryInterrupt whose flag the
// query checks before stepping and whose progress handler checks while stepping.

import CSQLite
import LegacyBridge
import Synchronization

enum SQLite {
    /// SQLite's text for a result code.
    static func describe(_ code: Int32) -> String {
        String(cString: sqlite3_errstr(code))
    }
}

/// One SQLite connection, used by one pool thread. Closed when released.
///
/// `@unchecked Sendable`: only its pool thread calls `query`; `interrupt` is safe from any thread;
/// it is released after the pool has stopped or by the thread that opened it.
final class Connection: @unchecked Sendable {
    private let handle: OpaquePointer
    private let counters: DatabaseCounters

    /// Opens `path` for this thread's queries.
    init(path: String, counters: DatabaseCounters) throws(SQLiteError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let error = SQLiteError(code: status, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "")
            sqlite3_close_v2(handle)
            throw error
        }
        self.handle = handle
        self.counters = counters
        counters.connectionsOpened.increment()
    }

    deinit {
        sqlite3_close_v2(handle)
        counters.connectionsClosed.increment()
    }

    /// Asks the running statement to stop. Any thread.
    func interrupt() {
        sqlite3_interrupt(handle)
    }

    /// Runs `sql` and returns its rows, each column as text (nil for NULL), unless `interrupt`
    /// is requested before or while it steps.
    func query(_ sql: String, interrupt: QueryInterrupt, beforeFirstStep: () -> Void) throws(SQLiteError) -> [[String?]]
    {
        interrupt.attach(self)
        defer { interrupt.detach() }
        let context = Unmanaged.passUnretained(interrupt).toOpaque()
        sqlite3_progress_handler(handle, 100, progressTrampoline, context)
        defer { sqlite3_progress_handler(handle, 0, nil, nil) }

        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard prepared == SQLITE_OK, let statement else {
            throw SQLiteError(code: prepared, message: String(cString: sqlite3_errmsg(handle)))
        }
        counters.statementsPrepared.increment()
        defer {
            sqlite3_finalize(statement)
            counters.statementsFinalized.increment()
        }
        // An interrupt requested before this point found no running statement: its
        // sqlite3_interrupt is lost, the flag is not.
        guard !interrupt.isRequested else {
            counters.queriesInterrupted.increment()
            throw SQLiteError.interrupted
        }
        // One requested from here on may still find no running statement (sqlite3_step clears
        // SQLite's own interrupt when it starts one): the progress handler checks the flag.
        beforeFirstStep()
        var rows: [[String?]] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else {
                if status == SQLITE_INTERRUPT { counters.queriesInterrupted.increment() }
                throw SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)))
            }
            let columns = sqlite3_column_count(statement)
            rows.append(
                (0..<columns).map { column in
                    sqlite3_column_text(statement, column).map { String(cString: $0) }
                })
        }
        counters.queriesCompleted.increment()
        return rows
    }
}

/// SQLite's progress handler: a nonzero answer stops the statement with `SQLITE_INTERRUPT`.
/// Nonisolated and file-level, as every trampoline here.
private func progressTrampoline(_ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let context else { return 0 }
    return Unmanaged<QueryInterrupt>.fromOpaque(context).takeUnretainedValue().isRequested ? 1 : 0
}

/// One query's interrupt, remembered: requested at most once, from the cancel handle, and checked
/// by the query before and while it steps.
final class QueryInterrupt: Sendable {
    /// The connection the query runs on, while it runs: only interrupted through this box.
    private let state = LockedValue<Connection?>(nil)
    private let flag = Atomic<Bool>(false)
    private let counters: DatabaseCounters

    init(counters: DatabaseCounters) {
        self.counters = counters
        counters.queries.increment()
    }

    deinit {
        counters.queryStatesFreed.increment()
    }

    /// Whether the interrupt was requested. Read by the progress handler: no lock.
    var isRequested: Bool { flag.load(ordering: .acquiring) }

    /// The query runs on `connection` from now on (its pool thread).
    func attach(_ connection: Connection) {
        state.withLock { $0 = connection }
    }

    /// The query is over (its pool thread).
    func detach() {
        let connection = state.withLock { state -> Connection? in
            defer { state = nil }
            return state
        }
        _ = connection  // released outside the lock
    }

    /// Requests the interrupt: remembered for the query's next check, and passed to the
    /// statement running now, if any. The cancel handle calls it, on a job thread.
    func request() {
        counters.interruptsRequested.increment()
        flag.store(true, ordering: .releasing)
        let connection = state.withLock { $0 }
        // We must not call SQLite under the lock. The pool thread takes no other call before this
        // handle returns, so the connection still runs this query or nothing.
        connection?.interrupt()
    }
}
