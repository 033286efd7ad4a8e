import Foundation
import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The real-adapter path: fixtures over `LoopSDK`, a C-like SDK on a loop thread of its own
/// (an `SDKLoop`) whose adapters retain their contexts with `SDKContext`. Each test gets an SDK of
/// its own, so that its resource counts are its own while other tests run.
@Suite("Real-adapter path: fixtures over a C-like SDK on its own loop", .shutsDownItsLoopSDKs)
struct FixtureConformanceTests {
    static let patient = ConformanceOptions(watchdog: testWatchdog)

    /// For scenarios that must fail: a failing path waits the patience (0.6 of this) once, and the
    /// rest of the scenario must fit in the other 0.4 however loaded the machine is. At 20 s a
    /// leaking adapter's scenario was reported hung under load (its 8 s of margin ran out).
    static let failingWatchdog: Duration = threadSanitizerIsActive ? .seconds(60) : .seconds(40)

    /// A client over an SDK of its own, shut down when the test ends (``ShutsDownLoopSDKs``).
    static func client(_ name: String = "fixture-test") throws -> LoopSDKClient {
        let sdk = try LoopSDK(name: name)
        guard let made = ShutsDownLoopSDKs.made else {
            Issue.record("client(_:) outside a test with the .shutsDownItsLoopSDKs trait: its SDK would run on")
            return LoopSDKClient(sdk: sdk)
        }
        made.withLock { $0.append(sdk) }
        return LoopSDKClient(sdk: sdk)
    }

