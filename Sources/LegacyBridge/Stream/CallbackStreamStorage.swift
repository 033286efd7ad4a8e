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
    let control: LockedBox<ProducerControlStateMachine>

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering) {
        self.box = LockedBox(CallbackStreamStateMachine(buffering: buffering, ordering: ordering))
        self.control = LockedBox(ProducerControlStateMachine())
    }

    // MARK: Producer side

    /// Runs `start` (no lock held) and records the handle it returns, or its error.
    @usableFromInline
    func runStart(_ start: (EventSink<Element>) throws -> StreamControl?) {
        let sink = EventSink(backend: .stream(self))
        do {
            let handle = try start(sink)
            if let delivery = control.withLock({ $0.controlArrived(handle) }) {
                deliver(delivery)
            }
        } catch {
            _ = control.withLock { $0.controlArrived(nil) }
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

    @inlinable
    func perform(_ effects: consuming StreamEffects<Element>) {
        if let wakeUp = effects.wakeUp {
            wakeUp.continuation.resume(with: wakeUp.result)
        }
        if let request = effects.control {
            apply(request)
        }
        // `effects.evicted` and `effects.discarded` are released here, outside the lock.
    }

    /// Passes a decision of the stream machine to the control machine and
    /// makes the call it hands out, if any.
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

    /// Makes `first` and every producer-control call that becomes due while it
    /// runs: this thread is the single deliverer until the machine has nothing more.
    @usableFromInline
    func deliver(_ first: ProducerControlStateMachine.Delivery) {
        var next: ProducerControlStateMachine.Delivery? = first
        while let delivery = next {
            delivery.perform()
            next = control.withLock { $0.deliveryCompleted() }
        }
    }
}
