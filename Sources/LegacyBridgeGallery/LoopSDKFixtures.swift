// Fixtures of the real-adapter path over `LoopSDK`: what a user writes to point the conformance
// suite at their adapter — calls that succeed, fail, hang and time out, the SDK's resource counts
// and its thread. The correct `LoopSDKClient` and each gallery `loop-sdk-*` adapter are checked
// through the same fixtures, so a verdict that differs between them is the adapter's doing.

import LegacyBridge
import LegacyBridgeConformance

/// Fixtures over ``LoopSDK`` for an adapter's functions.
public enum LoopSDKFixtures {
    /// An adapter's one-shot call: `behavior` on `client`'s SDK, with `timeout`, through `probe`.
    public typealias Fetch =
        nonisolated(nonsending) @Sendable (
            _ client: LoopSDKClient, _ behavior: LoopSDKBehavior, _ timeout: Duration?, _ probe: CallProbe<Int64>
        ) async throws -> Int64

    /// The SDK's loop thread, found through `client` only when a scenario asks.
    public static func threading(_ client: @escaping @Sendable () -> LoopSDKClient) -> AdapterThreading {
        .sdkThread(
            SDKScheduler(post: { job in try client().sdk.loop.post(job) }, isCurrent: { client().sdk.loop.isCurrent }))
    }

    /// A fixture of every kind of call over `client`, for the adapter function `fetch`.
    ///
    /// - Parameters:
    ///   - name: The fixture's name.
    ///   - client: The client whose SDK the calls use; asked for when a call is made.
    ///   - countsResources: Whether the fixture counts the SDK's `liveResources` (`false`: as a
    ///     user's fixture that has no such count).
    ///   - fetch: The adapter's one-shot call.
    /// - Returns: The fixture.
    public static func oneShot(
        name: String, client: @escaping @Sendable () -> LoopSDKClient, countsResources: Bool = true,
        fetch: @escaping Fetch
    ) -> OneShotFixture<Int64> {
        var liveResources: (@Sendable () -> Int)?
        if countsResources { liveResources = { client().liveResources } }
        return OneShotFixture(
            name: name,
            threading: threading(client),
            succeeding: { probe in try await fetch(client(), .value(7), nil, probe) },
            expecting: 7,
            failing: { probe in try await fetch(client(), .failure(LoopSDK.failedStatus), nil, probe) },
            hanging: .init(
                start: { probe in try await fetch(client(), .hang, nil, probe) },
                release: { client().sdk.releaseHeld() }),
            timingOut: .init { probe, timeout in try await fetch(client(), .hang, timeout, probe) },
            liveResources: liveResources,
            offThreadCalls: { client().sdk.offLoopCalls })
    }

    /// The fixture of the correct ``LoopSDKClient/fetch(_:timeout:probe:isolation:)``.
    public static func correctOneShot(
        name: String = "loop-sdk-client", client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> OneShotFixture<Int64> {
        oneShot(name: name, client: client) { client, behavior, timeout, probe in
            try await client.fetch(behavior, timeout: timeout, probe: probe)
        }
    }

    /// An adapter's subscription: `plan` on `client`'s SDK, through `probe`.
    public typealias Subscribe =
        @Sendable (_ client: LoopSDKClient, _ plan: LoopSDKStreamPlan, _ probe: StreamProbe<LoopSDKEvent>) ->
        any AsyncSequence<
            LoopSDKEvent, any Error
        >

    /// A stream fixture over `client`, for the adapter function `subscribe`: 40 events then an
    /// end, 5 events then an error, and endless events; in sequence; by default backpressure at 32 events.
    ///
    /// - Parameters:
    ///   - name: The fixture's name.
    ///   - client: The client whose SDK the subscriptions use; asked for when one is made.
    ///   - bound: How the adapter buffers for a slow consumer, as it declares it.
    ///   - countsResources: Whether the fixture gives the SDK's `liveResources`.
    ///   - subscribe: The adapter's subscription.
    /// - Returns: The fixture.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func stream(
        name: String, client: @escaping @Sendable () -> LoopSDKClient,
        bound: StreamFixture<LoopSDKEvent>.Bound = .backpressure(high: 32), countsResources: Bool = true,
        subscribe: @escaping Subscribe
    ) -> StreamFixture<LoopSDKEvent> {
        var liveResources: (@Sendable () -> Int)?
        if countsResources { liveResources = { @Sendable in client().liveResources } }
        return StreamFixture(
            name: name,
            threading: threading(client),
            finite: { probe in subscribe(client(), .finite(40), probe) },
            finiteCount: 40,
            failing: { probe in subscribe(client(), .failing(after: 5), probe) },
            endless: .init(
                start: { probe in subscribe(client(), .endless, probe) }, release: { client().sdk.releaseHeld() }),
            ordered: { $0.sequence },
            bound: bound,
            liveResources: liveResources,
            offThreadCalls: { client().sdk.offLoopCalls })
    }

    /// The fixture of the correct ``LoopSDKClient/events(_:probe:)``.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func correctStream(
        name: String = "loop-sdk-client-events", client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> StreamFixture<LoopSDKEvent> {
        stream(name: name, client: client) { client, plan, probe in client.events(plan, probe: probe) }
    }

    /// The fixture of the correct ``LoopSDKClient/latestEvents(_:keeping:probe:)``: a dropping
    /// stream over a producer that is never paused.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func correctDroppingStream(
        name: String = "loop-sdk-client-latest-events", client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> StreamFixture<LoopSDKEvent> {
        stream(name: name, client: client, bound: .dropping(limit: 32)) { client, plan, probe in
            client.latestEvents(plan, keeping: 32, probe: probe)
        }
    }

    /// An adapter's blocking query: `behavior` on `client`'s SDK, through `probe`.
    public typealias Query =
        nonisolated(nonsending) @Sendable (_ client: LoopSDKClient, _ behavior: LoopSDKBehavior, _ probe: BlockingProbe)
        async throws -> Int64

    /// A blocking-call fixture over `client`, for the adapter function `query`.
    public static func blocking(
        name: String, client: @escaping @Sendable () -> LoopSDKClient, query: @escaping Query
    ) -> BlockingFixture<Int64> {
        BlockingFixture(
            name: name,
            succeeding: { probe in try await query(client(), .value(7), probe) },
            failing: { probe in try await query(client(), .failure(LoopSDK.failedStatus), probe) },
            blocking: .init(
                start: { probe in try await query(client(), .hang, probe) }, release: { client().sdk.releaseHeld() }),
            liveResources: { client().liveResources })
    }

    /// The fixture of the correct ``LoopSDKClient/query(_:probe:isolation:)``.
    public static func correctBlocking(
        name: String = "loop-sdk-client-query", client: @escaping @Sendable () -> LoopSDKClient = { .shared }
    ) -> BlockingFixture<Int64> {
        blocking(name: name, client: client) { client, behavior, probe in try await client.query(behavior, probe: probe)
        }
    }
}
