// Shared-subscription adapters over a test double of an SDK with listeners, checked through
// `SharedSubscriptionFixture` the way a user checks their own: the library's `SharedSubscription`,
// and hand-written broadcasters that each get one thing wrong.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// A test double of an SDK whose listeners receive every event published while they are open, on
/// the double's delivery thread, and that can end them all by itself (a lost connection). It
/// counts removals of listeners it had already ended.
public final class ListenerDoubleSDK: Sendable {
    /// A listener's callbacks: an event, or the SDK's end of the listener.
    public struct Listener: Sendable {
        let onEvent: @Sendable (UInt64) -> Void
        let onEnd: @Sendable () -> Void

        /// Creates the callbacks.
        public init(onEvent: @escaping @Sendable (UInt64) -> Void, onEnd: @escaping @Sendable () -> Void) {
            self.onEvent = onEvent
            self.onEnd = onEnd
        }
    }

    private struct State {
        var open: [UInt64: Listener] = [:]
        var ended: Set<UInt64> = []
        var next: UInt64 = 1
        var removalsAfterEnd = 0
    }
    private let state = LockedValue(State())
    private let delivery = DispatchQueue(label: "listener-double")

    /// Creates the double.
    public init() {}

    /// Opens a listener; returns its handle.
    public func addListener(_ listener: Listener) -> UInt64 {
        state.withLock { state in
            let handle = state.next
            state.next += 1
            state.open[handle] = listener
            return handle
        }
    }

    /// Closes a listener. Closing one the SDK already ended is counted
    /// (``removalsAfterEnd``): a real SDK may have given its handle to another.
    public func removeListener(_ handle: UInt64) {
        state.withLock { state in
            if state.open.removeValue(forKey: handle) == nil, state.ended.contains(handle) {
                state.removalsAfterEnd += 1
            }
        }
    }

    /// Delivers an event carrying `token` to every open listener, on the delivery thread, and
    /// returns once delivered.
    public func publish(_ token: UInt64) {
        delivery.sync {
            for listener in state.withLock({ Array($0.open.values) }) { listener.onEvent(token) }
        }
    }

    /// Ends every open listener by itself, on the delivery thread, and returns once ended.
    public func endAll() {
        delivery.sync {
            let ended = state.withLock { state in
                defer {
                    state.ended.formUnion(state.open.keys)
                    state.open = [:]
                }
                return Array(state.open.values)
            }
            for listener in ended { listener.onEnd() }
        }
    }

    /// Listeners open now.
    public var listeners: Int { state.withLock { $0.open.count } }
    /// Removals of listeners the SDK had already ended.
    public var removalsAfterEnd: Int { state.withLock { $0.removalsAfterEnd } }
}

/// Shared-subscription adapters over ``ListenerDoubleSDK``, as fixtures.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
public enum ListenerDoubleFixtures {
    static func fixture(
        name: String, sdk: ListenerDoubleSDK,
        subscribe: @escaping @Sendable () -> any AsyncSequence<UInt64, any Error>
    ) -> SharedSubscriptionFixture<UInt64> {
        SharedSubscriptionFixture(
            name: name,
            subscribe: { subscribe() },
            publish: { token in sdk.publish(token) },
            token: { $0 },
            listeners: { sdk.listeners },
            endListener: { sdk.endAll() },
            listenerCancelsAfterEnd: { sdk.removalsAfterEnd },
            liveResources: { sdk.listeners })
    }

    /// The library's `SharedSubscription` over the double's listener. Expected to pass.
    public static func sharedSubscription() -> SharedSubscriptionFixture<UInt64> {
        let sdk = ListenerDoubleSDK()
        let shared = SharedSubscription(of: UInt64.self, restart: .automatic) { sink in
            let handle = sdk.addListener(
                .init(onEvent: { sink.yield($0) }, onEnd: { sink.finish() }))
            return StreamControl(cancel: CancelHandle { sdk.removeListener(handle) })
        }
        return fixture(name: "shared-double-shared-subscription", sdk: sdk) { shared.subscribe() }
    }
}

