import LegacyBridge
import LegacyBridgeConformance
import MQTTClient
import Testing

/// The conformance suite's real-adapter path on the shipped `MQTTConnection.publish`, over
/// libmosquitto and two private brokers on 127.0.0.1: the adapter's own code, with the probe it
/// takes.
@Suite("libmosquitto publish: the conformance suite checks the shipped adapter")
struct MQTTConformanceTests {
    /// Two connections. Succeeding and failing calls publish to a broker that always runs. A
    /// hanging call first freezes the other broker (SIGSTOP, checked in /proc), so its PUBACK
    /// never comes, and `release` lets that broker run again (SIGCONT), which acknowledges every
    /// publish held so far.
    final class Publishers: Sendable {
        let running: MosquittoBroker
        let frozen: MosquittoBroker
        let healthy: MQTTConnection
        let held: MQTTConnection

        init(running: MosquittoBroker, frozen: MosquittoBroker) async throws {
            self.running = running
            self.frozen = frozen
            healthy = try await MQTTConnection.connect(.init(host: "127.0.0.1", port: running.port))
            held = try await MQTTConnection.connect(.init(host: "127.0.0.1", port: frozen.port))
        }

        /// A publish whose PUBACK the frozen broker holds.
        func hold(_ probe: CallProbe<Void>, timeout: Duration? = nil) async throws {
            try await frozen.pauseAndWait()
            try await held.publish(topic: "conformance/held", payload: [2], timeout: timeout, probe: probe)
        }

        /// Publishes waiting for their PUBACK, over both connections.
        var live: Int { healthy.statistics.pendingPublishes + held.statistics.pendingPublishes }

        /// libmosquitto calls made off a loop thread.
        var offThread: Int { healthy.statistics.callsOffLoopThread + held.statistics.callsOffLoopThread }

        /// Each connection's loop thread is where its client must be used.
        var threading: AdapterThreading {
            .sdkThread(
                SDKScheduler(
                    post: { [healthy] job in try healthy.scheduler.post(job) },
                    isCurrent: { [healthy, held] in healthy.scheduler.isCurrent || held.scheduler.isCurrent }))
        }

        func stop() async {
            frozen.resume()
            await healthy.shutdown()
            await held.shutdown()
            await running.stop()
            await frozen.stop()
        }
    }

    /// One scenario cannot be checked: error-then-success needs a failure that comes through the
    /// callback, and MQTT 3.1.1 has none for one publish. A PUBACK carries no error, libmosquitto
    /// refuses a publish synchronously (the failing call here), and a lost connection fails every
    /// publish at once through the table's `failAll`.
    @Test("the shipped publish(topic:payload:) passes every one-shot scenario it can be given")
    func shippedAdapterPasses() async throws {
        let publishers = try await Publishers(
            running: try await MosquittoBroker.start(), frozen: try await MosquittoBroker.start())
        let fixture = OneShotFixture<Void>(
            name: "publish",
            threading: publishers.threading,
            succeeding: { probe in
                try await publishers.healthy.publish(topic: "conformance/ok", payload: [1], probe: probe)
            },
            // A wildcard in a publish topic: mosquitto_publish refuses it (MOSQ_ERR_INVAL).
            failing: { probe in
                try await publishers.healthy.publish(topic: "conformance/#", payload: [1], probe: probe)
            },
            hanging: .init(
                start: { probe in try await publishers.hold(probe) },
                release: { publishers.frozen.resume() }),
            timingOut: .init { probe, timeout in try await publishers.hold(probe, timeout: timeout) },
            liveResources: { publishers.live },
            offThreadCalls: { publishers.offThread })
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        // Over two connections, each on a loop of its own, declared with a scheduler of the test's
        // own: the suite cannot count one loop's watches (loop-watches-released needs .sdkLoop(loop)).
        #expect(
            report.notChecked.map(\.name) == ["error-then-success", "loop-watches-released"], "\(report.rendered)")
        await publishers.stop()
    }
}
