import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The latest-wins and coalesced scenarios against the library's adapters and the gallery's.
@Suite("Conformance: latest-wins and coalesced calls")
struct SupersedingConformanceTests {

    @Test("the LatestWins adapter passes every latest-wins scenario")
    func latestWinsAdapterPasses() async {
        let report = await ConformanceSuite.run(LatestWinsLibraryAdapter(), options: .init(watchdog: testWatchdog))
        #expect(report.results.map(\.name) == ConformanceSuite.scenarios(for: .latestWins).map(\.name))
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("the CoalescedCalls adapter passes every coalesced scenario")
    func coalescedCallsAdapterPasses() async {
        let report = await ConformanceSuite.run(CoalescedCallsAdapter(), options: .init(watchdog: testWatchdog))
        #expect(report.results.map(\.name) == ConformanceSuite.scenarios(for: .coalesced).map(\.name))
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test(
        "each superseding or coalescing mistake is flagged by its scenario, for its reason, on every seed",
        arguments: [
            ("revision-without-cancel", "latest-superseded-let-go", "cancel the superseded call"),
            ("current-continuation", "latest-late-answer-never-lands", "late result must never land"),
            ("cancel-on-first-leave", "coalesced-first-leaver-keeps-call", "only when its last waiter leaves"),
            ("kept-failure", "coalesced-failure-not-kept", "the failure was kept for the key"),
        ])
    func mistakeIsFlagged(adapter name: String, scenario: String, reason: String) async throws {
        let entry = try #require(AdapterCatalog.entry(named: name))
        for seed in UInt64(1)...3 {
            let report = await entry.run(options: .init(watchdog: flaggingWatchdog, seed: seed, only: [scenario]))
            #expect(report.failures.map(\.name) == [scenario], "\(report.rendered)")
            #expect(report.failures.first?.detail.contains(reason) == true, "\(report.rendered)")
        }
    }
}
