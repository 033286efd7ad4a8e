import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

@Suite("Stream: AsyncThrowingStream bridging")
struct StreamBridgingTests {
    @Test(
        "start runs eagerly, elements arrive before the terminal, the terminal once; later yields are .terminated and counted"
    )
    func terminalAfterElements() async throws {
        let starts = StreamShared(0)
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = AsyncThrowingStream.bridging(of: Int.self) { sink in
            starts.update { $0 += 1 }
            sinkBox.value = sink
            sink.yield(contentsOf: 0..<100)
            sink.finish(throwing: StreamTestError(code: 5))
            sink.finish()
            return nil
        }
        #expect(starts.value == 1)
        let sink = try #require(sinkBox.value)
        #expect(sink.yield(100) == .terminated)
        var received: [Int] = []
        await #expect(throws: StreamTestError(code: 5)) {
            for try await element in stream { received.append(element) }
        }
        #expect(received == Array(0..<100))
        #expect(sink.statistics.enqueued == 100)
        #expect(sink.statistics.yieldedAfterTermination == 1)
    }

    @Test("start that throws ends the stream with its error after the elements it yielded")
    func startThrows() async throws {
        let stream = AsyncThrowingStream.bridging(of: Int.self) { sink in
            sink.yield(1)
            throw StreamTestError(code: 2)
        }
        var received: [Int] = []
        await #expect(throws: StreamTestError(code: 2)) {
            for try await element in stream { received.append(element) }
        }
        #expect(received == [1])
    }

    @Test("cancelling the consuming task cancels the producer exactly once; later yields are .terminated")
    func taskCancel() async throws {
        let log = StreamCallLog()
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = AsyncThrowingStream.bridging(of: Int.self) { sink in
            sinkBox.value = sink
            sink.yield(1)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        let gotFirst = StreamShared(false)
        let task = Task {
            for try await _ in stream { gotFirst.value = true }
        }
        await streamPoll("the consumer got the first element") { gotFirst.value }
        task.cancel()
        _ = await task.result
        await streamPoll("cancel was called") { !log.all.isEmpty }
        #expect(log.all == ["cancel"])
        let sink = try #require(sinkBox.value)
        #expect(sink.yield(2) == .terminated)
        #expect(sink.statistics.yieldedAfterTermination == 1)
        #expect(log.all == ["cancel"])
    }

    @Test(
        "leaving the loop with break cancels the producer exactly once (when the stream value goes away, as AsyncThrowingStream does)"
    )
    func breakCancels() async throws {
        let log = StreamCallLog()
        do {
            let stream = AsyncThrowingStream.bridging(of: Int.self) { sink in
                sink.yield(contentsOf: 0..<5)
                return StreamControl(cancel: CancelHandle { log.append("cancel") })
            }
            for try await element in stream where element == 1 { break }
        }
        await streamPoll("cancel was called") { !log.all.isEmpty }
        #expect(log.all == ["cancel"])
    }

    @Test("a producer that finished is never cancelled")
    func finishedIsNotCancelled() async throws {
        let log = StreamCallLog()
        let stream = AsyncThrowingStream.bridging(of: Int.self) { sink in
            sink.yield(1)
            sink.finish()
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        for try await _ in stream {}
        #expect(log.all.isEmpty)
    }

    @Test("a cancel closure that yields and finishes synchronously does not deadlock")
    func reentrantCancel() async throws {
        let outcomes = StreamShared<[YieldOutcome]>([])
        do {
            let stream = AsyncThrowingStream.bridging(of: Int.self) { sink in
                sink.yield(contentsOf: 0..<3)
                return StreamControl(
                    cancel: CancelHandle {
                        outcomes.update { $0.append(sink.yield(100)) }
                        sink.finish()
                    })
            }
            for try await _ in stream { break }
        }
        await streamPoll("cancel ran") { !outcomes.value.isEmpty }
        #expect(outcomes.value == [.terminated])
    }

    @Test(
        "termination before start returned its control: cancel is made once, when the control arrives; never after a finish"
    )
    func cancelBeforeControl() async {
        // The consumer cannot exist before `bridging` returns, so the race is
        // forced on the subscription's storage: the consumer goes away first, then the handle arrives.
        let log = StreamCallLog()
        let storage = CallbackStreamStorage<Int>(buffering: .unbounded, ordering: .arrival)
        storage.consumerTerminated(cancelled: true)
        #expect(log.all.isEmpty)
        storage.handleArrived(StreamControl(cancel: CancelHandle { log.append("cancel") }))
        await streamPoll("the cancel ran") { log.all == ["cancel"] }
        storage.consumerTerminated(cancelled: true)
        #expect(
            storage.box.withLock { if case .closed = $0.producer.state { true } else { false } },
            "nothing may follow cancel"
        )

        let finished = CallbackStreamStorage<Int>(buffering: .unbounded, ordering: .arrival)
        finished.finish(nil)
        finished.handleArrived(StreamControl(cancel: CancelHandle { log.append("cancel after finish") }))
        finished.consumerTerminated(cancelled: true)
        #expect(finished.box.withLock { if case .closed = $0.producer.state { true } else { false } })
        #expect(log.all == ["cancel"])
    }

    @Test("buffering policies map onto AsyncThrowingStream's, with drop counts in the sink's statistics")
    func bufferingPolicies() async throws {
        for (buffering, expected) in [
            (StreamBuffering.bufferingOldest(2), [0, 1]), (.bufferingNewest(2), [8, 9]), (.unbounded, Array(0..<10)),
        ] {
            let sinkBox = StreamShared<EventSink<Int>?>(nil)
            let stream = AsyncThrowingStream.bridging(of: Int.self, buffering: buffering) { sink in
                sinkBox.value = sink
                for element in 0..<10 { sink.yield(element) }
                sink.finish()
                return nil
            }
            var received: [Int] = []
            for try await element in stream { received.append(element) }
            #expect(received == expected, "\(buffering)")
            #expect(sinkBox.value?.statistics.droppedByBuffering == 10 - expected.count, "\(buffering)")
        }
    }

    @Test(
        "backpressure works through the bridge: the producer is told to stop at high and resumed at low, nothing is dropped"
    )
    func backpressureBridged() async throws {
        let log = StreamCallLog()
        let outcomes = StreamShared<[YieldOutcome]>([])
        let stream = AsyncThrowingStream.bridging(of: Int.self, buffering: .backpressure(low: 1, high: 3)) { sink in
            outcomes.value = (0..<4).map { sink.yield($0) }
            return StreamControl(
                cancel: CancelHandle { log.append("cancel") }, pause: { log.append("pause") },
                resume: {
                    log.append("resume")
                    sink.yield(4)
                    sink.finish()
                })
        }
        // Every yield returns at once; from high on, the answer says stop.
        #expect(outcomes.value == [.enqueued, .enqueued, .stopProducing, .stopProducing])
        #expect(log.all == ["pause"], "the pause due at high is made when the handle arrives")
        var received: [Int] = []
        for try await element in stream { received.append(element) }
        #expect(received == [0, 1, 2, 3, 4])
        #expect(log.all == ["pause", "resume"])
    }

    @Test("sequenced producers on several threads are delivered in order; stale ones are dropped and counted")
    func sequencedConcurrent() async throws {
        let threads = 4
        let perThread = testsUnderSanitizer ? 500 : 2_000
        let window = threads * perThread  // every number fits: this checks ordering, not overflow
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = AsyncThrowingStream.bridging(of: Int.self, ordering: .sequenced(window: window)) { sink in
            sinkBox.value = sink
            let done = StreamShared(0)
            for thread in 0..<threads {
                streamThread {
                    // Thread t yields t, t + threads, …, highest first: heavily out of order.
                    for index in (0..<perThread).reversed() {
                        let sequence = index * threads + thread
                        sink.yield(sequence, sequence: UInt64(sequence))
                    }
                    if done.update({
                        $0 += 1; return $0
                    }) == threads {
                        sink.yield(0, sequence: 0)  // a duplicate of an already delivered number
                        sink.finish()
                    }
                }
            }
            return nil
        }
        var received: [Int] = []
        for try await element in stream { received.append(element) }
        #expect(received == Array(0..<(threads * perThread)))
        #expect(sinkBox.value?.statistics.droppedStale == 1)
    }

    @Test(
        "a sequenced bridge under .fail ends with SequenceGapError after the in-order prefix and cancels the producer once"
    )
    func sequencedGapFails() async throws {
        let log = StreamCallLog()
        let stream = AsyncThrowingStream.bridging(of: Int.self, ordering: .sequenced(window: 2, gaps: .fail)) { sink in
            sink.yield(0, sequence: 0)
            sink.yield(2, sequence: 2)
            sink.yield(3, sequence: 3)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        var received: [Int] = []
        await #expect(throws: SequenceGapError(missingSequence: 1)) {
            for try await element in stream { received.append(element) }
        }
        #expect(received == [0])
        await streamPoll("the producer was cancelled") { log.all == ["cancel"] }
        #expect(log.all == ["cancel"])
    }
}
