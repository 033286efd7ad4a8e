// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import Dispatch
import DocumentationSDK
import LegacyBridge
import LegacyBridgeConformance
import Testing

/// Scaffolding: the article's resolver SDK, a stand-in that answers "localhost", refuses every
/// other name except `silentHost`, which it holds until `answerSilentQueries()`. It calls back
/// synchronously, inside `lookup` and inside `cancel`, as some SDKs do.
nonisolated final class ResolverSDK: Sendable {
    struct Query: Sendable, Hashable { let id: Int }
    struct NotFound: Error {}
    struct Cancelled: Error {}
    static let silentHost = "silent.example"
    static var driver: SDKLoop.Driver {
        let wakeups = DispatchSemaphore(value: 0)
        return .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() })
    }

    private let held = LockedValue<[Query: @Sendable (Result<[String], any Error>) -> Void]>([:])
    private let next = LockedValue(0)

    var pendingQueries: Int { held.withLock { $0.count } }

    func lookup(_ host: String, _ callback: @escaping @Sendable (Result<[String], any Error>) -> Void) -> Query {
        let query = Query(id: next.withLock { $0 += 1; return $0 })
        switch host {
        case "localhost": callback(.success(["127.0.0.1"]))
        case Self.silentHost: held.withLock { $0[query] = callback }
        default: callback(.failure(NotFound()))
        }
        return query
    }

    func cancel(_ query: Query) {
        held.withLock { $0.removeValue(forKey: query) }?(.failure(Cancelled()))
    }

    func answerSilentQueries() {
        let callbacks = held.withLock { held in
            defer { held = [:] }
            return Array(held.values)
        }
        for callback in callbacks { callback(.success([])) }
    }
}

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingYourAdapter.md
func resolve(
    _ host: String, on loop: SDKLoop, sdk: ResolverSDK, probe: CallProbe<[String]> = .off,
    isolation: isolated (any Actor)? = #isolation
) async throws -> [String] {
    try await withCallback(isolation: isolation) { completion in
        let deliver = probe.callback { completion($0) }
        let query = LockedValue<ResolverSDK.Query?>(nil)
        try loop.post {
            probe.start { query.withLock { $0 = sdk.lookup(host) { deliver($0) } } }
        }
        return CancelHandle {
            try? loop.post { if let query = query.withLock({ $0 }) { probe.cancel { sdk.cancel(query) } } }
        }
    }
}
// end snippet

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingYourAdapter.md
@Test func resolverConforms() async throws {
    let loop = try SDKLoop(name: "resolver", driver: ResolverSDK.driver)
    let sdk = ResolverSDK()
    let fixture = OneShotFixture<[String]>(
        name: "resolve",
        threading: .sdkThread(loop.scheduler),
        succeeding: { probe in try await resolve("localhost", on: loop, sdk: sdk, probe: probe) },
        failing: { probe in try await resolve("no.such.host.invalid", on: loop, sdk: sdk, probe: probe) },
        hanging: .init(
            start: { probe in try await resolve(ResolverSDK.silentHost, on: loop, sdk: sdk, probe: probe) },
            release: { sdk.answerSilentQueries() }),
        liveResources: { sdk.pendingQueries })
    let report = await ConformanceSuite.run(fixture)
    #expect(report.failures.isEmpty, "\(report.rendered)")
}
// end snippet

