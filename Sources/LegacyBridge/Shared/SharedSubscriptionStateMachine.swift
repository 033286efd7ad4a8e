// The pure bookkeeping behind `SharedSubscription`: which generation of the SDK subscription runs,
// who consumes it, what a new consumer is replayed, and which control call is due.
//
// It owns no lock, calls no closure and resumes nothing: each event returns what the storage must
// do once it has released its lock (run `start`, make a control call, arm or cancel the linger
// timer, hand elements or the terminal to consumers' sinks). Each consumer's own buffer is the
// consumer's `CallbackStream`; this machine only decides who gets what, in which order.

/// The state of one SDK subscription shared by many consumers.
///
/// Rules:
/// - Each run of `start` is a generation with its own control handle. The first consumer starts
///   generation 1. A generation starts only when no stop of an earlier one is pending or in
///   flight: a consumer that arrives meanwhile waits, and the next generation starts once that
///   stop returned.
/// - When the last consumer leaves, the generation is stopped: at once without a linger, or when
///   the linger timer fires. A consumer arriving before it fires cancels the timer and keeps the
///   generation. A stop asks the control for its cancel, which the control machine makes once,
///   after `start` returned the handle, and never after the producer finished.
/// - Elements of the current generation go to every live consumer, to the replay buffer, and to
///   the backlog of each consumer still catching up. Elements of any other generation go nowhere
///   and are counted.
/// - A new consumer first takes the replay, then whatever arrived meanwhile, before it goes live:
///   each consumer sees the generation's elements in the order they were accepted.
/// - A stopped generation gives its replay up at once: no later run can deliver it.
/// - The terminal of the current generation goes to every consumer, after its backlog, and ends
///   the generation. Under the manual restart policy every later consumer gets the replay and that
///   terminal until `restart`; under the automatic one the next consumer starts a new generation.
///   A terminal of any other generation is ignored.
/// - A pause is decided when a first consumer asks for one, a resume when the last one asking
///   resumes or leaves. The control machine orders and serializes the calls.
/// - A consumer whose buffer overflowed is ended on its own with a slow-consumer error and leaves
///   as if it had stopped. One that already has its terminal keeps it.
@usableFromInline
struct SharedSubscriptionStateMachine<Element: Sendable, Sink: Sendable, Timer: Sendable>: Sendable {
    @usableFromInline typealias Control = ProducerControlStateMachine

    /// How a generation ended.
    @usableFromInline
    enum Terminal: Sendable {
        case finished
        case failed(any Error)
    }

    @usableFromInline
    enum Linger: Sendable {
        /// Consumers are present, or the generation has no linger.
        case off
        /// The timer with this token is being armed.
        case arming(token: UInt64)
        case armed(token: UInt64, timer: Timer)
    }

    @usableFromInline
    struct Generation: Sendable {
        @usableFromInline let id: UInt64
        @usableFromInline var control: Control
        @usableFromInline var linger: Linger
        /// Whether `start` returned.
        var started = false
    }

    @usableFromInline
    enum State: Sendable {
        /// No generation: the next consumer starts one.
        case idle
        /// Generation `id` was started and has not ended.
        case running(Generation)
        /// Generation `id` is being stopped; consumers present wait for the next one.
        case stopping(id: UInt64, control: Control)
        /// The last generation ended with this terminal (manual restart policy).
        case ended(Terminal)
    }

    /// A consumer taking its replay and backlog before it goes live.
    @usableFromInline
    struct Joining: Sendable {
        @usableFromInline let sink: Sink
        @usableFromInline var backlog: [Element]
        @usableFromInline var terminal: Terminal?
    }

