import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The keyed-request scenarios against the library's adapter and the gallery's (the dictionary
/// that resumes twice traps, so only GalleryProofTests runs it, in a child process).
@Suite("Conformance: keyed requests over one global reply callback")
struct KeyedConformanceTests {

    @Test("the PendingRequests adapter passes every keyed scenario, and the lab forced every hostile order")
    func pendingRequestsAdapterPasses() async {
        let report = await ConformanceSuite.run(PendingRequestsAdapter(), options: .init(watchdog: testWatchdog))
        #expect(report.results.map(\.name) == ConformanceSuite.scenarios(for: .keyed).map(\.name))
        #expect(report.failures.isEmpty, "\(report.rendered)")
        // A note means the lab could not force what the scenario is about (reversal, unknown ids).
        #expect(report.results.allSatisfy { $0.detail.isEmpty }, "\(report.rendered)")
    }

    @Test("a table that keeps its entry after a timeout is flagged for the leak, on every seed")
    func leakingTableIsFlagged() async {
        for seed in UInt64(1)...3 {
            let report = await ConformanceSuite.run(
                LeakingTableAdapter(),
                options: .init(
                    watchdog: flaggingWatchdog, seed: seed, only: ["keyed-timeout-and-cancel-leave-nothing"]))
            #expect(report.failures.map(\.name) == ["keyed-timeout-and-cancel-leave-nothing"], "\(report.rendered)")
            #expect(
                report.failures.first?.detail.contains("still tracks 1 request(s)") == true, "\(report.rendered)")
        }
    }

    @Test("an adapter that registers its id after the send loses the synchronous reply, on every seed")
    func registerAfterSendIsFlagged() async {
        for seed in UInt64(1)...3 {
            let report = await ConformanceSuite.run(
                RegisterAfterSendAdapter(),
                options: .init(watchdog: flaggingWatchdog, seed: seed, only: ["keyed-synchronous-reply"]))
            #expect(report.failures.map(\.name) == ["keyed-synchronous-reply"], "\(report.rendered)")
            #expect(
                report.failures.first?.detail.contains("registered the id after sending") == true,
                "\(report.rendered)")
        }
    }
}
