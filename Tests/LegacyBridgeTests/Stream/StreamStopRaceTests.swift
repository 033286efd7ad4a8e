import Foundation
import Testing
@testable import LegacyBridge

/// `stop()` racing a first `next()`: each test forces one interleaving of the two, by driving the
/// registry and the subscription storage step by step, or by holding `start` open with a gate.
@Suite("CallbackStream.stop() racing a first next()")
struct StreamStopRaceTests {
    @Test("stop() after a subscription was created but before it became live: it never becomes live")
    func stopBeforeAdmission() {
        let registry = StreamRegistry<Int>()
        let storage = CallbackStreamStorage<Int>(buffering: .unbounded, ordering: .arrival, registry: registry)
        registry.stopAll()
        #expect(!registry.admit(storage), "a subscription admitted after stop() would run start that nothing cancels")
    }

    @Test("stop() after a subscription became live but before start ran: start never runs and nothing is cancelled")
    func stopBetweenAdmissionAndStart() {
        let registry = StreamRegistry<Int>()
        let storage = CallbackStreamStorage<Int>(buffering: .unbounded, ordering: .arrival, registry: registry)
        #expect(registry.admit(storage))
        registry.stopAll()
        let log = StreamCallLog()
        storage.runStart { _ in
            log.append("start")
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        #expect(log.all == [], "the stop was already decided: the producer must not be started")
        var batch = RingBuffer<Int>()
        guard case .end = storage.next(into: &batch) else {
            Issue.record("a stopped subscription ends normally")
            return
        }
    }

    @Test("stop() while start runs: start returns, then its cancel is called exactly once, and next() ends")
    func stopWhileStartRuns() async throws {
        let log = StreamCallLog()
        let inStart = StreamShared(false)
        let release = StreamGate()
        // `start` holds one cooperative thread until released; the test waits without blocking one.
        let stream = CallbackStream(of: Int.self) { sink in
            log.append("start")
            inStart.value = true
            release.wait(what: "the test to release start")
            sink.yield(1)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        let consumer = Task.detached { () -> [Int] in
            var received: [Int] = []
            for try await element in stream { received.append(element) }
            return received
        }
        await streamPoll("start began") { inStart.value }
        stream.stop()  // start is running: this subscription is live and gets stopped
        release.open()
        let received = try await consumer.value
        #expect(received == [], "elements of a stopped subscription are dropped")
        await streamPoll("the producer was cancelled") { log.count(of: "cancel") == 1 }
        #expect(log.all == ["start", "cancel"])
    }

    @Test("stop() before the first next(): start never runs, next() returns nil")
    func stopBeforeFirstNext() async throws {
        let log = StreamCallLog()
        let stream = CallbackStream(of: Int.self) { _ in
            log.append("start")
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        var iterator = stream.makeAsyncIterator()
        stream.stop()
        #expect(try await iterator.next() == nil)
        #expect(log.all == [])
    }
}