    /// What the storage does after an event, with no lock held, in this order.
    struct Effects: Sendable {
        /// Cancel this linger timer.
        var cancelTimer: Timer?
        /// Arm the linger timer with this token, then report `lingerArmed`.
        var armLinger: UInt64?
        /// A control call of generation `callGeneration` to make, or a handle to release.
        var call: Control.Action = .none
        var callGeneration: UInt64 = 0
        /// Finish these sinks with `terminal`.
        var finish: [Sink] = []
        var terminal: Terminal?
        /// Run `start` for this generation, on a thread of the library's own.
        var start: UInt64?
        /// Replayable elements given up: released with the effects, outside the lock.
        var released: [Element] = []
        /// End this consumer's sink with the slow-consumer error.
        var slowConsumer: Sink?
    }

    /// How a new consumer is served.
    enum Delivery: Sendable {
        /// It is live: the elements reach its sink from now on.
        case live
        /// It must take its replay and backlog with `drain` until that says it caught up.
        case catchUp
        /// The subscription ended: hand it these elements, then the terminal. It did not join.
        case ended([Element], Terminal)
    }

    struct JoinAction: Sendable {
        var delivery: Delivery
        /// Run `start` for this generation on the joining consumer's thread first.
        var start: UInt64?
        var effects: Effects
    }

    /// The answer to a catching-up consumer's `drain`.
    enum Backlog: Sendable {
        /// Hand these elements to the sink, then drain again.
        case elements([Element])
        /// Nothing more: the consumer is live now.
        case caughtUp
        /// Hand these elements, then the terminal. The consumer is gone from the machine.
        case ended([Element], Terminal)
        /// The consumer left meanwhile.
        case gone
    }

    @usableFromInline
    enum YieldAction: Sendable {
        /// Hand the element(s) to these sinks. `acceptsStop`: a `stopProducing` answer may reach
        /// the producer. `evicted`: replay elements pushed out, released outside the lock.
        case deliver([Sink], acceptsStop: Bool, evicted: [Element])
        /// Not the current generation: nothing was stored.
        case stale
    }

    // The properties a yield reads are `@usableFromInline`, so that it runs specialized for the
    // element and sink types: as generic code it spent most of its time looking up metadata.

    /// Counts of the subscription's life.
    @usableFromInline var statistics = SharedSubscriptionStatistics()

    @usableFromInline var state = State.idle
    private var live: [Int: Sink] = [:]
    /// `live`'s sinks, rebuilt when it changes, so a yield hands out an array without building one.
    @usableFromInline var liveSinks: [Sink] = []
    @usableFromInline var joining: [Int: Joining] = [:]
    private var pausing: Set<Int> = []
    @usableFromInline var replay: [Element] = []
    /// Controls of ended generations with calls still in flight.
    private var retiring: [UInt64: Control] = [:]
    private var lastGeneration: UInt64 = 0
    private var lastLingerToken: UInt64 = 0

    @usableFromInline let replayLimit: Int
    let lingers: Bool
    let restartsAutomatically: Bool

    /// - Parameters:
    ///   - replayLimit: Elements kept for new consumers; 0 for none.
    ///   - lingers: Whether the last leave arms a timer instead of stopping at once.
    ///   - restartsAutomatically: Whether a consumer after a terminal starts a new generation.
    init(replayLimit: Int, lingers: Bool, restartsAutomatically: Bool) {
        precondition(replayLimit >= 0, "SharedSubscriptionStateMachine: negative replay limit")
        self.replayLimit = replayLimit
        self.lingers = lingers
        self.restartsAutomatically = restartsAutomatically
    }

    /// Replay elements kept while no run can deliver them: idle or stopping (tests).
    var replayKeptWithoutRun: Int {
        switch state {
        case .idle, .stopping: return replay.count
        case .running, .ended: return 0
        }
    }

    /// Consumers now: live ones and those catching up.
    var consumerCount: Int {
        live.count + joining.values.count(where: { $0.terminal == nil })
    }

    /// Whether a generation runs: its `start` returned, and it is neither stopping nor ended.
    var isRunning: Bool {
        if case .running(let generation) = state { return generation.started }
        return false
    }

    // MARK: - Consumers

