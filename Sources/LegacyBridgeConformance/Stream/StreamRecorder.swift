import LegacyBridge

// What the suite puts behind a `StreamProbe`: it records the SDK's events and end, how long each
// event callback took, the controls and where they ran; and, as the scenario asks, makes the SDK
// hostile (events and a second end after the end, the end on a fresh thread, an end reported
// inside the SDK's cancel).

/// How a scenario makes the SDK misbehave through one subscription's probe.
struct StreamHostility: Sendable {
    /// After the SDK's end, the last event is delivered again, then a second end with an error.
    var eventsAfterEnd = false
    /// The SDK's end is reported on a new thread of the suite's own.
    var foreignThreadEnd = false
    /// The SDK's cancel reports an end, with an error, synchronously inside the cancel.
    var endInsideCancel = false
}

/// Records one subscription made through a ``StreamProbe`` and makes it misbehave as told.
final class StreamRecorder<Element: Sendable>: StreamProbeHooks, FixtureWatch, Sendable {
    struct Snapshot {
        var startsBegun = 0
        var startsEnded = 0
        var spots: [(StreamProbeControl?, ThreadSpot)] = []
        var eventsWrapped = 0
        var endsWrapped = 0
        /// Events the SDK delivered to the adapter.
        var delivered = 0
        /// Events the SDK delivered before its first end.
        var deliveredBeforeEnd: Int?
        /// Events the consumer took.
        var consumed = 0
        var maxOutstanding = 0
        /// Ends the SDK reported (not counting what the probe injected).
        var sdkEnds = 0
        var sdkEndError: (any Error)?
        var cancels = 0
        /// When the adapter first called the SDK's cancel.
        var firstCancel: ContinuousClock.Instant?
        var cancelsAfterSDKEnd = 0
        /// When the adapter's first SDK cancel returned.
        var cancelReturned: ContinuousClock.Instant?
        /// Events the SDK began to deliver after that, and when the last of them began.
        var eventsAfterCancel = 0
        var lastEventAfterCancel: ContinuousClock.Instant?
        var pauses = 0
        var resumes = 0
        /// A yield answered that the stream wants the SDK to stop (`YieldOutcome.stopProducing`).
        var stopAnswers = 0
        var firstDelivery: ContinuousClock.Instant?
        var lastDelivery: ContinuousClock.Instant?

        var outstanding: Int { delivered - consumed }

        /// Whether an event began more than `grace` after the adapter's cancel returned: that
        /// cancel did not stop the SDK.
        func keptComing(grace: Duration) -> Bool {
            guard let returned = cancelReturned, let last = lastEventAfterCancel else { return false }
            return last - returned > grace
        }

        /// The mean time between two events the SDK delivered, or `nil` before the second.
        var meanInterval: Duration? {
            guard delivered > 1, let first = firstDelivery, let last = lastDelivery else { return nil }
            return (last - first) / (delivered - 1)
        }
        var usesProbe: Bool { startsBegun > 0 || eventsWrapped > 0 }
    }

    private struct State {
        var snapshot = Snapshot()
        var replays: [@Sendable (Element) -> Void] = []
        var finishes: [@Sendable ((any Error)?) -> Void] = []
        var lastElement: Element?
        var inFlight: [Int: ContinuousClock.Instant] = [:]
        var nextToken = 0
        var longestReturned: Duration = .zero
        /// What the probes handed to the adapter hold; weak here, so that its end says the adapter
        /// let go of every copy of the probe and can make no more SDK call through it.
        weak var handedOut: StreamProbeForwarder<Element>?
    }

    let hostility: StreamHostility
    let threading: AdapterThreading
    private let state = LockedBox(State())

    init(_ hostility: StreamHostility = .init(), threading: AdapterThreading) {
        self.hostility = hostility
        self.threading = threading
    }

    /// The probe to hand to the adapter. Its copies hold a forwarder, not this recorder, so that
    /// ``adapterLetGo`` can tell when the adapter dropped them all.
    var probe: StreamProbe<Element> {
        let forwarder = state.withLock { state in
            if let current = state.handedOut { return current }
            let made = StreamProbeForwarder(to: self)
            state.handedOut = made
            return made
        }
        return StreamProbe(hooks: forwarder)
    }

