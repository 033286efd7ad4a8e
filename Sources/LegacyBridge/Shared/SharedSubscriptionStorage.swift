// One shared subscription's state: the machine behind one lock, and the code that performs its
// actions once the lock is released (run `start`, make a control call, arm or cancel the linger
// timer, hand elements and terminals to the consumers' sinks). Calling out under the lock could
// deadlock: a consumer's sink may call its pause, which comes back here.

/// The state of one ``SharedSubscription``, shared by its consumers' streams, the producer's sinks,
/// the linger timer and the threads making control calls.
@usableFromInline
final class SharedSubscriptionStorage<Element: Sendable>: Sendable {
    @usableFromInline typealias Machine = SharedSubscriptionStateMachine<
        Element, SharedConsumer<Element>, DeadlineTimer
    >
    typealias Call = ProducerControlStateMachine.Call

    @usableFromInline let box: LockedBox<Locked>
    let linger: Duration
    let start: @Sendable (EventSink<Element>) throws -> StreamControl?
    /// The last consumer number handed out.
    private let consumerIDs = LockedBox(0)

    init(
        replayLimit: Int, linger: Duration, restartsAutomatically: Bool,
        start: @escaping @Sendable (EventSink<Element>) throws -> StreamControl?
    ) {
        self.box = LockedBox(
            Locked(
                machine: Machine(
                    replayLimit: replayLimit, lingers: linger > .zero, restartsAutomatically: restartsAutomatically)))
        self.linger = linger
        self.start = start
    }

    var statistics: SharedSubscriptionStatistics {
        box.withLock {
            var statistics = $0.machine.statistics
            statistics.consumers = $0.machine.consumerCount
            return statistics
        }
    }

    var isRunning: Bool { box.withLock { $0.machine.isRunning } }

    func restart() {
        // The replay given up is released here, outside the lock.
        _ = box.withLock { $0.machine.restart() }
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
        let consumer = SharedConsumer(id: id, sink: sink, limit: limit, storage: self)
        let action = box.withLock { $0.machine.join(id, consumer) }
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
        // Each closure captures the consumer alone, which then serves as its context: no
        // allocation per closure.
        let cancel = CancelHandle { consumer.left() }
        if limit != nil {
            // Its resume is never due: the pause ended it.
            return StreamControl(cancel: cancel, pause: { consumer.overflowed() }, resume: {})
        }
        return StreamControl(cancel: cancel, pause: { consumer.paused() }, resume: { consumer.resumed() })
    }

