import Foundation
import LegacyBridge
import LoopbackFixtures
import PostgresClient
import Testing

/// Every test starts its own PostgreSQL server on 127.0.0.1 and kills it at the end: nothing
/// leaves the machine. Queries carry a generous timeout, so a broken contract fails instead of
/// hanging.
@Suite("libpq client on the descriptor loop: a pool, PQcancel off the loop, LISTEN/NOTIFY shared")
struct PostgresClientTests {
    static let bound = Duration.seconds(60)

    static func connect(_ server: ServerProcess, connections: Int = 4, statementTimeout: Duration? = nil)
        async throws -> PostgresClient
    {
        try await PostgresClient.connect(
            .init(
                port: server.port, user: "postgres", database: "postgres", statementTimeout: statementTimeout,
                connections: connections))
    }

    @Test("a query returns its columns, rows (NULL as nil), command tag; a bad statement throws the server's SQLSTATE")
    func results() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 1)
        let result = try await db.query(
            "SELECT $1::int + 1 AS next, $2::text AS nothing, 'a''b' AS quoted", ["41", nil], timeout: Self.bound)
        #expect(result.columns == ["next", "nothing", "quoted"])
        #expect(result.rows == [["42", nil, "a'b"]])
        #expect(result.commandTag == "SELECT 1")
        try await db.query("CREATE TABLE items (id int PRIMARY KEY)", timeout: Self.bound)
        #expect(try await db.query("INSERT INTO items VALUES (1), (2)", timeout: Self.bound).commandTag == "INSERT 0 2")
        await #expect(throws: PostgresError.self) {
            try await db.query("SELEKT 1", timeout: Self.bound)
        }
        do {
            try await db.query("INSERT INTO items VALUES (1)", timeout: Self.bound)
            Issue.record("a duplicate key was accepted")
        } catch PostgresError.server(let state, _) {
            #expect(state == "23505", "unique_violation")
        }
        #expect(db.statistics.callsOffLoopThread == 0)
        await db.shutdown()
        await server.stop()
    }

    @Test("200 concurrent queries over a pool of 4 connections each get their own result, and every connection works")
    func pool() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 4)
        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let result = try await db.query("SELECT $1::int * 2, pg_sleep(0.001)", ["\(index)"], timeout: Self.bound)
                    return result.rows.first?.first == "\(index * 2)" ? 0 : 1
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(mismatches == 0)
        let s = db.statistics
        #expect(s.statements == 200, "\(s)")
        #expect(s.statementsPerConnection.count == 4 && s.statementsPerConnection.allSatisfy { $0 > 0 }, "\(s)")
        #expect(s.pendingQueries == 0)
        #expect(s.callsOffLoopThread == 0)
        await db.shutdown()
        await server.stop()
    }

    @Test("a running query that times out is cancelled on the server by PQcancel, off the loop; the connection goes on")
    func cancelRunning() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 1)
        await #expect(throws: BridgeTimeoutError.self) {
            try await db.query("SELECT pg_sleep(600)", timeout: .milliseconds(200))
        }
        // One connection: this query runs only once the server stopped the sleep (600 s > bound).
        #expect(try await db.query("SELECT 7", timeout: Self.bound).rows == [["7"]])
        let s = db.statistics
        #expect(s.cancelRequests == 1, "\(s)")
        #expect(s.cancelRequestsOnLoopThread == 0, "\(s)")
        #expect(s.lateResults == 1, "the cancelled sleep's error reached no caller: \(s)")
        await db.shutdown()
        await server.stop()
    }

    @Test(
        "a cancel request for a query that ends by itself meanwhile never stops the next caller's query on that connection (40 rounds)"
    )
    func cancelNeverHitsTheNextQuery() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 1)
        var hit = 0
        for round in 0..<40 {
            // The caller leaves about when the statement ends by itself, so that the cancel
            // request is often still on its way when the connection is free again.
            let leave = Duration.milliseconds(10 + round % 20)
            _ = try? await db.query("SELECT pg_sleep(0.02)", timeout: leave)
            do {
                _ = try await db.query("SELECT pg_sleep(0.05), \(round)", timeout: Self.bound)
            } catch PostgresError.server(let state, _) where state == "57014" {
                hit += 1
            }
        }
        #expect(hit == 0, "the next caller's query was cancelled in \(hit) of 40 rounds")
        let s = db.statistics
        #expect(s.cancelRequests > 0, "no round raced a cancel against its statement's end: \(s)")
        await db.shutdown()
        await server.stop()
    }

    @Test("a lost connection leaves the pick: every later query goes to the connections that are up, and none fails")
    func lostConnectionLeavesThePick() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 4)
        // One of the pool's backends terminated by a second client.
        let admin = try await Self.connect(server, connections: 1)
        let pids = try await admin.query(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            timeout: Self.bound
        ).rows.compactMap { $0.first ?? nil }
        #expect(pids.count == 4, "\(pids)")
        let victim = try #require(pids.first)
        _ = try await admin.query("SELECT pg_terminate_backend(\(victim))", timeout: Self.bound)
        await admin.shutdown()
        #expect(await eventually { db.statistics.connectionsLost == 1 }, "\(db.statistics)")
        #expect(db.statistics.connectionsUp == 3)
        var failed = 0
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for value in 0..<180 {
                group.addTask {
                    do {
                        return try await db.query("SELECT \(value)", timeout: Self.bound).rows == [["\(value)"]]
                    } catch {
                        return false
                    }
                }
            }
            for try await ok in group where !ok { failed += 1 }
        }
        #expect(failed == 0, "\(failed) of 180 queries failed after one connection of four was lost: \(db.statistics)")
        await db.shutdown()
        await server.stop()
    }

    @Test("a queued query whose caller is cancelled leaves the queue unsent; no cancel request is made for it")
    func withdrawQueued() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 1)
        let running = Task { try await db.query("SELECT pg_sleep(600)", timeout: Self.bound) }
        #expect(await eventually { db.statistics.statements == 1 }, "\(db.statistics)")
        let queued = Task { try await db.query("SELECT 'never'", timeout: Self.bound) }
        #expect(await eventually { db.statistics.pendingQueries == 2 }, "\(db.statistics)")
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        #expect(await eventually { db.statistics.withdrawnBeforeSending == 1 }, "\(db.statistics)")
        running.cancel()
        await #expect(throws: CancellationError.self) { try await running.value }
        #expect(try await db.query("SELECT 8", timeout: Self.bound).rows == [["8"]])
        let s = db.statistics
        #expect(s.statements == 2, "the withdrawn query was never sent: \(s)")
        #expect(s.cancelRequests == 1, "\(s)")
        await db.shutdown()
        await server.stop()
    }

    @Test("statement_timeout fails a long statement with SQLSTATE 57014, and the connection goes on")
    func statementTimeout() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 1, statementTimeout: .milliseconds(100))
        do {
            try await db.query("SELECT pg_sleep(600)", timeout: Self.bound)
            Issue.record("the statement outlived statement_timeout")
        } catch PostgresError.server(let state, let message) {
            #expect(state == PostgresError.queryCanceledState)
            #expect(message.contains("statement timeout"), "\(message)")
        }
        #expect(try await db.query("SELECT 9", timeout: Self.bound).rows == [["9"]])
        #expect(db.statistics.cancelRequests == 0)
        await db.shutdown()
        await server.stop()
    }

    @Test("two consumers of one channel each get every notification, in order, over one LISTEN; the last to leave unlistens")
    func sharedChannel() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 2)
        let count = 20
        let consumers = (0..<2).map { _ in
            Task { () throws -> [String] in
                var payloads: [String] = []
                for try await note in db.notifications(channel: "Jobs") {
                    payloads.append(note.payload)
                    if payloads.count == count { break }
                }
                return payloads
            }
        }
        guard
            await eventually({ db.consumerCount(channel: "Jobs") == 2 && db.statistics.listens == 1 })
        else {
            Issue.record("the two consumers did not join one LISTEN: \(db.statistics)")
            for consumer in consumers { consumer.cancel() }
            await server.stop()
            return
        }
        for index in 0..<count {
            try await db.query("SELECT pg_notify('Jobs', $1)", ["\(index)"], timeout: Self.bound)
        }
        let expected = (0..<count).map { "\($0)" }
        for consumer in consumers {
            #expect(try await consumer.value == expected)
        }
        #expect(await eventually { db.statistics.unlistens == 1 }, "\(db.statistics)")
        let s = db.statistics
        #expect(s.listens == 1, "\(s)")
        #expect(s.notifications == count, "\(s)")
        await db.shutdown()
        await server.stop()
    }

    @Test("the server killed fails every running and queued query and the listeners with connectionLost, and later queries")
    func connectionLoss() async throws {
        let server = try await ServerProcess.startPostgres()
        let db = try await Self.connect(server, connections: 2)
        let listener = Task { () throws -> Int in
            var count = 0
            for try await _ in db.notifications(channel: "lost") { count += 1 }
            return count
        }
        #expect(await eventually { db.statistics.listens == 1 }, "\(db.statistics)")
        let queries = (0..<6).map { _ in Task { try await db.query("SELECT pg_sleep(600)", timeout: Self.bound) } }
        #expect(await eventually { db.statistics.pendingQueries == 6 }, "\(db.statistics)")
        server.kill()
        for query in queries {
            await #expect {
                try await query.value
            } throws: { error in
                guard case PostgresError.connectionLost = error else { return false }
                return true
            }
        }
        await #expect {
            try await listener.value
        } throws: { error in
            guard case PostgresError.connectionLost = error else { return false }
            return true
        }
        await #expect {
            try await db.query("SELECT 1", timeout: Self.bound)
        } throws: { error in
            guard case PostgresError.connectionLost = error else { return false }
            return true
        }
        let s = db.statistics
        #expect(s.connectionsLost == 2, "\(s)")
        #expect(s.pendingQueries == 0, "\(s)")
        await db.shutdown()
        await server.stop()
    }

    @Test("connecting to a port nobody listens on throws connectFailed with libpq's message")
    func refused() async throws {
        let port = try freeLoopbackPort()
        await #expect {
            _ = try await PostgresClient.connect(.init(port: port, user: "postgres", database: "postgres", connections: 2))
        } throws: { error in
            guard case PostgresError.connectFailed(let message) = error else { return false }
            return message.lowercased().contains("refused")
        }
    }
}
