#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch

/// The producer-control machine plus the bookkeeping of who is delivering,
/// kept behind the control lock.
@usableFromInline
struct ProducerControlBox {
    @usableFromInline var machine = ProducerControlStateMachine()
    /// The thread making the call in flight, if any.
    var deliverer: pthread_t?
    /// The thread running `start`, until it returned.
    var starter: pthread_t?
    /// Producers waiting for a pause that is due behind a resume in flight.
    var pauseWaiters: [DispatchSemaphore] = []
    /// How long such a producer waits, per element, for the pause to land (see
    /// `CallbackStreamStorage.apply(_:)`). Tests lengthen it on one stream to force an order.
    var pauseHandoffWait: DispatchTimeInterval = .milliseconds(10)

    @usableFromInline
    init() {}

    /// Records the calling thread as the deliverer of `delivery`, if there is one.
    mutating func handOut(_ delivery: ProducerControlStateMachine.Delivery?) -> ProducerControlStateMachine.Delivery? {
        if delivery != nil { deliverer = pthread_self() }
        return delivery
    }

    /// The deliverer finished `operation`: the next call (if any) and the
    /// waiters to wake (once a pause landed, or the deliverer stops).
    mutating func completed(_ operation: ProducerControlStateMachine.Operation)
        -> (ProducerControlStateMachine.Delivery?, [DispatchSemaphore])
    {
        let next = machine.deliveryCompleted()
        if next == nil { deliverer = nil }
        guard operation == .pause || next == nil, !pauseWaiters.isEmpty else { return (next, []) }
        defer { pauseWaiters = [] }
        return (next, pauseWaiters)
    }

    /// Whether another thread is making a resume call (so a new pause must wait for it).
    var resumeInFlightElsewhere: Bool {
        guard machine.isResumeInFlight, let deliverer else { return false }
        return pthread_equal(deliverer, pthread_self()) == 0
    }

    /// Whether a wanted pause is held up by another thread: behind the resume call it is making,
    /// or because it is still running `start` (the pause is made when the control arrives).
    /// Never true for the thread that would make the pause, so that thread cannot wait for itself.
    var pauseHeldUpElsewhere: Bool {
        if machine.isPauseHeldUpByResume { return resumeInFlightElsewhere }
        if machine.isPauseHeldUpByMissingControl, let starter {
            return pthread_equal(starter, pthread_self()) == 0
        }
        return false
    }

    /// Producers waiting for a held-up pause, handed out to be woken.
    mutating func takePauseWaiters() -> [DispatchSemaphore] {
        defer { pauseWaiters = [] }
        return pauseWaiters
    }
}

