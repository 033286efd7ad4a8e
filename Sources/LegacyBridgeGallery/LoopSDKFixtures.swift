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
    ///   - fetch: The adapter's one-shot call.
    /// - Returns: The fixture.
    public static func oneShot(
        name: String, client: @escaping @Sendable () -> LoopSDKClient, fetch: @escaping Fetch
    ) -> OneShotFixture<Int64> {
        OneShotFixture(
            name: name,
            threading: threading(client),
            succeeding: { probe in try await fetch(client(), .value(7), nil, probe) },
            failing: { probe in try await fetch(client(), .failure(LoopSDK.failedStatus), nil, probe) },
            hanging: .init(
                start: { probe in try await fetch(client(), .hang, nil, probe) },
                release: { client().sdk.releaseHeld() }),
            timingOut: .init { probe, timeout in try await fetch(client(), .hang, timeout, probe) },
            liveResources: { client().liveResources },
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
}
