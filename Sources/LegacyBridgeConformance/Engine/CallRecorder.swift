import Dispatch
import LegacyBridge

// What the suite puts behind a `CallProbe`: it records where and when the adapter started the SDK
// call, what the SDK's callback delivered, and every SDK cancel; and, as the scenario asks, makes
// the callback path hostile (a duplicate or conflicting outcome, a callback before `start`
// returns, on a fresh thread, or inside the SDK's cancel).

/// How a scenario makes the SDK misbehave through one call's probe.
struct CallHostility<Value: Sendable>: Sendable {
    /// The probe's `start` cancels the caller's task before the SDK call is made.
    var cancelCallerInStart = false
    /// Delivered through the wrapped callback right after the SDK call was made, before `start`
    /// returns; the SDK's own callbacks are then withheld.
    var synchronousValue: Value?
    /// Each outcome the SDK reports is delivered twice.
    var repeatEach = false
    /// Delivered right after the SDK's first outcome.
    var conflicting: Result<Value, any Error>?
    /// Each outcome the SDK reports is delivered on a new thread of the suite's own.
    var foreignThread = false
    /// Delivered synchronously inside the SDK's cancel, as SDKs whose cancel calls back do.
    var insideCancel: (any Error)?
    /// The call was given a timeout that should expire: its error ends it the way a cancel does.
    var timesOut = false
    /// The call is superseded by a newer one (latest-wins): the adapter's error for that ends it
    /// the way a cancel does.
    var superseded = false
    /// The adapter's SDK cancel waits here (on the adapter's thread, before the SDK's cancel runs)
    /// until the scenario opens it: a cancel forced to come after what the scenario does next.
    var holdCancel: CancelHold?
}

/// A gate the adapter's SDK cancel waits at, bounded, until the scenario opens it.
final class CancelHold: Sendable {
    private let opened = DispatchSemaphore(value: 0)
    private let bound: Duration
    private let arrivals = LockedBox(0)

    /// - Parameter bound: The longest a cancel waits, should the scenario never open the gate.
    init(bound: Duration) {
        self.bound = bound
    }

    /// Lets every waiting and later cancel go.
    func open() {
        // Enough for every cancel that may wait (each takes one and gives it back).
        opened.signal()
    }

    /// How many cancels reached the gate so far (held or let through).
    var arrived: Int { arrivals.withLock { $0 } }

    /// Waits until ``open()`` or the bound.
    func wait() {
        arrivals.withLock { $0 += 1 }
        if opened.wait(timeout: .now() + .nanoseconds(Int(bound.nanosecondsClamped))) == .success {
            opened.signal()
        }
    }
}

/// How a call ended, as the scenario classifies it.
enum CallEnd: Sendable {
    /// The SDK's own outcome decided (a value or its error).
    case sdkOutcome
    /// The caller's cancellation or the adapter's timeout decided.
    case cancelled
}

/// Records one call made through a ``CallProbe`` and makes it misbehave as told.
final class CallRecorder<Value: Sendable>: CallProbeHooks, FixtureWatch, Sendable {
    struct Snapshot {
        var startsBegun = 0
        var startsEnded = 0
        var startSpots: [ThreadSpot] = []
        var callbacksWrapped = 0
        /// Outcomes the SDK's callback reported (each once, whatever the probe then did with it).
        var sdkOutcomes: [Result<Value, any Error>] = []
        var cancels = 0
        /// SDK cancels that returned.
        var cancelsEnded = 0
        /// Values the SDK reported after one of the adapter's SDK cancels had returned: the cancel
        /// did not stop the request.
        var valuesAfterCancelReturned = 0
        var cancelSpots: [ThreadSpot] = []
        /// SDK cancels made before the SDK call was started.
        var cancelsBeforeStart = 0
        /// SDK cancels made after the call had ended.
        var cancelsAfterEnd = 0
        /// SDK cancels made after the SDK had reported an outcome.
        var cancelsAfterSDKOutcome = 0
        var end: CallEnd?
        /// The synchronous value could not be delivered: no callback was wrapped by then.
        var nothingToDeliverThrough = false

        /// Whether the adapter passes the call through the probe at all.
        var usesProbe: Bool { startsBegun > 0 || callbacksWrapped > 0 }
        var sdkReportedFailure: Bool { sdkOutcomes.contains { if case .failure = $0 { true } else { false } } }
        var sdkReportedSuccess: Bool { sdkOutcomes.contains { if case .success = $0 { true } else { false } } }
    }

    private struct State {
        var snapshot = Snapshot()
        var delivers: [@Sendable (Result<Value, any Error>) -> Void] = []
        var caller: (@Sendable () -> Void)?
        /// What the probes handed to the adapter hold; weak here, so that its end says the adapter
        /// let go of every copy of the probe and can make no more SDK call through it.
        weak var handedOut: ProbeForwarder<Value>?
    }

