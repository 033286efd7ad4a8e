import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The keyed-request fixture over a request/reply SDK double: the library's `PendingRequests`
/// passes every scenario, with and without an SDK cancel, and each hand-written table that reuses
/// an id too early is failed by keyed-cancel-then-reuse, for its reason, on every seed.
@Suite("Real-adapter path: keyed requests over a request/reply SDK double")
struct KeyedFixtureTests {
    static let watchdog: Duration = threadSanitizerIsActive ? .seconds(60) : .seconds(30)

    @Test(
        "PendingRequests passes every keyed scenario, with and without an SDK cancel, none left unchecked",
        arguments: [true, false])
    func pendingRequestsPasses(canCancel: Bool) async {
        let report = await ConformanceSuite.run(
            KeyedDoubleFixtures.pendingRequests(canCancel: canCancel), options: .init(watchdog: Self.watchdog))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.isEmpty, "\(report.rendered)")
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .keyed).map(\.name))
    }

    @Test(
        "a table that frees a cancelled caller's id before the late reply, cancels by id later, or keeps a duplicate reply for the next request, is failed on every seed",
        arguments: KeyedDoubleMistake.allCases)
    func mistakeIsFlagged(_ mistake: KeyedDoubleMistake) async {
        for seed in [UInt64(1), 2, 3] {
            let report = await ConformanceSuite.run(
                mistake.fixture,
                options: .init(
                    watchdog: flaggingWatchdog, seed: seed,
                    only: Set(mistake.flaggedBy)))
            #expect(report.failures.map(\.name) == mistake.flaggedBy, "seed \(seed): \(report.rendered)")
            let expected: String
            switch mistake {
            case .freesIDBeforeLateReply:
                expected = "the late reply of the request whose caller left completed the newer request"
            case .lateCancelByID:
                expected = "the SDK's cancel for the request whose caller left reached the newer request"
            case .keepsUnmatchedReply:
                expected = "(a duplicate of an earlier request's reply)"
            }
            #expect(report.failures.first?.detail.contains(expected) == true, "seed \(seed): \(report.rendered)")
        }
    }

    @Test("without a way to make stray replies or failures, those scenarios are not checked, and say why")
    func missingClosuresAreNotChecked() async {
        let sdk = KeyedDoubleSDK(canCancel: false)
        let table = PendingRequests<UInt64, UInt64>()
        sdk.setReplyHandler { id, result in _ = table.complete(id, with: result) }
        let fixture = KeyedFixture<UInt64>(
            name: "keyed-minimal",
            request: { id, probe in
                try await table.request(id: id) { id in probe.start { sdk.send(id: id) } }
            },
            reply: { id, token in sdk.reply(id: id, token: token) },
            token: { $0 },
            requestCancellation: .none)
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: Self.watchdog))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        let skipped = Dictionary(uniqueKeysWithValues: report.notChecked.map { ($0.name, $0.detail) })
        #expect(Set(skipped.keys) == ["keyed-stray-replies", "keyed-failure-then-next"], "\(report.rendered)")
        #expect(skipped["keyed-stray-replies"]?.contains("strayReply") == true)
        #expect(skipped["keyed-failure-then-next"]?.contains("failing") == true)
    }
}
