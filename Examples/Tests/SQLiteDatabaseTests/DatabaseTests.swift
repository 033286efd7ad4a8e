import Dispatch
import Foundation
import LegacyBridge
import Synchronization
import Testing

@testable import SQLiteDatabase

/// A query that runs for minutes unless interrupted (a billion-row recursive count).
private let endless =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"
/// A query that takes a second or so: long enough to tell "interrupted" from "ran to the end".
private let long =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c"

/// A fresh database file with a table `t` of the numbers 1 to 100; removed by `remove()`.
private struct TemporaryDatabase {
    let directory: URL
    var path: String { directory.appendingPathComponent("test.sqlite").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func fill(_ database: Database) async throws {
        _ = try await database.query("CREATE TABLE t(x INTEGER)")
        _ = try await database.query(
            "INSERT INTO t WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100) SELECT x FROM c"
        )
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Polls until `condition` holds; the bound is only an upper limit for a hang.
private func eventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(120)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}

/// Checks that a closed database freed everything. A cancelled query's state is held by its cancel
/// handle, which may still be on its way to a job thread when `close()` returns: polled for.
private func expectBalanced(_ database: Database, sourceLocation: SourceLocation = #_sourceLocation) async {
    let s = database.statistics
    #expect(s.connectionsClosed == s.connectionsOpened, "every connection closed", sourceLocation: sourceLocation)
    #expect(s.statementsFinalized == s.statementsPrepared, "every statement finalized", sourceLocation: sourceLocation)
    let freed = await eventually { database.statistics.queryStatesFreed == database.statistics.queries }
    #expect(freed, "every query's state freed: \(database.statistics)", sourceLocation: sourceLocation)
}

@Suite("SQLite on an OffloadPool, one connection per pool thread")
struct DatabaseTests {
    @Test("a query returns its rows, and the database closes balanced")
    func queryReturnsRows() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let database = try Database(path: file.path, threads: 2)
        try await file.fill(database)
        let rows = try await database.query("SELECT count(*), sum(x) FROM t")
        #expect(rows == [["100", "5050"]])
        await database.close()
        await expectBalanced(database)
        let s = database.statistics
        #expect(s.interruptsRequested == 0)
    }

    @Test(
        "200 queries run while 200 endless ones are cancelled mid-flight: every cancelled caller gets CancellationError, no other query fails, nothing leaks"
    )
    func cancelManyMidFlight() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let started = Atomic<Int>(0)
        let threads = 4
        let database = try Database(path: file.path, threads: threads) { started.add(1, ordering: .relaxed) }
        try await file.fill(database)
        let before = started.load(ordering: .relaxed)
        // The endless ones first: the pool takes calls in order, so they fill every thread.
        let endlessTasks = (0..<200).map { _ in Task { try await database.query(endless) } }
        let shortTasks = (0..<200).map { _ in Task { try await database.query("SELECT count(*), sum(x) FROM t") } }
        // Every pool thread is stepping (or about to step) an endless query.
        #expect(await eventually { started.load(ordering: .relaxed) >= before + threads })
        for task in endlessTasks { task.cancel() }
        for task in endlessTasks {
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
        }
        for task in shortTasks {
            #expect(try await task.value == [["100", "5050"]])
        }
        await database.close()
        await expectBalanced(database)
        let s = database.statistics
        // A call the pool took just as its caller was cancelled gets its interrupt but never runs its
        // body, so there may be more interrupts than interrupted queries.
        #expect(s.queriesInterrupted >= threads, "the running endless queries were interrupted")
        #expect(s.queriesInterrupted <= s.interruptsRequested)
        #expect(s.queriesCompleted == 2 + 200, "the fill and the 200 short queries, nothing endless")
    }

    @Test("an interrupt that lands right before the first step is remembered: the query does not run to its end")
    func interruptBeforeFirstStep() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let reached = Atomic<Int>(0)
        let release = DispatchSemaphore(value: 0)
        let gated = Atomic<Bool>(false)
        let database = try Database(path: file.path, threads: 1) {
            // Holds the pool thread right before its first step, the flag already checked, until the
            // test released it: the interrupt then finds no running statement and SQLite forgets it.
            if gated.exchange(false, ordering: .acquiringAndReleasing) {
                reached.add(1, ordering: .releasing)
                release.wait()
            }
        }
        gated.store(true, ordering: .releasing)
        let task = Task { try await database.query(long) }
        #expect(await eventually { reached.load(ordering: .acquiring) == 1 })
        task.cancel()
        // The caller is back while the pool thread still waits before its first step.
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        // The interrupt ran, on a job thread, while no statement was stepping.
        #expect(await eventually { database.statistics.interruptsRequested == 1 })
        release.signal()
        await database.close()
        await expectBalanced(database)
        let s = database.statistics
        #expect(s.queriesInterrupted == 1)
        #expect(s.queriesCompleted == 0, "the interrupted query must not run to its end")
    }

    @Test("a timeout interrupts a running query and throws BridgeTimeoutError")
    func timeoutInterrupts() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let database = try Database(path: file.path, threads: 1)
        await #expect(throws: BridgeTimeoutError.self) { try await database.query(endless, timeout: .milliseconds(50)) }
        await database.close()
        await expectBalanced(database)
        let s = database.statistics
        #expect(s.queriesCompleted == 0)
    }

    @Test("a query on one connection is interrupted without failing another thread's query")
    func interruptIsPerConnection() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let started = Atomic<Int>(0)
        let database = try Database(path: file.path, threads: 2) { started.add(1, ordering: .relaxed) }
        let endlessTask = Task { try await database.query(endless) }
        let longTask = Task { try await database.query(long) }
        #expect(await eventually { started.load(ordering: .relaxed) == 2 })
        endlessTask.cancel()
        let result = await endlessTask.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(try await longTask.value == [["3000000"]])
        await database.close()
        await expectBalanced(database)
    }

    @Test("a bad statement fails with SQLite's error")
    func badStatement() async throws {
        let file = try TemporaryDatabase()
        defer { file.remove() }
        let database = try Database(path: file.path, threads: 1)
        await #expect(throws: SQLiteError.error) { try await database.query("SELEKT 1") }
        await database.close()
        await expectBalanced(database)
    }
}
