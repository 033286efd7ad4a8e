/// One subscription's shared state: the state machine behind the lock. Every
/// method asks the machine for an action under the lock, releases it, then
/// performs the action (resume the consumer, call the producer's control,
/// drop discarded elements).
@usableFromInline
struct CallbackStreamStorage<Element: Sendable>: Sendable {
    @usableFromInline
    let box: LockedBox<CallbackStreamStateMachine<Element>>

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering) {
        self.box = LockedBox(CallbackStreamStateMachine(buffering: buffering, ordering: ordering))
    }

    // MARK: Producer side

    /// Runs `start` (no lock held) and records the handle it returns, or its error.
    @usableFromInline
    func runStart(_ start: (EventSink<Element>) throws -> StreamControl?) {
        let sink = EventSink(backend: .stream(self))
        let effects: StreamEffects<Element>
        do {
            let control = try start(sink)
            effects = box.withLock { $0.controlArrived(control) }
        } catch {
            effects = box.withLock { $0.startFailed(error) }
        }
        perform(effects)
    }

    @inlinable
    func yield(_ element: Element) -> YieldOutcome {
        let (outcome, effects) = box.withLock { $0.yield(element) }
        perform(effects)
        return outcome
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
        box.withLock { $0.statistics }
    }

    // MARK: Effects (called with no lock held)

    @inlinable
    func perform(_ effects: consuming StreamEffects<Element>) {
        if let wakeUp = effects.wakeUp {
            wakeUp.continuation.resume(with: wakeUp.result)
        }
        if let delivery = effects.delivery {
            deliver(delivery)
        }
        // `effects.evicted` and `effects.discarded` are released here, outside the lock.
    }

    /// Makes `first` and every producer-control call that becomes due while it
    /// runs: this thread is the single deliverer until the machine has nothing more.
    @usableFromInline
    func deliver(_ first: ProducerControlStateMachine.Delivery) {
        var next: ProducerControlStateMachine.Delivery? = first
        while let delivery = next {
            delivery.perform()
            next = box.withLock { $0.deliveryCompleted() }
        }
    }
}
