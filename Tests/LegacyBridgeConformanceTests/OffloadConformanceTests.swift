import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The thread-affine and blocking scenarios against the library's adapters and the gallery's.
@Suite("Conformance: thread-affine and blocking SDKs")
struct OffloadConformanceTests {
    static let patient = ConformanceOptions(watchdog: testWatchdog)

    @Test("the SDK-thread-executor adapter passes every thread-affine scenario")
    func executorAdapterPasses() async {
        let report = await ConformanceSuite.run(SDKThreadExecutorAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .threadAffine).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("the OffloadPool adapter passes every blocking scenario")
    func offloadAdapterPasses() async {
        let report = await ConformanceSuite.run(OffloadPoolAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .blocking).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    // The DispatchQueue.global + semaphore gallery adapter blocks the cooperative pool of the
    // process that runs it: CLITests.galleryFlagged checks it in a child process, never here.

    @Test("an adapter that offloads but never interrupts is caught by blocking-cancel-interrupts only")
    func noInterruptIsCaught() async {
        let report = await ConformanceSuite.run(NoInterruptAdapter(), options: Self.patient)
        #expect(report.failures.map(\.name) == ["blocking-cancel-interrupts"], "\(report.rendered)")
        #expect(report.failures.first?.detail.contains("never interrupted") == true)
    }

    @Test("a plain actor around a thread-affine SDK is flagged by both thread-affine scenarios")
    func plainActorIsFlagged() async {
        let report = await ConformanceSuite.run(PlainActorAffineAdapter(), options: Self.patient)
        #expect(
            report.failures.map(\.name).sorted() == [
                "thread-affine-calls-on-sdk-thread", "thread-affine-cancel-on-sdk-thread",
            ])
        #expect(
            report.failures.allSatisfy { $0.verdict == .failed && $0.detail.contains("thread") }, "\(report.rendered)")
    }
}

/// Runs the call on an OffloadPool but passes no interrupt: a cancelled caller is let go, and its
/// call keeps a pool thread for its whole duration.
private struct NoInterruptAdapter: BlockingAdapter {
    static let pool = Result { try OffloadPool(threads: 16) }
    var name: String { "test-no-interrupt" }
    var summary: String { "OffloadPool.run without the call's interrupt" }
    func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await Self.pool.get().run(isolation: isolation) { try call.perform() }
    }
}