/// One mistake of a hand-written shared subscription over ``ListenerDoubleSDK``: WRONG ON PURPOSE.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
public enum ListenerDoubleMistake: String, CaseIterable, Sendable {
    /// Opens an SDK listener per consumer instead of sharing one.
    case listenerPerConsumer = "shared-double-listener-per-consumer"
    /// Keeps the SDK listener open after the last consumer left (a broadcaster that never stops).
    case neverStops = "shared-double-never-stops"
    /// Removes the SDK listener when the last consumer leaves, even when the SDK had ended it.
    case removesEndedListener = "shared-double-removes-ended-listener"
    /// Hands each new consumer the last event at once, so that a late joiner has the current
    /// value, and keeps it when the listener closes: a consumer that joins a new listener gets the
    /// previous run's last event.
    case replaysLastEvent = "shared-double-replays-last-event"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .listenerPerConsumer: return ["shared-one-listener"]
        case .neverStops: return ["shared-one-listener", "shared-consumer-leaves"]
        case .removesEndedListener: return ["shared-listener-ends"]
        case .replaysLastEvent: return ["shared-rejoin"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .listenerPerConsumer:
            return "WRONG ON PURPOSE: over a listener SDK double, one SDK listener per consumer"
        case .neverStops:
            return
                "WRONG ON PURPOSE: over a listener SDK double, never closes the listener when the last consumer leaves"
        case .removesEndedListener:
            return "WRONG ON PURPOSE: over a listener SDK double, removes a listener the SDK had already ended"
        case .replaysLastEvent:
            return
                "WRONG ON PURPOSE: over a listener SDK double, hands a new consumer the last event, kept from a listener that closed"
        }
    }

    /// The mistaken adapter's fixture, over a fresh double.
    public var fixture: SharedSubscriptionFixture<UInt64> {
        let sdk = ListenerDoubleSDK()
        let broadcaster = Broadcaster(sdk: sdk, mistake: self)
        return ListenerDoubleFixtures.fixture(name: rawValue, sdk: sdk) { broadcaster.subscribe() }
    }
}

/// A hand-written broadcaster: continuations of `AsyncThrowingStream`s in a locked table, fed by
/// one SDK listener. Each mistake changes one thing.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
private final class Broadcaster: Sendable {
    private struct State {
        var consumers: [Int: AsyncThrowingStream<UInt64, any Error>.Continuation] = [:]
        var next = 0
        var listener: UInt64?
        var opening = false
        /// The last event delivered (replaysLastEvent).
        var last: UInt64?
    }
    private let state = LockedValue(State())
    private let sdk: ListenerDoubleSDK
    private let mistake: ListenerDoubleMistake

    init(sdk: ListenerDoubleSDK, mistake: ListenerDoubleMistake) {
        self.sdk = sdk
        self.mistake = mistake
    }

    func subscribe() -> AsyncThrowingStream<UInt64, any Error> {
        let (stream, continuation) = AsyncThrowingStream<UInt64, any Error>.makeStream()
        let sdk = self.sdk
        if mistake == .listenerPerConsumer {
            // WRONG: a listener of its own for each consumer.
            let handle = sdk.addListener(
                .init(onEvent: { continuation.yield($0) }, onEnd: { continuation.finish() }))
            continuation.onTermination = { _ in sdk.removeListener(handle) }
            return stream
        }
        let (id, needsListener, last) = state.withLock { state -> (Int, Bool, UInt64?) in
            let id = state.next
            state.next += 1
            state.consumers[id] = continuation
            let needs = state.listener == nil && !state.opening
            if needs { state.opening = true }
            return (id, needs, state.last)
        }
        // WRONG (replaysLastEvent): the last event may be a previous listener's.
        if mistake == .replaysLastEvent, let last { continuation.yield(last) }
        if needsListener {
            let handle = sdk.addListener(
                .init(
                    onEvent: { [weak self] token in
                        let consumers = self?.state.withLock { state in
                            state.last = token
                            return Array(state.consumers.values)
                        }
                        for consumer in consumers ?? [] {
                            consumer.yield(token)
                        }
                    },
                    onEnd: { [weak self] in
                        let consumers = self?.state.withLock { state in
                            defer {
                                state.consumers = [:]
                                // WRONG (removesEndedListener): the ended listener's handle is kept.
                                if self?.mistake != .removesEndedListener { state.listener = nil }
                            }
                            return Array(state.consumers.values)
                        }
                        for consumer in consumers ?? [] { consumer.finish() }
                    }))
            state.withLock {
                $0.listener = handle
                $0.opening = false
            }
        }
        continuation.onTermination = { [weak self] _ in self?.leave(id) }
        return stream
    }

    private func leave(_ id: Int) {
        let close = state.withLock { state -> UInt64? in
            state.consumers[id] = nil
            // WRONG (neverStops): the listener stays open with no consumer.
            guard state.consumers.isEmpty, mistake != .neverStops else { return nil }
            defer { state.listener = nil }
            return state.listener
        }
        if let close { sdk.removeListener(close) }
    }
}