    let hostility: CallHostility<Value>
    let threading: AdapterThreading
    private let state = LockedBox(State())

    init(_ hostility: CallHostility<Value> = CallHostility(), threading: AdapterThreading) {
        self.hostility = hostility
        self.threading = threading
    }

    /// The probe to hand to the adapter. Its copies hold a forwarder, not this recorder, so that
    /// ``adapterLetGo`` can tell when the adapter dropped them all.
    var probe: CallProbe<Value> {
        let forwarder = state.withLock { state in
            if let current = state.handedOut { return current }
            let made = ProbeForwarder(to: self)
            state.handedOut = made
            return made
        }
        return CallProbe(hooks: forwarder)
    }

    /// Whether the adapter holds no copy of the probe any more: after that, it can make no SDK call
    /// this recorder would count (a retried or late cancel, say).
    var adapterLetGo: Bool { state.withLock { $0.handedOut == nil } }
    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// How to cancel the caller's task (``CallHostility/cancelCallerInStart``).
    func setCaller(cancel: @escaping @Sendable () -> Void) {
        state.withLock { $0.caller = cancel }
    }

    /// The caller got its outcome: a value, or an error other than `CancellationError`, is the
    /// SDK's own outcome unless the call was given a timeout (``CallHostility/timesOut``).
    func callReturned(_ result: Result<Value, any Error>) {
        let end: CallEnd
        switch result {
        case .success: end = .sdkOutcome
        case .failure(let error) where error is CancellationError: end = .cancelled
        case .failure: end = hostility.timesOut || hostility.superseded ? .cancelled : .sdkOutcome
        }
        state.withLock { $0.snapshot.end = end }
    }

    /// Delivers `outcome` through every callback the adapter wrapped, as a late SDK callback would.
    func deliverLate(_ outcome: Result<Value, any Error>) {
        for deliver in state.withLock({ $0.delivers }) { deliver(outcome) }
    }

    // MARK: CallProbeHooks

    func startBegins() {
        let spot = threading.spot()
        let cancelCaller = state.withLock { state -> (@Sendable () -> Void)? in
            state.snapshot.startsBegun += 1
            state.snapshot.startSpots.append(spot)
            return hostility.cancelCallerInStart ? state.caller : nil
        }
        // The caller's task, held by the scenario: never the current task, which a start posted to
        // the SDK's thread does not run in.
        cancelCaller?()
    }

    func startEnded(threw: Bool) {
        let delivers = state.withLock { state in
            state.snapshot.startsEnded += 1
            if hostility.synchronousValue != nil && state.delivers.isEmpty {
                state.snapshot.nothingToDeliverThrough = true
            }
            return state.delivers
        }
        if let value = hostility.synchronousValue, !threw {
            for deliver in delivers { deliver(.success(value)) }
        }
    }

    func wrapCallback(
        _ deliver: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) -> @Sendable (Result<Value, any Error>) -> Void {
        state.withLock {
            $0.snapshot.callbacksWrapped += 1
            $0.delivers.append(deliver)
        }
        return { [self] outcome in sdkReported(outcome, through: deliver) }
    }

    func cancelBegins() {
        hostility.holdCancel?.wait()
        let spot = threading.spot()
        state.withLock { state in
            state.snapshot.cancels += 1
            state.snapshot.cancelSpots.append(spot)
            if state.snapshot.startsBegun == 0 { state.snapshot.cancelsBeforeStart += 1 }
            if state.snapshot.end != nil { state.snapshot.cancelsAfterEnd += 1 }
            if !state.snapshot.sdkOutcomes.isEmpty { state.snapshot.cancelsAfterSDKOutcome += 1 }
        }
    }

    func cancelEnded() {
        state.withLock { $0.snapshot.cancelsEnded += 1 }
        // Inside the adapter's cancel, right after the SDK's: as an SDK whose cancel calls back.
        guard let error = hostility.insideCancel else { return }
        for deliver in state.withLock({ $0.delivers }) { deliver(.failure(error)) }
    }

    private func sdkReported(
        _ outcome: Result<Value, any Error>, through deliver: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) {
        let first = state.withLock { state in
            state.snapshot.sdkOutcomes.append(outcome)
            if case .success = outcome, state.snapshot.cancelsEnded > 0 {
                state.snapshot.valuesAfterCancelReturned += 1
            }
            return state.snapshot.sdkOutcomes.count == 1
        }
        if hostility.synchronousValue != nil { return }  // withheld: the call was answered in start
        let hostility = self.hostility
        let pass: @Sendable () -> Void = {
            deliver(outcome)
            if hostility.repeatEach { deliver(outcome) }
            if first, let conflicting = hostility.conflicting { deliver(conflicting) }
        }
        if hostility.foreignThread {
            onDedicatedThread("conformance callback", pass)
        } else {
            pass()
        }
    }