    /// Hands a new consumer its replay and what arrived meanwhile, until it is live.
    private func catchUp(_ id: Int, _ sink: SharedConsumer<Element>) {
        while true {
            switch box.withLock({ $0.machine.drain(id) }) {
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
            perform(box.withLock { $0.machine.startReturned(generation, control) })
        } catch {
            perform(box.withLock { $0.machine.startReturned(generation, nil) })
            finishInOrder { $0.finish(generation, .failed(error)) }
        }
    }

    @inlinable
    func yield(_ element: Element, generation: UInt64) -> YieldOutcome {
        let admission = box.withLock { state in
            withUnsafePointer(to: element) { state.admit(generation, UnsafeBufferPointer(start: $0, count: 1)) }
        }
        switch admission {
        case .stale:
            return .terminated
        case .queued:
            return .enqueued
        case .deliver(let sinks, let acceptsStop, _):
            var outcome = YieldOutcome.enqueued
            for consumer in sinks {
                outcome = Self.merge(outcome, consumer.yield(element))
            }
            if !box.withLock({ $0.stopDeliveringIfNothingQueued() }) {
                outcome = Self.merge(outcome, deliverQueued())
            }
            return outcome == .stopProducing && !acceptsStop ? .enqueued : outcome
        }
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>, generation: UInt64) -> YieldOutcome {
        switch box.withLock({ $0.admit(generation, elements) }) {
        case .stale:
            return .terminated
        case .queued:
            return .enqueued
        case .deliver(let sinks, let acceptsStop, _):
            var outcome = YieldOutcome.enqueued
            for consumer in sinks {
                outcome = Self.merge(outcome, consumer.yield(contentsOf: elements))
            }
            if !box.withLock({ $0.stopDeliveringIfNothingQueued() }) {
                outcome = Self.merge(outcome, deliverQueued())
            }
            return outcome == .stopProducing && !acceptsStop ? .enqueued : outcome
        }
    }

    /// Hands over what other threads' yields and terminals queued while this thread delivered, in
    /// the order they were accepted, until nothing is left; then this thread stops delivering.
    /// Returns the consumers' merged answer to those elements.
    @usableFromInline
    func deliverQueued() -> YieldOutcome {
        var outcome = YieldOutcome.enqueued
        while let next = box.withLock({ $0.nextQueued() }) {
            switch next {
            case .elements(let elements, let sinks):
                elements.withUnsafeBufferPointer { buffer in
                    for consumer in sinks {
                        outcome = Self.merge(outcome, consumer.yield(contentsOf: buffer))
                    }
                }
            case .terminal(let terminal, let sinks):
                for consumer in sinks { Self.finish(consumer, terminal) }
            }
        }
        return outcome
    }

    func finish(_ terminal: Machine.Terminal, generation: UInt64) {
        finishInOrder { $0.finish(generation, terminal) }
    }

    /// Ends generation through `end` (the machine's `finish`), its consumers' sinks after every
    /// element accepted before it: if another thread is delivering, the terminal is queued behind
    /// what it delivers; otherwise this thread finishes the sinks and then hands over whatever
    /// was queued meanwhile.
    private func finishInOrder(_ end: (inout Machine) -> Machine.Effects) {
        let (effects, deliversNow) = box.withLock { state in
            var effects = end(&state.machine)
            let now = state.admitTerminal(&effects)
            return (effects, now)
        }
        if let (terminal, sinks) = deliversNow {
            for consumer in sinks { Self.finish(consumer, terminal) }
            _ = deliverQueued()
        }
        perform(effects)
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

    private static func finish(_ consumer: SharedConsumer<Element>, _ terminal: Machine.Terminal) {
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
            var effects = box.withLock { $0.machine.callReturned(generation, call.operation) }
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
            var effects = box.withLock { $0.machine.callReturned(generation, operation) }
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
            self.perform(self.box.withLock { $0.machine.lingerFired(token) })
        }
        box.withLock { $0.machine.lingerArmed(token, timer) }?.cancel()
    }
}

/// One consumer of a shared subscription: its sink, the limit that ends it if it has one, and its
/// number in the subscription's tables. Its stream's control calls come back through it.
///
/// A reference, so that the subscription's tables hold one word per consumer and each control
/// closure captures this object alone, with no context of its own.
@usableFromInline
final class SharedConsumer<Element: Sendable>: Sendable {
    @usableFromInline let sink: EventSink<Element>
    /// Whether the consumer has a limit: its stream's wish to stop then means it is being ended.
    @usableFromInline let isLimited: Bool
    let limit: Int?
    let id: Int
    let storage: SharedSubscriptionStorage<Element>

    init(id: Int, sink: EventSink<Element>, limit: Int?, storage: SharedSubscriptionStorage<Element>) {
        self.sink = sink
        self.isLimited = limit != nil
        self.limit = limit
        self.id = id
        self.storage = storage
    }

    /// Hands over an element. A consumer with a limit never holds the producer back: its
    /// stream's wish to stop means it is being ended.
    @inlinable
    func yield(_ element: Element) -> YieldOutcome {
        let outcome = sink.yield(element)
        return isLimited && outcome == .stopProducing ? .enqueued : outcome
    }

    @inlinable
    func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldOutcome {
        let outcome = sink.yield(contentsOf: elements)
        return isLimited && outcome == .stopProducing ? .enqueued : outcome
    }

    func yield(contentsOf elements: [Element]) {
        _ = sink.yield(contentsOf: elements)
    }

    /// Its stream ended: its task was cancelled, it left its loop, or it went away.
    func left() {
        storage.perform(storage.box.withLock { $0.machine.leave(id) })
    }

    /// Its stream reached its high watermark.
    func paused() {
        storage.perform(storage.box.withLock { $0.machine.consumerPaused(id) })
    }

    /// Its stream drained to its low watermark.
    func resumed() {
        storage.perform(storage.box.withLock { $0.machine.consumerResumed(id) })
    }