    @Test(
        "the correct one-shot adapter passes every one-shot scenario; only loop-watches-released is left unchecked (LoopSDK runs its own loop)"
    )
    func correctOneShotPasses() async throws {
        let client = try Self.client()
        let report = await ConformanceSuite.run(
            LoopSDKFixtures.correctOneShot(client: { client }), options: Self.patient)
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .oneShot).map(\.name))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.map(\.name) == ["loop-watches-released"], "\(report.rendered)")
    }

    @Test("the correct stream adapter passes every stream scenario, none left unchecked")
    func correctStreamPasses() async throws {
        let client = try Self.client()
        let report = await ConformanceSuite.run(
            LoopSDKFixtures.correctStream(client: { client }), options: Self.patient)
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .stream).map(\.name))
        #expect(report.results.allSatisfy { $0.passed }, "\(report.rendered)")
    }

    /// The SDK is never paused: every scenario that takes events until a count is judged on what
    /// the buffer kept, not on what it dropped, and ends within the watchdog.
    @Test("a correct dropping stream over a producer it never pauses passes every stream scenario, none left unchecked")
    func correctDroppingStreamPasses() async throws {
        let client = try Self.client()
        let report = await ConformanceSuite.run(
            LoopSDKFixtures.correctDroppingStream(client: { client }), options: Self.patient)
        #expect(report.results.map(\.name) == ConformanceSuite.fixtureScenarios(for: .stream).map(\.name))
        #expect(report.results.allSatisfy { $0.verdict == .passed }, "\(report.rendered)")
    }

    @Test("the correct blocking adapter passes; thread affinity is not checked for an adapter declared .anyThread")
    func correctBlockingPasses() async throws {
        let client = try Self.client()
        let report = await ConformanceSuite.run(
            LoopSDKFixtures.correctBlocking(client: { client }), options: Self.patient)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(report.notChecked.map(\.name) == ["blocking-thread-affinity"], "\(report.rendered)")
        #expect(report.notChecked.first?.detail.contains("declares threading .anyThread") == true)
    }

    /// A blocking SDK call no interrupt ends (libgit2's network calls): the adapter runs it on
    /// an `OffloadPool` with no cancel, as it must.
    static func uninterruptible(
        _ client: LoopSDKClient, pool: OffloadPool, holdsCaller: Bool = false
    ) -> BlockingFixture<Int64> {
        let sdk = client.sdk
        let query: @Sendable (LoopSDKBehavior, BlockingProbe) async throws -> Int64 = { behavior, probe in
            let token = sdk.makeToken()
            guard holdsCaller else {
                return try await pool.run { try probe.body { try sdk.blockingQuery(behavior, token: token) } }
            }
            // WRONG ON PURPOSE: waits for the call, cancelled or not.
            return try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(
                        with: Result { try probe.body { try sdk.blockingQuery(behavior, token: token) } })
                }
            }
        }
        return BlockingFixture(
            name: holdsCaller ? "uninterruptible-holds-caller" : "uninterruptible",
            succeeding: { probe in try await query(.value(7), probe) },
            failing: { probe in try await query(.failure(LoopSDK.failedStatus), probe) },
            blocking: .init(start: { probe in try await query(.hang, probe) }, release: { sdk.releaseHeld() }),
            liveResources: { client.liveResources },
            requestCancellation: .none)
    }

    @Test(
        "a blocking SDK call no interrupt ends: the cancelled caller let go at once passes, the interrupt is not checked, the pool is still checked"
    )
    func uninterruptibleBlockingCall() async throws {
        let client = try Self.client()
        let pool = try OffloadPool(threads: 2, name: "uninterruptible")
        let report = await ConformanceSuite.run(Self.uninterruptible(client, pool: pool), options: Self.patient)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        let verdicts = Dictionary(uniqueKeysWithValues: report.results.map { ($0.name, $0.verdict) })
        #expect(verdicts["blocking-cancel-interrupts"] == .notChecked, "\(report.rendered)")
        #expect(verdicts["blocking-leaves-pool-free"] == .passed, "\(report.rendered)")
        let detail = try #require(report.notChecked.first { $0.name == "blocking-cancel-interrupts" }?.detail)
        #expect(detail.contains("because the SDK has no interrupt"), "\(detail)")
    }

    @Test("a blocking SDK call no interrupt ends: a caller held until the call returns is still failed")
    func uninterruptibleCallerHeldIsFlagged() async throws {
        let client = try Self.client()
        let pool = try OffloadPool(threads: 2, name: "uninterruptible")
        let report = await ConformanceSuite.run(
            Self.uninterruptible(client, pool: pool, holdsCaller: true),
            options: .init(watchdog: Self.failingWatchdog, only: ["blocking-cancel-interrupts"]))
        #expect(report.failures.map(\.name) == ["blocking-cancel-interrupts"], "\(report.rendered)")
        #expect(
            report.failures.first?.detail.contains("the cancelled caller was not resumed within") == true,
            "\(report.rendered)")
    }

    @Test("a threading message names the threading the fixture declared: .sdkLoop, not .sdkThread")
    func threadingMessageNamesTheDeclaration() async throws {
        let client = try Self.client()
        let sdk = client.sdk
        let pool = try OffloadPool(threads: 1, name: "off-loop")
        // WRONG ON PURPOSE: the query runs on a pool thread, not on the SDK's loop.
        let fixture = BlockingFixture<Int64>(
            name: "off-loop-query", threading: .sdkLoop(sdk.loop),
            succeeding: { probe in
                let token = sdk.makeToken()
                return try await pool.run { try probe.body { try sdk.blockingQuery(.value(7), token: token) } }
            })
        let report = await ConformanceSuite.run(
            fixture, options: .init(watchdog: testWatchdog, only: ["blocking-thread-affinity"]))
        #expect(report.failures.map(\.name) == ["blocking-thread-affinity"], "\(report.rendered)")
        let detail = report.failures.first?.detail ?? ""
        #expect(detail.contains("though it declares threading .sdkLoop"), "\(detail)")
        #expect(!detail.contains(".sdkThread"), "\(detail)")
    }

    @Test("a fixture with only a succeeding call: the scenarios that need more are not checked, each with its reason")
    func missingCallsAreNotChecked() async throws {
        let client = try Self.client()
        let fixture = OneShotFixture<Int64>(
            name: "succeeding-only", threading: client.threading,
            succeeding: { probe in try await client.fetch(.value(1), probe: probe) },
            liveResources: { client.liveResources })
        let report = await ConformanceSuite.run(fixture, options: Self.patient)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        let reasons = Dictionary(uniqueKeysWithValues: report.notChecked.map { ($0.name, $0.detail) })
        #expect(
            Set(reasons.keys) == [
                "failure-throws", "cancel-in-flight", "cancel-before-handle", "timeout", "late-callback-after-cancel",
                "error-then-success", "callback-inside-cancel", "caller-not-blocked", "sdk-thread-not-held",
                "loop-watches-released",
            ], "\(report.rendered)")
        #expect(reasons["cancel-in-flight"]?.contains("no hanging call") == true)
        #expect(reasons["failure-throws"]?.contains("no failing call") == true)
        #expect(reasons["timeout"]?.contains("no timed call") == true)
        #expect(report.notChecked.allSatisfy { $0.detail.hasPrefix("not checked: ") })
    }

    @Test("an adapter that ignores the probe: the hostile scenarios are not checked, and say the probe is missing")
    func withoutTheProbeNotChecked() async throws {
        let client = try Self.client()
        let fixture = LoopSDKFixtures.oneShot(
            name: "no-probe", client: { client },
            fetch: { client, behavior, timeout, _ in try await client.fetch(behavior, timeout: timeout, probe: .off) })
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: Self.failingWatchdog))
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        let skipped = Set(report.notChecked.map(\.name))
        #expect(
            skipped == [
                "cancel-before-handle", "duplicate-callback", "success-then-error", "error-then-success",
                "synchronous-callback", "foreign-thread-callback", "callback-inside-cancel", "loop-watches-released",
            ], "\(report.rendered)")
        #expect(
            report.notChecked.filter { $0.name != "loop-watches-released" }.allSatisfy {
                $0.detail.contains("through the probe")
            }, "\(report.rendered)")
    }

    @Test("a fixture that contradicts its declaration gets usage errors, not failures of the adapter")
    func contradictoryFixtureIsAUsageError() async throws {
        let client = try Self.client()
        // "Hangs" and "fails" with requests that succeed at once.
        let fixture = OneShotFixture<Int64>(
            name: "contradictory", threading: client.threading,
            succeeding: { probe in try await client.fetch(.value(1), probe: probe) },
            failing: { probe in try await client.fetch(.value(2), probe: probe) },
            hanging: .init(start: { probe in try await client.fetch(.value(3), probe: probe) }, release: {}),
            liveResources: { client.liveResources })
        let report = await ConformanceSuite.run(
            fixture,
            options: .init(watchdog: testWatchdog, only: ["failure-throws", "cancel-in-flight", "caller-not-blocked"]))
        #expect(report.failures.isEmpty, "\(report.rendered)")
        let usage = Dictionary(uniqueKeysWithValues: report.usageErrors.map { ($0.name, $0.detail) })
        #expect(usage["failure-throws"]?.contains("failing call returned a value: it cannot fail") == true, "\(usage)")
        #expect(usage["cancel-in-flight"]?.contains("returned a value before it was released: it cannot hang") == true)
    }

    @Test("a value the SDK reported as a failure is the adapter's fault, not a usage error: the probe tells them apart")
    func failureTurnedIntoValueIsTheAdapters() async throws {
        let client = try Self.client()
        let fixture = LoopSDKFixtures.oneShot(
            name: "failure-as-zero", client: { client },
            fetch: { client, behavior, timeout, probe in
                (try? await client.fetch(behavior, timeout: timeout, probe: probe)) ?? 0
            })
        let report = await ConformanceSuite.run(
            fixture, options: .init(watchdog: testWatchdog, only: ["failure-throws"]))
        #expect(report.failures.map(\.name) == ["failure-throws"], "\(report.rendered)")
        #expect(
            report.failures.first?.detail.contains("the SDK reported a failure, but the caller got a value") == true)
    }

    /// What each mistake's documented scenarios must say.
    static let evidence: [LoopSDKMistake: String] = [
        .noSDKCancel: "The adapter never called the SDK's cancel",
        .cancelAfterValue: "the call ended with the SDK's own outcome, yet the adapter called the SDK's cancel",
        .retryCancel: "called the SDK's cancel 2 times for one call",
        .semaphoreCaller: "the caller's actor could not run anything",
        .offThreadStart: "started the SDK call off the SDK's thread",
        .leaksContext: "the SDK still held 1 resource(s) more",
        .handleAsValue: "but the SDK delivered 7",
        .cancelRacesStart: "never reached the SDK's cancel",
        .backoffOnLoop: "after the SDK failed a call, the next call did not return",
        .timerNeverCancelled: "a timer of the adapter's own outlived the call",
        .cancelDoesNothing: "the SDK delivered a value for the request after the adapter's cancel had returned",
    ]

    @Test(
        "each one-shot mistake over the real SDK is failed by its documented scenarios, for its reason",
        arguments: LoopSDKMistake.allCases.filter { $0 != .resumeEveryCallback })
    func oneShotMistakeIsFlagged(_ mistake: LoopSDKMistake) async throws {
        let client = try Self.client(mistake.rawValue)
        let fixture = try #require(LoopSDKGallery.fixtures(client: { client }).first { $0.0 == mistake }?.1)
        let report = await ConformanceSuite.run(
            fixture, options: .init(watchdog: Self.failingWatchdog, only: Set(mistake.flaggedBy)))
        let evidence = try #require(Self.evidence[mistake])
        #expect(Set(report.failures.map(\.name)) == Set(mistake.flaggedBy), "\(report.rendered)")
        for failure in report.failures {
            #expect(failure.verdict == .failed, "\(failure.name): \(failure.detail)")
            #expect(failure.detail.contains(evidence), "\(failure.name): \(failure.detail)")
        }
    }

    /// Not under ThreadSanitizer: there the simulated SDK, beside the rest of this test process,
    /// delivered fewer events than the bound within the scenario's patience, so nothing could be
    /// seen held. CI's TSan conformance step runs this adapter crash-isolated.
    @Test(
        "a stream that buffers without bound though it declares backpressure is failed by the stalled consumer",
        .disabled(if: threadSanitizerIsActive, "the SDK is too slow beside the whole TSan test process"))
    func unboundedStreamIsFlagged() async throws {
        let client = try Self.client()
        let fixture = try #require(LoopSDKStreamMistake.fixtures(client: { client }).first { $0.0 == .unbounded }?.1)
        let report = await ConformanceSuite.run(
            fixture, options: .init(watchdog: Self.failingWatchdog, only: ["stream-stalled-consumer"]))
        #expect(report.failures.map(\.name) == ["stream-stalled-consumer"], "\(report.rendered)")
        #expect(
            report.failures.first?.detail.contains("were held for a stalled consumer") == true, "\(report.rendered)")
    }

    @Test(
        "a fixture whose endless subscription runs dry is told it is the fixture's fault (a usage error), not the adapter's hang"
    )
    func sourceThatRunsDryIsTheFixtures() async throws {
        let client = try Self.client()
        let fixture = StreamFixture<LoopSDKEvent>(
            name: "runs-dry",
            threading: LoopSDKFixtures.threading { client },
            finite: nil,
            endless: .init(
                start: { probe in client.events(.runsDry(after: 10), probe: probe) },
                release: { client.sdk.releaseHeld() }),
            ordered: { $0.sequence },
            bound: .backpressure(high: 32),
            liveResources: { client.liveResources })
        // The scenario hangs by design: its consumer waits for events that never come; 10 s of
        // watchdog (20 under TSan) leave the stall its 3 s (6 s) of quiet however loaded the run.
        let report = await ConformanceSuite.run(
            fixture,
            options: .init(
                watchdog: threadSanitizerIsActive ? .seconds(20) : .seconds(10), only: ["stream-thread-affinity"])
        )
        let result = try #require(report.results.first, "\(report.rendered)")
        #expect(result.verdict == .usageError, "\(report.rendered)")
        #expect(
            result.detail.contains("the fixture's subscription stopped delivering: after 10 events"),
            "\(report.rendered)")
    }

    @Test("a stream that never unsubscribes is failed when its consumer leaves: the SDK was never told to stop")
    func noUnsubscribeIsFlagged() async throws {
        let client = try Self.client()
        let fixture = try #require(
            LoopSDKStreamMistake.fixtures(client: { client }).first { $0.0 == .noUnsubscribe }?.1)
        let report = await ConformanceSuite.run(
            fixture, options: .init(watchdog: Self.failingWatchdog, only: ["stream-break", "stream-consumer-cancel"]))
        #expect(Set(report.failures.map(\.name)) == ["stream-break", "stream-consumer-cancel"], "\(report.rendered)")
        #expect(
            report.failures.allSatisfy { $0.detail.contains("never called the SDK's cancel") }, "\(report.rendered)")
    }

    @Test("a blocking query made in the caller's task is failed: the caller's thread runs nothing else")
    func queryOnPoolIsFlagged() async throws {
        // Only the scenario whose caller runs on the suite's own thread: the other one
        // (blocking-cancel-interrupts) holds a thread of the cooperative pool, which every other
        // test of this process needs; the gallery's crash-isolated runs check it.
        let client = try Self.client()
        let fixture = try #require(LoopSDKBlockingMistake.fixtures(client: { client }).first?.1)
        let report = await ConformanceSuite.run(
            fixture, options: .init(watchdog: Self.failingWatchdog, only: ["blocking-leaves-pool-free"]))
        #expect(report.failures.map(\.name) == ["blocking-leaves-pool-free"], "\(report.rendered)")
        #expect(
            report.failures.first?.detail.contains("the caller's thread ran nothing else") == true,
            "\(report.rendered)")
    }

    @Test("not checked and usage errors are shown apart, in the text and the JSON, and do not fail a run")
    func verdictsRenderAndExit() throws {
        let report = ConformanceReport(
            adapter: "shown", kind: .oneShot,
            results: [
                ScenarioResult(name: "success", summary: "s", verdict: .passed, detail: ""),
                ScenarioResult(
                    name: "timeout", summary: "t", verdict: .notChecked, detail: "not checked: no timed call"),
                ScenarioResult(name: "cancel-in-flight", summary: "c", verdict: .usageError, detail: "usage error: x"),
            ])
        #expect(report.failures.isEmpty)
        #expect(report.counts == "1/3 passed, 1 not checked, 1 usage error")
        #expect(
            report.rendered.contains("  SKIP timeout: t\n        -> not checked: no timed call"), "\(report.rendered)")
        #expect(
            report.rendered.contains("  USAGE cancel-in-flight: c\n        -> usage error: x"), "\(report.rendered)")
        let subject = ConformanceSubject.oneShot(
            OneShotFixture<Int>(name: "shown", succeeding: { _ in 1 }))
        let evaluation = ConformanceEvaluation([(subject, report)])
        #expect(evaluation.clean)
        #expect(evaluation.summaryLine.contains("USAGE ERRORS"), "\(evaluation.summaryLine)")
        let adapter = try #require(evaluation.json.adapters.first)
        #expect(adapter.notChecked == 1 && adapter.usageErrors == 1 && adapter.failed == 0)
        #expect(adapter.scenarios.map(\.verdict) == ["passed", "notChecked", "usageError"])
    }

    @Test("crash-isolated: the correct fixtures pass, exit 0, and their JSON counts what was not checked")
    func cliRunsFixtures() async throws {
        let run = try await CLI.run([
            "conformance", "--adapter", "loop-sdk-client,loop-sdk-client-query", "--json", "--watchdog",
            "\(testWatchdog.components.seconds)",
        ])
        #expect(run.status == 0, "\(run.output)\n\(run.errors)")
        let adapters = try #require(run.json?["adapters"] as? [[String: Any]], "\(run.output)")
        #expect(adapters.compactMap { $0["name"] as? String } == ["loop-sdk-client", "loop-sdk-client-query"])
        #expect(adapters.map { $0["failed"] as? Int } == [0, 0])
        // loop-sdk-client: loop-watches-released (LoopSDK runs its own loop, no watches to count).
        #expect(adapters.map { $0["notChecked"] as? Int } == [1, 1])
    }
}

/// Shuts down, when each test ends, every `LoopSDK` it made with `FixtureConformanceTests.client(_:)`:
/// the SDK's loop thread, and the stalls of the gallery adapters that wait on it by mistake, end
/// with the test instead of running for the rest of the process.
struct ShutsDownLoopSDKs: SuiteTrait, TestTrait, TestScoping {
    @TaskLocal static var made: LockedValue<[LoopSDK]>?

    var isRecursive: Bool { true }

    func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? { testCase == nil ? nil : self }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let made = LockedValue<[LoopSDK]>([])
        // Whether the test returned or threw, what it made is shut down before the error goes on.
        var thrown: (any Error)?
        do {
            try await Self.$made.withValue(made) { try await function() }
        } catch {
            thrown = error
        }
        for sdk in made.withLock({ $0 }) { await sdk.shutdown() }
        if let thrown { throw thrown }
    }
}

extension Trait where Self == ShutsDownLoopSDKs {
    /// Every `LoopSDK` a test makes through `FixtureConformanceTests.client(_:)` is shut down when it ends.
    static var shutsDownItsLoopSDKs: Self { Self() }
}
