import LegacyBridge
import LegacyBridgeConformance
import LoopbackFixtures
import RedisClient
import Testing

/// The conformance suite's real-adapter path on the shipped `RedisConnection.send`, over hiredis
/// and two private redis-servers on 127.0.0.1: the adapter's own code, with the probe it takes.
@Suite("hiredis send: the conformance suite checks the shipped adapter")
struct RedisConformanceTests {
    /// Two connections. Succeeding and failing calls go to a server that always runs. A hanging
    /// call first freezes the other server (SIGSTOP, checked in /proc), so its reply never comes,
    /// and `release` lets that server run again (SIGCONT), which answers every command held.
    final class Servers: Sendable {
        let running: ServerProcess
        let frozen: ServerProcess
        let healthy: RedisConnection
        let held: RedisConnection

        init() async throws {
            running = try await ServerProcess.startRedis()
            frozen = try await ServerProcess.startRedis()
            healthy = try await RedisConnection.connect(port: running.port)
            held = try await RedisConnection.connect(port: frozen.port)
        }

        /// A command whose reply the frozen server holds.
        func hold(_ probe: CallProbe<RedisReply>, timeout: Duration? = nil) async throws -> RedisReply {
            try await frozen.pauseAndWait()
            return try await held.send(["ECHO", "held"], timeout: timeout, probe: probe)
        }

        /// Commands waiting for a caller, and commands written and not answered (a cancelled
        /// caller's too, until its late reply), over both connections.
        var live: Int {
            healthy.statistics.pendingCommands + held.statistics.pendingCommands + healthy.commandsAwaitingReply
                + held.commandsAwaitingReply
        }

        /// hiredis calls made off a loop thread.
        var offThread: Int { healthy.statistics.callsOffLoopThread + held.statistics.callsOffLoopThread }

        /// Each connection's loop thread is where its contexts must be used.
        var threading: AdapterThreading {
            .sdkThread(
                SDKScheduler(
                    // Posts go to the hanging calls' loop: a job posted there runs after their starts.
                    post: { [held] job in try held.scheduler.post(job) },
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

    @Test(
        "the shipped send(_:timeout:probe:) passes every one-shot scenario it can be given, judged as an SDK without a per-request cancel"
    )
    func shippedAdapterPasses() async throws {
        let servers = try await Servers()
        let fixture = OneShotFixture<RedisReply>(
            name: "redis-send",
            threading: servers.threading,
            succeeding: { probe in try await servers.healthy.send(["ECHO", "ok"], probe: probe) },
            // An error reply: HINCRBY by something that is not a number.
            failing: { probe in
                try await servers.healthy.send(["HINCRBY", "hash", "field", "not-a-number"], probe: probe)
            },
            hanging: .init(
                start: { probe in try await servers.hold(probe) },
                release: { servers.frozen.resume() }),
            timingOut: .init { probe, timeout in try await servers.hold(probe, timeout: timeout) },
            liveResources: { servers.live },
            offThreadCalls: { servers.offThread },
            // hiredis cannot withdraw a command: a cancelled caller's entry goes with the late reply.
            requestCancellation: .none)
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .oneShot).count)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        // Over two connections, each on a loop of its own, declared with a scheduler of the test's
        // own: the suite cannot count one loop's watches (loop-watches-released needs .sdkLoop(loop)).
        #expect(
            report.notChecked.map(\.name) == ["callback-inside-cancel", "loop-watches-released"], "\(report.rendered)")
        await servers.stop()
    }

