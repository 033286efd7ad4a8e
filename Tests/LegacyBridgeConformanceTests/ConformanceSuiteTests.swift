import Foundation
import LegacyBridge
import LegacyBridgeConformance
import Testing

@Suite("Conformance suite: the library's adapters pass, broken ones are caught")
struct ConformanceSuiteTests {
    /// A generous watchdog: these tests check verdicts, not hang detection, and share two cores
    /// with every other test (and with ThreadSanitizer's slowdown).
    static let patient = ConformanceOptions(watchdog: .seconds(60))

    @Test("withCallback adapter passes every one-shot scenario")
    func withCallbackPasses() async {
        let report = await ConformanceSuite.run(WithCallbackAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("withCallback over a C-style owned context passes every one-shot scenario")
    func withCallbackContextPasses() async {
        let report = await ConformanceSuite.run(WithCallbackContextAdapter(), options: Self.patient)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("CallbackStream adapter passes every stream scenario")
    func callbackStreamPasses() async {
        let report = await ConformanceSuite.run(CallbackStreamAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .stream).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("an adapter that drops the caller's isolation is caught by main-actor-caller")
    func hoppingAdapterIsCaught() async {
        let report = await ConformanceSuite.run(HoppingAdapter(), options: .init(watchdog: .seconds(60), only: ["main-actor-caller"]))
        #expect(report.results.map(\.name) == ["main-actor-caller"])
        #expect(report.failures.map(\.name) == ["main-actor-caller"])
        #expect(report.failures.first?.detail.contains("hopped") == true)
    }

    @Test("an adapter that keeps every cancel function is caught by captures-freed")
    func leakyAdapterIsCaught() async {
        let report = await ConformanceSuite.run(LeakyAdapter(), options: .init(watchdog: .seconds(10), only: ["captures-freed"]))
        #expect(report.failures.map(\.name) == ["captures-freed"])
    }

    @Test("a stream adapter that keeps the newest 8 events loses data under a stalled consumer")
    func droppingStreamIsCaught() async {
        let report = await ConformanceSuite.run(DroppingStreamAdapter(), options: .init(watchdog: .seconds(60), only: ["slow-consumer-backpressure"]))
        #expect(report.failures.map(\.name) == ["slow-consumer-backpressure"])
    }

    @Test("a scenario that never ends is reported as a hang and the suite goes on")
    func hangIsReported() async {
        let report = await ConformanceSuite.run(
            StuckAdapter(), options: .init(watchdog: .milliseconds(300), only: ["synchronous-callback", "foreign-thread-callback"]))
        #expect(report.results.count == 2)
        #expect(report.results.allSatisfy { $0.verdict == .hung })
    }

    @Test("every gallery adapter documents the scenarios that flag it, and they exist")
    func galleryIsDocumented() {
        let gallery = AdapterCatalog.all.filter(\.isGallery)
        #expect(gallery.count >= 7)
        for entry in gallery {
            #expect(!entry.flaggedBy.isEmpty, "\(entry.name)")
            #expect(Set(entry.flaggedBy).isSubset(of: Set(entry.scenarioNames)), "\(entry.name)")
            #expect(entry.summary.hasPrefix("WRONG ON PURPOSE"), "\(entry.name)")
        }
        #expect(AdapterCatalog.library.map(\.name).sorted() == ["callback-stream", "offload-pool", "sdk-thread-executor", "with-callback", "with-callback-context"])
    }
}

// MARK: - Broken adapters defined by the tests (they do not crash, so they run in process)

/// Passes `nil` isolation: `start` runs off the caller's actor.
private struct HoppingAdapter: OneShotAdapter {
    var name: String { "test-hopping" }
    var summary: String { "withCallback without the caller's isolation" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await hop(operation)
    }
    // A nonisolated async function runs on the global executor: the hop the scenario must see.
    private nonisolated func hop(_ operation: LegacyOperation) async throws -> LegacyPayload {
        try await withCallback(isolation: nil, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

/// Keeps every cancel function forever (a cycle in real code, a leak here).
private struct LeakyAdapter: OneShotAdapter {
    static let kept = LockedCancels()
    var name: String { "test-leaky" }
    var summary: String { "keeps its cancel functions" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let cancel = operation.start { completion($0) }
            if let cancel { Self.kept.append(cancel) }
            return cancel.map(CancelHandle.init)
        }
    }
}

final class LockedCancels: @unchecked Sendable {
    // @unchecked Sendable: `cancels` is only touched under `lock`.
    private let lock = NSLock()
    private var cancels: [LegacyCancel] = []
    func append(_ cancel: @escaping LegacyCancel) { lock.withLock { cancels.append(cancel) } }
}

/// Never returns.
private struct StuckAdapter: OneShotAdapter {
    var name: String { "test-stuck" }
    var summary: String { "never resumes" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        await withUnsafeContinuation(isolation: isolation) { (_: UnsafeContinuation<Void, Never>) in }
        throw CancellationError()
    }
}

/// Keeps only the newest 8 events: bounded, but lossy.
private struct DroppingStreamAdapter: StreamAdapter {
    var name: String { "test-dropping" }
    var summary: String { "bufferingNewest(8)" }
    func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(buffering: .bufferingNewest(8), ordering: .sequenced(window: max(1, source.reorderWindow))) { sink in
            let control = source.start(
                onEvent: { sink.yield($0, sequence: $0.sequence) },
                onEnd: { error in if let error { sink.finish(throwing: error) } else { sink.finish() } })
            return StreamControl(cancel: control.cancel)
        }
    }
}
