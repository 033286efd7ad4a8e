import LegacyBridge

/// Your shared-subscription adapter over your SDK, as the conformance suite checks it: many
/// consumers of one SDK listener (a Redis SUBSCRIBE, a PostgreSQL LISTEN, an MQTT subscription, a
/// GUI SDK's observer), with ways to make the SDK deliver an event the suite can recognise and to
/// count the SDK's listeners.
///
/// ```swift
/// let fixture = SharedSubscriptionFixture<RedisMessage>(
///     name: "redis-messages",
///     subscribe: { redis.messages(channel: "news") },
///     publish: { token in _ = try? await publisher.send("PUBLISH", "news", "\(token)") },
///     token: { message in UInt64(message.text) },
///     listeners: { await subscribersOnServer("news") })
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the closures:
/// - `subscribe()` makes one consumer of your adapter: each iterator of the returned sequence
///   must get every event the SDK delivers from when it joined, in order, until it leaves.
/// - `publish(token)` makes the SDK deliver one event carrying `token` to its listener; it may
///   return before the event reached the adapter. The suite publishes again and again until every
///   consumer got one, so a consumer that is still joining loses nothing the verdict counts.
/// - `listeners()` counts the SDK listeners open now (on the server, or in your SDK's double).
/// - `endListener()` makes the SDK end the listener by itself (a lost connection, a server that
///   closes the subscription). Without it the scenario that needs it is not checked.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
public struct SharedSubscriptionFixture<Element: Sendable>: Sendable {
    /// One consumer's subscription through your adapter.
    public typealias Subscribe =
        nonisolated(nonsending) @Sendable () async throws -> any AsyncSequence<Element, any Error>

    /// The fixture's name, unique among the adapters of a run.
    public var name: String { common.name }
    /// What every fixture declares besides its calls.
    let common: FixtureCommon
    let subscribe: Subscribe
    let publish: @Sendable (_ token: UInt64) async -> Void
    let token: @Sendable (Element) -> UInt64?
    let listeners: @Sendable () async -> Int
    let endListener: (@Sendable () async -> Void)?
    let listenerCancelsAfterEnd: (@Sendable () -> Int)?

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called (``AdapterThreading/anyThread`` by default).
    ///   - subscribe: Makes one consumer of your adapter.
    ///   - publish: Makes the SDK deliver an event carrying `token` to its listener.
    ///   - token: The token an event carries, or `nil` for an event that carries none.
    ///   - listeners: How many SDK listeners are open now.
    ///   - endListener: Makes the SDK end its listener by itself.
    ///   - listenerCancelsAfterEnd: How many times the adapter cancelled or removed a listener the
    ///     SDK had already ended, if your SDK's double counts it: such a cancel reaches an SDK that
    ///     may have reused the listener's handle.
    ///   - liveResources: How many SDK resources are live now; it must come back to where it was.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        subscribe: @escaping Subscribe,
        publish: @escaping @Sendable (_ token: UInt64) async -> Void,
        token: @escaping @Sendable (Element) -> UInt64?,
        listeners: @escaping @Sendable () async -> Int,
        endListener: (@Sendable () async -> Void)? = nil,
        listenerCancelsAfterEnd: (@Sendable () -> Int)? = nil,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil
    ) {
        self.common = FixtureCommon(
            name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls)
        self.subscribe = subscribe
        self.publish = publish
        self.token = token
        self.listeners = listeners
        self.endListener = endListener
        self.listenerCancelsAfterEnd = listenerCancelsAfterEnd
    }

}
