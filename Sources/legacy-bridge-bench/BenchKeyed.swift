import ToolSupport
import LegacyBridge

// `--only keyed`: one request through `PendingRequests` (registered under its id, completed by
// id) against the hand-written table users keep (`HandWrittenRequestTable`: continuations by id
// behind a lock) and against one `withCallback` call (completed through its `Completion`), with
// the reply made inside `start` on the caller's thread and from a worker thread, like the oneshot
// and worker sections. With 1, 100 and 10,000 requests outstanding: the others are parked in
// both tables (under ids no batch uses) while a batch runs. Every request's value is summed and
// checked, and only the parked requests may be left in the table.

/// Figures of the `keyed` section.
struct BenchKeyedReport: Encodable {
    struct Load: Encodable {
        /// Requests outstanding while a batch runs, the measured one included.
        var outstanding = 0
        var inlineIdiomNs = 0.0
        var inlineKeyedNs = 0.0
        var workerIdiomNs = 0.0
        var workerKeyedNs = 0.0
    }

    /// The reply made inside `start`, one outstanding.
    var inlineWithCallbackNs = 0.0
    var inlineKeyedNs = 0.0
    /// The reply made by a worker thread, one outstanding.
    var workerWithCallbackNs = 0.0
    var workerKeyedNs = 0.0
    var loads: [Load] = []
    var idiomBytesPerPending = 0.0
    var keyedBytesPerPending = 0.0
    var rounds = 0
}

enum BenchKeyed {
    /// `withCallback`, completed inside `start`.
    static func inlineWithCallback(_ n: Int) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await withCallback { (completion: Completion<Int>) in
                    completion.succeed(i)
                    return nil
                }
            }
        }
        check(sum: sum, n: n)
        return ns
    }

    /// `PendingRequests.request(id:)`, completed by id inside `start`: a synchronous reply.
    static func inlineKeyed(_ n: Int, requests: PendingRequests<Int, Int>) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await requests.request(id: i) { id in
                    precondition(requests.complete(id, with: .success(id)), "keyed bench: request \(id) not found")
                }
            }
        }
        check(sum: sum, n: n, requests: requests)
        return ns
    }

    /// `PendingRequests.request(id:)`, completed by id from the worker thread.
    static func workerKeyed(_ n: Int, requests: PendingRequests<Int, Int>, worker: BenchThread) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await requests.request(id: i) { id in
                    worker.submit(
                        .run {
                            precondition(
                                requests.complete(id, with: .success(id)), "keyed bench: request \(id) not found")
                        })
                }
                worker.confirmJobsDone()
            }
        }
        check(sum: sum, n: n, requests: requests)
        return ns
    }

    /// The hand-written table, completed by id inside `start`.
    static func inlineIdiom(_ n: Int, table: HandWrittenRequestTable) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await table.request(id: i) { id in
                    precondition(table.complete(id, with: .success(id)), "keyed bench: request \(id) not found")
                }
            }
        }
        check(sum: sum, n: n)
        return ns
    }

    /// The hand-written table, completed by id from the worker thread.
    static func workerIdiom(_ n: Int, table: HandWrittenRequestTable, worker: BenchThread) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await table.request(id: i) { id in
                    worker.submit(
                        .run {
                            precondition(table.complete(id, with: .success(id)), "keyed bench: request \(id) not found")
                        })
                }
                worker.confirmJobsDone()
            }
        }
        check(sum: sum, n: n)
        return ns
    }

    /// Every value arrived once, and nothing but the parked requests is left pending, and nothing
    /// was refused.
    private static func check(sum: Int, n: Int, requests: PendingRequests<Int, Int>? = nil) {
        precondition(sum == n * (n - 1) / 2, "keyed bench: wrong values delivered")
        if let statistics = requests?.statistics {
            precondition(
                statistics.pending == parked.load(ordering: .relaxed) && statistics.refused == 0
                    && statistics.unknownReplies == 0 && statistics.duplicateReplies == 0,
                "keyed bench: the table is not clean: \(statistics)")
        }
        benchConsume(sum)
    }

    /// How many requests `park` left in each table.
    static let parked = AtomicCell<Int>(0)

    /// Parks `count` requests in both tables, under negative ids (batches use 0 ..< n), until
    /// the returned closure fails them all and waits for their callers.
    static func park(
        _ count: Int, in requests: PendingRequests<Int, Int>, and table: HandWrittenRequestTable
    ) async -> @Sendable () async -> Void {
        struct Parked: Error {}
        let callers = (0..<count).flatMap { index in
            [
                Task { _ = try? await requests.request(id: -1 - index) { _ in } },
                Task { _ = try? await table.request(id: -1 - index) { _ in } },
            ]
        }
        await BenchShared.waitUntil { requests.statistics.pending == count && table.pending == count }
        parked.store(count, ordering: .relaxed)
        return {
            requests.failAll(Parked())
            table.failAll(Parked())
            for caller in callers { await caller.value }
            parked.store(0, ordering: .relaxed)
        }
    }

    /// The hand-written table and PendingRequests, then `withCallback` if asked.
    static func inlineVariants(
        requests: PendingRequests<Int, Int>, table: HandWrittenRequestTable, withCallback: Bool
    ) -> [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "hand-written table") { try await inlineIdiom($0, table: table) },
            BenchBatchVariant(name: "PendingRequests") { try await inlineKeyed($0, requests: requests) },
        ] + (withCallback ? [BenchBatchVariant(name: "withCallback") { try await inlineWithCallback($0) }] : [])
    }

    static func workerVariants(
        requests: PendingRequests<Int, Int>, table: HandWrittenRequestTable, worker: BenchThread, withCallback: Bool
    ) -> [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "hand-written table") { try await workerIdiom($0, table: table, worker: worker) },
            BenchBatchVariant(name: "PendingRequests") {
                try await workerKeyed($0, requests: requests, worker: worker)
            },
        ]
            + (withCallback
                ? [
                    BenchBatchVariant(name: "withCallback") { try await BenchOneShotWorker.bridge($0, worker: worker) }
                ] : [])
    }
}

extension BenchKeyed {
    /// Upper bounds on PendingRequests / withCallback. A keyed request adds a table insert and
    /// removal under one more lock to the gate, so a few times an inline `withCallback` and close
    /// to it when a thread hop dominates are the goals; Benchmarks.md has the measured figures.
    static let inlineTarget = 4.0
    static let workerTarget = 1.5
    /// Upper bound on PendingRequests / the hand-written table (issue: no slower than the idiom).
    static let idiomTarget = 1.0
    /// Upper bound on PendingRequests' cost per request with 10,000 outstanding / with one.
    static let flatnessTarget = 1.5
    /// Upper bound on bytes per pending request, PendingRequests / the hand-written table.
    static let memoryTarget = 1.2
    /// Requests outstanding in the runs.
    static let loads = [1, 100, 10_000]
}
