import Foundation
import LegacyBridge
import LoopbackFixtures
import MQTTClient
import Testing

/// Every test starts its own broker on 127.0.0.1 and kills it at the end: nothing leaves the
/// machine. Publishes carry a generous timeout, so a broken contract fails instead of hanging.
@Suite("libmosquitto client over PendingRequests and SharedSubscription")
struct MQTTConnectionTests {
    static let bound = Duration.seconds(30)

    static func connect(_ broker: MosquittoBroker) async throws -> MQTTConnection {
        try await MQTTConnection.connect(.init(host: "127.0.0.1", port: broker.port))
    }

    @Test("200 concurrent QoS 1 publishes are each acknowledged through their message id")
    func concurrentPublishes() async throws {
        let broker = try await MosquittoBroker.start()
        let connection = try await Self.connect(broker)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    try await connection.publish(
                        topic: "load/\(index % 7)", payload: Array("\(index)".utf8),
                        timeout: Self.bound)
                }
            }
            try await group.waitForAll()
        }
        let s = connection.statistics
        #expect(s.publishes == 200)
        #expect(s.acknowledgements == 200)
        #expect(s.pendingPublishes == 0)
        #expect(s.lateAcknowledgements == 0)
        #expect(s.callsOffLoopThread == 0)
        await connection.shutdown()
        await broker.stop()
    }

    @Test("a QoS 0 publish, acknowledged inside mosquitto_publish before its id is returned, is not lost")
    func acknowledgementBeforeTheIDIsKnown() async throws {
        let broker = try await MosquittoBroker.start()
        let connection = try await Self.connect(broker)
        for index in 0..<20 {
            try await connection.publish(topic: "early", payload: [UInt8(index)], qos: 0, timeout: Self.bound)
        }
        let s = connection.statistics
        #expect(s.acknowledgementsInsidePublish == 20, "libmosquitto acknowledged QoS 0 later than expected: \(s)")
        #expect(s.pendingPublishes == 0)
        #expect(s.lateAcknowledgements == 0)
        await connection.shutdown()
        await broker.stop()
    }

    @Test("publishes cancelled while the broker holds their PUBACK throw CancellationError and leave nothing pending")
    func cancelledPublishes() async throws {
        let broker = try await MosquittoBroker.start()
        let connection = try await Self.connect(broker)
        try await broker.pauseAndWait()
        let tasks = (0..<20).map { index in
            Task { try await connection.publish(topic: "held", payload: [UInt8(index)], timeout: Self.bound) }
        }
        #expect(await eventually { connection.statistics.pendingPublishes == 20 })
        for task in tasks { task.cancel() }
        for task in tasks {
            await #expect(throws: CancellationError.self) { try await task.value }
        }
        #expect(connection.statistics.pendingPublishes == 0)
        broker.resume()
        // The broker acknowledges them after all: those late PUBACKs reach nobody and are counted.
        #expect(await eventually { connection.statistics.lateAcknowledgements == 20 }, "\(connection.statistics)")
        #expect(connection.statistics.pendingPublishes == 0)
        await connection.shutdown()
        await broker.stop()
    }

    @Test("killing the broker fails every pending publish and every subscription at once with connectionLost")
    func brokerKilled() async throws {
        let broker = try await MosquittoBroker.start()
        let connection = try await Self.connect(broker)
        let consumer = Task {
            for try await _ in connection.messages(topic: "lost/#") {}
        }
        #expect(await eventually { connection.statistics.subscribeAcknowledgements == 1 })
        try await broker.pauseAndWait()
        let tasks = (0..<20).map { index in
            Task { try await connection.publish(topic: "lost/\(index)", payload: [], timeout: Self.bound) }
        }
        #expect(await eventually { connection.statistics.pendingPublishes == 20 })
        await broker.stop()
        for task in tasks {
            await #expect(throws: MQTTError.connectionLost) { try await task.value }
        }
        await #expect(throws: MQTTError.connectionLost) { try await consumer.value }
        let s = connection.statistics
        #expect(s.pendingPublishes == 0)
        #expect(s.disconnects == 1)
        #expect(MQTTError.connectionLost.description.contains("connection was lost"), "\(MQTTError.connectionLost)")
        await #expect(throws: MQTTError.noConnection) {
            try await connection.publish(topic: "lost/after", payload: [], timeout: Self.bound)
        }
        await connection.shutdown()
    }

    @Test("two consumers of one topic each get every message, in order, over one SUBSCRIBE")
    func sharedTopic() async throws {
        let broker = try await MosquittoBroker.start()
        let connection = try await Self.connect(broker)
        let count = 50
        let consumers = (0..<2).map { _ in
            Task { () throws -> [[UInt8]] in
                var payloads: [[UInt8]] = []
                for try await message in connection.messages(topic: "shared/topic") {
                    payloads.append(message.payload)
                    if payloads.count == count { break }
                }
                return payloads
            }
        }
        guard
            await eventually(
                bound: 20,
                {
                    connection.consumerCount(topic: "shared/topic") == 2
                        && connection.statistics.subscribeAcknowledgements == 1
                })
        else {
            Issue.record("the two consumers did not join one acknowledged subscription: \(connection.statistics)")
            for consumer in consumers { consumer.cancel() }
            await broker.stop()
            return
        }
        for index in 0..<count {
            try await connection.publish(topic: "shared/topic", payload: [UInt8(index)], timeout: Self.bound)
        }
        let expected = (0..<count).map { [UInt8($0)] }
        for consumer in consumers {
            #expect(try await consumer.value == expected)
        }
        let s = connection.statistics
        #expect(s.subscribes == 1, "one broker subscription for both consumers: \(s)")
        #expect(s.messages == count, "the broker sent each message once: \(s)")
        await connection.shutdown()
        await broker.stop()
    }

    @Test("the last consumer of a topic to leave sends UNSUBSCRIBE, and the next one subscribes again")
    func lastConsumerUnsubscribes() async throws {
        let broker = try await MosquittoBroker.start()
        let connection = try await Self.connect(broker)
        func follow() -> Task<Void, any Error> {
            Task { for try await _ in connection.messages(topic: "leave") {} }
        }
        let first = follow()
        let second = follow()
        #expect(await eventually { connection.consumerCount(topic: "leave") == 2 })
        first.cancel()
        #expect(await eventually { connection.consumerCount(topic: "leave") == 1 })
        #expect(connection.statistics.unsubscribes == 0)
        second.cancel()
        #expect(await eventually(bound: 20) { connection.statistics.unsubscribes == 1 }, "\(connection.statistics)")
        let third = follow()
        #expect(await eventually(bound: 20) { connection.statistics.subscribes == 2 }, "\(connection.statistics)")
        third.cancel()
        #expect(await eventually(bound: 20) { connection.statistics.unsubscribes == 2 }, "\(connection.statistics)")
        #expect(connection.statistics.callsOffLoopThread == 0)
        await connection.shutdown()
        await broker.stop()
    }

    @Test("a released connection's loop thread ends, after publishing and with a consumer that left")
    func loopThreadEnds() async throws {
        let broker = try await MosquittoBroker.start()
        var connection: MQTTConnection? = try await Self.connect(broker)
        let name = try #require(connection?.loopName)
        #expect(Self.threadNames().contains(name))
        try await connection?.publish(topic: "release", payload: [1], timeout: Self.bound)
        let consumer = Task { [connection] in for try await _ in connection!.messages(topic: "release") {} }
        #expect(await eventually { connection?.statistics.subscribeAcknowledgements == 1 })
        consumer.cancel()
        _ = await consumer.result
        await connection?.shutdown()
        connection = nil
        #expect(await eventually(bound: 20) { !Self.threadNames().contains(name) }, "\(name) still runs")
        await broker.stop()
    }

    /// The names of this process's threads.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