    @Test(
        "the shipped send passes every keyed scenario a real server allows: BLPOPs answered out of order by LPUSH, a late reply for a caller that left while a newer request waits on its key, 32 outstanding"
    )
    func keyedScenariosPass() async throws {
        let server = try await ServerProcess.startRedis()
        let blocking = try await RedisConnection.connect(port: server.port)
        let pusher = try await RedisConnection.connect(port: server.port)
        guard case .integer(let clientID) = try await blocking.send("CLIENT", "ID") else {
            Issue.record("CLIENT ID gave no integer")
            return
        }
        let fixture = KeyedFixture<RedisReply>(
            name: "redis-blpop",
            threading: .sdkThread(blocking.scheduler),
            // A request waits on its own list; pipelined on one connection, the server runs each
            // BLPOP after the one before it was answered.
            request: { id, probe in try await blocking.send(["BLPOP", "key:\(id)", "0"], probe: probe) },
            reply: { id, token in _ = try? await pusher.send("LPUSH", "key:\(id)", "\(token)") },
            token: { reply in
                guard case .array(let items) = reply, items.count == 2, case .string(let bytes) = items[1] else {
                    return nil
                }
                return UInt64(String(decoding: bytes, as: UTF8.self))
            },
            // The blocked BLPOP ends with an error: CLIENT UNBLOCK ... ERROR, repeated until the
            // server has it blocked (the command may still be on its way).
            failing: { _ in
                for _ in 0..<2_000 {
                    if case .integer(1)? = try? await pusher.send("CLIENT", "UNBLOCK", "\(clientID)", "ERROR") {
                        return
                    }
                    try? await Task.sleep(for: .milliseconds(2))
                }
            },
            liveResources: { blocking.statistics.pendingCommands + blocking.commandsAwaitingReply },
            offThreadCalls: { blocking.statistics.callsOffLoopThread },
            // hiredis cannot withdraw a command: a caller that left gets its reply late.
            requestCancellation: .none)
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .keyed).count)
        #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
        // A real server answers only what was asked: no stray reply can be made.
        #expect(report.notChecked.map(\.name) == ["keyed-stray-replies"], "\(report.rendered)")
        await blocking.shutdown()
        await pusher.shutdown()
        await server.stop()
    }

    /// A BLPOP on `connection` for the list `key`, through the callback-style `send`: the one-shot
    /// call that `LatestWins` and `CoalescedCalls` are built on.
    static func blpop(
        _ connection: RedisConnection, _ list: String, probe: CallProbe<RedisReply>, completion: Completion<RedisReply>
    ) -> CancelHandle? {
        connection.send(bytes: [Array("BLPOP".utf8), Array(list.utf8), Array("0".utf8)], probe: probe) {
            _ = completion($0)
        }
        return nil  // hiredis cannot withdraw a written command
    }

    /// The token in a BLPOP's reply (the popped element).
    static func poppedToken(_ reply: RedisReply) -> UInt64? {
        guard case .array(let items) = reply, items.count == 2, case .string(let bytes) = items[1] else { return nil }
        return UInt64(String(decoding: bytes, as: UTF8.self))
    }

    /// Fails the BLPOP the server has blocked on `clientID`'s connection (CLIENT UNBLOCK ... ERROR),
    /// repeated until one was blocked (the command may still be on its way).
    static func unblock(_ clientID: Int, through pusher: RedisConnection) async {
        for _ in 0..<2_000 {
            if case .integer(1)? = try? await pusher.send("CLIENT", "UNBLOCK", "\(clientID)", "ERROR") { return }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    @Test(
        "LatestWins and CoalescedCalls over the shipped callback send pass every latest-wins and coalesced scenario: BLPOPs answered by LPUSH, a superseded BLPOP answered late, callers sharing one BLPOP"
    )
    func latestWinsAndCoalescedScenariosPass() async throws {
        let server = try await ServerProcess.startRedis()
        let blocking = try await RedisConnection.connect(port: server.port)
        let pusher = try await RedisConnection.connect(port: server.port)
        guard case .integer(let clientID) = try await blocking.send("CLIENT", "ID") else {
            Issue.record("CLIENT ID gave no integer")
            return
        }
        let search = LatestWins<RedisReply>()
        let lookups = CoalescedCalls<UInt64, RedisReply>()
        let latest = LatestWinsFixture<RedisReply>(
            name: "redis-latest-blpop",
            threading: .sdkThread(blocking.scheduler),
            call: { key, probe in
                try await search.run { Self.blpop(blocking, "latest:\(key)", probe: probe, completion: $0) }
            },
            answer: { key, token in _ = try? await pusher.send("LPUSH", "latest:\(key)", "\(token)") },
            token: Self.poppedToken,
            failing: { _ in await Self.unblock(Int(clientID), through: pusher) },
            liveResources: { blocking.commandsAwaitingReply },
            offThreadCalls: { blocking.statistics.callsOffLoopThread },
            requestCancellation: .none)
        let coalesced = CoalescedFixture<RedisReply>(
            name: "redis-coalesced-blpop",
            threading: .sdkThread(blocking.scheduler),
            call: { key, probe in
                try await lookups.value(for: key) {
                    Self.blpop(blocking, "shared:\(key)", probe: probe, completion: $0)
                }
            },
            answer: { key, token in _ = try? await pusher.send("LPUSH", "shared:\(key)", "\(token)") },
            token: Self.poppedToken,
            failing: { _ in await Self.unblock(Int(clientID), through: pusher) },
            liveResources: { blocking.commandsAwaitingReply + lookups.statistics.inFlight },
            offThreadCalls: { blocking.statistics.callsOffLoopThread },
            requestCancellation: .none)
        let options = ConformanceOptions(watchdog: .seconds(60))
        for report in [
            await ConformanceSuite.run(latest, options: options),
            await ConformanceSuite.run(coalesced, options: options),
        ] {
            #expect(report.results.count == 5, "\(report.rendered)")
            #expect(report.failures.isEmpty && report.usageErrors.isEmpty, "\(report.rendered)")
            #expect(report.notChecked.isEmpty, "\(report.rendered)")
        }
        await blocking.shutdown()
        await pusher.shutdown()
        await server.stop()
    }

    @Test(
        "the shipped messages(channel:) passes every shared-subscription scenario: one SUBSCRIBE for every consumer (PUBSUB NUMSUB), events in order, UNSUBSCRIBE after the last, a killed subscriber connection ends every consumer"
    )
    func sharedScenariosPass() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        let other = try await RedisConnection.connect(port: server.port)
        let fixture = SharedSubscriptionFixture<RedisMessage>(
            name: "redis-messages",
            subscribe: { redis.messages(channel: "news") },
            publish: { token in _ = try? await other.send("PUBLISH", "news", "\(token)") },
            token: { message in UInt64(String(decoding: message.payload, as: UTF8.self)) },
            // Clients subscribed to the channel, as the server counts them.
            listeners: {
                guard case .array(let items)? = try? await other.send("PUBSUB", "NUMSUB", "news"), items.count == 2,
                    case .integer(let count) = items[1]
                else { return -1 }
                return Int(count)
            },
            // The server drops every subscriber connection: the listener ends without a cancel.
            endListener: { _ = try? await other.send("CLIENT", "KILL", "TYPE", "pubsub") })
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .shared).count)
        #expect(
            report.failures.isEmpty && report.usageErrors.isEmpty && report.notChecked.isEmpty, "\(report.rendered)")
        await redis.shutdown()
        await other.shutdown()
        await server.stop()
    }
}
