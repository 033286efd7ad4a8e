import LegacyBridge
import ToolSupport

// `--only latest`: n calls, each made by a task of its own, each superseding the one before and
// cancelling its SDK call; the SDK (a pthread, `BenchCallSDK`) answers only the newest, once
// every other caller is back. LatestWins against a stored Task cancelled and replaced on each call.
// Every caller's outcome is checked: one value (the newest call's), n - 1 superseded, no SDK call
// left open.
//
// `--only coalesced`: n calls over k keys made at once, each its own task; the SDK answers each
// call from its thread as soon as it gets to it, so callers that arrive while a key's call is in
// flight share it. CoalescedCalls against a `[Key: Task]` dictionary. Every value is checked
// against its key, and no SDK call is left open.

/// Figures of the `latest` and `coalesced` sections.
struct BenchSupersedingReport: Encodable {
    var latestNs = 0.0
    var latestIdiomNs = 0.0
    var latestCalls = 0
    var coalescedNs = 0.0
    var coalescedIdiomNs = 0.0
    var coalescedCalls = 0
    var coalescedKeys = 0
    /// Callers per SDK call, median of the rounds (how much sharing the run saw).
    var coalescedSharing = 0.0
    var coalescedIdiomSharing = 0.0
    var rounds = 0
}

enum BenchLatest {
    /// Ids of the SDK calls, distinct across batches.
    static let nextBase = AtomicCell<Int>(0)

    /// What the callers of one batch saw.
    struct Outcomes: Sendable {
        var values = 0
        var superseded = 0
    }

    /// `n` supersessions through `LatestWins`; ns per call.
    static func primitive(_ n: Int, sdk: BenchCallSDK) async -> Double {
        let latest = LatestWins<Int>()
        return await batch(n, sdk: sdk) { id in
            do {
                let value = try await latest.run { completion in
                    sdk.start(id) { _ = completion($0) }
                    return CancelHandle { sdk.cancel(id) }
                }
                precondition(value == id, "latest bench: run \(id) returned \(value)")
                return true
            } catch is SupersededError {
                return false
            } catch {
                preconditionFailure("latest bench: a run threw \(error)")
            }
        }
    }

    /// `n` supersessions through the stored-Task idiom; ns per call.
    static func idiom(_ n: Int, sdk: BenchCallSDK) async -> Double {
        let latest = HandWrittenLatestWins()
        return await batch(n, sdk: sdk) { id in
            do {
                let value = try await latest.run {
                    try await withTaskCancellationHandler {
                        try await withCheckedThrowingContinuation { continuation in
                            sdk.start(id) { continuation.resume(with: $0) }
                        }
                    } onCancel: {
                        sdk.cancel(id)
                    }
                }
                precondition(value == id, "latest bench: run \(id) returned \(value)")
                return true
            } catch is CancellationError {
                return false
            } catch {
                preconditionFailure("latest bench: a run threw \(error)")
            }
        }
    }

    /// Starts `n` callers, one task each, in order; once all but the newest are back the SDK
    /// answers. `call(id)` returns whether its caller got a value (false: superseded).
    private static func batch(
        _ n: Int, sdk: BenchCallSDK, _ call: @escaping @Sendable (Int) async -> Bool
    ) async -> Double {
        precondition(n >= 2, "latest bench: a batch needs two calls")
        sdk.holdCalls()
        let base = nextBase.add(n, ordering: .relaxed).oldValue
        let ended = AtomicCell<Int>(0)
        let valuesSeen = AtomicCell<Int>(0)
        let allButNewest = BenchSignal()
        let ns = await benchTimePerOperation(n) {
            // Unstructured tasks awaited in order: a task group removes each child that ends from
            // its list by a walk, quadratic at 100,000 children ending out of order.
            let callers = (0..<n).map { index in
                Task {
                    if await call(base + index) { valuesSeen.add(1, ordering: .relaxed) }
                    if ended.add(1, ordering: .acquiringAndReleasing).newValue == n - 1 { allButNewest.fire() }
                }
            }
            await allButNewest.wait()
            sdk.answerFromNowOn()
            for caller in callers { await caller.value }
        }
        precondition(valuesSeen.load(ordering: .acquiring) == 1, "latest bench: not exactly one caller got a value")
        // A superseded run's cancel handle runs on a job thread after its caller was resumed: on a
        // busy machine some are still on their way when every caller is back. Timing is done.
        let open = await openCalls(sdk)
        precondition(open == 0, "latest bench: \(open) SDK calls left open 60 s after every caller was back")
        return ns
    }

    /// The SDK calls still open once they stop closing, or after 60 s.
    static func openCalls(_ sdk: BenchCallSDK) async -> Int {
        let deadline = ContinuousClock.now + .seconds(60)
        while sdk.live > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
        }
        return sdk.live
    }

    /// Upper bound on LatestWins / the stored-Task idiom, per supersession.
    static let target = 1.0
}

enum BenchCoalesced {
    /// `n` calls over `keys` keys through `CoalescedCalls`; ns per call and callers per SDK call.
    static func primitive(_ n: Int, keys: Int, sdk: BenchCallSDK) async -> (ns: Double, sharing: Double) {
        let calls = CoalescedCalls<Int, Int>()
        return await batch(n, keys: keys, sdk: sdk) { key in
            try await calls.value(for: key) { completion in
                sdk.start(key) { _ = completion($0) }
                return CancelHandle { sdk.cancel(key) }
            }
        }
    }

    /// `n` calls over `keys` keys through the `[Key: Task]` idiom.
    static func idiom(_ n: Int, keys: Int, sdk: BenchCallSDK) async -> (ns: Double, sharing: Double) {
        let calls = HandWrittenCoalescer()
        return await batch(n, keys: keys, sdk: sdk) { key in
            try await calls.value(for: key) {
                try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        sdk.start(key) { continuation.resume(with: $0) }
                    }
                } onCancel: {
                    sdk.cancel(key)
                }
            }
        }
    }

    /// The value the SDK gives call `key`.
    static func expected(for key: Int) -> Int { key &* 2 &+ 1 }

    private static func batch(
        _ n: Int, keys: Int, sdk: BenchCallSDK, _ call: @escaping @Sendable (Int) async throws -> Int
    ) async -> (ns: Double, sharing: Double) {
        let startedBefore = sdk.snapshot.started
        let ns = await benchTimePerOperation(n) {
            // Unstructured tasks awaited in order, as in the latest section.
            let callers = (0..<n).map { index in
                let key = index % keys
                return Task {
                    do {
                        let value = try await call(key)
                        precondition(value == expected(for: key), "coalesced bench: key \(key) got \(value)")
                    } catch {
                        preconditionFailure("coalesced bench: a call threw \(error)")
                    }
                }
            }
            for caller in callers { await caller.value }
        }
        let open = await BenchLatest.openCalls(sdk)
        precondition(open == 0, "coalesced bench: \(open) SDK calls left open 60 s after every caller was back")
        let sdkCalls = sdk.snapshot.started - startedBefore
        return (ns, Double(n) / Double(max(sdkCalls, 1)))
    }

    /// Upper bound on CoalescedCalls / the `[Key: Task]` idiom, per call.
    static let target = 1.0
}
