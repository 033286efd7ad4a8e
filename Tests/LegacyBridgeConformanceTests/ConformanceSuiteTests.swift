import Foundation
import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

@Suite("Conformance suite: the library's adapters pass, broken ones are caught")
struct ConformanceSuiteTests {
    static let patient = ConformanceOptions(watchdog: testWatchdog)

    @Test("withCallback adapter passes every one-shot scenario")
    func withCallbackPasses() async {
        let report = await ConformanceSuite.run(WithCallbackAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("withCallback over a C-style owned context passes every one-shot scenario")
    func withCallbackContextPasses() async {
        let report = await ConformanceSuite.run(WithCallbackContextAdapter(), options: Self.patient)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("CallbackStream adapter passes every stream scenario")
    func callbackStreamPasses() async {
        let report = await ConformanceSuite.run(CallbackStreamAdapter(), options: Self.patient)
        #expect(report.results.count == ConformanceSuite.scenarios(for: .stream).count)
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test("an adapter that drops the caller's isolation is caught by main-actor-caller")
    func hoppingAdapterIsCaught() async {
        let report = await ConformanceSuite.run(
            HoppingAdapter(), options: .init(watchdog: testWatchdog, only: ["main-actor-caller"]))
        #expect(report.results.map(\.name) == ["main-actor-caller"])
        #expect(report.failures.map(\.name) == ["main-actor-caller"])
        #expect(report.failures.first?.detail.contains("hopped") == true)
    }

    @Test("an adapter that keeps every cancel function is caught by captures-freed")
    func leakyAdapterIsCaught() async {
        let report = await ConformanceSuite.run(
            LeakyAdapter(), options: .init(watchdog: .seconds(10), only: ["captures-freed"]))
        #expect(report.failures.map(\.name) == ["captures-freed"])
    }

    @Test("a stream adapter that keeps the newest 8 events is reported as losing events, not as buffering them")
    func droppingStreamIsCaught() async {
        let report = await ConformanceSuite.run(
            DroppingStreamAdapter(), options: .init(watchdog: testWatchdog, only: ["stream-stalled-consumer"]))
        #expect(report.failures.map(\.name) == ["stream-stalled-consumer"])
        let detail = report.failures.first?.detail ?? ""
        #expect(detail.contains("never reached the consumer"), "\(detail)")
        #expect(!detail.contains("buffered for a stalled consumer"), "\(detail)")
    }

    @Test(
        "an adapter that drops an outcome arriving on another thread before its continuation exists fails finish-before-install on every seed"
    )
    func earlyOutcomeDropIsCaughtEverySeed() async {
        for seed in UInt64(1)...5 {
            let report = await ConformanceSuite.run(
                DropsEarlyOutcomeAdapter(),
                options: .init(watchdog: .seconds(1), seed: seed, only: ["finish-before-install"]))
            #expect(report.failures.map(\.name) == ["finish-before-install"], "seed \(seed): \(report.rendered)")
            // The outcome was dropped, so the call never returns: a hang, not some other failure.
            #expect(report.failures.first?.verdict == .hung, "seed \(seed): \(report.rendered)")
        }
        // The same adapter keeps an early outcome made on start's own thread: what catches it is
        // the cross-thread order the scenario forces, not some other mistake.
        let report = await ConformanceSuite.run(
            DropsEarlyOutcomeAdapter(), options: .init(watchdog: testWatchdog, only: ["synchronous-callback"]))
        #expect(report.failures.isEmpty, "\(report.rendered)")
    }

    @Test(
        "stream-failure delivers the source's failure to a consumer already waiting in next(), on every seed"
    )
    func terminalReachesAWaitingConsumer() async {
        let recorder = EndRecorder()
        for seed in UInt64(1)...5 {
            let report = await ConformanceSuite.run(
                WaitObservingStreamAdapter(recorder: recorder),
                options: .init(watchdog: testWatchdog, seed: seed, only: ["stream-failure"]))
            #expect(report.failures.isEmpty, "seed \(seed): \(report.rendered)")
        }
        #expect(recorder.consumerWaiting == Array(repeating: true, count: 5))
    }

    @Test(
        "an in-process run reports an adapter that blocks every thread it runs on as a hang while those threads are still blocked",
        .enabled(
            if: !threadSanitizerIsActive,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func watchdogFiresWhileThreadsAreBlocked() async {
        // The adapter blocks every cooperative thread it gets, which would stall every other test of
        // this process: it runs in a child process of its own (an exit test).
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let blocker = ThreadBlockingAdapter()
            // Upper bound only: if the watchdog could not report, the blocked threads are let go
            // after 60 s so that the test ends (and fails) instead of hanging.
            onDedicatedThread("safety timer") {
                sleep(60)
                blocker.releaseAll(bySafetyTimer: true)
            }
            let report = await ConformanceSuite.run(
                blocker, options: .init(watchdog: .seconds(1), burstSize: 64, only: ["burst-random-cancels"]))
            let releasedBySafetyTimer = blocker.releasedBySafetyTimer
            blocker.releaseAll(bySafetyTimer: false)
            precondition(report.results.map(\.verdict) == [.hung], "\(report.rendered)")
            precondition(!releasedBySafetyTimer, "the report came only after the blocked threads were let go")
            precondition(blocker.blockedAtLeastOnce, "the adapter never blocked a thread")
        }
    }

    @Test(
        "a C-style adapter that releases its context on cancel is flagged by every scenario that cancels, in process, on every seed"
    )
    func doubleReleaseIsCaughtInProcess() async {
        let cancelling = [
            "cancel-in-flight", "cancel-before-handle", "callback-inside-cancel", "late-callback-after-cancel",
            "timeout", "context-released-once",
        ]
        for seed in UInt64(1)...3 {
            let report = await ConformanceSuite.run(
                ContextReleasedOnCancelAdapter(),
                options: .init(watchdog: testWatchdog, seed: seed, only: Set(cancelling)))
            #expect(Set(report.failures.map(\.name)) == Set(cancelling), "seed \(seed): \(report.rendered)")
            for failure in report.failures {
                #expect(
                    failure.verdict == .failed && failure.detail.contains("release"),
                    "seed \(seed): \(failure.name): \(failure.detail)")
            }
        }
    }

    @Test(
        "a double release made after the SDK released the context, while the adapter's cancel handle is still running, is flagged"
    )
    func lateDoubleReleaseIsCaught() async {
        // The SDK releases the context inside the cancel call (a silent cancel), and the handle
        // over-releases only after a pause: the suite must judge once the handle has returned, not
        // once the SDK's release was seen.
        let report = await ConformanceSuite.run(
            PausedDoubleReleaseAdapter(), options: .init(watchdog: testWatchdog, only: ["cancel-before-handle"]))
        #expect(report.failures.map(\.name) == ["cancel-before-handle"], "\(report.rendered)")
        #expect(report.failures.first?.detail.contains("release") == true, "\(report.rendered)")
    }

    @Test("a scenario that never ends is reported as a hang and the suite goes on")
    func hangIsReported() async {
        let report = await ConformanceSuite.run(
            StuckAdapter(),
            options: .init(watchdog: .milliseconds(300), only: ["synchronous-callback", "foreign-thread-callback"]))
        #expect(report.results.count == 2)
        #expect(report.results.allSatisfy { $0.verdict == .hung })
    }

    @Test("every gallery adapter documents the scenarios that flag it, and they exist")
    func galleryIsDocumented() {
        let gallery = AdapterCatalog.all.filter(\.isGallery)
        #expect(gallery.count >= 7)
        for entry in gallery {
            #expect(!entry.flaggedBy.isEmpty, "\(entry.name)")
            #expect(Set(entry.flaggedBy).isSubset(of: Set(entry.scenarioNames)), "\(entry.name)")
            #expect(entry.summary.hasPrefix("WRONG ON PURPOSE"), "\(entry.name)")
        }
        #expect(
            AdapterCatalog.library.map(\.name).sorted() == [
                "callback-stream", "coalesced-calls", "coalesced-double-coalesced-calls",
                "coalesced-double-coalesced-calls-no-cancel", "keyed-double-pending-requests",
                "keyed-double-pending-requests-no-cancel", "latest-double-latest-wins",
                "latest-double-latest-wins-no-cancel", "latest-wins", "loop-sdk-client", "loop-sdk-client-events",
                "loop-sdk-client-latest-events", "loop-sdk-client-query", "mailbox-sdk-client", "offload-pool",
                "pending-requests",
                "sdk-thread-executor",
                "shared-double-shared-subscription", "shared-subscription", "socket-sdk-client", "with-callback",
                "with-callback-context",
            ])
    }
}

// MARK: - Broken adapters defined by the tests (they do not crash, so they run in process)

/// Handles a callback on the thread that is running `start` (a synchronous one) and one that comes
/// after the continuation is installed; one from another thread in between is dropped, because its
/// author assumed "callbacks from other threads come later".
private struct DropsEarlyOutcomeAdapter: OneShotAdapter {
    var name: String { "test-drops-early-outcome" }
    var summary: String { "drops an outcome from another thread that arrives before the continuation" }

    private struct State {
        var continuation: CheckedContinuation<LegacyPayload, any Error>?
        var early: Result<LegacyPayload, any Error>?
        var starting: pthread_t?
    }

    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let state = LockedState(State())
        state.with { $0.starting = pthread_self() }
        _ = operation.start { result in
            let continuation = state.with { state -> CheckedContinuation<LegacyPayload, any Error>? in
                if let continuation = state.continuation {
                    state.continuation = nil
                    return continuation
                }
                if let starting = state.starting, pthread_equal(starting, pthread_self()) != 0, state.early == nil {
                    state.early = result
                }
                return nil  // from another thread, before install: dropped
            }
            continuation?.resume(with: result)
        }
        state.with { $0.starting = nil }
        return try await withCheckedThrowingContinuation(isolation: isolation) { continuation in
            let early = state.with { state -> Result<LegacyPayload, any Error>? in
                if let early = state.early { return early }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }
    }
}

/// Records, for each stream, whether its consumer was waiting in next() when the source's end came.
private final class EndRecorder: @unchecked Sendable {
    // @unchecked Sendable: `waiting` is only touched under `lock`.
    private let lock = NSLock()
    private var waiting: [Bool] = []
    func record(_ consumerWaiting: Bool) { lock.withLock { waiting.append(consumerWaiting) } }
    var consumerWaiting: [Bool] { lock.withLock { waiting } }
}

/// A minimal hand-written stream (unbounded, arrival order) that tells the recorder whether its
/// consumer was parked in next() when the source's end arrived. Ends once; quiet afterwards.
private struct WaitObservingStreamAdapter: StreamAdapter {
    let recorder: EndRecorder
    var name: String { "test-wait-observing" }
    var summary: String { "records whether the consumer waited when the end came" }

    struct Events: AsyncSequence {
        typealias Element = LegacyEvent
        let source: LegacyEventSource
        let recorder: EndRecorder

        struct AsyncIterator: AsyncIteratorProtocol {
            let channel: Channel
            mutating func next() async throws -> LegacyEvent? { try await channel.next() }
        }

        func makeAsyncIterator() -> AsyncIterator {
            let channel = Channel(recorder: recorder)
            _ = source.start(onEvent: { channel.event($0) }, onEnd: { channel.end($0) })
            return AsyncIterator(channel: channel)
        }
    }

    final class Channel: Sendable {
        private struct State {
            var buffer: [LegacyEvent] = []
            var end: Result<Void, any Error>?
            var endDelivered = false
            var waiter: CheckedContinuation<LegacyEvent?, any Error>?
        }
        private let state = LockedState(State())
        private let recorder: EndRecorder
        init(recorder: EndRecorder) { self.recorder = recorder }

        func event(_ event: LegacyEvent) {
            let waiter = state.with { state -> CheckedContinuation<LegacyEvent?, any Error>? in
                guard state.end == nil else { return nil }
                if let waiter = state.waiter {
                    state.waiter = nil
                    return waiter
                }
                state.buffer.append(event)
                return nil
            }
            waiter?.resume(returning: event)
        }

        func end(_ error: (any Error)?) {
            let (first, waiter) = state.with { state -> (Bool, CheckedContinuation<LegacyEvent?, any Error>?) in
                guard state.end == nil else { return (false, nil) }
                state.end = error.map { .failure($0) } ?? .success(())
                defer { state.waiter = nil }
                if state.waiter != nil { state.endDelivered = true }
                return (true, state.waiter)
            }
            guard first else { return }
            recorder.record(waiter != nil)
            if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
        }

        func next() async throws -> LegacyEvent? {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.with { state -> Result<LegacyEvent?, any Error>? in
                    if !state.buffer.isEmpty { return .success(state.buffer.removeFirst()) }
                    if let end = state.end {
                        defer { state.endDelivered = true }
                        if state.endDelivered { return .success(nil) }
                        return end.map { nil }
                    }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    func events(from source: LegacyEventSource) -> Events { Events(source: source, recorder: recorder) }
}

/// Blocks every thread it is called on until the test lets it go.
private final class ThreadBlockingAdapter: OneShotAdapter, @unchecked Sendable {
    // @unchecked Sendable: the mutable fields are only touched under `lock`; the semaphore is thread-safe.
    private let lock = NSLock()
    private let gate = DispatchSemaphore(value: 0)
    private var released = false
    private var releasedByTimer = false
    private var blocked = 0

    var name: String { "test-thread-blocking" }
    var summary: String { "blocks the calling thread on a semaphore" }

    var releasedBySafetyTimer: Bool { lock.withLock { releasedByTimer } }
    var blockedAtLeastOnce: Bool { lock.withLock { blocked > 0 } }

    func releaseAll(bySafetyTimer: Bool) {
        let first = lock.withLock { () -> Bool in
            defer { released = true }
            if !released && bySafetyTimer { releasedByTimer = true }
            return !released
        }
        if first { for _ in 0..<10_000 { gate.signal() } }
    }

    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        block()
        throw CancellationError()
    }

    private func block() {
        let wait = lock.withLock { () -> Bool in
            blocked += 1
            return !released
        }
        if wait { gate.wait() }
    }
}

/// A value behind a lock, for the test adapters.
private final class LockedState<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func with<Result>(_ body: (inout Value) -> Result) -> Result { lock.withLock { body(&value) } }
}

/// Passes `nil` isolation: `start` runs off the caller's actor.
private struct HoppingAdapter: OneShotAdapter {
    var name: String { "test-hopping" }
    var summary: String { "withCallback without the caller's isolation" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await hop(operation)
    }
    // A nonisolated async function runs on the global executor: the hop the scenario must see.
    private nonisolated func hop(_ operation: LegacyOperation) async throws -> LegacyPayload {
        try await withCallback(isolation: nil, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

/// Keeps every cancel function forever (a cycle in real code, a leak here).
private struct LeakyAdapter: OneShotAdapter {
    static let kept = LockedCancels()
    var name: String { "test-leaky" }
    var summary: String { "keeps its cancel functions" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let cancel = operation.start { completion($0) }
            if let cancel { Self.kept.append(cancel) }
            return cancel.map(CancelHandle.init)
        }
    }
}

final class LockedCancels: @unchecked Sendable {
    // @unchecked Sendable: `cancels` is only touched under `lock`.
    private let lock = NSLock()
    private var cancels: [LegacyCancel] = []
    func append(_ cancel: @escaping LegacyCancel) { lock.withLock { cancels.append(cancel) } }
}

/// Never returns.
private struct StuckAdapter: OneShotAdapter {
    var name: String { "test-stuck" }
    var summary: String { "never resumes" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        await withUnsafeContinuation(isolation: isolation) { (_: UnsafeContinuation<Void, Never>) in }
        throw CancellationError()
    }
}

/// Keeps only the newest 8 events: bounded, but lossy.
private struct DroppingStreamAdapter: StreamAdapter {
    var name: String { "test-dropping" }
    var summary: String { "bufferingNewest(8)" }
    func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(buffering: .bufferingNewest(8), ordering: .sequenced(window: max(1, source.reorderWindow))) {
            sink in
            let control = source.start(
                onEvent: { sink.yield($0, sequence: $0.sequence) },
                onEnd: { error in if let error { sink.finish(throwing: error) } else { sink.finish() } })
            return StreamControl(cancel: CancelHandle(control.cancel))
        }
    }
}

/// Releases its C context in the cancel handle, a moment after the SDK's cancel returned: the
/// same double release as the gallery's `context-released-on-cancel`, as a preempted handle thread
/// makes it.
private struct PausedDoubleReleaseAdapter: OneShotAdapter {
    var name: String { "test-paused-double-release" }
    var summary: String { "releases its context 200 ms after calling the SDK's cancel" }

    private final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    private struct Retained: @unchecked Sendable {
        let value: Unmanaged<AnyObject>
    }

    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Unmanaged<AnyObject>.passRetained(Context(completion))
            let cancel = operation.start(
                context: context,
                callback: { context, result in (context.takeUnretainedValue() as! Context).completion(result) },
                release: { context in context.release() })
            let retained = Retained(value: context)
            return cancel.map { cancel in
                CancelHandle {
                    cancel()
                    usleep(200_000)  // the handle's thread preempted; the suite must still see what follows
                    retained.value.release()
                }
            }
        }
    }
}
