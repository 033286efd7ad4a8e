import LegacyBridge
import LegacyBridgeConformance
import Testing

/// The thread-affine and blocking scenarios against the library's adapters and the gallery's.
@Suite("Conformance: thread-affine and blocking SDKs")
struct OffloadConformanceTests {
    static let patient = ConformanceOptions(watchdog: .seconds(60))

    @Test("the SDK-thread-executor adapter passes every thread-affine scenario")
    func executorAdapterPasses() async {
        let report = await ConformanceSuite.run(SDKThreadExecutorAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .threadAffine).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("a plain actor around a thread-affine SDK is flagged by both thread-affine scenarios")
    func plainActorIsFlagged() async {
        let report = await ConformanceSuite.run(PlainActorAffineAdapter(), options: Self.patient)
        #expect(report.failures.map(\.name).sorted() == ["thread-affine-calls-on-sdk-thread", "thread-affine-cancel-on-sdk-thread"])
        #expect(report.failures.allSatisfy { $0.verdict == .failed && $0.detail.contains("thread") }, "\(report.rendered)")
    }
}
