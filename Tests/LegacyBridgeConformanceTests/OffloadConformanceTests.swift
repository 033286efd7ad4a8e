import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The thread-affine and blocking scenarios against the library's adapters and the gallery's.
@Suite("Conformance: thread-affine and blocking SDKs")
struct OffloadConformanceTests {
    static let patient = ConformanceOptions(watchdog: testWatchdog)

    @Test("the SDK-thread-executor adapter passes every thread-affine scenario")
    func executorAdapterPasses() async {
        let report = await ConformanceSuite.run(SDKThreadExecutorAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .threadAffine).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("the OffloadPool adapter passes every blocking scenario")
    func offloadAdapterPasses() async {
        let report = await ConformanceSuite.run(OffloadPoolAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .blocking).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    // The DispatchQueue.global + semaphore gallery adapter blocks the cooperative pool of the
    // process that runs it: CLITests.galleryFlagged checks it in a child process, never here.

    @Test("an adapter that offloads but never interrupts is caught by blocking-cancel-interrupts only")
    func noInterruptIsCaught() async {
        let report = await ConformanceSuite.run(NoInterruptAdapter(), options: Self.patient)
        #expect(report.failures.map(\.name) == ["blocking-cancel-interrupts"], "\(report.rendered)")
        #expect(report.failures.first?.detail.contains("never interrupted") == true)
    }

    @Test(
        "a blocking call made in a detached task is seen on the cooperative pool, whatever the load",
        .enabled(
            if: !threadSanitizerIsActive,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func detachedTaskIsSeenOnThePool() async {
        // This adapter blocks threads of the cooperative pool, which every other test of this
        // process needs: it runs in a child process of its own (an exit test).
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let report = await ConformanceSuite.run(
                DetachedTaskBlockingAdapter(),
                options: .init(watchdog: testWatchdog, only: ["blocking-value-and-error"]))
            precondition(report.failures.map(\.name) == ["blocking-value-and-error"], "\(report.rendered)")
            precondition(
                report.failures.allSatisfy { $0.detail.contains("inside a task on Swift's own threads") },
                "\(report.rendered)")
        }
    }

    @Test(
        "a blocking call retried after its interrupt is caught on every seed, however late the retry",
        .enabled(
            if: !threadSanitizerIsActive,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func retryAfterInterruptIsCaught() async {
        // The scenario's verdict needs the cancelled caller back within its promptness bound. In
        // the shared test process, the stress tests beside it put thousands of jobs ahead of that
        // caller on the cooperative pool, and under load it waited longer than the bound: it runs
        // in a child process of its own (an exit test).
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            for seed in UInt64(1)...4 {
                let report = await ConformanceSuite.run(
                    RetryAfterInterruptAdapter(),
                    options: .init(watchdog: testWatchdog, seed: seed, only: ["blocking-cancel-interrupts"]))
                precondition(
                    report.failures.map(\.name) == ["blocking-cancel-interrupts"], "seed \(seed): \(report.rendered)")
                precondition(
                    report.failures.first?.detail.contains("again 2 time(s) after it had interrupted it") == true,
                    "seed \(seed): \(report.rendered)")
            }
        }
    }

    @Test(
        "a thread-affine adapter that blocks its caller until the busy loop ran the call is caught on every seed",
        .enabled(
            if: !threadSanitizerIsActive,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func semaphorePostIsCaught() async {
        // The adapter blocks its caller's cooperative thread on a semaphore, which every other test
        // of this process needs: it runs in a child process of its own (an exit test).
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            for seed in UInt64(1)...4 {
                let report = await ConformanceSuite.run(
                    SemaphorePostAffineAdapter(),
                    options: .init(watchdog: .seconds(5), seed: seed, only: ["thread-affine-caller-not-blocked"]))
                precondition(
                    report.failures.map(\.name) == ["thread-affine-caller-not-blocked"],
                    "seed \(seed): \(report.rendered)")
                precondition(
                    report.failures.first?.detail.contains("the caller's thread ran nothing else") == true,
                    "seed \(seed): \(report.rendered)")
            }
        }
    }

    @Test("a plain actor around a thread-affine SDK is flagged by both thread-affine scenarios")
    func plainActorIsFlagged() async {
        let report = await ConformanceSuite.run(PlainActorAffineAdapter(), options: Self.patient)
        #expect(
            report.failures.map(\.name).sorted() == [
                "thread-affine-calls-on-sdk-thread", "thread-affine-cancel-on-sdk-thread",
            ])
        #expect(
            report.failures.allSatisfy { $0.verdict == .failed && $0.detail.contains("thread") }, "\(report.rendered)")
    }
}

/// Runs the call on an OffloadPool but passes no interrupt: a cancelled caller is let go, and its
/// call keeps a pool thread for its whole duration.
private struct NoInterruptAdapter: BlockingAdapter {
    static let pool = Result { try OffloadPool(threads: 16, name: "conf-tests") }
    var name: String { "test-no-interrupt" }
    var summary: String { "OffloadPool.run without the call's interrupt" }
    func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await Self.pool.get().run(isolation: isolation) { try call.perform() }
    }
}

/// Makes the blocking call in a detached task and awaits it: the caller suspends, but the call
/// holds a thread of the cooperative pool for its whole duration.
private struct DetachedTaskBlockingAdapter: BlockingAdapter {
    var name: String { "test-detached-task-blocking" }
    var summary: String { "the blocking call in Task.detached" }
    func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await Task.detached { try call.perform() }.value
    }
}
