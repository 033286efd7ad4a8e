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