    /// Consumer `id` arrives with its sink.
    mutating func join(_ id: Int, _ sink: Sink) -> JoinAction {
        precondition(live[id] == nil && joining[id] == nil, "SharedSubscription: consumer \(id) joined twice")
        if case .ended = state {} else { statistics.consumersJoined += 1 }
        switch state {
        case .idle:
            addLive(id, sink)
            var effects = Effects()
            let id = beginGeneration(&effects)
            return JoinAction(delivery: .live, start: id, effects: effects)
        case .running(var generation):
            var effects = Effects()
            switch generation.linger {
            case .off:
                break
            case .arming:
                // The timer's arming finds its token stale and cancels it.
                generation.linger = .off
                statistics.lingerRescues += 1
            case .armed(_, let timer):
                generation.linger = .off
                effects.cancelTimer = timer
                statistics.lingerRescues += 1
            }
            state = .running(generation)
            if replay.isEmpty {
                addLive(id, sink)
                return JoinAction(delivery: .live, effects: effects)
            }
            statistics.replayed += replay.count
            joining[id] = Joining(sink: sink, backlog: replay)
            return JoinAction(delivery: .catchUp, effects: effects)
        case .stopping:
            // It waits for the generation that starts once the stop returned.
            addLive(id, sink)
            return JoinAction(delivery: .live, effects: Effects())
        case .ended(let terminal):
            statistics.replayed += replay.count
            statistics.terminalsReplayed += 1
            return JoinAction(delivery: .ended(replay, terminal), effects: Effects())
        }
    }

    /// Catching-up consumer `id` asks for its backlog.
    mutating func drain(_ id: Int) -> Backlog {
        guard var record = joining[id] else { return .gone }
        if let terminal = record.terminal {
            joining[id] = nil
            return .ended(record.backlog, terminal)
        }
        if record.backlog.isEmpty {
            joining[id] = nil
            live[id] = record.sink
            liveSinks.append(record.sink)
            return .caughtUp
        }
        let batch = record.backlog
        record.backlog = []
        joining[id] = record
        return .elements(batch)
    }

    /// Consumer `id` left: its task ended, it left its loop, or its iterator went away.
    mutating func leave(_ id: Int) -> Effects {
        if live.removeValue(forKey: id) != nil {
            liveSinks = Array(live.values)
        } else if joining.removeValue(forKey: id) == nil {
            // A terminal ended it before.
            return Effects()
        }
        let resumes = pausing.remove(id) != nil && pausing.isEmpty
        guard consumerCount == 0, case .running(let generation) = state else {
            return resumes ? steer(pause: false) : Effects()
        }
        guard lingers else {
            // A stop needs no resume first: the cancel follows the pause.
            return stop(generation)
        }
        // While it lingers, the producer runs for the replay.
        var effects = resumes ? steer(pause: false) : Effects()
        guard case .running(var lingering) = state else {
            preconditionFailure("SharedSubscription: a resume ended the generation")
        }
        lastLingerToken += 1
        lingering.linger = .arming(token: lastLingerToken)
        state = .running(lingering)
        effects.armLinger = lastLingerToken
        return effects
    }

    /// Consumer `id`'s buffer went over its limit: it is ended with the slow-consumer error alone.
    mutating func consumerOverflowed(_ id: Int) -> Effects {
        let sink: Sink
        if let live = live[id] {
            sink = live
        } else if let record = joining[id], record.terminal == nil {
            sink = record.sink
        } else {
            // It left, or its terminal is already behind its backlog.
            return Effects()
        }
        statistics.slowConsumersEnded += 1
        var effects = leave(id)
        effects.slowConsumer = sink
        return effects
    }

    /// Consumer `id`'s buffer reached its high watermark.
    mutating func consumerPaused(_ id: Int) -> Effects {
        guard live[id] != nil || joining[id] != nil else { return Effects() }
        let (inserted, _) = pausing.insert(id)
        return inserted && pausing.count == 1 ? steer(pause: true) : Effects()
    }

