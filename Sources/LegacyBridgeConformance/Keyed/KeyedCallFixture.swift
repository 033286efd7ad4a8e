import LegacyBridge

/// Your adapter over your SDK for one of the three kinds whose calls the suite names by a key and
/// whose SDK answers when the suite says: keyed requests (``KeyedFixture``), latest-wins calls
/// (``LatestWinsFixture``) and coalesced calls (``CoalescedFixture``). They differ only in what the
/// adapter does with the key, so they are one fixture; `Kind` (one of ``KeyedCallKind``'s) picks
/// the scenarios the suite runs.
///
/// Make one through its kind's name, e.g. `LatestWinsFixture<Reply>(name:call:answer:token:)`,
/// and hand it to ``ConformanceSuite``'s `run`. Contract for the closures:
/// - `call(key, probe)` calls your adapter, the same instance every time, for `key`; pass the
///   probe to it. The SDK request must not complete by itself: it answers when the suite calls
///   `answer` (or `failing`) for `key`.
/// - `answer(key, token)` makes your SDK answer its request for `key` with a value that carries
///   `token`. For an SDK that cannot withdraw a request (`requestCancellation: .none`), that is
///   also how a late answer comes. A request the SDK no longer holds (its cancel withdrew it) must
///   get nothing from it.
/// - `token(value)` reads the token back from what the caller got.
/// - The suite chooses keys, and tokens unique in the run; what each kind does with them is on its
///   name's page.
public struct KeyedCallFixture<Value: Sendable, Kind>: Sendable {
    /// One call of your adapter for `key` (a keyed request's id), with the probe to pass to it.
    public typealias Call =
        nonisolated(nonsending) @Sendable (_ key: UInt64, _ probe: CallProbe<Value>) async throws -> Value
    /// Makes the SDK answer its request for `key` with a value carrying `token`.
    public typealias Answer = @Sendable (_ key: UInt64, _ token: UInt64) async -> Void
    /// ``Call``, under the name keyed requests use.
    public typealias Request = Call
    /// ``Answer``, under the name keyed requests use.
    public typealias Reply = Answer

    /// The fixture's name, unique among the adapters of a run.
    public var name: String { common.name }
    /// What every fixture declares besides its calls.
    let common: FixtureCommon
    let call: Call
    let answer: Answer
    let token: @Sendable (Value) -> UInt64?
    let failing: (@Sendable (_ key: UInt64) async -> Void)?
    /// Keyed requests only: a reply that answers none of the SDK's requests.
    let strayReply: Answer?

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called (``AdapterThreading/anyThread``, the default, or
    ///     ``AdapterThreading/sdkThread(_:)``).
    ///   - call: Calls your adapter for `key`: a latest-wins call supersedes the one before;
    ///     coalesced callers for the same key share one SDK call.
    ///   - answer: Makes the SDK answer its request for `key` with a value carrying `token`.
    ///   - token: The token a value carries, or `nil` when it carries none.
    ///   - failing: Makes the SDK answer its request for `key` with a failure; the suite then
    ///     checks that every caller waiting on it throws, and that the next call still gets its
    ///     answer.
    ///   - liveResources: How many requests the SDK and your adapter hold now (contexts, handles,
    ///     table entries); it must come back to where it was once every call has ended.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    ///   - requestCancellation: Whether the SDK can withdraw one request
    ///     (``SDKRequestCancellation/perRequest``, the default: a request nobody waits for any more
    ///     must be cancelled) or cannot (``SDKRequestCancellation/none``: it is answered late, and
    ///     that answer must reach nobody).
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
        self.init(
            common: FixtureCommon(
                name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls,
                requestCancellation: requestCancellation),
            call: call, answer: answer, token: token, failing: failing, strayReply: nil)
    }

    init(
        common: FixtureCommon, call: @escaping Call, answer: @escaping Answer,
        token: @escaping @Sendable (Value) -> UInt64?, failing: (@Sendable (_ key: UInt64) async -> Void)?,
        strayReply: Answer?
    ) {
        self.common = common
        self.call = call
        self.answer = answer
        self.token = token
        self.failing = failing
        self.strayReply = strayReply
    }
}

/// The kinds of ``KeyedCallFixture``: what the adapter does with the key.
public enum KeyedCallKind {
    /// Requests matched by id through one reply callback (``KeyedFixture``).
    public enum Requests {}
    /// A new call supersedes the one in flight (``LatestWinsFixture``).
    public enum LatestWins {}
    /// Callers for the same key share one call (``CoalescedFixture``).
    public enum Coalesced {}
}

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
public typealias KeyedFixture<Value: Sendable> = KeyedCallFixture<Value, KeyedCallKind.Requests>

extension KeyedCallFixture where Kind == KeyedCallKind.Requests {
    /// Creates a keyed-request fixture.
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
        self.init(
            common: FixtureCommon(
                name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls,
                requestCancellation: requestCancellation),
            call: request, answer: reply, token: token, failing: failing, strayReply: strayReply)
    }
}

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
public typealias LatestWinsFixture<Value: Sendable> = KeyedCallFixture<Value, KeyedCallKind.LatestWins>

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
public typealias CoalescedFixture<Value: Sendable> = KeyedCallFixture<Value, KeyedCallKind.Coalesced>

extension KeyedCallFixture {
    /// Launches the fixture's call for `key` with a fresh recorder, watched to the end (a call
    /// the scenario will supersede, or whose cancel it holds back, says so in `hostility`).
    func launch(
        _ key: UInt64, _ context: FixtureContext, _ hostility: CallHostility<Value> = .init()
    ) -> LaunchedCall<Value> {
        let call = self.call
        return TokenedCalls<Value>.launch(context, hostility) { probe in try await call(key, probe) }
    }
}