    /// Whether the adapter holds no copy of the probe any more: after that, it can make no SDK
    /// control call this recorder would count (a retried cancel, say).
    var adapterLetGo: Bool { state.withLock { $0.handedOut == nil } }
    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// The consumer took an event.
    func noteConsumed() {
        state.withLock { $0.snapshot.consumed += 1 }
    }

    /// The longest time an event callback took, or has been running so far.
    var longestCallback: Duration {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.inFlight.values.reduce(state.longestReturned) { max($0, now - $1) }
        }
    }

    /// Event callbacks running right now.
    var callbacksInFlight: Int { state.withLock { $0.inFlight.count } }

    // MARK: StreamProbeHooks

    func startBegins() {
        let spot = threading.spot()
        state.withLock {
            $0.snapshot.startsBegun += 1
            $0.snapshot.spots.append((nil, spot))
        }
    }

    func startEnded(threw: Bool) {
        state.withLock { $0.snapshot.startsEnded += 1 }
    }

    func wrapEvent<Outcome>(_ yield: @escaping @Sendable (Element) -> Outcome) -> @Sendable (Element) -> Outcome {
        state.withLock {
            $0.snapshot.eventsWrapped += 1
            $0.replays.append { element in _ = yield(element) }
        }
        return { [self] element in
            let now = ContinuousClock.now
            let token = state.withLock { state -> Int in
                state.snapshot.delivered += 1
                state.snapshot.maxOutstanding = max(state.snapshot.maxOutstanding, state.snapshot.outstanding)
                state.snapshot.lastDelivery = now
                state.snapshot.firstDelivery = state.snapshot.firstDelivery ?? now
                if state.snapshot.cancelReturned != nil {
                    state.snapshot.eventsAfterCancel += 1
                    state.snapshot.lastEventAfterCancel = now
                }
                state.lastElement = element
                state.nextToken += 1
                state.inFlight[state.nextToken] = now
                return state.nextToken
            }
            let outcome = yield(element)
            let stop = (outcome as? YieldOutcome)?.shouldStop == true
            let returned = ContinuousClock.now
            state.withLock { state in
                if let entered = state.inFlight.removeValue(forKey: token) {
                    state.longestReturned = max(state.longestReturned, returned - entered)
                }
                if stop { state.snapshot.stopAnswers += 1 }
            }
            return outcome
        }
    }

    func wrapEnd(_ finish: @escaping @Sendable ((any Error)?) -> Void) -> @Sendable ((any Error)?) -> Void {
        state.withLock {
            $0.snapshot.endsWrapped += 1
            $0.finishes.append(finish)
        }
        return { [self] error in
            let (first, replays, last) = state.withLock { state in
                state.snapshot.sdkEnds += 1
                let first = state.snapshot.sdkEnds == 1
                if first {
                    state.snapshot.deliveredBeforeEnd = state.snapshot.delivered
                    state.snapshot.sdkEndError = error
                }
                return (first, state.replays, state.lastElement)
            }
            let hostility = self.hostility
            let report: @Sendable () -> Void = {
                finish(error)
                guard first, hostility.eventsAfterEnd else { return }
                if let last { for replay in replays { replay(last) } }
                finish(ProbeInjectedError())
            }
            if hostility.foreignThreadEnd {
                onDedicatedThread("conformance end", report)
            } else {
                report()
            }
        }
    }

    func controlBegins(_ control: StreamProbeControl) {
        let spot = threading.spot()
        state.withLock { state in
            state.snapshot.spots.append((control, spot))
            switch control {
            case .cancel:
                state.snapshot.cancels += 1
                state.snapshot.firstCancel = state.snapshot.firstCancel ?? .now
                if state.snapshot.sdkEnds > 0 { state.snapshot.cancelsAfterSDKEnd += 1 }
            case .pause:
                state.snapshot.pauses += 1
            case .resume:
                state.snapshot.resumes += 1
            }
        }
    }

    func controlEnded(_ control: StreamProbeControl) {
        if control == .cancel {
            let now = ContinuousClock.now
            state.withLock { $0.snapshot.cancelReturned = $0.snapshot.cancelReturned ?? now }
        }
        // Inside the adapter's cancel, right after the SDK's: as an SDK whose cancel reports the end.
        guard control == .cancel, hostility.endInsideCancel else { return }
        for finish in state.withLock({ $0.finishes }) { finish(ProbeInjectedError()) }
    }

    // MARK: FixtureWatch

    /// The subscription's SDK stopped: it delivered events, the consumer took every one of them,
    /// and for `quietFor` since the last one the SDK delivered neither an event nor an end, though
    /// the adapter had not paused or cancelled it. A hang then is the fixture's source running dry
    /// (a finite or endless test source must deliver until its end or its release).
    func stall(quietFor: Duration) -> String? {
        let snapshot = self.snapshot
        guard snapshot.delivered > 0, snapshot.outstanding == 0, snapshot.sdkEnds == 0,
            snapshot.pauses <= snapshot.resumes, let last = snapshot.lastDelivery
        else { return nil }
        // A cancel counts against the adapter only if it came before the SDK had been quiet that
        // long: the watchdog's own cancellation of the hung scenario comes later.
        let quiet = (snapshot.firstCancel ?? .now) - last
        guard quiet >= quietFor else { return nil }
        return
            "the fixture's subscription stopped delivering: after \(snapshot.delivered) events, all taken by the consumer, its SDK delivered neither an event nor an end for \(milliseconds(quiet)), while the adapter had neither paused nor cancelled it. Fix the fixture: a subscription must keep delivering until its end (finite) or its release (endless); a test source that runs dry hangs the scenario. (An adapter that pauses its SDK without the probe looks the same: pass pause and resume through it.)"
    }

    /// Rules broken on this subscription: a second SDK cancel, a cancel after the SDK had ended the
    /// subscription by itself, an SDK call off the SDK's thread.
    func problem() -> String? {
        let snapshot = self.snapshot
        if snapshot.cancels > 1 {
            return
                "the adapter called the SDK's cancel \(snapshot.cancels) times for one subscription: cancel once. A second cancel reaches an SDK that may have reused the handle"
        }
        if snapshot.cancelsAfterSDKEnd > 0 {
            return
                "the subscription had ended by itself (the SDK reported its end), yet the adapter called the SDK's cancel: never cancel a subscription whose end came (cancel is not close; the handle may belong to another subscription by then)"
        }
        if let (control, spot) = snapshot.spots.first(where: { $0.1.onSDKThread == false }) {
            let what = control.map { "the SDK's \($0)" } ?? "the subscription's start"
            return
                "the adapter made \(what) off the SDK's thread\(spot.onMainActor ? " (on the main actor)" : ""), though it declares threading \(threading.declared): post every SDK call to the SDK's thread (StreamControl(scheduler:) does it for cancel, pause and resume)"
        }
        return nil
    }
}

/// The hooks of the probes a ``StreamRecorder`` hands out: everything goes to the recorder. The
/// recorder holds this only weakly, so its end marks the moment the adapter dropped every probe.
final class StreamProbeForwarder<Element: Sendable>: StreamProbeHooks, Sendable {
    let recorder: StreamRecorder<Element>

    init(to recorder: StreamRecorder<Element>) {
        self.recorder = recorder
    }

    func startBegins() { recorder.startBegins() }
    func startEnded(threw: Bool) { recorder.startEnded(threw: threw) }
    func wrapEvent<Outcome>(_ yield: @escaping @Sendable (Element) -> Outcome) -> @Sendable (Element) -> Outcome {
        recorder.wrapEvent(yield)
    }
    func wrapEnd(_ finish: @escaping @Sendable ((any Error)?) -> Void) -> @Sendable ((any Error)?) -> Void {
        recorder.wrapEnd(finish)
    }
    func controlBegins(_ control: StreamProbeControl) { recorder.controlBegins(control) }
    func controlEnded(_ control: StreamProbeControl) { recorder.controlEnded(control) }
}
