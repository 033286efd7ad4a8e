import Dispatch
import LegacyBridge
import LegacySimulator

/// The shared-subscription contract: several consumers follow one SDK listener, each gets every
/// event in order and the listener's end, the SDK sees one listener, and the last consumer to
/// leave stops it.
///
/// Every consumer joins before the first event: the consumers' tasks run on one thread of the
/// suite's own, first come first served, and the listener's event 0 waits on the SDK's thread
/// until a task queued after them all has run, that is until each consumer's first `next()`
/// suspended.
enum SharedSubscriptionScenarios<Adapter: SharedSubscriptionAdapter> {
    static var all: [Scenario<Adapter, LabContext>] {
        [everyConsumerEveryEvent, oneSDKListener, lastConsumerStopsListener]
    }

    /// What one consumer saw.
    struct Followed: Sendable {
        var sequences: [UInt64] = []
        var error: (any Error)?
        /// The loop ended by itself (the sequence ended or threw), not because the consumer left.
        var ended = false
    }

    /// A listener on the lab's client whose event 0 waits until the scenario opens the probe's gate.
    static func makeListener(
        _ context: LabContext, eventCount: UInt64, behavior: SimulatedBehavior
    ) -> LegacyListener {
        LegacyListener(
            client: context.lab.sdk, topic: 7, eventCount: eventCount, behavior: behavior,
            probe: ListenerProbe(patience: context.lab.patience, holdFirstEvent: true))
    }

    /// Follows one consumer's sequence until it ends or `leave` (asked after each event) says to go.
    static func follow(
        _ subscribe: @Sendable () -> Adapter.Consumer, leave: @Sendable ([UInt64]) -> Bool = { _ in false }
    ) async -> Followed {
        var followed = Followed()
        var iterator = subscribe().makeAsyncIterator()
        do {
            while let event = try await iterator.next() {
                followed.sequences.append(event.sequence)
                if leave(followed.sequences) { return followed }
            }
        } catch {
            followed.error = error
        }
        followed.ended = true
        return followed
    }

