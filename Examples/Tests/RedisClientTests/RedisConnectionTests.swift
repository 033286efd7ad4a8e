import Foundation
import LegacyBridge
import LoopbackFixtures
import RedisClient
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every test starts its own redis-server on 127.0.0.1 and kills it at the end: nothing leaves the
/// machine. Commands carry a generous timeout, so a broken contract fails instead of hanging.
@Suite("hiredis client on the descriptor loop, over PendingRequests and SharedSubscription")
struct RedisConnectionTests {
    static let bound = Duration.seconds(60)

    @Test("connect to a server that accepts and never answers fails with connectFailed once its timeout passed")
    func connectTimesOut() async throws {
        // A listening socket nobody accepts from: the kernel completes the handshake, hiredis
        // connects and sends its PING, and no reply ever comes.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(listener, 8) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        await #expect {
            _ = try await RedisConnection.connect(port: port, timeout: .milliseconds(300))
        } throws: { error in
            guard case RedisError.connectFailed(let reason) = error else { return false }
            return reason.contains("PING")
        }
    }

    @Test("commands get their own replies: strings, binary values, integers, nil, arrays and error replies")
    func replies() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        #expect(try await redis.send("SET", "greeting", "hello", timeout: Self.bound) == .status("OK"))
        #expect(try await redis.send("GET", "greeting", timeout: Self.bound).text == "hello")
        let binary: [UInt8] = [0, 255, 10, 13, 0]
        try await redis.send(bytes: [Array("SET".utf8), Array("binary".utf8), binary], timeout: Self.bound)
        #expect(try await redis.send("GET", "binary", timeout: Self.bound) == .string(binary))
        #expect(try await redis.send("INCRBY", "counter", "41", timeout: Self.bound) == .integer(41))
        #expect(try await redis.send("GET", "missing", timeout: Self.bound) == .null)
        try await redis.send("RPUSH", "list", "a", "b", timeout: Self.bound)
        #expect(try await redis.send("LRANGE", "list", "0", "-1", timeout: Self.bound) == .array([.string(Array("a".utf8)), .string(Array("b".utf8))]))
        await #expect {
            try await redis.send("INCR", "list", timeout: Self.bound)
        } throws: { error in
            guard case RedisError.server(let message) = error else { return false }
            return message.hasPrefix("WRONGTYPE")
        }
        let s = redis.statistics
        #expect(s.pendingCommands == 0)
        #expect(s.lateReplies == 0)
        #expect(s.callsOffLoopThread == 0)
        await redis.shutdown()
        await server.stop()
    }

    @Test("10,000 pipelined commands from concurrent tasks each get the reply to their own command")
    func pipelined() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        let count = 10_000
        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask {
                    let reply = try await redis.send("ECHO", "value \(index)", timeout: Self.bound)
                    return reply.text == "value \(index)" ? 0 : 1
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(mismatches == 0)
        let s = redis.statistics
        #expect(s.commands == count + 1, "every ECHO and the connect's PING: \(s)")
        #expect(s.replies == count + 1, "\(s)")
        #expect(s.pendingCommands == 0)
        #expect(s.callsOffLoopThread == 0)
        await redis.shutdown()
        await server.stop()
    }

    @Test("a command that times out lets its caller go; its late reply is counted and the next command gets its own")
    func timeout() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        let other = try await RedisConnection.connect(port: server.port)
        // BLPOP with no deadline: the server answers only once something is pushed.
        await #expect(throws: BridgeTimeoutError.self) {
            try await redis.send("BLPOP", "queue", "0", timeout: .milliseconds(50))
        }
        #expect(redis.statistics.pendingCommands == 0, "the caller was let go")
        // The server still runs the command: its reply comes once the list has an element.
        try await other.send("RPUSH", "queue", "late", timeout: Self.bound)
        #expect(await eventually { redis.statistics.lateReplies == 1 }, "\(redis.statistics)")
        #expect(try await redis.send("ECHO", "next", timeout: Self.bound).text == "next")
        #expect(try await other.send("LLEN", "queue", timeout: Self.bound) == .integer(0), "the BLPOP took the element")
        await redis.shutdown()
        await other.shutdown()
        await server.stop()
    }

    @Test("two consumers of one channel each get every message, in order, over one SUBSCRIBE; the last to leave unsubscribes")
    func sharedChannel() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        let count = 50
        let consumers = (0..<2).map { _ in
            Task { () throws -> [[UInt8]] in
                var payloads: [[UInt8]] = []
                for try await message in redis.messages(channel: "news") {
                    payloads.append(message.payload)
                    if payloads.count == count { break }
                }
                return payloads
            }
        }
        guard
            await eventually(
                bound: 60,
                { redis.consumerCount(channel: "news") == 2 && redis.statistics.subscribeConfirmations == 1 })
        else {
            Issue.record("the two consumers did not join one confirmed subscription: \(redis.statistics)")
            for consumer in consumers { consumer.cancel() }
            await server.stop()
            return
        }
        // Commands and subscriptions run on two contexts: this connection can publish too.
        for index in 0..<count {
            #expect(try await redis.send("PUBLISH", "news", "\(index)", timeout: Self.bound) == .integer(1))
        }
        let expected = (0..<count).map { Array("\($0)".utf8) }
        for consumer in consumers {
            #expect(try await consumer.value == expected)
        }
        #expect(await eventually { redis.statistics.unsubscribes == 1 }, "\(redis.statistics)")
        let s = redis.statistics
        #expect(s.subscribes == 1, "one SUBSCRIBE for both consumers: \(s)")
        #expect(s.messages == count, "the server sent each message once: \(s)")
        // A new consumer subscribes again, and gets what is published from then on.
        let again = Task { () throws -> String? in
            for try await message in redis.messages(channel: "news") { return String(decoding: message.payload, as: UTF8.self) }
            return nil
        }
        #expect(await eventually { redis.statistics.subscribeConfirmations == 2 }, "\(redis.statistics)")
        try await redis.send("PUBLISH", "news", "again", timeout: Self.bound)
        #expect(try await again.value == "again")
        await redis.shutdown()
        await server.stop()
    }

    @Test("the server killed mid-command fails every pending command and subscription with connectionLost, and later calls too")
    func serverKilled() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        let follower = Task { () throws -> Int in
            var count = 0
            for try await _ in redis.messages(channel: "lost") { count += 1 }
            return count
        }
        #expect(await eventually { redis.statistics.subscribeConfirmations == 1 }, "\(redis.statistics)")
        let blocked = (0..<20).map { index in
            Task { try await redis.send("BLPOP", "never-\(index)", "0", timeout: Self.bound) }
        }
        #expect(await eventually { redis.statistics.commands == 21 }, "\(redis.statistics)")
        server.kill()
        for task in blocked {
            await #expect {
                try await task.value
            } throws: { error in
                guard case RedisError.connectionLost = error else { return false }
                return true
            }
        }
        await #expect {
            try await follower.value
        } throws: { error in
            guard case RedisError.connectionLost = error else { return false }
            return true
        }
        await #expect {
            try await redis.send("PING", timeout: Self.bound)
        } throws: { error in
            guard case RedisError.connectionLost = error else { return false }
            return true
        }
        let s = redis.statistics
        #expect(s.pendingCommands == 0)
        #expect(s.disconnects == 2, "both contexts saw the loss: \(s)")
        await redis.shutdown()
        await server.stop()
    }

    @Test("connecting to a port nobody listens on throws connectFailed with hiredis's reason")
    func refused() async throws {
        let port = try freeLoopbackPort()
        await #expect {
            _ = try await RedisConnection.connect(port: port)
        } throws: { error in
            guard case RedisError.connectFailed(let reason) = error else { return false }
            return reason.lowercased().contains("refused")
        }
    }

    @Test("after shutdown, pending and later commands throw notConnected")
    func shutdown() async throws {
        let server = try await ServerProcess.startRedis()
        let redis = try await RedisConnection.connect(port: server.port)
        let blocked = Task { try await redis.send("BLPOP", "never", "0", timeout: Self.bound) }
        #expect(await eventually { redis.statistics.commands == 2 }, "\(redis.statistics)")
        await redis.shutdown()
        await #expect(throws: RedisError.notConnected) { try await blocked.value }
        await #expect(throws: RedisError.notConnected) { try await redis.send("PING", timeout: Self.bound) }
        await server.stop()
    }
}
