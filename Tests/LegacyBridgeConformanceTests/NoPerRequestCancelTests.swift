import LegacyBridge
import LegacyBridgeConformance
import Testing

/// An SDK that cannot withdraw a request, like hiredis: each request allocates a record, the
/// adapter's callback frees it, and a reply always comes (a held one when released).
private final class ReplyOnlySDK: Sendable {
    private struct State {
        var live = 0
        var held: [@Sendable (Result<Int, any Error>) -> Void] = []
    }

    private let state = LockedValue(State())

    /// Records allocated and not freed.
    var live: Int { state.withLock { $0.live } }

    /// Makes a request: `reply` gets `outcome` at once, or, for nil, when ``release()`` runs.
    func request(_ outcome: Result<Int, any Error>?, reply: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        state.withLock { $0.live += 1 }
        guard let outcome else {
            state.withLock { $0.held.append(reply) }
            return
        }
        reply(outcome)
    }

    /// Frees one request's record.
    func free() { state.withLock { $0.live -= 1 } }

    /// Answers every held request (a late reply for those whose caller left).
    func release() {
        let held = state.withLock { state in
            defer { state.held = [] }
            return state.held
        }
        for reply in held { reply(.success(99)) }
    }
}

private struct ReplyOnlyError: Error {}

/// The adapter: `withCallback` over a request, its record freed in the SDK's callback. `leaky`
/// frees it only when the reply reached a waiting caller, so a late reply leaks it: the mistake
/// the declaration must not hide.
/// It stays on its caller's actor (`isolation`), as the docs ask of a fixture's helpers.
private func call(
    _ sdk: ReplyOnlySDK, _ outcome: Result<Int, any Error>?, leaky: Bool = false, timeout: Duration? = nil,
    probe: CallProbe<Int>, isolation: isolated (any Actor)? = #isolation
) async throws -> Int {
    try await withCallback(isolation: isolation, timeout: timeout) { completion in
        probe.start {
            // Whether this request's reply decided its caller's outcome: false for a late reply.
            let decided = LockedValue(false)
            let deliver = probe.callback { result in
                if completion(result) { decided.withLock { $0 = true } }
            }
            sdk.request(outcome) { result in
                deliver(result)
                if !leaky || decided.withLock({ $0 }) { sdk.free() }
            }
            return nil  // no SDK cancel exists
        }
    }
}

private func fixture(
    _ sdk: ReplyOnlySDK, leaky: Bool = false, declared: SDKRequestCancellation
) -> OneShotFixture<Int> {
    OneShotFixture<Int>(
        name: leaky ? "reply-only-leaky" : "reply-only",
        succeeding: { probe in try await call(sdk, .success(7), leaky: leaky, probe: probe) },
        expecting: 7,
        failing: { probe in try await call(sdk, .failure(ReplyOnlyError()), leaky: leaky, probe: probe) },
        hanging: .init(
            start: { probe in try await call(sdk, nil, leaky: leaky, probe: probe) }, release: { sdk.release() }),
        timingOut: .init { probe, timeout in try await call(sdk, nil, leaky: leaky, timeout: timeout, probe: probe) },
        liveResources: { sdk.live },
        requestCancellation: declared)
}

/// `requestCancellation: .none`: an SDK whose request cannot be withdrawn, whose resources come
/// back with the late reply, is judged by that rule, and a leak on that path is still caught.
@Suite("Real-adapter path: an SDK without a per-request cancel")
struct NoPerRequestCancelTests {
    static let options = ConformanceOptions(watchdog: testWatchdog)

    @Test(
        "declared .none, a correct adapter passes every scenario but callback-inside-cancel (and thread-affinity: .anyThread), which are not checked"
    )
    func correctPasses() async {
        let report = await ConformanceSuite.run(fixture(ReplyOnlySDK(), declared: .none), options: Self.options)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        #expect(
            report.notChecked.map(\.name) == [
                "callback-inside-cancel", "thread-affinity", "sdk-thread-not-held", "loop-watches-released",
            ],
            "\(report.rendered)")
        #expect(report.notChecked.first?.detail.contains("without a per-request cancel") == true)
    }

    @Test(
        "declared .perRequest, the same adapter fails the cancel scenarios: the suite wanted its resources back before the late reply"
    )
    func undeclaredIsJudgedAsPerRequest() async {
        let report = await ConformanceSuite.run(
            fixture(ReplyOnlySDK(), declared: .perRequest),
            options: .init(watchdog: FixtureConformanceTests.failingWatchdog, only: ["cancel-in-flight"]))
        let result = report.results.first
        #expect(result?.verdict == .failed, "\(report.rendered)")
        #expect(result?.detail.contains("not released") == true, "\(report.rendered)")
    }

    @Test(
        "declared .none, an adapter that frees a request's record only while its caller waits is failed: the late reply leaks it",
        arguments: ["cancel-in-flight", "cancel-before-handle", "timeout"])
    func leakOnTheLateReplyIsCaught(scenario: String) async {
        let report = await ConformanceSuite.run(
            fixture(ReplyOnlySDK(), leaky: true, declared: .none),
            options: .init(watchdog: FixtureConformanceTests.failingWatchdog, only: [scenario]))
        let result = report.results.first
        #expect(result?.verdict == .failed, "\(report.rendered)")
        #expect(result?.detail.contains("late reply") == true, "\(report.rendered)")
        #expect(result?.detail.contains("still held 1 resource") == true, "\(report.rendered)")
    }
}
