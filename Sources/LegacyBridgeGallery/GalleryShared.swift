// Bad-adapter gallery, one SDK listener shared by many consumers: WRONG ON PURPOSE. See
// Gallery.swift.

import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. Starts the listener once into one `AsyncThrowingStream` and hands that same
/// stream to every consumer.
///
/// Why it is wrong: an `AsyncStream` delivers each element to one waiting iterator, not to all of
/// them. Several consumers iterating one stream split its events among them, and the runtime traps
/// when two tasks wait in `next()` at once (swiftlang/swift#71412). Give each consumer a stream of
/// its own.
/// Flagged by: `shared-every-consumer-every-event` (a split, a consumer left waiting, or a crash).
public struct SharedAsyncStreamAdapter: SharedSubscriptionAdapter {
    /// Creates the adapter.
    public init() {}
    /// `one-asyncstream-shared`.
    public var name: String { "one-asyncstream-shared" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: every consumer iterates the same AsyncThrowingStream of the one listener"
    }

    /// Shares one stream among every consumer.
    /// - Parameter listener: The SDK listener.
    /// - Returns: A function that returns the one stream, starting the listener the first time.
    public func share(_ listener: LegacyListener) -> @Sendable () -> AsyncThrowingStream<LegacyEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<LegacyEvent, any Error>.makeStream()
        let started = LockedBox(false)
        return {
            let first = started.withLock { started in
                defer { started = true }
                return !started
            }
            if first {
                do {
                    let control = try listener.start(
                        onEvent: { continuation.yield($0) },
                        onEnd: { error in continuation.finish(throwing: error) })
                    continuation.onTermination = { _ in control.cancel() }
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            return stream  // WRONG: one stream for every consumer
        }
    }
}

/// WRONG ON PURPOSE. Gives each consumer a `CallbackStream` of its own, and each of them starts
/// the SDK listener.
///
/// Why it is wrong: each stream is correct alone, but the SDK is subscribed once per consumer. An
/// SDK that takes one listener per topic refuses the second start, and one that accepts it
/// delivers every event once per consumer over the wire. Share one listener among the consumers.
/// Flagged by: `shared-one-listener`.
public struct ListenerPerConsumerAdapter: SharedSubscriptionAdapter {
    /// Creates the adapter.
    public init() {}
    /// `listener-per-consumer`.
    public var name: String { "listener-per-consumer" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a CallbackStream per consumer, each starting its own SDK listener"
    }

    /// Gives each consumer its own listener.
    /// - Parameter listener: The SDK listener.
    /// - Returns: A function that returns a new stream over a new listener.
    public func share(_ listener: LegacyListener) -> @Sendable () -> CallbackStream<LegacyEvent> {
        {
            CallbackStream { sink in
                let control = try listener.start(  // WRONG: one SDK listener per consumer
                    onEvent: { sink.yield($0) },
                    onEnd: { error in
                        if let error { sink.finish(throwing: error) } else { sink.finish() }
                    })
                return StreamControl(cancel: CancelHandle(control.cancel))
            }
        }
    }
}

/// WRONG ON PURPOSE. A hand-rolled broadcaster: one listener, one `AsyncThrowingStream` per
/// consumer, and a consumer that leaves is removed, but the listener is never cancelled.
///
/// Why it is wrong: every consumer gets every event, but when the last one leaves the SDK keeps
/// delivering to nobody, holding its topic, its threads and the network subscription for the
/// life of the program.
/// Flagged by: `shared-consumer-leaves`.
public struct NeverStopsListenerAdapter: SharedSubscriptionAdapter {
    /// Creates the adapter.
    public init() {}
    /// `never-stops-listener`.
    public var name: String { "never-stops-listener" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a broadcaster that removes consumers who leave but never cancels the SDK listener"
    }

    /// Broadcasts one listener to a stream per consumer.
    /// - Parameter listener: The SDK listener.
    /// - Returns: A function that returns a new consumer's stream.
    public func share(_ listener: LegacyListener) -> @Sendable () -> AsyncThrowingStream<LegacyEvent, any Error> {
        let broadcaster = Broadcaster(listener)
        return { broadcaster.subscribe() }
    }

