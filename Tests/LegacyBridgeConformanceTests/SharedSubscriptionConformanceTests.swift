import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The shared-subscription scenarios against the library's adapter and the gallery's (the one
/// stream iterated by several consumers traps, so only GalleryProofTests runs it, in a child
/// process).
@Suite("Conformance: one SDK listener shared by many consumers")
struct SharedSubscriptionConformanceTests {

    @Test("the SharedSubscription adapter passes every shared-subscription scenario")
    func sharedSubscriptionAdapterPasses() async {
        let report = await ConformanceSuite.run(
            SharedSubscriptionLibraryAdapter(), options: .init(watchdog: testWatchdog))
        #expect(report.results.map(\.name) == ConformanceSuite.scenarios(for: .shared).map(\.name))
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("a listener per consumer is flagged for subscribing the SDK more than once, on every seed")
    func listenerPerConsumerIsFlagged() async {
        for seed in UInt64(1)...3 {
            let report = await ConformanceSuite.run(
                ListenerPerConsumerAdapter(),
                options: .init(watchdog: flaggingWatchdog, seed: seed, only: ["shared-one-listener"]))
            #expect(report.failures.map(\.name) == ["shared-one-listener"], "\(report.rendered)")
            #expect(
                report.failures.first?.detail.contains("to start 4 listeners for 4 consumers") == true,
                "\(report.rendered)")
        }
    }

    @Test("a broadcaster that never cancels the listener is flagged once its last consumer left, on every seed")
    func neverStopsListenerIsFlagged() async {
        for seed in UInt64(1)...3 {
            let report = await ConformanceSuite.run(
                NeverStopsListenerAdapter(),
                options: .init(
                    watchdog: flaggingWatchdog, seed: seed, only: ["shared-consumer-leaves"]))
            #expect(report.failures.map(\.name) == ["shared-consumer-leaves"], "\(report.rendered)")
            #expect(
                report.failures.first?.detail.contains("after the last consumer left, the SDK listener still runs")
                    == true, "\(report.rendered)")
        }
    }
}