    /// Its stream went over the limit: the pause of a limited stream.
    func overflowed() {
        storage.perform(storage.box.withLock { $0.machine.consumerOverflowed(id) })
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

extension SharedSubscriptionStorage {
    /// What the lock guards: the machine, and the order in which accepted elements and terminals
    /// are handed to the consumers (see `SharedDeliveryQueue`).
    @usableFromInline
    struct Locked: Sendable {
        @usableFromInline var machine: Machine
        @usableFromInline var deliveries = SharedDeliveryQueue<Element, SharedConsumer<Element>, Machine.Terminal>()

        @usableFromInline
        init(machine: Machine) {
            self.machine = machine
        }

        /// A yield of generation `id`: accepted by the machine, then delivered now by the caller
        /// (which becomes the deliverer) or queued behind the current deliverer.
        @inlinable
        mutating func admit(_ id: UInt64, _ elements: UnsafeBufferPointer<Element>) -> Admission {
            switch machine.yield(id, elements) {
            case .stale:
                return .stale
            case .deliver(let sinks, let acceptsStop, let evicted):
                guard deliveries.admit(elements, to: sinks) else { return .queued(evicted: evicted) }
                return .deliver(sinks, acceptsStop: acceptsStop, evicted: evicted)
            }
        }

        @inlinable
        mutating func stopDeliveringIfNothingQueued() -> Bool {
            deliveries.stopDeliveringIfNothingQueued()
        }

        mutating func nextQueued() -> SharedDeliveryQueue<Element, SharedConsumer<Element>, Machine.Terminal>
            .Queued?
        {
            deliveries.next()
        }

        /// Takes the terminal's sinks out of `effects`: queued behind the current deliverer, or
        /// returned for the caller, which becomes the deliverer.
        mutating func admitTerminal(
            _ effects: inout Machine.Effects
        ) -> (Machine.Terminal, [SharedConsumer<Element>])? {
            guard let terminal = effects.terminal, !effects.finish.isEmpty else { return nil }
            let sinks = effects.finish
            effects.finish = []
            return deliveries.admit(terminal, to: sinks) ? (terminal, sinks) : nil
        }
    }

    /// What a yield does once accepted.
    @usableFromInline
    enum Admission: Sendable {
        /// Not the current generation: nothing was stored.
        case stale
        /// Queued behind the thread delivering, which hands it over.
        case queued(evicted: [Element])
        /// Hand it to these sinks now, then what was queued meanwhile.
        case deliver([SharedConsumer<Element>], acceptsStop: Bool, evicted: [Element])
    }
}

/// The order in which a shared subscription hands accepted elements and terminals to its
/// consumers, kept under the subscription's lock.
///
/// Elements reach the consumers' sinks outside the lock (a sink may call its pause, which comes
/// back to the subscription). So that every consumer gets them in the order they were accepted,
/// and a terminal after them, one thread at a time delivers: a yield or a terminal accepted while
/// another thread delivers is queued here, and that thread hands it over before it stops.
///
/// Protocol, each step under the lock: `admit` (true: the caller delivers what it admitted now,
/// false: it was queued); after delivering, `stopDeliveringIfNothingQueued`, and while that says
/// false, `next` until it returns nil, delivering each.
@usableFromInline
struct SharedDeliveryQueue<Element, Sink, Terminal> {
    /// A delivery queued behind the thread delivering.
    enum Queued {
        case elements(ContiguousArray<Element>, [Sink])
        case terminal(Terminal, [Sink])
    }

    /// Accepted and not yet handed over, oldest first from `head`.
    var queue: [Queued] = []
    var head = 0
    /// `queue.count - head`, readable from the inlined yield.
    @usableFromInline var queued = 0
    /// A thread is handing elements or a terminal to the consumers.
    @usableFromInline var delivering = false

    @usableFromInline
    init() {}

    /// Elements accepted for `sinks`: true if the caller delivers them now (and is the deliverer
    /// until it stops), false if they were queued behind the deliverer.
    @inlinable
    mutating func admit(_ elements: UnsafeBufferPointer<Element>, to sinks: [Sink]) -> Bool {
        if !delivering {
            delivering = true
            return true
        }
        enqueue(elements, sinks)
        return false
    }

    @usableFromInline
    mutating func enqueue(_ elements: UnsafeBufferPointer<Element>, _ sinks: [Sink]) {
        guard !sinks.isEmpty else { return }
        queue.append(.elements(ContiguousArray(elements), sinks))
        queued += 1
    }

    /// A terminal for `sinks`: true if the caller finishes them now (and is the deliverer until it
    /// stops), false if it was queued behind the deliverer.
    mutating func admit(_ terminal: Terminal, to sinks: [Sink]) -> Bool {
        if !delivering {
            delivering = true
            return true
        }
        queue.append(.terminal(terminal, sinks))
        queued += 1
        return false
    }

    /// The deliverer handed its own over: it stops if nothing was queued meanwhile (true), else it
    /// must hand that over too, through `next` (false).
    @inlinable
    mutating func stopDeliveringIfNothingQueued() -> Bool {
        guard queued == 0 else { return false }
        delivering = false
        return true
    }

    /// The next queued delivery; nil when there is none, and then the deliverer stops.
    mutating func next() -> Queued? {
        guard head < queue.count else {
            if !queue.isEmpty {
                queue.removeAll(keepingCapacity: queue.count <= 64)
                head = 0
            }
            delivering = false
            return nil
        }
        let item = queue[head]
        head += 1
        queued -= 1
        return item
    }
}

extension SharedDeliveryQueue: Sendable where Element: Sendable, Sink: Sendable, Terminal: Sendable {}
extension SharedDeliveryQueue.Queued: Sendable where Element: Sendable, Sink: Sendable, Terminal: Sendable {}
