import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The shared-subscription fixture over an SDK double with listeners: the library's
/// `SharedSubscription` passes every scenario, and each hand-written broadcaster is failed by its
/// documented scenarios, for its reason, on every seed.
@Suite("Real-adapter path: shared subscriptions over an SDK double with listeners")
struct SharedFixtureTests {
    @Test("SharedSubscription passes every shared-subscription scenario, none left unchecked")
    func sharedSubscriptionPasses() async {
        let report = await ConformanceSuite.run(
            ListenerDoubleFixtures.sharedSubscription(), options: .init(watchdog: testWatchdog))
        #expect(
            report.failures.isEmpty && report.usageErrors.isEmpty && report.notChecked.isEmpty, "\(report.rendered)")
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .shared).map(\.name))
    }

    @Test(
        "a listener per consumer, a listener never closed, a removal of an ended listener and a replay of the last event are each failed for their reason",
        arguments: ListenerDoubleMistake.allCases)
    func mistakeIsFlagged(_ mistake: ListenerDoubleMistake) async {
        let reason: String
        switch mistake {
        case .listenerPerConsumer: reason = "share one listener among the consumers"
        case .neverStops: reason = "stop the SDK's listener when the last consumer leaves"
        case .removesEndedListener: reason = "after the SDK itself had ended it"
        case .replaysLastEvent: reason = "got an event published before it joined"
        }
        for seed in [UInt64(1), 2] {
            let report = await ConformanceSuite.run(
                mistake.fixture, options: .init(watchdog: flaggingWatchdog, seed: seed, only: Set(mistake.flaggedBy)))
            #expect(Set(report.failures.map(\.name)) == Set(mistake.flaggedBy), "seed \(seed): \(report.rendered)")
            #expect(report.failures.allSatisfy { $0.detail.contains(reason) }, "seed \(seed): \(report.rendered)")
        }
    }

    @Test("without endListener, the scenario that needs it is not checked and says why")
    func withoutEndNotChecked() async {
        let sdk = ListenerDoubleSDK()
        let shared = SharedSubscription(of: UInt64.self) { sink in
            let handle = sdk.addListener(.init(onEvent: { sink.yield($0) }, onEnd: { sink.finish() }))
            return StreamControl(cancel: CancelHandle { sdk.removeListener(handle) })
        }
        let fixture = SharedSubscriptionFixture<UInt64>(
            name: "shared-minimal", subscribe: { shared.subscribe() }, publish: { sdk.publish($0) }, token: { $0 },
            listeners: { sdk.listeners })
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: testWatchdog))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.map(\.name) == ["shared-listener-ends"], "\(report.rendered)")
        #expect(report.notChecked.first?.detail.contains("endListener") == true)
    }
}
