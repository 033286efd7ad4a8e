/// One subscription's shared state: the stream machine behind the stream's
/// lock, and the producer-control machine behind its own small lock (so a
/// deliverer never competes with a producer hammering the stream's lock).
/// Every method asks a machine for an action under its lock, releases it,
/// then performs the action (resume the consumer, make or schedule a
/// producer-control call, arm a gap timer, drop discarded elements).
///
/// Nothing here ever waits: a yield, a finish, the consumer's `next()` and
/// the cancellation handler each take a lock for a few instructions and
/// return. What cannot be settled at once is settled by whoever comes next,
/// by a job posted through the control's `SDKScheduler`, or on one of
/// the library's spare threads (the default home of `cancel`).
@usableFromInline
final class CallbackStreamStorage<Element: Sendable>: Sendable {
    @usableFromInline
    let box: LockedBox<CallbackStreamStateMachine<Element>>
    @usableFromInline
    let control: LockedBox<ProducerControlStateMachine>
    /// The ordering's gap timeout, if it has one.
    let gapTimeout: Duration?
    /// The stream value's registry (for `CallbackStream.statistics` and `stop()`), if any.
    let registry: StreamRegistry<Element>?
    /// This subscription's number in the registry.
    let subscriptionID: Int
    /// The timer of the newest gap and its reorderer generation. Arming a newer gap cancels the
    /// older timer (a stale generation does nothing when it fires anyway), and the
    /// subscription's end cancels the last, so a stream never holds more than one pending gap
    /// timer, however many gaps opened and filled.
    let gapTimer = LockedBox<(generation: UInt64, timer: DeadlineTimer)?>(nil)

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering, registry: StreamRegistry<Element>? = nil) {
        self.box = LockedBox(spinning: true) { CallbackStreamStateMachine(buffering: buffering, ordering: ordering) }
        self.control = LockedBox(ProducerControlStateMachine())
        self.gapTimeout = ordering.effectiveGapTimeout
        self.registry = registry
        self.subscriptionID = registry?.register() ?? 0
    }

    deinit {
        gapTimer.withLock { $0 }?.timer.cancel()
        registry?.subscriptionEnded(id: subscriptionID, statistics: self.statistics)
    }

    // MARK: Producer side

    /// Runs `start` (no lock held) and records the handle it returns, or its error.
    @usableFromInline
    func runStart(_ start: (EventSink<Element>) throws -> StreamControl?) {
        // Stopped or cancelled before `start` began: the producer is never started.
        if box.withLock({ $0.hasEnded }) {
            controlArrived(nil)
            return
        }
        let sink = EventSink(storage: self)
        do {
            controlArrived(try start(sink))
        } catch {
            controlArrived(nil)
            finish(error)
        }
    }

    /// `start` returned: yields may now answer `.stopProducing`, and a pause
    /// or cancel decided meanwhile is made.
    func controlArrived(_ handle: StreamControl?) {
        box.withLock { $0.controlArrived(canResume: handle?.resume != nil) }
        if let delivery = control.withLock({ $0.controlArrived(handle) }) {
            deliver(delivery)
        }
    }

    @inlinable
    func yield(_ element: Element) -> YieldOutcome {
        switch box.withLock({ $0.yield(element) }) {
        case .outcome(let outcome):
            return outcome
        case .effects(let outcome, let effects):
            perform(effects)
            return outcome
        }
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldOutcome {
        let (outcome, effects) = box.withLock { $0.yield(contentsOf: elements) }
        // The common batch needs nothing done: skip the (generic, unspecialized) effects call.
        if !effects.isEmpty { perform(effects) }
        return outcome
    }

    @usableFromInline
    func yield(_ element: Element, sequence: UInt64) -> YieldOutcome {
        let (outcome, effects) = box.withLock { $0.yield(element, sequence: sequence) }
        perform(effects)
        return outcome
    }

    @usableFromInline
    func finish(_ failure: (any Error)?) {
        perform(box.withLock { $0.finish(failure) })
    }

    // MARK: Consumer side

    /// Takes the waiting elements into `batch` (or the terminal), passing on
    /// a resume the consumer's return made due.
    @inlinable
    func next(into batch: inout StreamRing<Element>) -> CallbackStreamStateMachine<Element>.NextAction {
        let (action, request) = box.withLock { $0.next(into: &batch) }
        if let request { apply(request) }
        return action
    }

    @usableFromInline
    func suspend(_ continuation: UnsafeContinuation<Void, Never>) {
        if let ready = box.withLock({ $0.suspend(continuation) }) {
            ready.resume()
        }
    }

    /// The consumer stopped: `cancelled` for a cancelled task or a consumer
    /// that went away, `false` for an explicit `stop()`. Safe inside the
    /// task runtime's cancellation handler: it flips state, resumes the
    /// waiter and schedules the producer's cancel; it calls no producer code.
    @usableFromInline
    func consumerTerminated(cancelled: Bool) {
        perform(box.withLock { $0.consumerTerminated(cancelled: cancelled) })
    }

    @usableFromInline
    var statistics: StreamStatistics {
        var statistics = box.withLock { $0.statistics }
        control.withLock {
            statistics.pauses = $0.pauses
            statistics.resumes = $0.resumes
        }
        return statistics
    }

    // MARK: Effects (called with no lock held)

    @usableFromInline
    func perform(_ effects: consuming StreamEffects<Element>) {
        effects.wakeUp?.resume()
        if let request = effects.control {
            apply(request)
        }
        if let generation = effects.armGapTimer {
            armGapTimer(generation)
        }
        // `effects.evicted` and `effects.discarded` are released here, outside the lock.
    }

    /// Passes a decision of the stream machine to the control machine and
    /// makes (or schedules) the call it hands out, if any.
    @usableFromInline
    func apply(_ request: StreamControlRequest) {
        let delivery = control.withLock { machine -> ProducerControlStateMachine.Delivery? in
            switch request {
            case .setPaused(let paused, let version):
                return machine.setPaused(paused, version: version)
            case .cancel:
                return machine.requestCancel()
            case .producerFinished:
                machine.producerFinished()
                return nil
            }
        }
        if let delivery { deliver(delivery) }
    }

    /// The caller became the deliverer of `first`: makes it where the
    /// threading contract says (see `StreamControl`), then every call that
    /// became due meanwhile, one at a time.
    func deliver(_ first: ProducerControlStateMachine.Delivery) {
        if let scheduler = first.control.scheduler {
            do {
                try scheduler.post { self.runDeliveries(from: first, inline: false) }
            } catch {
                abandonDeliveries()
            }
        } else if first.operation == .cancel {
            BridgeThreadPool.shared.run { self.runDeliveries(from: first, inline: false) }
        } else {
            runDeliveries(from: first, inline: true)
        }
    }

    /// The deliverer's loop. `inline`: running on the thread whose event made
    /// the call due (default contract), which must hand a `cancel` off to a
    /// spare thread instead of making it here, inside a yield or a
    /// consumer's call.
    func runDeliveries(from first: ProducerControlStateMachine.Delivery, inline: Bool) {
        var delivery = first
        while true {
            delivery.perform()
            guard let next = control.withLock({ $0.deliveryCompleted() }) else { return }
            if inline && next.operation == .cancel {
                BridgeThreadPool.shared.run { self.runDeliveries(from: next, inline: false) }
                return
            }
            delivery = next
        }
    }

    /// The scheduler refused a delivery's job (the SDK's loop is gone): that call and every call
    /// due after it are given up, so the control machine ends idle or closed, never stuck delivering.
    func abandonDeliveries() {
        while control.withLock({ $0.deliveryCompleted() }) != nil {}
    }

    /// Arms the timer of the gap that opened at reorderer generation
    /// `generation`. A gap timeout of zero gives the gap up at once.
    func armGapTimer(_ generation: UInt64) {
        guard let timeout = gapTimeout else { return }
        if timeout <= .zero {
            gapTimerFired(generation)
            return
        }
        // The timer holds the stream only weakly.
        let timer = DeadlineTimers.schedule(at: ContinuousClock.now + timeout) { [weak self] in
            self?.gapTimerFired(generation)
        }
        // Two producers' threads may arm two generations in either order: the newer one stays.
        let superseded = gapTimer.withLock { slot -> DeadlineTimer? in
            if let current = slot, current.generation > generation { return timer }
            defer { slot = (generation, timer) }
            return slot?.timer
        }
        superseded?.cancel()
    }

    func gapTimerFired(_ generation: UInt64) {
        perform(box.withLock { $0.gapTimerFired(generation: generation) })
    }
}