    /// Consumer `id` drained to its low watermark.
    mutating func consumerResumed(_ id: Int) -> Effects {
        pausing.remove(id) != nil && pausing.isEmpty ? steer(pause: false) : Effects()
    }

    // MARK: - Producer

    /// `start` of generation `id` returned its control, or `nil`; also after it threw.
    mutating func startReturned(_ id: UInt64, _ handle: StreamControl?) -> Effects {
        switch state {
        case .running(var generation) where generation.id == id:
            let call = generation.control.handleArrived(handle)
            generation.started = true
            state = .running(generation)
            return counted(Effects(call: call, callGeneration: id))
        case .stopping(let current, var control) where current == id:
            let call = control.handleArrived(handle)
            return afterStopStep(id, control, call)
        case .idle, .running, .stopping, .ended:
            // It ended inside `start`, and its control retired.
            guard var control = retiring[id] else {
                preconditionFailure("SharedSubscription: start of generation \(id) returned twice")
            }
            let call = control.handleArrived(handle)
            retire(id, control)
            return counted(Effects(call: call, callGeneration: id))
        }
    }

    /// Generation `id`'s producer yields `count` elements, passed as `elements`.
    @inlinable
    mutating func yield(_ id: UInt64, _ elements: UnsafeBufferPointer<Element>) -> YieldAction {
        guard case .running(let generation) = state, generation.id == id else {
            statistics.yieldedWhileStopped += elements.count
            return .stale
        }
        statistics.yielded += elements.count
        var evicted: [Element] = []
        if replayLimit > 0 {
            replay.append(contentsOf: elements.suffix(replayLimit))
            let excess = replay.count - replayLimit
            if excess > 0 {
                // Their last references go outside the lock: an element's deinit may be user code.
                evicted = Array(replay.prefix(excess))
                replay.removeFirst(excess)
            }
        }
        if !joining.isEmpty {
            for (key, var record) in joining where record.terminal == nil {
                joining[key] = nil  // keep the backlog uniquely referenced while appending
                record.backlog.append(contentsOf: elements)
                joining[key] = record
            }
        }
        return .deliver(liveSinks, acceptsStop: generation.control.acceptsStopAnswers, evicted: evicted)
    }

    /// Generation `id`'s producer finished, or its `start` threw.
    mutating func finish(_ id: UInt64, _ terminal: Terminal) -> Effects {
        guard case .running(var generation) = state, generation.id == id else {
            statistics.terminalsIgnored += 1
            return Effects()
        }
        switch terminal {
        case .finished: statistics.finishes += 1
        case .failed: statistics.failures += 1
        }
        var effects = Effects(terminal: terminal)
        if case .armed(_, let timer) = generation.linger { effects.cancelTimer = timer }
        effects.finish = liveSinks
        live = [:]
        liveSinks = []
        pausing = []
        for key in joining.keys { joining[key]?.terminal = terminal }
        effects.call = generation.control.producerFinished()
        effects.callGeneration = id
        retire(id, generation.control)
        if restartsAutomatically {
            effects.released = replay
            replay = []
            state = .idle
        } else {
            state = .ended(terminal)
        }
        return counted(effects)
    }

    /// A control call of generation `id` returned, or its scheduler refused it.
    mutating func callReturned(_ id: UInt64, _ operation: Control.Operation) -> Effects {
        switch state {
        case .running(var generation) where generation.id == id:
            let call = generation.control.callReturned(operation)
            state = .running(generation)
            return counted(Effects(call: call, callGeneration: id))
        case .stopping(let current, var control) where current == id:
            let call = control.callReturned(operation)
            return afterStopStep(id, control, call)
        case .idle, .running, .stopping, .ended:
            guard var control = retiring[id] else {
                preconditionFailure("SharedSubscription: a call of generation \(id) returned, but none was made")
            }
            let call = control.callReturned(operation)
            retire(id, control)
            return counted(Effects(call: call, callGeneration: id))
        }
    }

