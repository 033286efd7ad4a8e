import Foundation
import LegacyBridge
import LegacySimulator

// One-shot calls, each batch a loop of `n` awaited calls whose results are summed and consumed.
// The nonisolated batches run on the global executor (plain nonisolated async functions); the
// @MainActor ones on the main actor, which for this async @main program is the main queue.

/// Callback made synchronously inside start.
enum BenchOneShotSync {
    // MARK: nonisolated

    /// Floor: a bare continuation resumed before the closure returns.
    static func floor(_ n: Int) async -> Double {
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= await withUnsafeContinuation { $0.resume(returning: i) }
            }
        }
        benchConsume(sum)
        return ns
    }

    /// The reference gate (NSLock + checked continuation + cancellation handler).
    static func referenceGate(_ n: Int) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await referenceBridge { complete in complete(.success(i)) }
            }
        }
        benchConsume(sum)
        return ns
    }

    /// `withCallback`, completion called inside start.
    static func bridge(_ n: Int) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await withCallback { (completion: Completion<Int>) in
                    completion.succeed(i)
                    return nil
                }
            }
        }
        benchConsume(sum)
        return ns
    }

    // MARK: @MainActor

    @MainActor
    static func floorMainActor(_ n: Int) async -> Double {
        dispatchPrecondition(condition: .onQueue(.main))  // the main actor is the main queue here
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= await withUnsafeContinuation { $0.resume(returning: i) }
            }
        }
        benchConsume(sum)
        return ns
    }

    @MainActor
    static func referenceGateMainActor(_ n: Int) async throws -> Double {
        dispatchPrecondition(condition: .onQueue(.main))  // the main actor is the main queue here
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await referenceBridge { complete in complete(.success(i)) }
            }
        }
        benchConsume(sum)
        return ns
    }

    @MainActor
    static func bridgeMainActor(_ n: Int) async throws -> Double {
        dispatchPrecondition(condition: .onQueue(.main))  // the main actor is the main queue here
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await withCallback { (completion: Completion<Int>) in
                    completion.succeed(i)
                    return nil
                }
            }
        }
        benchConsume(sum)
        return ns
    }

    static var variants: [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "floor") { await floor($0) },
            BenchBatchVariant(name: "reference gate") { try await referenceGate($0) },
            BenchBatchVariant(name: "withCallback") { try await bridge($0) },
            BenchBatchVariant(name: "floor @MainActor") { await floorMainActor($0) },
            BenchBatchVariant(name: "reference gate @MainActor") { try await referenceGateMainActor($0) },
            BenchBatchVariant(name: "withCallback @MainActor") { try await bridgeMainActor($0) },
        ]
    }
}

/// Callback made later, from a worker thread.
enum BenchOneShotWorker {
    /// Floor: a bare continuation, resumed by the worker thread.
    static func floor(_ n: Int, worker: BenchThread) async -> Double {
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= await withUnsafeContinuation { worker.submit(.resume($0, i)) }
                worker.confirmJobsDone()
            }
        }
        benchConsume(sum)
        return ns
    }

    /// `withCallback`, completed by the same worker thread through the same queue.
    static func bridge(_ n: Int, worker: BenchThread) async throws -> Double {
        var sum = 0
        let ns = try await benchTimePerOperation(n) {
            for i in 0..<n {
                sum &+= try await withCallback { (completion: Completion<Int>) in
                    worker.submit(.complete(completion, i))
                    return nil
                }
                worker.confirmJobsDone()
            }
        }
        benchConsume(sum)
        return ns
    }

    /// Floor of the C round trip: a bare continuation resumed from the SDK's worker by a C trampoline.
    static func sdkFloor(_ n: Int, sdk: SDKClient) async -> Double {
        var sum = 0
        let ns = await benchTimePerOperation(n) {
            for _ in 0..<n {
                let request = SDKBareRequest()
                let number = await withUnsafeContinuation {
                    SDK.startBareRequest(client: sdk, path: "bench", request, resuming: $0)
                }
                sum &+= Int(truncatingIfNeeded: number)
                request.confirmReleased()
            }
        }
        benchConsume(sum)
        return ns
    }

    /// `LegacyClient.fetch`: `withCallback` over the SDK layer and the C round trip.
    static func fetch(_ n: Int, client: LegacyClient) async throws -> Double {
        var sum = 0
        let request = FetchRequest(path: "bench")
        let ns = try await benchTimePerOperation(n) {
            for _ in 0..<n {
                sum &+= Int(truncatingIfNeeded: try await client.fetch(request).requestID)
            }
        }
        benchConsume(sum)
        return ns
    }

    static func variants(worker: BenchThread, sdk: SDKClient, client: LegacyClient) -> [BenchBatchVariant] {
        [
            BenchBatchVariant(name: "floor") { await floor($0, worker: worker) },
            BenchBatchVariant(name: "withCallback") { try await bridge($0, worker: worker) },
            BenchBatchVariant(name: "SDK floor") { await sdkFloor($0, sdk: sdk) },
            BenchBatchVariant(name: "LegacyClient.fetch") { try await fetch($0, client: client) },
        ]
    }
}
