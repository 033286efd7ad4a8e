import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The latest-wins and coalesced fixtures over a one-shot SDK call double: the library's
/// `LatestWins` and `CoalescedCalls` pass every scenario, with and without an SDK cancel; what a
/// fixture does not give is reported as not checked, and a fixture that cannot hang as a usage
/// error. (Each hand-written mistake is failed for its reason on four seeds by GalleryProofTests.)
@Suite("Real-adapter path: latest-wins and coalesced calls over a one-shot SDK call double")
struct CallFixtureTests {
    /// A hang bound. `CoalescedCalls` hands a shared call's outcome on from a task on the
    /// cooperative pool, which under ThreadSanitizer waits behind the burst suites' jobs for
    /// minutes: 60 s once ran out there for a correct adapter (a passing run never waits for it).
    static let watchdog: Duration = threadSanitizerIsActive ? .seconds(600) : .seconds(30)

    @Test("LatestWins passes every latest-wins scenario, with and without an SDK cancel", arguments: [true, false])
    func latestWinsPasses(canCancel: Bool) async {
        let report = await ConformanceSuite.run(
            CallDoubleFixtures.latestWins(canCancel: canCancel), options: .init(watchdog: Self.watchdog))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.isEmpty, "\(report.rendered)")
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .latestWins).map(\.name))
        #expect(report.results.count == 5)
    }

    @Test("CoalescedCalls passes every coalesced scenario, with and without an SDK cancel", arguments: [true, false])
    func coalescedCallsPasses(canCancel: Bool) async {
        let report = await ConformanceSuite.run(
            CallDoubleFixtures.coalescedCalls(canCancel: canCancel), options: .init(watchdog: Self.watchdog))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.isEmpty, "\(report.rendered)")
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .coalesced).map(\.name))
        #expect(report.results.count == 5)
    }

    @Test("without a way to make the SDK fail, the failure scenarios are not checked, and say why")
    func missingFailingIsNotChecked() async {
        let sdk = CallDoubleSDK(canCancel: true)
        let runs = LatestWins<UInt64>()
        let calls = CoalescedCalls<UInt64, UInt64>()
        let start: @Sendable (UInt64, CallProbe<UInt64>, Completion<UInt64>) -> CancelHandle = { key, probe, done in
            let callback = probe.callback { _ = done($0) }
            let handle = probe.start { sdk.start(key: key, callback: callback) }
            return CancelHandle { probe.cancel { _ = sdk.cancel(handle) } }
        }
        let latest = LatestWinsFixture<UInt64>(
            name: "latest-minimal",
            call: { key, probe in try await runs.run { start(key, probe, $0) } },
            answer: { key, token in sdk.answer(key: key, token: token) }, token: { $0 })
        let coalesced = CoalescedFixture<UInt64>(
            name: "coalesced-minimal",
            call: { key, probe in try await calls.value(for: key) { start(key, probe, $0) } },
            answer: { key, token in sdk.answer(key: key, token: token) }, token: { $0 })
        let reports = [
            await ConformanceSuite.run(latest, options: .init(watchdog: Self.watchdog)),
            await ConformanceSuite.run(coalesced, options: .init(watchdog: Self.watchdog)),
        ]
        for (report, skipped) in zip(reports, ["latest-failure-then-next", "coalesced-failure-not-kept"]) {
            #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
            #expect(report.notChecked.map(\.name) == [skipped], "\(report.rendered)")
            #expect(report.notChecked.first?.detail.contains("failing") == true, "\(report.rendered)")
        }
    }

    @Test("a fixture whose call answers by itself is told so (a usage error), not blamed on the adapter")
    func callThatCannotWaitIsAUsageError() async {
        let runs = LatestWins<UInt64>()
        let latest = LatestWinsFixture<UInt64>(
            name: "latest-answers-at-once",
            call: { key, probe in
                try await runs.run { completion in
                    let callback = probe.callback { _ = completion($0) }
                    probe.start { callback(.success(key << 8 | 1)) }
                    return nil
                }
            },
            answer: { _, _ in }, token: { $0 })
        let report = await ConformanceSuite.run(
            latest, options: .init(watchdog: Self.watchdog, only: ["latest-late-answer-never-lands"]))
        #expect(report.usageErrors.map(\.name) == ["latest-late-answer-never-lands"], "\(report.rendered)")
        #expect(report.failures.isEmpty, "\(report.rendered)")
        #expect(
            report.usageErrors.first?.detail.contains("must wait for the answer the suite asks for") == true,
            "\(report.rendered)")
    }
}