    // MARK: - Linger timer

    /// The linger timer with `token` is armed. Returns it if it must be cancelled: a consumer
    /// arrived, or the generation ended, while it was being armed.
    mutating func lingerArmed(_ token: UInt64, _ timer: Timer) -> Timer? {
        guard case .running(var generation) = state, case .arming(let current) = generation.linger,
            current == token
        else { return timer }
        generation.linger = .armed(token: token, timer: timer)
        state = .running(generation)
        return nil
    }

    /// The linger timer with `token` fired.
    mutating func lingerFired(_ token: UInt64) -> Effects {
        guard case .running(let generation) = state else { return Effects() }
        switch generation.linger {
        case .arming(let current) where current == token, .armed(let current, _) where current == token:
            precondition(consumerCount == 0, "SharedSubscription: a linger timer ran with consumers present")
            return stop(generation)
        case .off, .arming, .armed:
            return Effects()
        }
    }

    /// Forget the terminal of an ended subscription: the next consumer starts a new generation.
    /// Returns the replay given up, to release outside the lock.
    mutating func restart() -> [Element] {
        switch state {
        case .ended:
            let released = replay
            replay = []
            state = .idle
            return released
        case .idle, .running, .stopping:
            return []
        }
    }

    // MARK: - Helpers

    private mutating func addLive(_ id: Int, _ sink: Sink) {
        live[id] = sink
        liveSinks.append(sink)
    }

    /// Starts a new generation for the consumers present.
    /// The previous run's replay is released with `effects`, outside the lock.
    private mutating func beginGeneration(_ effects: inout Effects) -> UInt64 {
        lastGeneration += 1
        effects.released = replay
        replay = []
        var control = Control()
        if !pausing.isEmpty {
            // Consumers that asked for a pause while a stop was under way still want it: the
            // pause is owed to the new run and made once its handle arrives.
            guard case .none = control.pauseDecided() else {
                preconditionFailure("SharedSubscription: a pause was handed out before the handle")
            }
        }
        state = .running(Generation(id: lastGeneration, control: control, linger: .off))
        statistics.starts += 1
        return lastGeneration
    }

    private mutating func stop(_ generation: Generation) -> Effects {
        var control = generation.control
        statistics.stops += 1
        // No later run can deliver this replay (each starts empty): give it up now, not when the
        // next consumer comes, which may be never.
        let released = replay
        replay = []
        let call = control.cancelRequested()
        var effects = afterStopStep(generation.id, control, call)
        effects.released = released + effects.released
        return effects
    }

    /// Records a stopping generation's control after a step; once no call can follow, the stop is
    /// over and the consumers that arrived meanwhile get a new generation.
    private mutating func afterStopStep(_ id: UInt64, _ control: Control, _ call: Control.Action) -> Effects {
        var effects = counted(Effects(call: call, callGeneration: id))
        guard control.isClosed else {
            state = .stopping(id: id, control: control)
            return effects
        }
        state = .idle
        if consumerCount > 0 {
            effects.start = beginGeneration(&effects)
        }
        return effects
    }

    /// A pause or resume is wanted by the consumers as a whole.
    private mutating func steer(pause: Bool) -> Effects {
        guard case .running(var generation) = state else { return Effects() }
        let call = pause ? generation.control.pauseDecided() : generation.control.resumeDecided()
        state = .running(generation)
        return counted(Effects(call: call, callGeneration: generation.id))
    }

    /// Keeps an ended generation's control while calls can still follow.
    private mutating func retire(_ id: UInt64, _ control: Control) {
        retiring[id] = control.isClosed ? nil : control
    }

    /// Counts the control call handed out.
    private mutating func counted(_ effects: Effects) -> Effects {
        if case .make(let call) = effects.call {
            switch call.operation {
            case .pause: statistics.pauses += 1
            case .resume: statistics.resumes += 1
            case .cancel: statistics.cancels += 1
            }
        }
        return effects
    }
}
