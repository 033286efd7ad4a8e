import LegacyBridge

/// Your keyed-request adapter over your SDK, as the conformance suite checks it: requests under an
/// id the suite chooses, and ways to make your SDK (or its test double) reply to them when the
/// suite says, with a token the suite can find in the caller's value.
///
/// A keyed adapter serves many requests through one reply callback, matched by id: JSON-RPC ids,
/// MQTT message ids, hiredis's command callbacks, a `PendingRequests` table. Its hazards are the
/// order and the identity of replies: out of order, duplicated, for ids nobody holds, and late, for
/// a request whose caller left while a newer request already reuses its id. The suite forces each
/// of them and checks that every caller gets the reply meant for it, exactly once.
///
/// ```swift
/// let fixture = KeyedFixture<RedisReply>(
///     name: "redis-blpop",
///     request: { id, probe in try await redis.send(bytes: ["BLPOP", "key:\(id)", "0"], probe: probe) },
///     reply: { id, token in _ = try? await pusher.send(["LPUSH", "key:\(id)", "\(token)"]) },
///     token: { reply in reply.blpopValue.flatMap { UInt64($0) } },
///     requestCancellation: .none)
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the closures:
/// - `request(id, probe)` calls your adapter for one request that the suite names `id`, passing
///   the probe to it; pass `id` on as the request's id when your protocol lets the caller choose
///   it, or use it to name what the request waits for. The request must not complete by itself:
///   its reply comes when the suite calls `reply` (or `failing`) for its id.
/// - `reply(id, token)` makes your SDK answer its request `id` with a value that carries `token`.
///   For an SDK that cannot withdraw a request (`requestCancellation: .none`), that is also how
///   the late reply of a request whose caller left comes. It may return before the reply reached
///   the adapter. A request the SDK no longer holds (its cancel withdrew it) must get nothing from
///   it, as from a real SDK: a reply left waiting in a queue would answer the next request.
/// - `token(value)` reads the token back from what the caller got.
/// - The suite uses each id for one request only, except where a scenario reuses one on purpose,
///   and chooses tokens unique in the run.
public struct KeyedFixture<Value: Sendable>: Sendable {
    /// One request of your adapter under `id`, with the probe to pass to it.
    public typealias Request =
        nonisolated(nonsending) @Sendable (_ id: UInt64, _ probe: CallProbe<Value>) async throws -> Value
    /// Makes the SDK answer its request `id` with a value carrying `token`.
    public typealias Reply = @Sendable (_ id: UInt64, _ token: UInt64) async -> Void

    /// The fixture's name, unique among the adapters of a run.
    public let name: String
    let threading: AdapterThreading
    let request: Request
    let reply: Reply
    let token: @Sendable (Value) -> UInt64?
    let failing: (@Sendable (_ id: UInt64) async -> Void)?
    let strayReply: Reply?
    let liveResources: (@Sendable () -> Int)?
    let offThreadCalls: (@Sendable () -> Int)?
    let requestCancellation: SDKRequestCancellation

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called (``AdapterThreading/anyThread``, the default, or
    ///     ``AdapterThreading/sdkThread(_:)``).
    ///   - request: Calls your adapter for a request under `id`; it waits for its reply.
    ///   - reply: Makes the SDK answer its request `id` with a value carrying `token`.
    ///   - token: The token a value carries, or `nil` when it carries none.
    ///   - failing: Makes the SDK answer its request `id` with a failure; the suite then checks
    ///     that the caller throws, and that the next request still gets its reply.
    ///   - strayReply: Makes the SDK deliver a reply under `id` that answers none of its requests:
    ///     a duplicate of one already answered, or one for an id nobody sent. Only a test double
    ///     can do this; the stray-reply scenario is not checked without it.
    ///   - liveResources: How many requests the SDK and your adapter hold now (contexts, table
    ///     entries); it must come back to where it was once every request has ended.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    ///   - requestCancellation: Whether the SDK can withdraw one request
    ///     (``SDKRequestCancellation/perRequest``, the default) or cannot
    ///     (``SDKRequestCancellation/none``: a request whose caller left is answered late).
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        request: @escaping Request,
        reply: @escaping Reply,
        token: @escaping @Sendable (Value) -> UInt64?,
        failing: (@Sendable (_ id: UInt64) async -> Void)? = nil,
        strayReply: Reply? = nil,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil,
        requestCancellation: SDKRequestCancellation = .perRequest
    ) {
        self.name = name
        self.threading = threading
        self.request = request
        self.reply = reply
        self.token = token
        self.failing = failing
        self.strayReply = strayReply
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