/// Scaffolding: the keyed section's RPC wire, a stand-in for an SDK with one reply handler for
/// every request and ids the caller chooses. It answers a request only when told, and only one it
/// still holds. The first snippet treats it as an SDK that cannot withdraw a request; the second
/// uses `withdraw(id:)`.
nonisolated final class RPCWire: Sendable {
    struct Failed: Error {}
    private let handler = LockedValue<(@Sendable (UInt64, Result<String, any Error>) -> Void)?>(nil)
    private let held = LockedValue<[UInt64: Int]>([:])

    var pending: Int { held.withLock { $0.values.reduce(0, +) } }

    func onReply(_ handler: @escaping @Sendable (UInt64, Result<String, any Error>) -> Void) {
        self.handler.withLock { $0 = handler }
    }

    func send(id: UInt64, method: String) {
        held.withLock { $0[id, default: 0] += 1 }
    }

    func answer(id: UInt64, with text: String) { deliver(id, .success(text)) }

    /// Forgets one held request under `id`: it is never answered.
    func withdraw(id: UInt64) {
        held.withLock { held in
            guard let count = held[id] else { return }
            held[id] = count > 1 ? count - 1 : nil
        }
    }

    func fail(id: UInt64) { deliver(id, .failure(Failed())) }

    private func deliver(_ id: UInt64, _ result: Result<String, any Error>) {
        let found = held.withLock { held -> Bool in
            guard let count = held[id] else { return false }
            held[id] = count > 1 ? count - 1 : nil
            return true
        }
        if found, let handler = handler.withLock({ $0 }) { handler(id, result) }
    }
}

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingYourAdapter.md
func call(
    _ method: String, id: UInt64, over wire: RPCWire, calls: PendingRequests<UInt64, String>,
    probe: CallProbe<String> = .off, isolation: isolated (any Actor)? = #isolation
) async throws -> String {
    try await calls.request(id: id, isolation: isolation) { id in
        probe.start { wire.send(id: id, method: method) }
    }
}

@Test func rpcCallConforms() async throws {
    let wire = RPCWire()
    let calls = PendingRequests<UInt64, String>()  // no cancel: the wire cannot withdraw a request
    wire.onReply { id, result in _ = calls.complete(id, with: result) }
    let fixture = KeyedFixture<String>(
        name: "rpc-call",
        request: { id, probe in try await call("status", id: id, over: wire, calls: calls, probe: probe) },
        reply: { id, token in wire.answer(id: id, with: "ok \(token)") },
        token: { value in UInt64(value.dropFirst(3)) },
        failing: { id in wire.fail(id: id) },
        liveResources: { wire.pending + calls.statistics.pending },
        requestCancellation: .none)
    let report = await ConformanceSuite.run(fixture)
    #expect(report.failures.isEmpty, "\(report.rendered)")
}
// end snippet

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingYourAdapter.md
func withdrawableCall(
    _ method: String, id: UInt64, over wire: RPCWire, calls: PendingRequests<UInt64, String>,
    probes: LockedValue<[UInt64: CallProbe<String>]>, probe: CallProbe<String> = .off,
    isolation: isolated (any Actor)? = #isolation
) async throws -> String {
    do {
        let reply = try await calls.request(id: id, isolation: isolation) { id in
            probes.withLock { $0[id] = probe }  // the id is this request's now
            probe.start { wire.send(id: id, method: method) }
        }
        probes.withLock { $0[id] = nil }  // answered: the table makes no cancel for it
        return reply
    } catch let error where error is CancellationError || error is BridgeTimeoutError || error is RequestIDError {
        throw error  // the table's cancel takes the probe; a refused id never held one
    } catch {
        probes.withLock { $0[id] = nil }  // the SDK's own failure: no cancel either
        throw error
    }
}

@Test func withdrawableCallConforms() async throws {
    let wire = RPCWire()
    let probes = LockedValue<[UInt64: CallProbe<String>]>([:])
    let calls = PendingRequests<UInt64, String>(cancel: { [weak wire] id in  // the wire holds the table
        let probe = probes.withLock { $0.removeValue(forKey: id) } ?? .off
        probe.cancel { wire?.withdraw(id: id) }
    })
    wire.onReply { id, result in _ = calls.complete(id, with: result) }
    let fixture = KeyedFixture<String>(
        name: "rpc-call-withdrawable",
        request: { id, probe in
            try await withdrawableCall("status", id: id, over: wire, calls: calls, probes: probes, probe: probe)
        },
        reply: { id, token in wire.answer(id: id, with: "ok \(token)") },
        token: { value in UInt64(value.dropFirst(3)) },
        failing: { id in wire.fail(id: id) },
        liveResources: { wire.pending + calls.statistics.pending })
    let report = await ConformanceSuite.run(fixture)
    #expect(report.failures.isEmpty, "\(report.rendered)")
    #expect(report.notChecked.map(\.name) == ["keyed-stray-replies"])  // only a test double makes those
}
// end snippet

