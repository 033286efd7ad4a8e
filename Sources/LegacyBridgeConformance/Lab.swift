import Dispatch
import LegacyBridge
import LegacySimulator


/// Marks the main dispatch queue so code can ask, without trapping, whether it runs on it.
private let mainQueueKey: DispatchSpecificKey<UInt8> = {
    let key = DispatchSpecificKey<UInt8>()
    DispatchQueue.main.setSpecific(key: key, value: 1)
    return key
}()

/// Whether the caller runs on the main queue, the main actor's executor. (On Linux the main queue
/// is not always drained by the main thread, so the thread is not the thing to check.)
func isOnMainQueue() -> Bool {
    DispatchQueue.getSpecific(key: mainQueueKey) == 1
}

/// A fresh simulated SDK client for one scenario, plus factories for instrumented operations.
///
/// Each scenario gets its own client so counters are its own and so that tearing the client down
/// stops anything a broken adapter left running.
final class ScenarioLab: Sendable {
    let sdk: SDKClient

    init(seed: UInt64, workerThreads: Int = 4) throws {
        sdk = try SDKClient(workerThreads: workerThreads, seed: seed)
    }

    var counters: SDKCounters { sdk.counters }

    /// A one-shot operation backed by the SDK in `behavior`, and the probe that watches it.
    func operation(
        _ behavior: SimulatedBehavior,
        timeout: Duration? = nil,
        beforeStart: (@Sendable () -> Void)? = nil,
        holdStartUntilCallback: Bool = false
    ) -> (LegacyOperation, OperationProbe) {
        let probe = OperationProbe()
        let sdk = self.sdk
        let operation = LegacyOperation(
            timeout: timeout,
            start: { callback in
                probe.noteStart()
                beforeStart?()
                // The box stands for the SDK-side operation object: it holds the adapter's callback
                // and the cancel function holds the box, the way a real SDK's request object does.
                let box = CallbackBox(callback)
                probe.watchCapture(box)
                let started = SDK.startRequest(
                    client: sdk, request: FetchRequest(path: "/conformance", responseSize: 16), behavior: behavior,
                    onCompletion: { result in
                        probe.noteCallback()
                        box.callback(result.map(LegacyPayload.init).mapError { $0 })
                    },
                    onRelease: { probe.noteRelease() })
                if holdStartUntilCallback { probe.waitForCallback() }
                switch started {
                case .success(let handle):
                    return { [box] in
                        withExtendedLifetime(box) {
                            probe.noteCancel()
                            handle.cancel()
                        }
                    }
                case .failure(let error):
                    probe.noteRelease()
                    callback(.failure(error))
                    return nil
                }
            },
            startWithContext: { context, callback, release in
                probe.noteStart()
                beforeStart?()
                probe.watchAdapterContext(context.takeUnretainedValue())
                let pointer = ContextPointer(value: context)
                let started = SDK.startRequest(
                    client: sdk, request: FetchRequest(path: "/conformance", responseSize: 16), behavior: behavior,
                    onCompletion: { result in
                        probe.noteCallback()
                        // A real SDK would hand the freed pointer back here: a use-after-free. The
                        // lab checks first, so the mistake is reported every time instead of
                        // crashing sometimes.
                        guard probe.adapterContextIsAlive(atCallback: true) else { return }
                        callback(pointer.value, result.map(LegacyPayload.init).mapError { $0 })
                    },
                    onRelease: {
                        if probe.adapterContextIsAlive(atCallback: false) { release(pointer.value) }
                        probe.noteRelease()
                    })
                if holdStartUntilCallback { probe.waitForCallback() }
                switch started {
                case .success(let handle):
                    return {
                        probe.noteCancel()
                        handle.cancel()
                    }
                case .failure(let error):
                    probe.noteRelease()
                    callback(context, .failure(error))
                    release(context)
                    return nil
                }
            })
        return (operation, probe)
    }
}

