import LegacyBridge

// The shared-subscription scenarios of the real-adapter path: consumers join one SDK listener
// through the user's adapter, the SDK delivers events the suite recognises by their token, and
// the suite counts the SDK's listeners. A consumer may still be joining when the SDK delivers, so
// the suite publishes warm-up events until every consumer got one, and judges only what comes
// after, except that an event published before a consumer joined must never reach it (a replay).

@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
enum SharedSubscriptionFixtureScenarios<Element: Sendable> {
    typealias Fixture = SharedSubscriptionFixture<Element>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [oneListener, consumerLeaves, rejoin, listenerEnds]
    }

    // MARK: - Consumers

    struct ConsumerState: Sendable {
        var tokens: [UInt64] = []
        /// How the consumer's loop ended: "finished", "cancelled", or the error's type.
        var end: String?
    }

    /// One consumer of the adapter, iterating in a task of the scenario's own.
    struct Consumer: Sendable {
        let state: LockedBox<ConsumerState>
        let task: Task<Void, Never>

        var tokens: [UInt64] { state.withLock { $0.tokens } }
        var end: String? { state.withLock { $0.end } }
    }

    static func join(_ fixture: Fixture) -> Consumer {
        let state = LockedBox(ConsumerState())
        let subscribe = fixture.subscribe
        let token = fixture.token
        let task = ScenarioThreads.task {
            do {
                let sequence = try await subscribe()
                for try await element in sequence {
                    let value = token(element) ?? .max
                    state.withLock { $0.tokens.append(value) }
                }
                state.withLock { $0.end = "finished" }
            } catch {
                state.withLock { $0.end = error is CancellationError ? "cancelled" : "\(type(of: error)): \(error)" }
            }
        }
        return Consumer(state: state, task: task)
    }

    /// Tokens of a scenario: unique in a run.
    static func tokens(_ scenario: UInt64, _ phase: UInt64) -> UInt64 { scenario << 32 | phase << 16 }

    /// Publishes warm-up events, 20 ms apart, until every consumer got one; `nil` when they did
    /// and none got an event published before the warm-up (every token the suite published
    /// earlier is below `base`): a replay is never taken for the first event of a warm-up.
    static func warmUp(
        _ consumers: [Consumer], _ fixture: Fixture, _ context: FixtureContext, base: UInt64
    ) async
        -> Check?
    {
        let clock = ContinuousClock()
        let deadline = clock.now + context.patience
        var published: UInt64 = 0
        while clock.now < deadline {
            if consumers.allSatisfy({ !$0.tokens.isEmpty }) { return replayed(to: consumers, before: base) }
            if let ended = consumers.firstIndex(where: { $0.end != nil && $0.tokens.isEmpty }) {
                return .fail(
                    "consumer #\(ended + 1) ended (\(consumers[ended].end!)) before any event reached it: the adapter ends consumers that just joined"
                )
            }
            published += 1
            await fixture.publish(base + published)
            try? await Task.sleep(for: .milliseconds(20))
        }
        let starved = consumers.filter { $0.tokens.isEmpty }.count
        return .fail(
            "\(starved) of \(consumers.count) consumer(s) got none of the \(published) events the SDK delivered within \(context.patience): the adapter does not pass the SDK's events to every consumer"
        )
    }

    /// The problem when a consumer got an event published before it joined (a token up to
    /// `base`, the suite's tokens growing through the run).
    static func replayed(to consumers: [Consumer], before base: UInt64) -> Check? {
        for (index, consumer) in consumers.enumerated() {
            guard let stale = consumer.tokens.first(where: { $0 <= base }) else { continue }
            return .fail(
                "consumer #\(index + 1) of \(consumers.count) got an event published before it joined (token \(stale)): the adapter replays an earlier event, the last one of a listener that already closed, say, to a new consumer. Hand a consumer only the events the SDK delivers while it is subscribed"
            )
        }
        return nil
    }

    /// Publishes `count` events after the warm-up and waits until every consumer got them; the
    /// problem when one did not get exactly them, in order.
    static func deliver(
        count: Int, to consumers: [Consumer], _ fixture: Fixture, _ context: FixtureContext, base: UInt64
    ) async -> Check? {
        let expected = (1...UInt64(count)).map { base + $0 }
        for token in expected { await fixture.publish(token) }
        let received: @Sendable (Consumer) -> [UInt64] = { consumer in
            consumer.tokens.filter { $0 > base && $0 <= base + UInt64(count) }
        }
        _ = await eventually { consumers.allSatisfy { received($0).count >= count } }
        for (index, consumer) in consumers.enumerated() where received(consumer) != expected {
            return .fail(
                "consumer #\(index + 1) of \(consumers.count) got \(received(consumer).map { $0 - base }) of the events 1...\(count) the SDK delivered while it was subscribed: every consumer must get every event, once, in order"
            )
        }
        return nil
    }

    /// Waits until the SDK has `count` listeners open; `nil` then, the last count otherwise.
    static func waitListeners(_ count: Int, _ fixture: Fixture, within bound: Duration) async -> Int? {
        let clock = ContinuousClock()
        let deadline = clock.now + bound
        var last = await fixture.listeners()
        while last != count && clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
            last = await fixture.listeners()
        }
        return last == count ? nil : last
    }

    /// Cancels `consumers` and waits until their loops ended.
    static func leave(_ consumers: [Consumer], _ context: FixtureContext) async -> Check? {
        for consumer in consumers { consumer.task.cancel() }
        for (index, consumer) in consumers.enumerated() {
            guard await value(of: consumer.task, within: context.patience) != nil else {
                return .fail(
                    "consumer #\(index + 1)'s loop did not end within \(context.patience) of its task being cancelled: a consumer that leaves must be let go at once"
                )
            }
        }
        return nil
    }

    /// The last consumer left: the listener must close.
    static func listenerClosed(_ fixture: Fixture, _ context: FixtureContext) async -> Check? {
        if let open = await waitListeners(0, fixture, within: context.patience) {
            return .fail(
                "\(open) SDK listener(s) still open \(context.patience) after the last consumer left: stop the SDK's listener when the last consumer leaves"
            )
        }
        return nil
    }

    // MARK: - Scenarios

    static var oneListener: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "shared-one-listener",
            summary:
                "two consumers share one SDK listener, each gets every event in order, and the listener closes when both left"
        ) { fixture, context in
            let consumers = [join(fixture), join(fixture)]
            if let problem = await warmUp(consumers, fixture, context, base: tokens(1, 1)) {
                _ = await leave(consumers, context)
                return problem
            }
            let open = await fixture.listeners()
            if open != 1 {
                _ = await leave(consumers, context)
                return .fail(
                    "2 consumers had \(open) SDK listener(s) open: share one listener among the consumers (each extra listener is another subscription the SDK and the server keep)"
                )
            }
            if let problem = await deliver(count: 3, to: consumers, fixture, context, base: tokens(1, 2)) {
                _ = await leave(consumers, context)
                return problem
            }
            if let problem = await leave(consumers, context) { return problem }
            if let problem = await listenerClosed(fixture, context) { return problem }
            return .pass
        }
    }

    static var consumerLeaves: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "shared-consumer-leaves",
            summary:
                "one of two consumers leaves: the other still gets every event on the same listener; the listener closes when the last one leaves"
        ) { fixture, context in
            let first = join(fixture)
            let second = join(fixture)
            if let problem = await warmUp([first, second], fixture, context, base: tokens(2, 1)) {
                _ = await leave([first, second], context)
                return problem
            }
            if let problem = await leave([first], context) {
                _ = await leave([second], context)
                return problem
            }
            if let problem = await deliver(count: 3, to: [second], fixture, context, base: tokens(2, 2)) {
                _ = await leave([second], context)
                return .fail("after the other consumer left, \(problem.detailText)")
            }
            let open = await fixture.listeners()
            if open != 1 {
                _ = await leave([second], context)
                return .fail(
                    "with one consumer left, \(open) SDK listener(s) were open: keep the one listener while any consumer remains"
                )
            }
            if let problem = await leave([second], context) { return problem }
            if let problem = await listenerClosed(fixture, context) { return problem }
            return .pass
        }
    }

    static var rejoin: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "shared-rejoin",
            summary:
                "a consumer joins after the listener closed: the listener opens again and the consumer gets the events, none of the earlier run's"
        ) { fixture, context in
            let first = join(fixture)
            if let problem = await warmUp([first], fixture, context, base: tokens(3, 1)) {
                _ = await leave([first], context)
                return problem
            }
            if let problem = await leave([first], context) { return problem }
            if let problem = await listenerClosed(fixture, context) { return problem }
            let again = join(fixture)
            if let problem = await warmUp([again], fixture, context, base: tokens(3, 2)) {
                _ = await leave([again], context)
                if !again.tokens.isEmpty { return problem }
                return .fail(
                    "a consumer that joined after the listener closed: \(problem.detailText). Open the SDK's listener again for it"
                )
            }
            if let problem = await deliver(count: 2, to: [again], fixture, context, base: tokens(3, 3)) {
                _ = await leave([again], context)
                return problem
            }
            if let problem = await leave([again], context) { return problem }
            if let problem = await listenerClosed(fixture, context) { return problem }
            return .pass
        }
    }

    static var listenerEnds: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "shared-listener-ends",
            summary:
                "the SDK ends the listener by itself: every consumer's loop ends, the adapter does not cancel the ended listener, and a later consumer is not left waiting"
        ) { fixture, context in
            guard let endListener = fixture.endListener else {
                return .notChecked("the fixture gives no endListener: the SDK cannot be made to end its listener")
            }
            let consumers = [join(fixture), join(fixture)]
            if let problem = await warmUp(consumers, fixture, context, base: tokens(4, 1)) {
                _ = await leave(consumers, context)
                return problem
            }
            let cancelsBefore = fixture.listenerCancelsAfterEnd?() ?? 0
            await endListener()
            _ = await eventually { consumers.allSatisfy { $0.end != nil } }
            if let waiting = consumers.firstIndex(where: { $0.end == nil }) {
                _ = await leave(consumers, context)
                return .fail(
                    "consumer #\(waiting + 1) was still waiting \(context.patience) after the SDK ended the listener: pass the SDK's end on to every consumer"
                )
            }
            if let problem = cancelsAfterEnd(fixture, since: cancelsBefore) { return problem }
            // A later consumer gets events from a new listener, or ends at once: never waits forever.
            let later = join(fixture)
            let clock = ContinuousClock()
            let deadline = clock.now + context.patience
            var published: UInt64 = 0
            while later.end == nil && later.tokens.isEmpty && clock.now < deadline {
                published += 1
                await fixture.publish(tokens(4, 2) + published)
                try? await Task.sleep(for: .milliseconds(20))
            }
            let laterWaited = later.end == nil && later.tokens.isEmpty
            _ = await leave([later], context)
            if laterWaited {
                return .fail(
                    "a consumer that joined after the SDK ended the listener neither got an event nor an end within \(context.patience): start a new listener for it, or end it at once"
                )
            }
            if let problem = await listenerClosed(fixture, context) { return problem }
            if let problem = cancelsAfterEnd(fixture, since: cancelsBefore) { return problem }
            return .pass
        }
    }

    /// Listener cancels the SDK counted after it had ended the listener, since `before`.
    static func cancelsAfterEnd(_ fixture: Fixture, since before: Int) -> Check? {
        let count = (fixture.listenerCancelsAfterEnd?() ?? 0) - before
        guard count > 0 else { return nil }
        return .fail(
            "the adapter cancelled the SDK listener \(count) time(s) after the SDK itself had ended it: an ended listener's handle may already belong to another; cancel only a listener that is still running"
        )
    }
}

extension Check {
    /// The text of a failure or a note, for a message that wraps it.
    var detailText: String {
        switch self {
        case .pass: return "passed"
        case .passWithNote(let text), .fail(let text), .notChecked(let text), .usageError(let text): return text
        }
    }
}
