import Foundation
import LegacyBridge
import LegacyBridgeConformance
import LoopbackFixtures
import PostgresClient
import Testing

/// The conformance suite's real-adapter path on the shipped `PostgresClient.query`, over libpq and
/// a private PostgreSQL server on 127.0.0.1: the adapter's own code, its PQcancel included.
@Suite("libpq query: the conformance suite checks the shipped adapter")
struct PostgresConformanceTests {
    /// Two clients of one server. Succeeding and failing calls go to one; a hanging call is a long
    /// `pg_sleep` on the other, whose caller's cancel reaches the server through PQcancel, and
    /// `release` interrupts every sleep left with SIGINT to that client's server processes (what a
    /// cancel request makes the server do), so each ends with SQLSTATE 57014.
    final class Clients: Sendable {
        let server: ServerProcess
        let healthy: PostgresClient
        let held: PostgresClient

        init() async throws {
            server = try await ServerProcess.startPostgres()
            let configuration = PostgresClient.Configuration(
                port: server.port, user: "postgres", database: "postgres", connections: 2)
            healthy = try await PostgresClient.connect(configuration)
            held = try await PostgresClient.connect(configuration)
        }

        func hold(_ probe: CallProbe<PostgresResult>, timeout: Duration? = nil) async throws -> PostgresResult {
            try await held.query("SELECT pg_sleep(600)", timeout: timeout, probe: probe)
        }

        func release() {
            for pid in held.backendPIDs where pid > 0 { kill(pid, SIGINT) }
        }

        var live: Int { healthy.statistics.pendingQueries + held.statistics.pendingQueries }
        var offThread: Int { healthy.statistics.callsOffLoopThread + held.statistics.callsOffLoopThread }

        var threading: AdapterThreading {
            .sdkThread(
                SDKScheduler(
                    // Posts go to the hanging calls' loop: a job posted there runs after their starts.
                    post: { [held] job in try held.scheduler.post(job) },
                    isCurrent: { [healthy, held] in healthy.scheduler.isCurrent || held.scheduler.isCurrent }))
        }

        func stop() async {
            await healthy.shutdown()
            await held.shutdown()
            await server.stop()
        }
    }

    @Test("the shipped query(_:_:timeout:probe:) passes every one-shot scenario it can be given")
    func shippedAdapterPasses() async throws {
        let clients = try await Clients()
        let fixture = OneShotFixture<PostgresResult>(
            name: "postgres-query",
            threading: clients.threading,
            succeeding: { probe in try await clients.healthy.query("SELECT 1", probe: probe) },
            failing: { probe in try await clients.healthy.query("SELEKT 1", probe: probe) },
            hanging: .init(start: { probe in try await clients.hold(probe) }, release: { clients.release() }),
            timingOut: .init { probe, timeout in try await clients.hold(probe, timeout: timeout) },
            liveResources: { clients.live },
            offThreadCalls: { clients.offThread })
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        // Over two connections, each on a loop of its own, declared with a scheduler of the test's
        // own: the suite cannot count one loop's watches (loop-watches-released needs .sdkLoop(loop)).
        #expect(report.notChecked.map(\.name) == ["loop-watches-released"], "\(report.rendered)")
        await clients.stop()
    }
}
