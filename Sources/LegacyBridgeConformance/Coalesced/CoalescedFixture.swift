import LegacyBridge

/// Your coalesced-call adapter over your SDK, as the conformance suite checks it: calls for keys
/// the suite chooses, several at once for one key, and ways to make your SDK (or its test double)
/// answer the request for a key when the suite says, with a token the suite can find in the value.
///
/// A coalesced adapter lets concurrent callers asking for the same thing share one SDK call: one
/// DNS lookup per host, one token refresh for every request that found the token expired, a
/// `CoalescedCalls` table. Its hazards: one SDK call per caller, a shared call cancelled when one of
/// its callers leaves (or never, when the last one does), and an outcome kept for the key after
/// the call ended, a failure above all. The suite forces each of them.
///
/// ```swift
/// let fixture = CoalescedFixture<RedisReply>(
///     name: "redis-coalesced",
///     call: { key, probe in try await lookups.value(for: key, probe: probe) },
///     answer: { key, token in _ = try? await pusher.send(["LPUSH", "shared:\(key)", "\(token)"]) },
///     token: { reply in reply.blpopValue.flatMap { UInt64($0) } },
///     requestCancellation: .none)
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the closures:
/// - `call(key, probe)` calls your adapter, the same instance every time, for `key`; pass the
///   probe to it. The adapter passes the probe of the caller whose call it makes to the SDK (its
///   `start`, its `callback`, its `cancel`), so the suite counts one SDK call per shared call. The
///   SDK request must not complete by itself: it answers when the suite calls `answer` (or
///   `failing`) for `key`.
/// - `answer(key, token)` makes your SDK answer its request for `key` with a value that carries
///   `token` (a correct adapter has one request per key in flight). A request the SDK no longer
///   holds (its cancel withdrew it) must get nothing from it.
/// - `token(value)` reads the token back from what the caller got.
/// - The suite chooses keys for each scenario, asks for the same key again once its call ended,
///   and chooses tokens unique in the run.
public struct CoalescedFixture<Value: Sendable>: Sendable {
    /// One call of your adapter for `key`, with the probe to pass to it.
    public typealias Call =
        nonisolated(nonsending) @Sendable (_ key: UInt64, _ probe: CallProbe<Value>) async throws -> Value
    /// Makes the SDK answer its request for `key` with a value carrying `token`.
    public typealias Answer = @Sendable (_ key: UInt64, _ token: UInt64) async -> Void

    /// The fixture's name, unique among the adapters of a run.
    public let name: String
    let threading: AdapterThreading
    let call: Call
    let answer: Answer
    let token: @Sendable (Value) -> UInt64?
    let failing: (@Sendable (_ key: UInt64) async -> Void)?
    let liveResources: (@Sendable () -> Int)?
    let offThreadCalls: (@Sendable () -> Int)?
    let requestCancellation: SDKRequestCancellation

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called (``AdapterThreading/anyThread``, the default, or
    ///     ``AdapterThreading/sdkThread(_:)``).
    ///   - call: Calls your adapter for `key`; callers for the same key share one SDK call.
    ///   - answer: Makes the SDK answer its request for `key` with a value carrying `token`.
    ///   - token: The token a value carries, or `nil` when it carries none.
    ///   - failing: Makes the SDK answer its request for `key` with a failure; the suite then
    ///     checks that every caller sharing it throws, and that a later call for the key makes a
    ///     new SDK call.
    ///   - liveResources: How many requests the SDK and your adapter hold now (contexts, table
    ///     entries); it must come back to where it was once every call has ended.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    ///   - requestCancellation: Whether the SDK can withdraw one request
    ///     (``SDKRequestCancellation/perRequest``, the default: a shared call whose last caller
    ///     left must be cancelled) or cannot (``SDKRequestCancellation/none``: it is answered late).
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        call: @escaping Call,
        answer: @escaping Answer,
        token: @escaping @Sendable (Value) -> UInt64?,
        failing: (@Sendable (_ key: UInt64) async -> Void)? = nil,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil,
        requestCancellation: SDKRequestCancellation = .perRequest
    ) {
        self.name = name
        self.threading = threading
        self.call = call
        self.answer = answer
        self.token = token
        self.failing = failing
        self.liveResources = liveResources
        self.offThreadCalls = offThreadCalls
        self.requestCancellation = requestCancellation
    }

    var common: FixtureCommon {
        FixtureCommon(
            name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls,
            requestCancellation: requestCancellation)
    }
}