/// One subscription's shared state: the stream machine behind the stream's
/// lock, and the producer-control machine behind its own small lock (so a
/// deliverer never competes with a producer hammering the stream's lock).
/// Every method asks a machine for an action under its lock, releases it,
/// then performs the action (resume the consumer, call the producer's
/// control, drop discarded elements).
@usableFromInline
struct CallbackStreamStorage<Element: Sendable>: Sendable {
    @usableFromInline
    let box: LockedBox<CallbackStreamStateMachine<Element>>
    @usableFromInline
    let control: LockedBox<ProducerControlBox>

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering) {
        self.box = LockedBox(CallbackStreamStateMachine(buffering: buffering, ordering: ordering))
        self.control = LockedBox(ProducerControlBox())
    }

    // MARK: Producer side

    /// Runs `start` (no lock held) and records the handle it returns, or its error.
    @usableFromInline
    func runStart(_ start: (EventSink<Element>) throws -> StreamControl?) {
        let sink = EventSink(backend: .stream(self))
        control.withLock { $0.starter = pthread_self() }
        do {
            let handle = try start(sink)
            let (delivery, waiters) = control.withLock { box in
                box.starter = nil
                let delivery = box.handOut(box.machine.controlArrived(handle))
                // A pause made now wakes its waiters when it lands; otherwise nothing will.
                return (delivery, delivery == nil ? box.takePauseWaiters() : [])
            }
            for waiter in waiters { waiter.signal() }
            if let delivery { deliver(delivery) }
        } catch {
            let waiters = control.withLock { box in
                box.starter = nil
                _ = box.machine.controlArrived(nil)
                return box.takePauseWaiters()
            }
            for waiter in waiters { waiter.signal() }
            finish(error)
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

    @usableFromInline
    func yield(contentsOf elements: ContiguousArray<Element>) -> YieldOutcome {
        let (outcome, effects) = box.withLock { $0.yield(contentsOf: elements) }
        perform(effects)
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

    @usableFromInline
    func suspend(_ continuation: UnsafeContinuation<Element?, any Error>) {
        perform(box.withLock { $0.suspend(continuation) })
    }

    @usableFromInline
    func consumerTerminated() {
        perform(box.withLock { $0.consumerTerminated() })
    }

    /// Called by the consumer right after its continuation returned: waits
    /// until the thread that resumed it has confirmed the `resume` call.
    ///
    /// A continuation can be resumed before its task has finished suspending;
    /// the runtime then lets the task go on without any synchronization that
    /// ThreadSanitizer can see, and the task's next async frame (reusing the
    /// continuation's memory) is reported as racing with the read inside
    /// `resume`. Confirming under the stream's lock, and acquiring that lock
    /// here, makes the order explicit. The resumer confirms right after the
    /// call returns, so this normally finds it done at once.
    @usableFromInline
    func awaitWakeUpConfirmed() {
        while box.withLock({ $0.wakeUpsInFlight > 0 }) {
            sched_yield()
        }
    }

    @usableFromInline
    var statistics: StreamStatistics {
        var statistics = box.withLock { $0.statistics }
        control.withLock {
            statistics.pauses = $0.machine.pauses
            statistics.resumes = $0.machine.resumes
        }
        return statistics
    }

    // MARK: Effects (called with no lock held)

    @inlinable
    func perform(_ effects: consuming StreamEffects<Element>) {
        if let wakeUp = effects.wakeUp {
            wakeUp.continuation.resume(with: wakeUp.result)
            box.withLock { $0.wakeUpDelivered() }
        }
        if let request = effects.control {
            apply(request)
        } else if effects.acceptedWhilePauseWanted {
            awaitHeldUpPause()
        }
        // `effects.evicted` and `effects.discarded` are released here, outside the lock.
    }

    /// An element arrived while a pause is wanted. If that pause is still held up behind a resume
    /// call another thread is making (a descheduled consumer, say), this producer thread waits for
    /// it — at most `pauseHandoffWait` per element — instead of running on: without it a
    /// descheduled resumer let the producer overshoot `high` by tens of thousands of elements.
    @usableFromInline
    func awaitHeldUpPause() {
        let waiter = control.withLock { box -> (DispatchSemaphore, DispatchTimeInterval)? in
            guard box.pauseHeldUpElsewhere else { return nil }
            let waiter = DispatchSemaphore(value: 0)
            box.pauseWaiters.append(waiter)
            return (waiter, box.pauseHandoffWait)
        }
        if let (waiter, wait) = waiter { _ = waiter.wait(timeout: .now() + wait) }
    }

    /// Passes a decision of the stream machine to the control machine and
    /// makes the call it hands out, if any.
    ///
    /// A pause that becomes due while another thread is still making a
    /// resume call cannot be made yet (it must land after the resume). The
    /// producer would keep running meanwhile, and if that other thread is
    /// descheduled it could overshoot `high` without bound; so the yielding
    /// thread waits, at most `pauseHandoffWait`, until the pause has landed.
    /// The wait is bounded because the resume call itself may be waiting for
    /// this very thread (an SDK whose resume talks to its event thread).
    @usableFromInline
    func apply(_ request: StreamControlRequest) {
        let (delivery, waiter) = control.withLock {
            box -> (ProducerControlStateMachine.Delivery?, (DispatchSemaphore, DispatchTimeInterval)?) in
            switch request {
            case .setPaused(let paused, let version):
                let delivery = box.handOut(box.machine.setPaused(paused, version: version))
                if paused && delivery == nil && box.pauseHeldUpElsewhere {
                    let waiter = DispatchSemaphore(value: 0)
                    box.pauseWaiters.append(waiter)
                    return (nil, (waiter, box.pauseHandoffWait))
                }
                return (delivery, nil)
            case .cancel:
                return (box.handOut(box.machine.requestCancel()), nil)
            case .producerFinished:
                box.machine.producerFinished()
                return (nil, nil)
            }
        }
        if let delivery { deliver(delivery) }
        if let (waiter, wait) = waiter { _ = waiter.wait(timeout: .now() + wait) }
    }

    /// Makes `first` and every producer-control call that becomes due while it
    /// runs: this thread is the single deliverer until the machine has nothing more.
    @usableFromInline
    func deliver(_ first: ProducerControlStateMachine.Delivery) {
        var next: ProducerControlStateMachine.Delivery? = first
        while let delivery = next {
            delivery.perform()
            let (following, waiters) = control.withLock { $0.completed(delivery.operation) }
            for waiter in waiters { waiter.signal() }
            next = following
        }
    }
}
