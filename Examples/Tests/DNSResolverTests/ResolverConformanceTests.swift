import DNSResolver
import LegacyBridge
import LegacyBridgeConformance
import LoopbackFixtures
import Testing

/// The conformance suite's real-adapter path on the shipped `Resolver.resolve`, over c-ares and
/// the loopback DNS responder: the adapter's own code, with the probe it takes.
@Suite("c-ares resolver: the conformance suite checks the shipped adapter")
struct ResolverConformanceTests {
    /// The resolvers of one fixture, all asking the loopback responder only. A `*.silent.test`
    /// lookup hangs (the responder never answers, an attempt waits 60 s); `release` replaces the
    /// resolver in use and shuts the old one down, which ends its pending lookups
    /// (`AresError.destruction`).
    final class Resolvers: Sendable {
        let server: String
        private let all: LockedValue<[Resolver]>
        private let current: LockedValue<Resolver>

        init(server: String) throws {
            self.server = server
            let first = try Self.make(server)
            all = LockedValue([first])
            current = LockedValue(first)
        }

        private static func make(_ server: String) throws -> Resolver {
            try Resolver(configuration: .init(servers: [server], attemptTimeout: .seconds(60), attempts: 1))
        }

        var resolver: Resolver { current.withLock { $0 } }

        func release() {
            guard let next = try? Self.make(server) else { return }
            all.withLock { $0.append(next) }
            let old = current.withLock { current in
                defer { current = next }
                return current
            }
            Task { await old.shutdown() }
        }

        /// c-ares channels and retained contexts not yet freed, over every resolver.
        var live: Int {
            all.withLock { $0 }.reduce(0) { total, resolver in
                let s = resolver.statistics
                return total + (s.channelsCreated - s.channelsDestroyed) + (s.contextsRetained - s.contextsFreed)
            }
        }

        /// c-ares calls made off a loop thread.
        var offThread: Int { all.withLock { $0 }.reduce(0) { $0 + $1.statistics.callsOffLoopThread } }

        /// Each resolver's loop thread is where its channels must be used.
        var threading: AdapterThreading {
            .sdkThread(
                SDKScheduler(
                    post: { [self] job in try resolver.scheduler.post(job) },
                    isCurrent: { [self] in all.withLock { $0 }.contains { $0.scheduler.isCurrent } }))
        }

        func shutdown() async {
            for resolver in all.withLock({ $0 }) { await resolver.shutdown() }
        }
    }

    /// One lookup of the adapter under test.
    typealias Lookup =
        nonisolated(nonsending) @Sendable (
            _ resolver: Resolver, _ host: String, _ timeout: Duration?, _ probe: CallProbe<[ResolvedAddress]>
        ) async throws -> [ResolvedAddress]

    static func fixture(
        _ name: String, _ resolvers: Resolvers, lookup: @escaping Lookup
    ) -> OneShotFixture<
        [ResolvedAddress]
    > {
        OneShotFixture(
            name: name,
            threading: resolvers.threading,
            succeeding: { probe in try await lookup(resolvers.resolver, "one.answer.test", nil, probe) },
            failing: { probe in try await lookup(resolvers.resolver, "unknown.test", nil, probe) },
            hanging: .init(
                start: { probe in try await lookup(resolvers.resolver, "held.silent.test", nil, probe) },
                release: { resolvers.release() }),
            timingOut: .init { probe, timeout in
                try await lookup(resolvers.resolver, "late.silent.test", timeout, probe)
            },
            liveResources: { resolvers.live },
            offThreadCalls: { resolvers.offThread })
    }

    @Test("the shipped resolve(host:) passes every one-shot scenario it can be given")
    func shippedAdapterPasses() async throws {
        let responder = try await LoopbackDNSResponder.start()
        let resolvers = try Resolvers(server: responder.server)
        let fixture = Self.fixture("resolve", resolvers) { resolver, host, timeout, probe in
            try await resolver.resolve(host: host, family: .ipv4, timeout: timeout, probe: probe)
        }
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        // A resolver replaced at each release, each on a loop of its own, declared with a scheduler
        // of the test's own: the suite cannot count one loop's watches.
        #expect(report.notChecked.map(\.name) == ["loop-watches-released"], "\(report.rendered)")
        await resolvers.shutdown()
        await responder.stop()
    }

    /// WRONG ON PURPOSE: awaits the lookup in an unstructured task (`Task { ... }.value`, "to
    /// leave the caller's actor"). The caller's cancellation never reaches the lookup: a cancelled
    /// caller waits until c-ares gives up by itself, and the query is never cancelled.
    static let detachedLookup: Lookup = { resolver, host, timeout, probe in
        try await Task { try await resolver.resolve(host: host, family: .ipv4, timeout: timeout, probe: probe) }.value
    }

    @Test(
        "a variant that awaits the lookup in an unstructured task is failed by cancel-in-flight: the caller is not let go"
    )
    func detachedLookupIsFlagged() async throws {
        let responder = try await LoopbackDNSResponder.start()
        let resolvers = try Resolvers(server: responder.server)
        let report = await ConformanceSuite.run(
            Self.fixture("resolve-detached", resolvers, lookup: Self.detachedLookup),
            options: .init(watchdog: .seconds(20), only: ["cancel-in-flight"]))
        #expect(report.failures.map(\.name) == ["cancel-in-flight"], "\(report.rendered)")
        #expect(report.failures.first?.verdict == .failed, "\(report.rendered)")
        #expect(report.failures.first?.detail.contains("the caller was not resumed") == true, "\(report.rendered)")
        await resolvers.shutdown()
        await responder.stop()
    }
}
