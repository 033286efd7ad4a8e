import LegacyBridge

/// Your latest-wins adapter over your SDK, as the conformance suite checks it: calls for keys the
/// suite chooses, each superseding the one before, and ways to make your SDK (or its test double)
/// answer a key's request when the suite says, with a token the suite can find in the value.
///
/// A latest-wins adapter lets a new call supersede the one in flight: search as you type, a map
/// tile for the current viewport, a `LatestWins` around an SDK's query. Its hazards: the answer of
/// a superseded call that comes late lands in the newest caller's hands, a superseded caller left
/// waiting, and a superseded SDK request nobody cancels. The suite forces each of them.
///
/// ```swift
/// let fixture = LatestWinsFixture<RedisReply>(
///     name: "redis-latest",
///     call: { key, probe in try await search.latest(key: key, probe: probe) },
///     answer: { key, token in _ = try? await pusher.send(["LPUSH", "latest:\(key)", "\(token)"]) },
///     token: { reply in reply.blpopValue.flatMap { UInt64($0) } },
///     requestCancellation: .none)
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the closures:
/// - `call(key, probe)` calls your adapter, the same instance every time, so that each call
///   supersedes the one before; pass the probe to it. The SDK request for `key` must not complete
///   by itself: it answers when the suite calls `answer` (or `failing`) for `key`.
/// - `answer(key, token)` makes your SDK answer its request for `key` with a value that carries
///   `token`. For an SDK that cannot withdraw a request (`requestCancellation: .none`), that is
///   also how the late answer of a superseded call comes. A request the SDK no longer holds (its
///   cancel withdrew it) must get nothing from it.
/// - `token(value)` reads the token back from what the caller got.
/// - The suite uses each key for one call only, and chooses tokens unique in the run.
public struct LatestWinsFixture<Value: Sendable>: Sendable {
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
    ///   - call: Calls your adapter for `key`; the call supersedes the one before.
    ///   - answer: Makes the SDK answer its request for `key` with a value carrying `token`.
    ///   - token: The token a value carries, or `nil` when it carries none.
    ///   - failing: Makes the SDK answer its request for `key` with a failure; the suite then
    ///     checks that the caller throws, and that the next call still gets its answer.
    ///   - liveResources: How many requests the SDK and your adapter hold now (contexts, handles);
    ///     it must come back to where it was once every call has ended.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    ///   - requestCancellation: Whether the SDK can withdraw one request
    ///     (``SDKRequestCancellation/perRequest``, the default: a superseded request must be
    ///     cancelled) or cannot (``SDKRequestCancellation/none``: it is answered late, and that
    ///     answer must reach nobody).
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
