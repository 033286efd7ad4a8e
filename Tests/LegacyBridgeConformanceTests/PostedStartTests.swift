import Dispatch
import LegacyBridge
import LegacyBridgeConformance
import Testing

/// Adapters whose SDK must be called on a loop thread of their own, as the guide *Single-threaded
/// libraries* tells users to write them: `start` and the cancel posted to an `SDKLoop`. The
/// simulator-path scenarios must judge them by the caller's outcome, on every seed.
@Suite("Simulator path: adapters that post start and cancel to a loop thread of their own")
struct PostedStartTests {
    static let seeds: [UInt64] = [1, 2, 3, 4]

    /// The scenarios that misjudged such adapters (issue 24, bugs 1–4).
    static let misjudged = [
        "finish-before-install", "cancel-before-handle", "captures-freed", "burst-random-cancels", "main-actor-caller",
    ]

    static func loop(_ name: String) throws -> SDKLoop {
        let wakeups = DispatchSemaphore(value: 0)
        return try SDKLoop(name: name, driver: .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() }))
    }

    @Test("a closure-style adapter posting start and cancel passes every one-shot scenario, on every seed")
    func closureStylePasses() async throws {
        let adapter = PostedStartAdapter(loop: try Self.loop("posted-closure"))
        for seed in Self.seeds {
            let report = await ConformanceSuite.run(adapter, options: .init(watchdog: testWatchdog, seed: seed))
            #expect(report.results.count == ConformanceSuite.scenarios(for: .oneShot).count)
            #expect(report.failures.isEmpty, "seed \(seed): \(report.rendered)")
        }
    }

    @Test(
        "a C-style adapter keeping the SDK's cancel in its context object, posting start and cancel, passes the scenarios that misjudged it, on every seed"
    )
    func contextStylePasses() async throws {
        let adapter = PostedContextAdapter(loop: try Self.loop("posted-context"))
        for seed in Self.seeds {
            let report = await ConformanceSuite.run(
                adapter, options: .init(watchdog: testWatchdog, seed: seed, only: Set(Self.misjudged)))
            #expect(report.results.count == Self.misjudged.count)
            #expect(report.failures.isEmpty, "seed \(seed): \(report.rendered)")
        }
    }
}

/// `withCallback`; `start` and the cancel posted to the adapter's own loop thread.
struct PostedStartAdapter: OneShotAdapter {
    let loop: SDKLoop
    var name: String { "test-posted-start" }
    var summary: String { "withCallback, start and cancel posted to a loop thread of its own" }
    var threading: AdapterThreading { .sdkThread(loop.scheduler) }

    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let loop = self.loop
        return try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let cancel = LockedValue<LegacyCancel?>(nil)
            try loop.post {
                let made = operation.start { completion($0) }
                cancel.withLock { $0 = made }
            }
            return CancelHandle {
                try? loop.post { cancel.withLock { $0 }?() }
            }
        }
    }
}

/// The C-style start with a retained context that also keeps the SDK's cancel function; start and
/// cancel posted to the adapter's own loop thread.
struct PostedContextAdapter: OneShotAdapter {
    let loop: SDKLoop
    var name: String { "test-posted-context" }
    var summary: String { "C-style context holding the SDK's cancel, start and cancel posted to a loop of its own" }
    var threading: AdapterThreading { .sdkThread(loop.scheduler) }

    final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        let cancel = LockedValue<LegacyCancel?>(nil)
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let loop = self.loop
        return try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Context(completion)
            try loop.post {
                let made = operation.start(
                    context: Unmanaged.passRetained(context),
                    callback: { context, result in (context.takeUnretainedValue() as! Context).completion(result) },
                    release: { context in context.release() })
                context.cancel.withLock { $0 = made }
            }
            return CancelHandle {
                try? loop.post { context.cancel.withLock { $0 }?() }
            }
        }
    }
}