/// The adapter's context as the SDK holds it: an opaque reference passed back to callbacks.
/// `@unchecked Sendable`: the lab never dereferences it; it only hands it back to the adapter,
/// whose callbacks are `@Sendable`, after checking (weakly) that the object still exists.
struct ContextPointer: @unchecked Sendable {
    let value: Unmanaged<AnyObject>
}

/// Holds the adapter's callback on the SDK side.
final class CallbackBox: Sendable {
    let callback: @Sendable (Result<LegacyPayload, any Error>) -> Void
    init(_ callback: @escaping @Sendable (Result<LegacyPayload, any Error>) -> Void) { self.callback = callback }
}

extension LegacyPayload {
    init(_ response: FetchResponse) {
        self.init(requestID: response.requestID, attempt: UInt32(clamping: response.attempt))
    }
}

/// What one operation saw of the adapter driving it. Thread-safe.
final class OperationProbe: Sendable {
    struct Snapshot {
        var starts = 0
        var startedOnMainThread: Bool?
        var callbacks = 0
        var cancels = 0
        var released = false
        /// A callback found the adapter's context already freed.
        var contextFreedBeforeCallback = false
        /// The SDK's release found the adapter's context already freed.
        var contextFreedBeforeRelease = false
    }

    private struct State {
        var snapshot = Snapshot()
        weak var capture: CallbackBox?
        var capturesWatched = false
        weak var adapterContext: AnyObject?
        var adapterContextWatched = false
    }

    private let state = LockedBox(State())
    private let firstCallback = DispatchSemaphore(value: 0)

    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    func noteStart() {
        let main = isOnMainQueue()
        state.withLock {
            $0.snapshot.starts += 1
            $0.snapshot.startedOnMainThread = main
        }
    }
    func noteCallback() {
        let first = state.withLock {
            $0.snapshot.callbacks += 1
            return $0.snapshot.callbacks == 1
        }
        if first { firstCallback.signal() }
    }

    /// Blocks until the first callback was delivered (at most 2 s): holds `start` open so the
    /// callback provably comes before `start` returns.
    func waitForCallback() {
        _ = firstCallback.wait(timeout: .now() + .seconds(2))
    }
    func noteCancel() { state.withLock { $0.snapshot.cancels += 1 } }
    func noteRelease() { state.withLock { $0.snapshot.released = true } }

    func watchCapture(_ box: CallbackBox) {
        state.withLock {
            $0.capture = box
            $0.capturesWatched = true
        }
    }

    /// Whether the SDK-side object holding the adapter's callback has been freed (`nil` when the
    /// closure-style start was not used).
    var captureFreed: Bool? {
        state.withLock { $0.capturesWatched ? $0.capture == nil : nil }
    }

    func watchAdapterContext(_ object: AnyObject) {
        state.withLock {
            $0.adapterContext = object
            $0.adapterContextWatched = true
        }
    }

    /// Whether the adapter's context object still exists; records it when it does not.
    func adapterContextIsAlive(atCallback: Bool) -> Bool {
        state.withLock {
            let alive = $0.adapterContext != nil
            if !alive {
                if atCallback { $0.snapshot.contextFreedBeforeCallback = true } else {
                    $0.snapshot.contextFreedBeforeRelease = true
                }
            }
            return alive
        }
    }

    /// Whether the adapter's context object has been freed (`nil` when the C-style start was not used).
    var adapterContextFreed: Bool? {
        state.withLock { $0.adapterContextWatched ? $0.adapterContext == nil : nil }
    }
}

/// How long scenarios wait for something that must happen (a release, a cancel). Set per run from
/// the watchdog, so a loaded machine (or ThreadSanitizer) does not turn a slow pass into a failure.
enum Patience {
    @TaskLocal static var bound: Duration = .seconds(2)
}

/// Polls `condition` until it holds or `bound` (default: the run's patience) passes. Returns
/// whether it held. The sleep is only an upper bound on how long to wait for something that must happen.
func eventually(within bound: Duration? = nil, _ condition: @Sendable () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + (bound ?? Patience.bound)
    while clock.now < deadline {
        if condition() { return true }
        // A cancelled task cannot sleep; the watchdog has given up on it anyway.
        if Task.isCancelled { break }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}
