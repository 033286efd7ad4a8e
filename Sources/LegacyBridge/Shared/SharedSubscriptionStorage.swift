// One shared subscription's state: the machine behind one lock, and the code that performs its
// actions once the lock is released (run `start`, make a control call, arm or cancel the linger
// timer, hand elements and terminals to the consumers' sinks). Calling out under the lock could
// deadlock: a consumer's sink may call its pause, which comes back here.

/// The state of one ``SharedSubscription``, shared by its consumers' streams, the producer's sinks,
/// the linger timer and the threads making control calls.
@usableFromInline
final class SharedSubscriptionStorage<Element: Sendable>: Sendable {
    @usableFromInline typealias Machine = SharedSubscriptionStateMachine<
        Element, SharedConsumerSink<Element>, DeadlineTimer
    >
    typealias Call = ProducerControlStateMachine.Call

    @usableFromInline let box: LockedBox<Machine>
    let linger: Duration
    let start: @Sendable (EventSink<Element>) throws -> StreamControl?
    /// The last consumer number handed out.
    private let consumerIDs = LockedBox(0)

    init(
        replayLimit: Int, linger: Duration, restartsAutomatically: Bool,
        start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) {
        self.box = LockedBox(
            Machine(replayLimit: replayLimit, lingers: linger > .zero, restartsAutomatically: restartsAutomatically))
        self.linger = linger
        self.start = start
    }

    var statistics: SharedSubscriptionStatistics {
        box.withLock {
            var statistics = $0.statistics
            statistics.consumers = $0.consumerCount
            return statistics
        }
    }

    var isRunning: Bool { box.withLock { $0.isRunning } }

    func restart() {
        // The replay given up is released here, outside the lock.
        _ = box.withLock { $0.restart() }
    }

    // MARK: - Consumers

    /// A consumer's stream starts: it joins, on its own task, and gets the control through which
    /// its stream reports that it left, paused or resumed. With a `limit`, its stream's pause
    /// means it went over the limit.
    func join(_ sink: EventSink<Element>, failingAbove limit: Int?) -> StreamControl? {
        let id = consumerIDs.withLock {
            $0 += 1
            return $0
        }
        let consumer = SharedConsumerSink(sink: sink, limit: limit)
        let action = box.withLock { $0.join(id, consumer) }
        perform(action.effects)
        if let generation = action.start {
            runStart(generation)
        }
        switch action.delivery {
        case .live:
            break
        case .catchUp:
            catchUp(id, consumer)
        case .ended(let replay, let terminal):
            sink.yield(contentsOf: replay)
            Self.finish(consumer, terminal)
            return nil
        }
        let cancel = CancelHandle { self.perform(self.box.withLock { $0.leave(id) }) }
        if limit != nil {
            // Its resume is never due: the pause ended it.
            return StreamControl(
                cancel: cancel, pause: { self.perform(self.box.withLock { $0.consumerOverflowed(id) }) }, resume: {})
        }
        return StreamControl(
            cancel: cancel,
            pause: { self.perform(self.box.withLock { $0.consumerPaused(id) }) },
            resume: { self.perform(self.box.withLock { $0.consumerResumed(id) }) })
    }

    /// Hands a new consumer its replay and what arrived meanwhile, until it is live.
    private func catchUp(_ id: Int, _ sink: SharedConsumerSink<Element>) {
        while true {
            switch box.withLock({ $0.drain(id) }) {
            case .elements(let batch):
                sink.yield(contentsOf: batch)
            case .caughtUp, .gone:
                return
            case .ended(let batch, let terminal):
                sink.yield(contentsOf: batch)
                Self.finish(sink, terminal)
                return
            }
        }
    }

    // MARK: - Producer

    /// Runs `start` for `generation` with no lock held.
    func runStart(_ generation: UInt64) {
        let sink = EventSink(shared: SharedSubscriptionProducer(storage: self, generation: generation))
        do {
            let control = try start(sink)
            perform(box.withLock { $0.startReturned(generation, control) })
        } catch {
            perform(box.withLock { $0.startReturned(generation, nil) })
            perform(box.withLock { $0.finish(generation, .failed(error)) })
        }
    }

    @inlinable
    func yield(_ element: Element, generation: UInt64) -> YieldOutcome {
        let action = box.withLock { machine in
            withUnsafePointer(to: element) { machine.yield(generation, UnsafeBufferPointer(start: $0, count: 1)) }
        }
        switch action {
        case .stale:
            return .terminated
        case .deliver(let sinks, let acceptsStop, _):
            var outcome = YieldOutcome.enqueued
            for consumer in sinks {
                outcome = Self.merge(outcome, consumer.yield(element))
            }
            return outcome == .stopProducing && !acceptsStop ? .enqueued : outcome
        }
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>, generation: UInt64) -> YieldOutcome {
        switch box.withLock({ $0.yield(generation, elements) }) {
        case .stale:
            return .terminated
        case .deliver(let sinks, let acceptsStop, _):
            var outcome = YieldOutcome.enqueued
            for consumer in sinks {
                outcome = Self.merge(outcome, consumer.yield(contentsOf: elements))
            }
            return outcome == .stopProducing && !acceptsStop ? .enqueued : outcome
        }
    }

    func finish(_ terminal: Machine.Terminal, generation: UInt64) {
        perform(box.withLock { $0.finish(generation, terminal) })
    }

