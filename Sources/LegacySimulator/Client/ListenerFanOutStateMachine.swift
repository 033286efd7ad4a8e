// The consumers of one shared SDK listener and the listener's life, as a pure value that
// LegacySharedListener asks under its lock; it calls the SDK and the consumers' sinks after the
// lock is released.

/// The state of a listener shared by many consumers.
///
/// Rules:
/// - The first consumer starts the SDK listener; consumers that join while it starts or runs
///   share it.
/// - The last consumer to leave stops it: at once if it runs, as soon as its start returned if it
///   is starting.
/// - Each start has its own generation. Events and the terminal of a listener reach the consumers
///   present when they arrive; those of an older listener (stopped or ended, still delivering) reach
///   nobody.
/// - A terminal (end or error) finishes every current consumer and leaves no listener; the next
///   consumer starts a new one. A start that fails finishes every consumer with its error.
/// - The SDK listener is paused while any consumer asks for a pause and resumed when none does.
///   One controller at a time makes the pause and resume calls, until the SDK's state matches
///   what the consumers ask, so the calls never cross.
struct ListenerFanOutStateMachine<Sink: Sendable, Handle: Sendable>: Sendable {
    private enum State: Sendable {
        /// No listener.
        case idle
        /// A consumer is starting listener `generation`.
        case starting(generation: UInt64)
        /// Listener `generation` runs.
        case running(generation: UInt64, handle: Handle)
    }

    enum JoinAction {
        /// Start listener `generation` (on the joining consumer's thread), then report `started`
        /// or `startFailed`.
        case start(generation: UInt64)
        /// The listener starts or runs already.
        case none
    }

    enum StopAction {
        case none
        /// Cancel this listener.
        case stop(Handle)
        /// Become the controller: call `nextControl` until it says done.
        case control
    }

    enum ControlStep {
        case pause(Handle)
        case resume(Handle)
        case done
    }

    /// Counts of the listener's life.
    struct Statistics: Hashable {
        var starts = 0
        var stops = 0
        var terminals = 0
    }

    private var state = State.idle
    private var consumers: [Int: Sink] = [:]
    private var pausedConsumers: Set<Int> = []
    /// What the SDK was last told (false for a new listener).
    private var sdkPaused = false
    private var controlling = false
    private var generation: UInt64 = 0
    private(set) var statistics = Statistics()

    /// Consumers now.
    var consumerCount: Int { consumers.count }

    /// Whether a listener runs: its start returned, and it neither stopped nor ended.
    var isRunning: Bool {
        if case .running = state { return true }
        return false
    }

    mutating func join(_ id: Int, _ sink: Sink) -> JoinAction {
        precondition(consumers[id] == nil, "ListenerFanOutStateMachine: consumer \(id) joined twice")
        consumers[id] = sink
        switch state {
        case .idle:
            generation += 1
            state = .starting(generation: generation)
            sdkPaused = false
            statistics.starts += 1
            return .start(generation: generation)
        case .starting, .running:
            return .none
        }
    }

    /// The start of listener `generation` returned its handle.
    mutating func started(generation: UInt64, handle: Handle) -> StopAction {
        guard case .starting(let current) = state, current == generation else {
            // It ended inside its start (a synchronous terminal) and may have been replaced since:
            // nothing waits for it.
            return .none
        }
        if consumers.isEmpty {
            state = .idle
            statistics.stops += 1
            return .stop(handle)
        }
        state = .running(generation: generation, handle: handle)
        return controlIfNeeded() ? .control : .none
    }

    /// The start of listener `generation` failed: the consumers to finish with its error.
    mutating func startFailed(generation: UInt64) -> [Sink] {
        guard case .starting(let current) = state, current == generation else {
            preconditionFailure("ListenerFanOutStateMachine: start \(generation) failed, but it is not starting")
        }
        return endAll()
    }

    /// An event of listener `generation`: the consumers to give it to.
    func event(generation: UInt64) -> [Sink] {
        isCurrent(generation) ? Array(consumers.values) : []
    }

    /// The terminal of listener `generation`: the consumers to finish.
    mutating func terminal(generation: UInt64) -> [Sink] {
        guard isCurrent(generation) else { return [] }
        statistics.terminals += 1
        return endAll()
    }

    mutating func leave(_ id: Int) -> StopAction {
        // A consumer a terminal already finished has left already.
        guard consumers.removeValue(forKey: id) != nil else { return .none }
        pausedConsumers.remove(id)
        guard consumers.isEmpty else { return controlIfNeeded() ? .control : .none }
        switch state {
        case .running(_, let handle):
            state = .idle
            statistics.stops += 1
            return .stop(handle)
        case .starting, .idle:
            // A starting listener is stopped by `started`.
            return .none
        }
    }

    mutating func pause(_ id: Int) -> StopAction {
        guard consumers[id] != nil else { return .none }
        pausedConsumers.insert(id)
        return controlIfNeeded() ? .control : .none
    }

    mutating func resume(_ id: Int) -> StopAction {
        guard consumers[id] != nil else { return .none }
        pausedConsumers.remove(id)
        return controlIfNeeded() ? .control : .none
    }

    /// The controller's next call, or `done` (it is no longer the controller).
    mutating func nextControl() -> ControlStep {
        precondition(controlling, "ListenerFanOutStateMachine: nextControl called by a non-controller")
        guard case .running(_, let handle) = state else {
            controlling = false
            return .done
        }
        let wanted = !pausedConsumers.isEmpty
        guard wanted != sdkPaused else {
            controlling = false
            return .done
        }
        sdkPaused = wanted
        return wanted ? .pause(handle) : .resume(handle)
    }

    private func isCurrent(_ generation: UInt64) -> Bool {
        switch state {
        case .starting(let current), .running(let current, _): return current == generation
        case .idle: return false
        }
    }

    private mutating func endAll() -> [Sink] {
        let sinks = Array(consumers.values)
        consumers.removeAll()
        pausedConsumers.removeAll()
        state = .idle
        return sinks
    }

    /// Whether the caller must become the controller: a listener runs, nobody controls it, and
    /// it is not in the state the consumers ask for.
    private mutating func controlIfNeeded() -> Bool {
        guard case .running = state, !controlling, sdkPaused != !pausedConsumers.isEmpty else { return false }
        controlling = true
        return true
    }
}