    /// Starts `count` consumers on one thread of the suite's own, then opens the listener's first
    /// event once each of them has suspended in its first `next()`.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    static func consumers(
        _ count: Int, of subscribe: @escaping @Sendable () -> Adapter.Consumer, listener: LegacyListener,
        leave: @escaping @Sendable (Int, [UInt64]) -> Bool = { _, _ in false }
    ) -> [Task<Followed, Never>] {
        let lane = ScenarioExecutor(label: "conformance consumers", maxThreads: 1)
        let tasks = (0..<count).map { index in
            Task(executorPreference: lane) { await follow(subscribe, leave: { leave(index, $0) }) }
        }
        Task(executorPreference: lane) { listener.probe.firstEvent.open() }
        return tasks
    }

    /// Where `sequences` first differs from `expected`, in words.
    static func gap(in sequences: [UInt64], expected: [UInt64]) -> String {
        guard !sequences.isEmpty else { return "none at all" }
        for (index, want) in expected.enumerated() {
            guard index < sequences.count else { return "nothing after event \(want - 1)" }
            if sequences[index] != want { return "event \(sequences[index]) where \(want) was due" }
        }
        return "events after the last one"
    }

    static var everyConsumerEveryEvent: Scenario<Adapter, LabContext> {
        Scenario(
            name: "shared-every-consumer-every-event",
            summary:
                "3 consumers follow one listener of 20 events that then fails: each gets all 20 in order, then the error; nothing cancels the ended listener"
        ) { adapter, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .notChecked("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            let count: UInt64 = 20
            let listener = makeListener(
                context, eventCount: count,
                behavior: .wellBehaved.with {
                    $0.delivery = .worker
                    $0.streamEnd = .failure
                    $0.errorStatus = .remote
                })
            let tasks = consumers(3, of: adapter.share(listener), listener: listener)
            guard let followed = await values(of: tasks, within: Patience.bound) else {
                return .fail(
                    "a consumer was still waiting \(Patience.bound) after the listener ended: the events and the end must reach every consumer (one stream iterated by several tasks leaves some of them suspended)"
                )
            }
            let expected = Array(0..<count)
            for (index, consumer) in followed.enumerated() where consumer.sequences != expected {
                return .fail(
                    "consumer \(index + 1) of 3 got \(consumer.sequences.count) of \(count) events (\(gap(in: consumer.sequences, expected: expected))): each consumer must get every event, in order (one stream iterated by several consumers splits its events among them)"
                )
            }
            for (index, consumer) in followed.enumerated() {
                guard let error = consumer.error as? LegacySDKError, error.rawValue == LegacySDKError.remote.rawValue
                else {
                    return .fail(
                        "consumer \(index + 1) of 3 ended with \(consumer.error.map { "\($0)" } ?? "no error") after the listener failed with the SDK's remote error: the end must reach every consumer"
                    )
                }
            }
            let starts = context.lab.counters.listenerStarts
            guard starts == 1 else {
                return .fail("the SDK was asked to start \(starts) listeners for 3 consumers of one topic, expected 1")
            }
            // No consumer left before the end, so nothing had a reason to cancel the listener.
            let lateCancels = listener.probe.cancelsAfterEnd
            guard lateCancels == 0 else {
                return .fail(
                    "the adapter cancelled the SDK listener \(lateCancels) time(s) after the SDK itself had ended it (refused here; a real SDK may have handed that subscription to someone else by then): cancel a listener only while it runs, when its last consumer leaves before its end"
                )
            }
            return .pass
        }
    }

    static var oneSDKListener: Scenario<Adapter, LabContext> {
        Scenario(
            name: "shared-one-listener",
            summary: "4 consumers follow one endless listener, then leave: the SDK is asked for one listener only"
        ) { adapter, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .notChecked("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            let listener = makeListener(
                context, eventCount: 0, behavior: .wellBehaved.with { $0.intervalMicroseconds = 500 })
            let tasks = consumers(4, of: adapter.share(listener), listener: listener) { _, seen in seen.count >= 5 }
            guard let followed = await values(of: tasks, within: Patience.bound) else {
                return .fail("a consumer of an endless listener never got its 5 events within \(Patience.bound)")
            }
            let counters = context.lab.counters
            guard counters.listenerStarts == 1, counters.listenerBusy == 0 else {
                return .fail(
                    "the SDK was asked to start \(counters.listenerStarts + counters.listenerBusy) listeners for 4 consumers of one topic (\(counters.listenerBusy) refused because one was running): share one listener among the consumers"
                )
            }
            for (index, consumer) in followed.enumerated() where consumer.sequences.count < 5 {
                return .fail(
                    "consumer \(index + 1) of 4 got \(consumer.sequences.count) events, then its sequence ended\(consumer.error.map { " with \($0)" } ?? "")"
                )
            }
            return .pass
        }
    }

    static var lastConsumerStopsListener: Scenario<Adapter, LabContext> {
        Scenario(
            name: "shared-consumer-leaves",
            summary:
                "of 3 consumers of an endless listener, 2 leave and the third still gets events; when it leaves too the SDK listener is cancelled"
        ) { adapter, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .notChecked("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            let listener = makeListener(
                context, eventCount: 0, behavior: .wellBehaved.with { $0.intervalMicroseconds = 500 })
            // Consumers 1 and 2 leave after 3 events. Consumer 3 stays until it got 5 events
            // produced after both had left.
            let othersLeft = LockedBox<UInt64?>(nil)
            let tasks = consumers(3, of: adapter.share(listener), listener: listener) { index, seen in
                guard index == 2 else { return seen.count >= 3 }
                guard let after = othersLeft.withLock({ $0 }), let last = seen.last else { return false }
                return last >= after + 5
            }
            guard let early = await values(of: Array(tasks.prefix(2)), within: Patience.bound) else {
                tasks[2].cancel()
                return .fail("consumers 1 and 2 never got their 3 events within \(Patience.bound)")
            }
            for (index, consumer) in early.enumerated() where consumer.sequences.count < 3 {
                tasks[2].cancel()
                return .fail("consumer \(index + 1) got \(consumer.sequences.count) events, then its sequence ended")
            }
            othersLeft.withLock { $0 = context.lab.counters.listenerEvents }
            guard let last = await values(of: [tasks[2]], within: Patience.bound)?.first, !last.ended else {
                return .fail(
                    "once 2 of 3 consumers had left, the third stopped getting events: the listener was stopped before its last consumer left (SDK listener cancels: \(context.lab.counters.listenerStops))"
                )
            }
            guard await eventually({ context.lab.counters.listenerLive == 0 }) else {
                return .fail(
                    "\(Patience.bound) after the last consumer left, the SDK listener still runs (\(context.lab.counters.listenerStops) cancelled): stop it when the last consumer leaves"
                )
            }
            let counters = context.lab.counters
            guard counters.listenerStops == 1, counters.listenerStarts == 1 else {
                return .fail(
                    "the SDK saw \(counters.listenerStarts) listener start(s) and \(counters.listenerStops) cancel(s), expected one of each"
                )
            }
            return .pass
        }
    }
}

/// Stands in for an adapter type when only scenario names are needed.
struct NeverSharedAdapter: SharedSubscriptionAdapter {
    var name: String { "" }
    var summary: String { "" }
    func share(_ listener: LegacyListener) -> @Sendable () -> AsyncStream<LegacyEvent> {
        { AsyncStream { $0.finish() } }
    }
}