    // MARK: FixtureWatch

    /// Rules broken on this call: a second SDK cancel, a cancel after the SDK's own outcome
    /// decided, a cancel before the call was started, an SDK call off the SDK's thread.
    func problem() -> String? {
        let snapshot = self.snapshot
        if snapshot.cancels > 1 {
            let late =
                snapshot.cancelsAfterEnd > 0 ? ", \(snapshot.cancelsAfterEnd) of them after the call had ended" : ""
            return
                "the adapter called the SDK's cancel \(snapshot.cancels) times for one call\(late): cancel once. A second cancel reaches an SDK that may have reused the handle for another request"
        }
        if snapshot.end == .sdkOutcome && snapshot.cancelsAfterSDKOutcome > 0 {
            return
                "the call ended with the SDK's own outcome, yet the adapter called the SDK's cancel\(snapshot.cancelsAfterEnd > 0 ? " after the call had ended" : ""): never cancel an operation whose completion decided (cancel is not close; it can hit another request that reuses the handle)"
        }
        if snapshot.cancelsBeforeStart > 0 {
            return
                "the adapter called the SDK's cancel before it had started the SDK call: the cancel found nothing to stop, and the call it started next runs on. Make the cancel after the start (post both to the SDK's thread, in that order)"
        }
        if let spot = snapshot.startSpots.first(where: { $0.onSDKThread == false }) {
            return
                "the adapter started the SDK call off the SDK's thread\(spot.onMainActor ? " (on the main actor)" : ""), though it declares threading \(threading.declared): post the start to the SDK's thread"
        }
        if snapshot.cancelSpots.contains(where: { $0.onSDKThread == false }) {
            return
                "the adapter called the SDK's cancel off the SDK's thread, though it declares threading \(threading.declared): post the cancel to the SDK's thread (after the start)"
        }
        return nil
    }
}

/// A call of the fixture's, running in a task of its own that the scenario holds.
struct LaunchedCall<Value: Sendable>: Sendable {
    let recorder: CallRecorder<Value>
    let task: Task<Result<Value, any Error>, Never>

    /// The caller's outcome.
    var result: Result<Value, any Error> {
        get async { await task.value }
    }
}

/// The caller's actor for ``launchCall(_:_:on:)``.
enum CallerPlace: Sendable {
    /// A task on the scenario's threads, with no actor.
    case task
    /// The main actor.
    case mainActor
}

/// Starts `call` with `recorder`'s probe in a task of its own. The task waits until the recorder
/// knows how to cancel it, so that a probe that cancels the caller from inside `start` always
/// finds it, wherever `start` runs.
func launchCall<Value: Sendable>(
    _ call: @escaping OneShotFixture<Value>.Call, _ recorder: CallRecorder<Value>, on place: CallerPlace = .task
) -> LaunchedCall<Value> {
    let go = FirstResultLatch<Bool>()
    let probe = recorder.probe
    let task: Task<Result<Value, any Error>, Never>
    switch place {
    case .task:
        task = ScenarioThreads.task {
            _ = await go.value()
            let result: Result<Value, any Error>
            do { result = .success(try await call(probe)) } catch { result = .failure(error) }
            recorder.callReturned(result)
            return result
        }
    case .mainActor:
        task = Task { @MainActor in
            _ = await go.value()
            // Called here, in the main actor's task, so that the call runs on the main actor.
            let result: Result<Value, any Error>
            do { result = .success(try await call(probe)) } catch { result = .failure(error) }
            recorder.callReturned(result)
            return result
        }
    }
    recorder.setCaller { task.cancel() }
    go.offer(true)
    return LaunchedCall(recorder: recorder, task: task)
}

/// The hooks of the probes a ``CallRecorder`` hands out: everything goes to the recorder. The
/// recorder holds this only weakly, so its end marks the moment the adapter dropped every probe.
final class ProbeForwarder<Value: Sendable>: CallProbeHooks, Sendable {
    let recorder: CallRecorder<Value>

    init(to recorder: CallRecorder<Value>) {
        self.recorder = recorder
    }

    func startBegins() { recorder.startBegins() }
    func startEnded(threw: Bool) { recorder.startEnded(threw: threw) }
    func wrapCallback(
        _ deliver: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) -> @Sendable (Result<Value, any Error>) -> Void {
        recorder.wrapCallback(deliver)
    }
    func cancelBegins() { recorder.cancelBegins() }
    func cancelEnded() { recorder.cancelEnded() }
}
