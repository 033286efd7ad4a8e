import LegacyBridge

// `--only keyed`: one request through `PendingRequests` (registered under its id, completed by
// id) against one `withCallback` call (completed through its `Completion`), with the reply made
// inside `start` on the caller's thread and from a worker thread, like the oneshot and worker
// sections. Every request's value is summed and checked, and the table must end empty.

/// Figures of the `keyed` section.
struct BenchKeyedReport: Encodable {
    /// The reply made inside `start`.
    var inlineWithCallbackNs = 0.0
    var inlineKeyedNs = 0.0
    /// The reply made by a worker thread.
    var workerWithCallbackNs = 0.0
    var workerKeyedNs = 0.0
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

    /// Every value arrived once, and nothing is left pending or was refused.
    private static func check(sum: Int, n: Int, requests: PendingRequests<Int, Int>? = nil) {
        precondition(sum == n * (n - 1) / 2, "keyed bench: wrong values delivered")
        if let statistics = requests?.statistics {
            precondition(
                statistics.pending == 0 && statistics.refused == 0 && statistics.unknownReplies == 0
                    && statistics.duplicateReplies == 0,
                "keyed bench: the table is not clean: \(statistics)")
        }
        benchConsume(sum)
    }

    static func inlineVariants(requests: PendingRequests<Int, Int>) -> [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "withCallback") { try await inlineWithCallback($0) },
            BenchBatchVariant(name: "PendingRequests") { try await inlineKeyed($0, requests: requests) },
        ]
    }

    static func workerVariants(requests: PendingRequests<Int, Int>, worker: BenchThread) -> [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "withCallback") { try await BenchOneShotWorker.bridge($0, worker: worker) },
            BenchBatchVariant(name: "PendingRequests") {
                try await workerKeyed($0, requests: requests, worker: worker)
            },
        ]
    }
}

extension BenchKeyed {
    /// Upper bounds on PendingRequests / withCallback. A keyed request adds a table insert and
    /// removal under one more lock to the gate, so a few times an inline `withCallback` and close
    /// to it when a thread hop dominates are the goals; Benchmarks.md has the measured figures.
    static let inlineTarget = 4.0
    static let workerTarget = 1.5
}
