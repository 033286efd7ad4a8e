import Foundation
import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

@Suite("Real-adapter path, one-shot: fixtures over a C-like SDK on its own loop")
struct FixtureOneShotTests {
    @Test("the correct adapter passes every scenario its fixture enables")
    func correctAdapterPasses() async throws {
        let client = LoopSDKClient(sdk: try LoopSDK(name: "fixture-test"))
        let report = await ConformanceSuite.run(
            LoopSDKFixtures.correctOneShot(client: { client }), options: .init(watchdog: testWatchdog))
        print(report.rendered)
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.isEmpty, "\(report.rendered)")
        #expect(report.usageErrors.isEmpty, "\(report.rendered)")
    }
}

@Suite("explore")
struct ExploreGallery {
    @Test func explore() async throws {
        let client = LoopSDKClient(sdk: try LoopSDK(name: "fixture-explore"))
        for (mistake, fixture) in LoopSDKGallery.fixtures(client: { client }) where mistake != .resumeEveryCallback {
            let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(5)))
            print(report.rendered)
        }
    }
}