    /// The producer's answer from the consumers' answers: stop wins over a drop, a drop over
    /// enqueued. A consumer that ended meanwhile does not speak for the others.
    @inlinable
    static func merge(_ current: YieldOutcome, _ next: YieldOutcome) -> YieldOutcome {
        switch (current, next) {
        case (.stopProducing, _), (_, .stopProducing): return .stopProducing
        case (.dropped, _), (_, .dropped): return .dropped
        case (.enqueued, _), (.terminated, _): return .enqueued
        }
    }

    private static func finish(_ consumer: SharedConsumerSink<Element>, _ terminal: Machine.Terminal) {
        switch terminal {
        case .finished: consumer.sink.finish()
        case .failed(let error): consumer.sink.finish(throwing: error)
        }
    }

    // MARK: - Actions, performed with no lock held

    func perform(_ effects: Machine.Effects) {
        effects.cancelTimer?.cancel()
        if let token = effects.armLinger {
            armLinger(token)
        }
        switch effects.call {
        case .none, .release: break
        case .make(let call): make(call, generation: effects.callGeneration)
        }
        if let terminal = effects.terminal {
            for sink in effects.finish {
                Self.finish(sink, terminal)
            }
        }
        if let consumer = effects.slowConsumer {
            consumer.sink.finish(throwing: SlowConsumerError(limit: consumer.limit ?? 0))
        }
        if let generation = effects.start {
            // The stop before it returned on this thread, maybe the SDK's own: start elsewhere.
            BridgeThreadPool.shared.run { self.runStart(generation) }
        }
    }

    /// Makes `call` where the threading contract of ``StreamControl`` says: as a job posted through
    /// its scheduler, `cancel` on a library job thread, `pause` and `resume` right here.
    private func make(_ call: Call, generation: UInt64) {
        if let scheduler = call.scheduler {
            do {
                try scheduler.post { self.makeCalls(from: call, generation: generation, inline: false) }
            } catch {
                abandonCalls(from: call, generation: generation)
            }
        } else if call.operation == .cancel {
            BridgeThreadPool.shared.run { self.makeCalls(from: call, generation: generation, inline: false) }
        } else {
            makeCalls(from: call, generation: generation, inline: true)
        }
    }

    /// Makes `first`, then every call the machine hands this thread when it returns. `inline`: on
    /// the thread of a yield or a consumer, which hands a `cancel` to a library job thread instead.
    private func makeCalls(from first: Call, generation: UInt64, inline: Bool) {
        var call = first
        while true {
            call.make()
            var effects = box.withLock { $0.callReturned(generation, call.operation) }
            guard case .make(let next) = effects.call else {
                perform(effects)
                return
            }
            if inline && next.operation == .cancel {
                perform(effects)
                return
            }
            effects.call = .none
            perform(effects)
            call = next
        }
    }

    /// The scheduler refused a job because the SDK's loop is gone: that call and every call due
    /// after it are given up, so the control ends idle or closed, never stuck in flight.
    private func abandonCalls(from first: Call, generation: UInt64) {
        var operation = first.operation
        while true {
            var effects = box.withLock { $0.callReturned(generation, operation) }
            guard case .make(let next) = effects.call else {
                perform(effects)
                return
            }
            effects.call = .none
            perform(effects)
            operation = next.operation
        }
    }

    // MARK: - Linger timer

    private func armLinger(_ token: UInt64) {
        // The timer holds the subscription only weakly.
        let timer = DeadlineTimers.schedule(at: ContinuousClock.now + linger) { [weak self] in
            guard let self else { return }
            self.perform(self.box.withLock { $0.lingerFired(token) })
        }
        box.withLock { $0.lingerArmed(token, timer) }?.cancel()
    }
}

/// A consumer's sink, and the limit that ends it if it has one.
@usableFromInline
struct SharedConsumerSink<Element: Sendable>: Sendable {
    @usableFromInline let sink: EventSink<Element>
    @usableFromInline let limit: Int?

    /// Hands over an element. A consumer with a limit never holds the producer back: its
    /// stream's wish to stop means it is being ended.
    @inlinable
    func yield(_ element: Element) -> YieldOutcome {
        let outcome = sink.yield(element)
        return limit != nil && outcome == .stopProducing ? .enqueued : outcome
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldOutcome {
        let outcome = sink.yield(contentsOf: elements)
        return limit != nil && outcome == .stopProducing ? .enqueued : outcome
    }

    func yield(contentsOf elements: [Element]) {
        _ = sink.yield(contentsOf: elements)
    }
}

/// The producer's side of one generation of a shared subscription: what its ``EventSink`` calls.
@usableFromInline
final class SharedSubscriptionProducer<Element: Sendable>: Sendable {
    @usableFromInline let storage: SharedSubscriptionStorage<Element>
    @usableFromInline let generation: UInt64

    init(storage: SharedSubscriptionStorage<Element>, generation: UInt64) {
        self.storage = storage
        self.generation = generation
    }

    @inlinable
    func yield(_ element: Element) -> YieldOutcome {
        storage.yield(element, generation: generation)
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldOutcome {
        storage.yield(contentsOf: elements, generation: generation)
    }

    func finish(_ terminal: SharedSubscriptionStorage<Element>.Machine.Terminal) {
        storage.finish(terminal, generation: generation)
    }

    var statistics: StreamStatistics {
        let shared = storage.statistics
        var statistics = StreamStatistics()
        statistics.enqueued = shared.yielded
        statistics.yieldedAfterTermination = shared.yieldedWhileStopped
        statistics.pauses = shared.pauses
        statistics.resumes = shared.resumes
        return statistics
    }
}