/// Scaffolding: the shared section's news feed, a stand-in for an SDK with observers that get
/// every item posted while they are registered.
nonisolated final class NewsFeed: Sendable {
    private let observers = LockedValue<[Int: @Sendable (String) -> Void]>([:])
    private let next = LockedValue(0)

    var observerCount: Int { observers.withLock { $0.count } }

    func addObserver(_ observer: @escaping @Sendable (String) -> Void) -> Int {
        let id = next.withLock { $0 += 1; return $0 }
        observers.withLock { $0[id] = observer }
        return id
    }

    func removeObserver(_ id: Int) { observers.withLock { $0[id] = nil } }

    func post(_ item: String) {
        for observer in observers.withLock({ Array($0.values) }) { observer(item) }
    }
}

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingYourAdapter.md
@Test func newsConforms() async throws {
    let feed = NewsFeed()
    let news = SharedSubscription(of: String.self, restart: .automatic) { sink in
        let observer = feed.addObserver { item in sink.yield(item) }
        return StreamControl(cancel: CancelHandle { feed.removeObserver(observer) })
    }
    let fixture = SharedSubscriptionFixture<String>(
        name: "news",
        subscribe: { news.subscribe() },
        publish: { token in feed.post("item \(token)") },
        token: { item in UInt64(item.dropFirst(5)) },
        listeners: { feed.observerCount })
    let report = await ConformanceSuite.run(fixture)
    #expect(report.failures.isEmpty, "\(report.rendered)")
}
// end snippet

/// Scaffolding: the superseding and sharing section's place index, a stand-in for an SDK whose
/// lookups each have a callback and a handle to cancel them.
nonisolated final class PlaceIndex: Sendable {
    struct Failed: Error {}
    private let lookups = LockedValue<[Int: (key: UInt64, reply: @Sendable (Result<String, any Error>) -> Void)]>([:])
    private let next = LockedValue(0)

    var pending: Int { lookups.withLock { $0.count } }

    func lookup(_ key: UInt64, reply: @escaping @Sendable (Result<String, any Error>) -> Void) -> Int {
        let handle = next.withLock { $0 += 1; return $0 }
        lookups.withLock { $0[handle] = (key, reply) }
        return handle
    }

    func cancel(_ handle: Int) { lookups.withLock { $0[handle] = nil } }

    func answer(_ key: UInt64, with text: String) { deliver(key, .success(text)) }

    func fail(_ key: UInt64) { deliver(key, .failure(Failed())) }

    private func deliver(_ key: UInt64, _ result: Result<String, any Error>) {
        let replies = lookups.withLock { lookups in
            let handles = lookups.filter { $0.value.key == key }.map(\.key)
            return handles.compactMap { lookups.removeValue(forKey: $0)?.reply }
        }
        for reply in replies { reply(result) }
    }
}

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingYourAdapter.md
nonisolated func lookup(
    _ key: UInt64, in index: PlaceIndex, probe: CallProbe<String> = .off, completion: Completion<String>
) -> CancelHandle {
    let reply = probe.callback { result in _ = completion(result) }
    let handle = probe.start { index.lookup(key, reply: reply) }
    return CancelHandle { probe.cancel { index.cancel(handle) } }
}

@Test func searchAndPlacesConform() async throws {
    let index = PlaceIndex()
    let search = LatestWins<String>()  // each search supersedes the one before
    let places = CoalescedCalls<UInt64, String>()  // callers for one place share its lookup
    let latest = LatestWinsFixture<String>(
        name: "search",
        call: { key, probe in try await search.run { lookup(key, in: index, probe: probe, completion: $0) } },
        answer: { key, token in index.answer(key, with: "place \(token)") },
        token: { text in UInt64(text.dropFirst(6)) },
        failing: { key in index.fail(key) },
        liveResources: { index.pending })
    let shared = CoalescedFixture<String>(
        name: "places",
        call: { key, probe in
            try await places.value(for: key) { lookup(key, in: index, probe: probe, completion: $0) }
        },
        answer: { key, token in index.answer(key, with: "place \(token)") },
        token: { text in UInt64(text.dropFirst(6)) },
        failing: { key in index.fail(key) },
        liveResources: { index.pending })
    let options = ConformanceOptions(watchdog: .seconds(300))  // beside many tests, or under TSan
    let reports = [
        await ConformanceSuite.run(latest, options: options), await ConformanceSuite.run(shared, options: options),
    ]
    #expect(reports.allSatisfy { $0.failures.isEmpty }, "\(reports.map(\.rendered))")
}
// end snippet
