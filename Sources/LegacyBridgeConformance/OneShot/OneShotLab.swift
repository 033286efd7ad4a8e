import Dispatch
import LegacyBridge
import LegacySimulator

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

/// The lab's one-shot operations: each one it hands out is remembered, so that after the scenario
/// the lab can check the context lifetime rules on all of them (``lifetimeProblem()``), whatever
/// the scenario was about.
extension ScenarioLab {
    /// A one-shot operation backed by the SDK in `behavior`, and the probe that watches it.
    ///
    /// - Parameters:
    ///   - behavior: What the simulated SDK does with the request.
    ///   - timeout: The operation's timeout, if any.
    ///   - threading: The adapter's declared threading, to record where `start` ran.
    ///   - beforeStart: Runs inside `start`, on the adapter's thread, before the SDK is called.
    ///   - holdStartUntilCallbackReturned: `start` does not return before the adapter's callback
    ///     has run to its end (or the lab's patience ran out): the outcome provably arrives, and is
    ///     handled, before the adapter has its cancel function — let alone a continuation.
    /// - Returns: The operation to hand to the adapter, and the probe that watches it.
    func operation(
        _ behavior: SimulatedBehavior,
        timeout: Duration? = nil,
        threading: AdapterThreading = .anyThread,
        beforeStart: (@Sendable () -> Void)? = nil,
        holdStartUntilCallbackReturned: Bool = false
    ) -> (LegacyOperation, OperationProbe) {
        let probe = OperationProbe(threading: threading)
        register(probe)
        let sdk = self.sdk
        let patience = self.patience
        let operation = LegacyOperation(
            timeout: timeout,
            start: { callback in
                probe.noteStart()
                beforeStart?()
                // The box stands for the SDK-side operation object: it holds the adapter's callback
                // and the cancel function holds the box, the way a real SDK's request object does.
                let box = CallbackBox(callback)
                probe.watchCapture(box)
                let slot = HandleSlot()
                let started = SDK.startRequest(
                    client: sdk, request: FetchRequest(path: "/conformance", responseSize: 16), behavior: behavior,
                    onCompletion: { result in
                        probe.noteCallback()
                        box.callback(result.map(LegacyPayload.init).mapError { $0 })
                        probe.noteCallbackReturned()
                    },
                    onRelease: {
                        box.drop()
                        slot.drop()
                        probe.noteRelease()
                    })
                if holdStartUntilCallbackReturned { probe.waitForCallbackReturned(within: patience) }
                switch started {
                case .success(let handle):
                    slot.attach(handle)
                    let token = probe.handOutCancelFunction()
                    return { [box] in
                        withExtendedLifetime((box, token)) {
                            probe.noteCancel()
                            slot.cancel()
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
                let watch = ContextWatch(context)
                probe.watchContext(watch)
                let slot = HandleSlot()
                let started = SDK.startRequest(
                    client: sdk, request: FetchRequest(path: "/conformance", responseSize: 16), behavior: behavior,
                    onCompletion: { result in
                        probe.noteCallback()
                        watch.deliver(probe) { callback($0, result.map(LegacyPayload.init).mapError { $0 }) }
                        probe.noteCallbackReturned()
                    },
                    onRelease: {
                        watch.release(probe, release)
                        slot.drop()
                        probe.noteRelease()
                    })
                if holdStartUntilCallbackReturned { probe.waitForCallbackReturned(within: patience) }
                switch started {
                case .success(let handle):
                    slot.attach(handle)
                    // The cancel function reaches the SDK's handle through the slot, which lets go
                    // of it at the SDK's release: an adapter may keep this function in its context
                    // object, which the lab's guards keep alive until the scenario ends.
                    let token = probe.handOutCancelFunction()
                    return {
                        withExtendedLifetime(token) {
                            probe.noteCancel()
                            slot.cancel()
                        }
                    }
                case .failure(let error):
                    watch.deliver(probe) { callback($0, .failure(error)) }
                    watch.release(probe, release)
                    probe.noteRelease()
                    return nil
                }
            })
        return (operation, probe)
    }

    /// A one-shot operation without the SDK, completed by the scenario through the returned
    /// ``ScriptedOperation``. Its cancel function is recorded and otherwise ignored (like an SDK
    /// whose cancel is a no-op once the work is under way).
    func scriptedOperation() -> (LegacyOperation, ScriptedOperation) {
        let scripted = ScriptedOperation()
        register(scripted.probe)
        let probe = scripted.probe
        let operation = LegacyOperation(
            timeout: nil,
            start: { callback in
                probe.noteStart()
                let box = CallbackBox(callback)
                probe.watchCapture(box)
                scripted.attach(.closure(box))
                return { probe.noteCancel() }
            },
            startWithContext: { context, callback, release in
                probe.noteStart()
                let watch = ContextWatch(context)
                probe.watchContext(watch)
                scripted.attach(.context(watch, callback, release))
                return { probe.noteCancel() }
            })
        return (operation, scripted)
    }

    /// The first broken context lifetime rule among every one-shot operation of this scenario, in
    /// words, or `nil`: no callback after the adapter released its context, no release before the
    /// SDK's, no double release, and (once the SDK released it) no reference left behind.
    func lifetimeProblem() async -> String? {
        let all = probes.withLock { $0 }
        if let problem = await lateCancelProblem(all) { return problem }
        for probe in all {
            if let problem = probe.contextProblem() { return problem }
        }
        for probe in all where probe.snapshot.released && probe.context != nil {
            let freed = await eventually { probe.context?.adapterHoldsNothing ?? true }
            if let problem = probe.contextProblem() { return problem }
            if !freed {
                let references = probe.context?.adapterReferencesLeft ?? 0
                return
                    "\(probe.path): the adapter's context still had \(references) reference(s) after the SDK released it and the call returned (a leak): balance the retain made for the SDK in its release callback, and keep no other reference"
            }
        }
        return nil
    }

    /// A cancel function called again after the SDK released its operation, in words, or `nil`.
    ///
    /// The operation has ended, but the adapter may still hold its cancel function (a retry
    /// scheduled for later): each cancelled operation is watched until the adapter let go of that
    /// function, so no later call is possible, or for a bounded quiet period. A cancel function
    /// kept in a C context the adapter no longer references counts as let go: only the lab's
    /// guards keep that context alive, and the adapter can reach it no more.
    func lateCancelProblem(_ all: [OperationProbe]) async -> String? {
        let cancelled = all.filter { $0.snapshot.cancels > 0 }
        guard !cancelled.isEmpty else { return nil }
        // First the plain sign: the adapter dropped every cancel function, so whatever it does
        // after calling one (a release, a retry) has run. A context released by the SDK alone is not
        // that sign: the adapter's cancel handle may still be running past its call.
        // Bounded apart from the patience: an adapter that keeps its cancel function in its context
        // waits this long on every cancelled scenario, and a handle runs on in milliseconds.
        let dropped = await eventually(within: min(patience / 8, .seconds(2))) {
            cancelled.allSatisfy { $0.cancelFunctionFreed != false }
        }
        if !dropped {
            // A cancel function kept in the adapter's C context stays alive as long as the lab's
            // guards keep that context: then the context holding nothing else is the sign.
            _ = await eventually(within: patience / 8) {
                cancelled.allSatisfy { probe in
                    if probe.cancelFunctionFreed != false { return true }
                    guard probe.snapshot.released, let context = probe.context else { return false }
                    return context.adapterHoldsNothing
                }
            }
        }
        for probe in cancelled {
            let snapshot = probe.snapshot
            guard snapshot.cancels > 1, snapshot.cancelsAfterRelease > 0 else { continue }
            return
                "the adapter called the operation's cancel function \(snapshot.cancels) times, \(snapshot.cancelsAfterRelease) of them after the SDK had released the operation: cancel once. On a real SDK a later call reaches a handle that may already belong to another request"
        }
        return nil
    }

    /// Gives up the references the lab holds on adapters' contexts, for every operation the SDK is
    /// done with (a context the adapter over-released is left alone: freeing it is not safe).
    func releaseContextGuards() {
        for probe in probes.withLock({ $0 }) where probe.snapshot.released {
            probe.context?.dropGuards()
        }
    }
}

/// A one-shot operation the scenario drives by hand (see ``ScenarioLab/scriptedOperation()``).
final class ScriptedOperation: Sendable {
    enum Target: Sendable {
        case closure(CallbackBox)
        case context(
            ContextWatch,
            @Sendable (Unmanaged<AnyObject>, Result<LegacyPayload, any Error>) -> Void,
            @Sendable (Unmanaged<AnyObject>) -> Void)
    }

    let probe = OperationProbe()
    private let target = LockedBox<Target?>(nil)
    /// The thread running the adapter's callback right now (one delivering thread at a time).
    private let callbackThread = LockedBox<pthread_t?>(nil)

    /// Whether the calling thread is inside the adapter's callback, delivered by ``deliver(_:concurrently:)``.
    var isInsideCallbackOnThisThread: Bool {
        callbackThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    fileprivate func attach(_ new: Target) {
        target.withLock { $0 = new }
    }

    /// Whether the adapter has started the operation.
    var started: Bool { target.withLock { $0 != nil } }

    /// Delivers `outcomes` from threads of the lab's own, then releases the operation (drops the
    /// callback, or calls the context's release) once the last callback returned.
    ///
    /// - Parameters:
    ///   - outcomes: The outcomes, delivered in this order (or all at once).
    ///   - concurrently: Each outcome on its own thread, all released at the same moment
    ///     by a barrier, so that the adapter's callback runs on several threads at once with no
    ///     synchronisation between them; otherwise one thread delivers them in order.
    func deliver(_ outcomes: [Result<LegacyPayload, any Error>], concurrently: Bool) {
        guard let target = target.withLock({ $0 }) else {
            preconditionFailure("ScriptedOperation.deliver before the adapter started the operation")
        }
        let probe = self.probe
        let finisher = LockedBox(outcomes.count)
        let release: @Sendable () -> Void = { [self] in
            switch target {
            case .context(let watch, _, let release): watch.release(probe, release)
            case .closure(let box): box.drop()
            }
            self.target.withLock { $0 = nil }
            probe.noteRelease()
        }
        // Counted before the call, and (concurrently) before the barrier: between the barrier and
        // the adapter's callback the lab takes no lock, so that it adds no ordering between the
        // two threads that could hide a data race in the adapter from ThreadSanitizer.
        let call: @Sendable (Result<LegacyPayload, any Error>) -> Void = { [callbackThread] outcome in
            if !concurrently { callbackThread.withLock { $0 = pthread_self() } }
            switch target {
            case .closure(let box):
                box.callback(outcome)
            case .context(let watch, let callback, _):
                watch.deliver(probe) { callback($0, outcome) }
            }
            if !concurrently { callbackThread.withLock { $0 = nil } }
            probe.noteCallbackReturned()
            if finisher.withLock({
                $0 -= 1; return $0 == 0
            }) {
                release()
            }
        }
        if concurrently {
            let barrier = ThreadBarrier(parties: outcomes.count)
            for (index, outcome) in outcomes.enumerated() {
                onDedicatedThread("conformance-callback-\(index)") {
                    probe.noteCallback()
                    barrier.arriveAndWait()
                    call(outcome)
                }
            }
        } else {
            onDedicatedThread("conformance-callbacks") {
                for outcome in outcomes {
                    probe.noteCallback()
                    call(outcome)
                }
            }
        }
    }
}

/// Lets `parties` threads go on together: each waits until all have arrived.
final class ThreadBarrier: Sendable {
    private let arrived = LockedBox(0)
    private let go = DispatchSemaphore(value: 0)
    private let parties: Int

    init(parties: Int) { self.parties = parties }

    func arriveAndWait() {
        let last = arrived.withLock {
            $0 += 1
            return $0 == parties
        }
        if last {
            for _ in 1..<parties { go.signal() }
        } else {
            go.wait()
        }
    }
}

/// The SDK's handle of one operation, as the operation's cancel function reaches it: held from the
/// start until the SDK's release, then let go, as a real SDK frees its request object. A release
/// that comes before the handle is attached (the operation finished inside its start) wins.
final class HandleSlot: Sendable {
    private enum State {
        case waiting
        case attached(SDKHandle)
        case released
    }
    private let state = LockedBox(State.waiting)

    func attach(_ handle: SDKHandle) {
        state.withLock { state in
            if case .waiting = state { state = .attached(handle) }
        }
    }

    /// Cancels the operation, unless the SDK already released it.
    func cancel() {
        let handle = state.withLock { state -> SDKHandle? in
            if case .attached(let handle) = state { return handle }
            return nil
        }
        handle?.cancel()
    }

    /// The SDK released the operation.
    func drop() {
        let handle = state.withLock { state -> SDKHandle? in
            defer { state = .released }
            if case .attached(let handle) = state { return handle }
            return nil
        }
        _ = handle  // released outside the lock: the handle's deinit calls the SDK
    }
}

/// Holds the adapter's callback on the SDK side, until the SDK is done with the operation: then
/// it lets go, as a real SDK's request object does, so that it forms no cycle with an adapter
/// whose callback captures the operation's cancel function.
final class CallbackBox: Sendable {
    private let stored: LockedBox<(@Sendable (Result<LegacyPayload, any Error>) -> Void)?>
    init(_ callback: @escaping @Sendable (Result<LegacyPayload, any Error>) -> Void) { stored = LockedBox(callback) }

    /// Calls the adapter's callback, unless the SDK already let go of it.
    func callback(_ result: Result<LegacyPayload, any Error>) {
        stored.withLock { $0 }?(result)
    }

    /// The SDK is done with the operation: drop the adapter's callback.
    func drop() {
        let callback = stored.withLock { stored in
            defer { stored = nil }
            return stored
        }
        _ = callback  // released outside the lock: it may run the adapter's deinit
    }
}

extension LegacyPayload {
    init(_ response: FetchResponse) {
        self.init(requestID: response.requestID, attempt: UInt32(clamping: response.attempt))
    }
}

/// Watches the context an adapter hands to a C-style start.
///
/// The SDK must hand the context to every callback and to one release after the last callback;
/// the adapter must keep its retain (`Unmanaged.passRetained`) until that release and give it up
/// there. A real SDK cannot tell when an adapter breaks that rule: it hands a freed pointer back
/// and the process crashes, sometimes. The lab checks instead, every time:
///
/// - it holds a few references of its own (``guards``), so an adapter that releases too early or
///   too often never frees the object while the SDK still uses it;
/// - it reads the object's strong reference count (the standard library's `_getRetainCount`, a
///   debugging hook) and subtracts its own: what is left is what the adapter holds. Zero before a
///   callback means the adapter already released (a use-after-free in a real SDK): the callback
///   is not delivered, and recorded. Zero at the SDK's release means the adapter released early
///   and the release it is about to make is a second one: it is not called, and recorded. Below
///   zero means the adapter released more than it retained (a double release).
final class ContextWatch: @unchecked Sendable {
    // @unchecked Sendable: `context` is immutable and only handed back to the adapter or counted;
    // `guardsHeld` is behind its lock.
    static let guards = 3

    let context: Unmanaged<AnyObject>
    private let guardsHeld = LockedBox(ContextWatch.guards)
    /// The context object, without keeping it: whether it was freed once the guards are gone.
    private let object: LockedBox<WeakObject>

    init(_ context: Unmanaged<AnyObject>) {
        self.context = context
        self.object = LockedBox(WeakObject(context.takeUnretainedValue()))
        for _ in 0..<Self.guards { _ = context.retain() }
    }

    /// Whether the adapter holds no reference any more: none but the lab's guards, or, once the
    /// lab gave those up, the object was freed.
    var adapterHoldsNothing: Bool {
        if let references = adapterReferences { return references <= 0 }
        return object.withLock { $0.object == nil }
    }

    /// The strong references the adapter still holds, for messages (0 once freed).
    var adapterReferencesLeft: Int {
        if let references = adapterReferences { return references }
        guard let alive = object.withLock({ $0.object }) else { return 0 }
        // `alive` is one reference of our own.
        return strongReferenceCount(Unmanaged.passUnretained(alive)) - referenceCountOffset - 1
    }

    /// The strong references the adapter holds (its retain for the SDK plus any it keeps itself);
    /// negative after a double release; `nil` once the lab gave up its own references.
    var adapterReferences: Int? {
        guardsHeld.withLock { held in
            held > 0 ? strongReferenceCount(context) - referenceCountOffset - held : nil
        }
    }

    /// Calls `body` with the context if the adapter still holds it; records a callback after the
    /// adapter's release otherwise.
    func deliver(_ probe: OperationProbe, _ body: (Unmanaged<AnyObject>) -> Void) {
        if (adapterReferences ?? 0) > 0 {
            body(context)
        } else {
            probe.noteCallbackAfterContextRelease()
        }
    }

    /// Calls the adapter's release if it still holds the context; records an early release otherwise.
    ///
    /// The lab keeps its guards until the scenario is over, so that a release the adapter makes
    /// after the SDK's (a double release) is reported rather than freeing the object under it.
    /// Under AddressSanitizer it gives them up first instead: the adapter's release frees the
    /// context there, as over a real SDK, and any later use of it (or a second release) is a use
    /// of freed memory that AddressSanitizer reports every time, inside the scenario.
    func release(_ probe: OperationProbe, _ release: (Unmanaged<AnyObject>) -> Void) {
        if (adapterReferences ?? 0) > 0 {
            if addressSanitizerIsActive {
                _ = announcedFreedContexts
                dropGuards()
            }
            release(context)
        } else {
            probe.noteContextReleasedBeforeSDKRelease()
        }
    }

    /// Gives up the lab's references, unless the adapter over-released (then freeing is unsafe:
    /// the object is left alive on purpose).
    func dropGuards() {
        let count: Int = guardsHeld.withLock { held in
            guard held > 0, strongReferenceCount(context) - referenceCountOffset - held >= 0 else { return 0 }
            defer { held = 0 }
            return held
        }
        // Outside the lock: the last release runs the adapter's deinit.
        for _ in 0..<count { context.release() }
    }
}

/// Said once per process, before the lab first lets an adapter's release free its context.
private let announcedFreedContexts: Void = announceWatch(
    "the suite had let the SDK's release free an adapter's C context (an AddressSanitizer build), so freed memory reached after that is the adapter using its context after the release"
)

/// A weak reference to an object, to learn when it was freed.
struct WeakObject {
    weak var object: AnyObject?
    init(_ object: AnyObject) { self.object = object }
}

/// The object's strong reference count as the runtime reports it, read the same way every time.
@inline(never)
func strongReferenceCount(_ object: Unmanaged<AnyObject>) -> Int {
    Int(_getRetainCount(object.takeUnretainedValue()))
}

/// What ``strongReferenceCount(_:)`` adds to the references that exist (the temporary the read
/// itself makes), calibrated on an object with exactly one.
let referenceCountOffset: Int = {
    final class Marker {}
    let marker = Unmanaged<AnyObject>.passRetained(Marker())
    defer { marker.release() }
    return strongReferenceCount(marker) - 1
}()

/// What one operation saw of the adapter driving it. Thread-safe.
final class OperationProbe: Sendable {
    struct Snapshot {
        var starts = 0
        /// Where the latest `start` ran.
        var startSpot: ThreadSpot?
        var callbacks = 0
        var callbacksReturned = 0
        var cancels = 0
        /// Calls of the cancel function after the SDK had released the operation (its handle).
        var cancelsAfterRelease = 0
        var released = false
        /// Callbacks the SDK had to make after the adapter released its context (not delivered).
        var callbacksAfterContextRelease = 0
        /// The SDK's release came after the adapter had released its context (not delivered).
        var contextReleasedBeforeSDKRelease = false
        /// A held `start` (see ``ScenarioLab/operation(_:timeout:beforeStart:holdStartUntilCallbackReturned:)``)
        /// saw the adapter's callback return before it returned itself; `nil` when not held.
        var heldStartSawCallbackReturn: Bool?
    }

    private struct State {
        var snapshot = Snapshot()
        weak var capture: CallbackBox?
        var capturesWatched = false
        weak var cancelFunction: CancelFunctionToken?
        var cancelFunctionHandedOut = false
        var context: ContextWatch?
    }

    private let state = LockedBox(State())
    private let firstCallbackReturned = DispatchSemaphore(value: 0)
    private let threading: AdapterThreading

    init(threading: AdapterThreading = .anyThread) {
        self.threading = threading
    }

    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    func noteStart() {
        let spot = threading.spot()
        state.withLock {
            $0.snapshot.starts += 1
            $0.snapshot.startSpot = spot
        }
    }
    func noteCallback() { state.withLock { $0.snapshot.callbacks += 1 } }
    func noteCallbackReturned() {
        let first = state.withLock {
            $0.snapshot.callbacksReturned += 1
            return $0.snapshot.callbacksReturned == 1
        }
        if first { firstCallbackReturned.signal() }
    }

    /// Blocks (at most `bound`) until the adapter's first callback has returned: holds `start`
    /// open so that the outcome provably arrives, and is handled, before `start` returns. Records
    /// whether it did (``Snapshot/heldStartSawCallbackReturn``).
    func waitForCallbackReturned(within bound: Duration) {
        let returned =
            firstCallbackReturned.wait(timeout: .now() + .nanoseconds(Int(bound.nanosecondsClamped))) == .success
        state.withLock { $0.snapshot.heldStartSawCallbackReturn = returned }
    }
    func noteCancel() {
        state.withLock {
            $0.snapshot.cancels += 1
            if $0.snapshot.released { $0.snapshot.cancelsAfterRelease += 1 }
        }
    }

    /// A token that the cancel function handed to the adapter keeps alive: the probe learns when
    /// the adapter let go of the function, after which it cannot be called any more.
    func handOutCancelFunction() -> CancelFunctionToken {
        let token = CancelFunctionToken()
        state.withLock {
            $0.cancelFunction = token
            $0.cancelFunctionHandedOut = true
        }
        return token
    }

    /// Whether the adapter let go of the operation's cancel function (`nil` when none was handed out).
    var cancelFunctionFreed: Bool? {
        state.withLock { $0.cancelFunctionHandedOut ? $0.cancelFunction == nil : nil }
    }
    func noteRelease() { state.withLock { $0.snapshot.released = true } }
    func noteCallbackAfterContextRelease() { state.withLock { $0.snapshot.callbacksAfterContextRelease += 1 } }
    func noteContextReleasedBeforeSDKRelease() { state.withLock { $0.snapshot.contextReleasedBeforeSDKRelease = true } }

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

    func watchContext(_ watch: ContextWatch) {
        state.withLock { $0.context = watch }
    }

    /// The watch on the adapter's context (`nil` when the C-style start was not used).
    var context: ContextWatch? { state.withLock { $0.context } }

    /// "a cancelled operation" or "an operation that completed", for messages.
    var path: String {
        snapshot.cancels > 0 ? "in a cancelled operation" : "in an operation that completed by itself"
    }

    /// The context lifetime rule this operation's adapter broke so far, in words, or `nil`.
    func contextProblem() -> String? {
        let snapshot = self.snapshot
        let onCancel =
            snapshot.cancels > 0 ? " (it released on cancel: the SDK still calls back and releases after a cancel)" : ""
        if snapshot.callbacksAfterContextRelease > 0 {
            return
                "\(path), the SDK called back after the adapter had released its context\(onCancel): a use-after-free in a real SDK. Release the context only in the SDK's release callback, which comes after the last callback"
        }
        if snapshot.contextReleasedBeforeSDKRelease {
            return
                "\(path), the adapter had already released its context when the SDK called its release callback\(onCancel), so releasing there is a second release: a double release (use-after-free) in a real SDK. Release it only in the SDK's release callback"
        }
        if let references = context?.adapterReferences, references < 0 {
            return
                "\(path), the adapter released its context \(-references) more time(s) than it retained it: a double release"
        }
        return nil
    }
}

/// Kept alive by an operation's cancel function, and only by it.
final class CancelFunctionToken: Sendable {}