    private final class Broadcaster: Sendable {
        private struct State {
            var consumers: [Int: AsyncThrowingStream<LegacyEvent, any Error>.Continuation] = [:]
            var nextID = 0
            var started = false
        }
        private let state = LockedBox(State())
        private let listener: LegacyListener

        init(_ listener: LegacyListener) { self.listener = listener }

        func subscribe() -> AsyncThrowingStream<LegacyEvent, any Error> {
            let (stream, continuation) = AsyncThrowingStream<LegacyEvent, any Error>.makeStream()
            let (id, startNow) = state.withLock { state in
                defer {
                    state.nextID += 1
                    state.started = true
                }
                state.consumers[state.nextID] = continuation
                return (state.nextID, !state.started)
            }
            continuation.onTermination = { [state] _ in
                // WRONG: when the last consumer leaves, the listener keeps running.
                state.withLock { _ = $0.consumers.removeValue(forKey: id) }
            }
            if startNow {
                let state = self.state
                do {
                    _ = try listener.start(
                        onEvent: { event in
                            for consumer in state.withLock({ $0.consumers.values }) { consumer.yield(event) }
                        },
                        onEnd: { error in
                            for consumer in state.withLock({ $0.consumers.values }) { consumer.finish(throwing: error) }
                        })
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            return stream
        }
    }
}

/// WRONG ON PURPOSE. A broadcaster (a stream per consumer, fed from one listener) that cancels the
/// SDK listener when its last consumer's stream terminates, whatever ended it.
///
/// Why it is wrong: when the SDK ends the listener itself, the end finishes every consumer's
/// stream, and their termination handlers cancel a listener the SDK has already ended and let go.
/// A real SDK may by then have given that subscription (its id, its handle) to someone else, whose
/// listener is stopped. Cancel only a listener that still runs.
/// Flagged by: `shared-every-consumer-every-event` (the listener ends with its consumers still there).
public struct CancelsEndedListenerAdapter: SharedSubscriptionAdapter {
    /// Creates the adapter.
    public init() {}
    /// `cancels-ended-listener`.
    public var name: String { "cancels-ended-listener" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a broadcaster that cancels the SDK listener when its last consumer's stream ends, even after the SDK ended it"
    }

    /// Broadcasts one listener to a stream per consumer.
    /// - Parameter listener: The SDK listener.
    /// - Returns: A function that returns a new consumer's stream.
    public func share(_ listener: LegacyListener) -> @Sendable () -> AsyncThrowingStream<LegacyEvent, any Error> {
        let broadcaster = Broadcaster(listener)
        return { broadcaster.subscribe() }
    }

    private final class Broadcaster: Sendable {
        private struct State {
            var consumers: [Int: AsyncThrowingStream<LegacyEvent, any Error>.Continuation] = [:]
            var nextID = 0
            var control: LegacySourceControl?
        }
        private let state = LockedBox(State())
        private let listener: LegacyListener

        init(_ listener: LegacyListener) { self.listener = listener }

        func subscribe() -> AsyncThrowingStream<LegacyEvent, any Error> {
            let (stream, continuation) = AsyncThrowingStream<LegacyEvent, any Error>.makeStream()
            let (id, startNow) = state.withLock { state in
                defer { state.nextID += 1 }
                state.consumers[state.nextID] = continuation
                return (state.nextID, state.nextID == 0)
            }
            continuation.onTermination = { [state] _ in
                let last = state.withLock { state -> LegacySourceControl? in
                    state.consumers.removeValue(forKey: id)
                    return state.consumers.isEmpty ? state.control : nil
                }
                last?.cancel()  // WRONG: also when the SDK's own end finished the streams
            }
            if startNow {
                let state = self.state
                do {
                    let control = try listener.start(
                        onEvent: { event in
                            for consumer in state.withLock({ $0.consumers.values }) { consumer.yield(event) }
                        },
                        onEnd: { error in
                            for consumer in state.withLock({ $0.consumers.values }) { consumer.finish(throwing: error) }
                        })
                    state.withLock { $0.control = control }
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            return stream
        }
    }
}