/// What a `CallbackStream` value knows of the subscriptions its iterators
/// started: the live ones (to `stop()` them) and the statistics of the most
/// recent one, kept after it ended.
///
/// `@unchecked Sendable` is not needed: the state lives in a `LockedBox`.
@usableFromInline
final class StreamRegistry<Element: Sendable>: Sendable {
    struct Entry {
        weak var storage: CallbackStreamStorage<Element>?
    }

    struct State {
        var live: [Entry] = []
        var latest = Entry()
        var latestID = 0
        var lastStatistics = StreamStatistics()
        var stopped = false
    }

    let state = LockedBox(State())

    @usableFromInline
    init() {}

    /// A new subscription is being created: its number.
    func register() -> Int {
        state.withLock { state in
            state.latestID += 1
            state.latest = Entry()
            return state.latestID
        }
    }

    /// Makes a new subscription live, unless `stop()` was called: then it returns false and the
    /// subscription must end without running `start`. Checking and registering under one lock
    /// with `stopAll` is what keeps a first `next()` racing `stop()` from starting a producer
    /// that nothing will cancel.
    @usableFromInline
    func admit(_ storage: CallbackStreamStorage<Element>) -> Bool {
        state.withLock { state in
            if state.stopped { return false }
            state.live.removeAll { $0.storage == nil }
            state.live.append(Entry(storage: storage))
            if storage.subscriptionID == state.latestID { state.latest = Entry(storage: storage) }
            return true
        }
    }

    /// Called from a storage's deinit with its final counters.
    func subscriptionEnded(id: Int, statistics: StreamStatistics) {
        state.withLock { state in
            if id == state.latestID { state.lastStatistics = statistics }
        }
    }

    @usableFromInline
    var statistics: StreamStatistics {
        let (latest, last) = state.withLock { ($0.latest.storage, $0.lastStatistics) }
        return latest?.statistics ?? last
    }

    @usableFromInline
    func stopAll() {
        let live = state.withLock { state -> [CallbackStreamStorage<Element>] in
            state.stopped = true
            return state.live.compactMap(\.storage)
        }
        for storage in live { storage.consumerTerminated(cancelled: false) }
    }
}
