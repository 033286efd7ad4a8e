// One subscription's shared state: the state machine behind one lock, and the code that performs
// its actions once the lock is released (resume the consumer, make a control call, arm or cancel a
// gap timer, drop elements). Calling out under the lock could deadlock: a cancel or a dropped
// element's deinit may call back into the sink.

/// The state of one `CallbackStream` subscription, shared by its iterator, its sink, the task's
/// cancellation handler, its gap timer and the threads making control calls.
///
/// Nothing here waits: every method takes the lock for a few instructions, asks the machine,
/// releases the lock, then acts. A control call that cannot start yet is made later by the thread
/// whose call was in its way, as a job posted through the control's `SDKScheduler`, or on one of
/// the library's job threads, the home of `cancel`.
@usableFromInline
final class CallbackStreamStorage<Element: Sendable>: Sendable {
    @usableFromInline typealias Machine = CallbackStreamStateMachine<Element>
    @usableFromInline typealias Call = ProducerControlStateMachine.Call

    /// A spinning lock: a fast producer and its consumer take it millions of times a second.
    @usableFromInline let box: LockedBox<Machine>
    /// The ordering's gap timeout, if it has one.
    let gapTimeout: Duration?
    /// The stream value's registry, for `CallbackStream.statistics` and `stop()`, if any.
    let registry: StreamRegistry<Element>?
    /// This subscription's number in the registry.
    let subscriptionID: Int

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering, registry: StreamRegistry<Element>? = nil) {
        self.box = LockedBox(spinning: true) { Machine(buffering: buffering, ordering: ordering) }
        self.gapTimeout = ordering.effectiveGapTimeout
        self.registry = registry
        self.subscriptionID = registry?.register() ?? 0
    }

    deinit {
        let (statistics, timer) = box.withLock { ($0.statistics, $0.pendingGapTimer?.timer) }
        timer?.cancel()
        registry?.subscriptionEnded(id: subscriptionID, statistics: statistics)
    }

    // MARK: - Producer side

    /// Runs `start` with no lock held and hands the machine the handle it returns, or its error.
    /// A handle without a scheduler of its own makes its calls through `scheduler`, if given.
    @usableFromInline
    func runStart(_ start: (EventSink<Element>) throws -> StreamControl?, scheduler: SDKScheduler? = nil) {
        // Stopped or cancelled before `start` began: the producer is never started.
        if box.withLock({ $0.hasEnded }) {
            handleArrived(nil)
            return
        }
        let sink = EventSink(storage: self)
        do {
            handleArrived(try start(sink)?.scheduled(by: scheduler))
        } catch {
            handleArrived(nil)
            finish(error)
        }
    }

    /// Posts `start` through `scheduler` to run on the SDK's thread. A refused post ends the
    /// stream with the scheduler's error; `start` never runs.
    @usableFromInline
    func postStart(
        _ start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?, through scheduler: SDKScheduler
    ) {
        do {
            try scheduler.post { self.runStart(start, scheduler: scheduler) }
        } catch {
            handleArrived(nil)
            finish(error)
        }
    }

    /// `start` returned: calls decided meanwhile can be made.
    func handleArrived(_ handle: StreamControl?) {
        perform(box.withLock { $0.handleArrived(handle) })
    }

    @inlinable
    func yield(_ element: Element) -> YieldOutcome {
        switch box.withLock({ $0.yield(element) }) {
        case .answer(let outcome):
            return outcome
        case .evicted:
            // The evicted element goes with the action, here, outside the lock.
            return .dropped
        case .perform(let effects, let outcome):
            perform(effects)
            return outcome
        }
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldOutcome {
        switch box.withLock({ $0.yield(contentsOf: elements) }) {
        case .answer(let outcome):
            return outcome
        case .evicted:
            return .dropped
        case .perform(let effects, let outcome):
            perform(effects)
            return outcome
        }
    }

    @usableFromInline
    func yield(_ element: Element, sequence: UInt64) -> YieldOutcome {
        switch box.withLock({ $0.yield(element, sequence: sequence) }) {
        case .answer(let outcome):
            return outcome
        case .evicted:
            return .dropped
        case .perform(let effects, let outcome):
            perform(effects)
            return outcome
        }
    }

    @usableFromInline
    func finish(_ failure: (any Error)?) {
        perform(box.withLock { $0.finish(failure) })
    }

    // MARK: - Consumer side

    /// What the consumer does after asking for elements.
    @usableFromInline
    enum Step {
        /// A batch was swapped into the consumer's ring.
        case batch
        /// Nothing is waiting: suspend with `suspend(_:)`, then ask again.
        case suspend
        case end
        case fail(any Error)
        case cancelled
    }

    /// Takes the waiting elements into `batch`, or the terminal, after making a resume that the
    /// consumer's return made due.
    @inlinable
    func next(into batch: inout RingBuffer<Element>) -> Step {
        switch box.withLock({ $0.next(into: &batch) }) {
        case .batch(nil):
            return .batch
        case .batch(let resume?):
            make(resume)
            return .batch
        case .suspend(nil):
            return .suspend
        case .suspend(let resume?):
            make(resume)
            return .suspend
        case .end:
            return .end
        case .fail(let error):
            return .fail(error)
        case .cancelled:
            return .cancelled
        }
    }

    @usableFromInline
    func suspend(_ continuation: UnsafeContinuation<Void, Never>) {
        switch box.withLock({ $0.suspend(continuation) }) {
        case .suspended:
            break
        case .resume(let continuation):
            // We must not resume the continuation while holding the lock.
            continuation.resume()
        }
    }

    /// The consumer stopped: `cancelled` for a cancelled task or a consumer that went away, `false`
    /// for an explicit `stop()`. Safe inside the task runtime's cancellation handler: it flips
    /// state, resumes the waiter and hands the producer's cancel to another thread.
    @usableFromInline
    func consumerTerminated(cancelled: Bool) {
        perform(box.withLock { $0.consumerTerminated(cancelled: cancelled) })
    }

    @usableFromInline
    var statistics: StreamStatistics {
        box.withLock { $0.statistics }
    }

    // MARK: - Actions, performed with no lock held

    func perform(_ action: Machine.EffectsAction) {
        switch action {
        case .none: break
        case .perform(let effects): perform(effects)
        }
    }

    /// Resumes the consumer, cancels or arms a gap timer, makes a control call; the discarded
    /// elements and a released handle go when `effects` does, here, outside the lock.
    @usableFromInline
    func perform(_ effects: consuming Machine.Effects) {
        effects.wakeUp?.resume()
        switch effects.gapTimer {
        case .none: break
        case .cancel(let timer): timer.cancel()
        case .arm(let generation): armGapTimer(generation)
        }
        perform(effects.producer)
    }

    func perform(_ action: ProducerControlStateMachine.Action) {
        switch action {
        case .none, .release: break
        case .make(let call): make(call)
        }
    }

    /// Makes `call` where the threading contract of ``StreamControl`` says: as a job posted through
    /// its scheduler, `cancel` on a library job thread, `pause` and `resume` right here.
    @usableFromInline
    func make(_ call: Call) {
        if let scheduler = call.scheduler {
            do {
                try scheduler.post { self.makeCalls(from: call, inline: false) }
            } catch {
                abandonCalls(from: call)
            }
        } else if call.operation == .cancel {
            BridgeThreadPool.shared.run { self.makeCalls(from: call, inline: false) }
        } else {
            makeCalls(from: call, inline: true)
        }
    }

    /// Makes `first`, then every call the machine hands this thread when it returns. `inline`: on
    /// the thread of a yield or of the consumer, which hands a `cancel` to a library job thread instead.
    func makeCalls(from first: Call, inline: Bool) {
        var call = first
        while true {
            call.make()
            switch box.withLock({ $0.callReturned(call.operation) }) {
            case .none, .release:
                return
            case .make(let next):
                if inline && next.operation == .cancel {
                    BridgeThreadPool.shared.run { self.makeCalls(from: next, inline: false) }
                    return
                }
                call = next
            }
        }
    }

    /// The scheduler refused a job because the SDK's loop is gone: that call and every call due
    /// after it are given up, so the control machine ends idle or closed, never stuck in flight.
    func abandonCalls(from first: Call) {
        var operation = first.operation
        while case .make(let next) = box.withLock({ $0.callReturned(operation) }) {
            operation = next.operation
        }
    }

    // MARK: - Gap timers

    /// Arms the timer of the gap that opened at reorderer generation `generation`. A gap timeout
    /// of zero gives the gap up at once.
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
        switch box.withLock({ $0.gapTimerArmed(timer, generation: generation) }) {
        case .keep: break
        case .cancel(let timer): timer.cancel()
        }
    }

    func gapTimerFired(_ generation: UInt64) {
        perform(box.withLock { $0.gapTimerFired(generation: generation) })
    }
}
