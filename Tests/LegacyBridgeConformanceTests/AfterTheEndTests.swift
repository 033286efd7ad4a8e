import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// Mistakes that show only after the operation ended, or only on a thread the adapter hands its
/// work to: each is caught on every seed by an order the lab forces, not by timing luck.
@Suite("Conformance: what an adapter does after the operation ended")
struct AfterTheEndTests {
    @Test("a cancel retried after the SDK released the operation is caught on every seed; the library's adapters pass")
    func lateRetryCancelIsCaught() async {
        let scenario = "cancel-in-flight"
        for seed in UInt64(1)...4 {
            let report = await ConformanceSuite.run(
                LateRetryCancelAdapter(), options: .init(watchdog: testWatchdog, seed: seed, only: [scenario]))
            #expect(report.failures.map(\.name) == [scenario], "seed \(seed): \(report.rendered)")
            // After the SDK's release as a rule; counted at once if a loaded machine delays the
            // release past the retry.
            let detail = report.failures.first?.detail ?? ""
            #expect(
                detail.contains("2 times, 1 of them after the SDK had released the operation")
                    || detail.contains("called 2 times, expected exactly once"), "seed \(seed): \(report.rendered)")
        }
        let options = ConformanceOptions(watchdog: testWatchdog, only: [scenario])
        let closure = await ConformanceSuite.run(WithCallbackAdapter(), options: options)
        let context = await ConformanceSuite.run(WithCallbackContextAdapter(), options: options)
        #expect(closure.failures.isEmpty && context.failures.isEmpty, "\(closure.rendered)\n\(context.rendered)")
    }

    @Test("a stream whose start blocks the consumer's thread until the first event is caught on every seed")
    func blockingStreamStartIsCaught() async {
        let scenario = "stream-consumer-not-blocked"
        for seed in UInt64(1)...4 {
            let report = await ConformanceSuite.run(
                BlockingStartStreamAdapter(), options: .init(watchdog: .seconds(5), seed: seed, only: [scenario]))
            #expect(report.failures.map(\.name) == [scenario], "seed \(seed): \(report.rendered)")
            #expect(
                report.failures.first?.detail.contains("the consumer's thread ran nothing else") == true,
                "seed \(seed): \(report.rendered)")
        }
        let library = await ConformanceSuite.run(
            CallbackStreamAdapter(), options: .init(watchdog: testWatchdog, only: [scenario]))
        #expect(library.failures.isEmpty && library.results.count == 1, "\(library.rendered)")
    }

    @Test("a reorder window hard-coded smaller than the source's is caught on every seed; the library's adapter passes")
    func fixedReorderWindowIsCaught() async {
        let scenario = "reordered-across-window"
        for seed in UInt64(1)...4 {
            let report = await ConformanceSuite.run(
                FixedWindowStreamAdapter(), options: .init(watchdog: testWatchdog, seed: seed, only: [scenario]))
            #expect(report.failures.map(\.name) == [scenario], "seed \(seed): \(report.rendered)")
            #expect(
                report.failures.first?.detail.contains("reordered no further") == true,
                "seed \(seed): \(report.rendered)")
        }
        let library = await ConformanceSuite.run(
            CallbackStreamAdapter(), options: .init(watchdog: testWatchdog, only: [scenario]))
        #expect(library.failures.isEmpty && library.results.count == 1, "\(library.rendered)")
    }
}

/// A correct adapter whose own bookkeeping is under `LockedValue`, as the conformance article
/// advises for adapter code checked under ThreadSanitizer.
@Suite("Conformance: a correct adapter with its own locked bookkeeping")
struct LockedBookkeepingTests {
    @Test("an adapter counting its callbacks in a LockedValue passes the busiest one-shot scenarios, on every seed")
    func lockedValueBookkeepingPasses() async {
        let adapter = CountingAdapter()
        for seed in UInt64(1)...3 {
            let report = await ConformanceSuite.run(
                adapter,
                options: .init(
                    watchdog: testWatchdog, seed: seed, only: ["burst-random-cancels", "concurrent-callbacks"]))
            #expect(report.failures.isEmpty && report.results.count == 2, "seed \(seed): \(report.rendered)")
        }
        #expect(adapter.callbacks.withLock { $0 } > 0)
    }
}

/// `withCallback`, and a count of every callback the SDK made, shared by the SDK's threads.
private struct CountingAdapter: OneShotAdapter {
    let callbacks = LockedValue(0)
    var name: String { "test-locked-value-bookkeeping" }
    var summary: String { "withCallback, counting callbacks in a LockedValue" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let callbacks = self.callbacks
        return try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { result in
                callbacks.withLock { $0 += 1 }
                completion(result)
            }.map(CancelHandle.init)
        }
    }
}
