import Foundation
import Testing
@testable import LegacyBridge

/// Sequence numbers come from C: every hostile pattern through a whole stream, no trap, nothing
/// silently lost.
@Suite("Stream: hostile sequence numbers")
struct StreamSequenceNumbersTests {
    /// Runs a sequenced stream whose producer yields `sequences` (element = its index) on a plain
    /// thread, then finishes; returns what the consumer received and the statistics.
    private func run(
        _ sequences: [UInt64], window: Int, first: UInt64 = 0, gaps: StreamOrdering.GapPolicy = .skip
    ) async throws -> (received: [Int], statistics: StreamStatistics) {
        let stream = CallbackStream(
            of: Int.self, ordering: .sequenced(window: window, firstSequence: first, gaps: gaps)
        ) { sink in
            streamThread {
                for (index, sequence) in sequences.enumerated() { sink.yield(index, sequence: sequence) }
                sink.finish()
            }
            return nil
        }
        var iterator = stream.makeAsyncIterator()
        var received: [Int] = []
        while let element = try await iterator.next() { received.append(element) }
        return (received, iterator.statistics)
    }

    @Test("a stream starting just below UInt64.max wraps to 0 and delivers everything in order")
    func wrapsThroughMax() async throws {
        let sequences: [UInt64] = [.max - 1, .max - 2, 0, .max, 1, 2]
        let (received, statistics) = try await run(sequences, window: 4, first: .max - 2)
        #expect(received == [1, 0, 3, 2, 4, 5])
        #expect(statistics.droppedStale == 0 && statistics.skippedSequences == 0)
    }

    @Test("a 32-bit counter that wraps delivers all 10 elements")
    func narrowCounterWraps() async throws {
        let sequences = (0..<10).map { (UInt64(1) << 32) - 5 + UInt64($0) }.map { $0 & 0xFFFF_FFFF }
        let (received, statistics) = try await run(sequences, window: 1, first: (1 << 32) - 5)
        #expect(received == Array(0..<10))
        #expect(statistics.droppedStale == 0)
    }

    @Test("one garbage far-ahead number under .skip is dropped; the rest of the stream arrives")
    func garbageDoesNotKillTheStream() async throws {
        var sequences: [UInt64] = Array(0..<20)
        sequences.insert(1 << 41, at: 7)
        let (received, statistics) = try await run(sequences, window: 1)
        #expect(received == Array(0..<7) + Array(8..<21))
        #expect(statistics.droppedStale == 1)
        #expect(statistics.skippedSequences == 0)
    }

    @Test("the UInt64.max sentinel mid-stream is stale: dropped and counted")
    func sentinelDropped() async throws {
        let (received, statistics) = try await run([0, 1, .max, 2], window: 2)
        #expect(received == [0, 1, 3])
        #expect(statistics.droppedStale == 1)
    }

    @Test("elements held behind a missing number show in heldBehindGap until the gap is given up")
    func heldBehindGapIsVisible() async throws {
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self, ordering: .sequenced(window: 8)) { sink in
            sinkBox.value = sink
            sink.yield(0, sequence: 0)
            sink.yield(2, sequence: 2)
            sink.yield(3, sequence: 3)
            return nil
        }
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        #expect(iterator.statistics.heldBehindGap == 2)
        let sink = try #require(sinkBox.value)
        sink.finish()  // under .skip the gap is given up at the end
        #expect(try await iterator.next() == 2)
        #expect(try await iterator.next() == 3)
        #expect(try await iterator.next() == nil)
        #expect(iterator.statistics.heldBehindGap == 0)
        #expect(iterator.statistics.skippedSequences == 1)
    }

    @Test(
        "a gap timeout gives up a gap that makes no progress: the held elements arrive while the producer stays silent")
    func gapTimeoutReleasesHeldElements() async throws {
        for timeout in [Duration.zero, .milliseconds(50)] {
            let stream = CallbackStream(of: Int.self, ordering: .sequenced(window: 8, gapTimeout: timeout)) { sink in
                sink.yield(0, sequence: 0)
                sink.yield(2, sequence: 2)
                sink.yield(3, sequence: 3)
                return StreamControl(cancel: CancelHandle {})  // the producer then goes silent, without finishing
            }
            var iterator = stream.makeAsyncIterator()
            var received: [Int] = []
            for _ in 0..<3 {
                guard let element = try await iterator.next() else { break }
                received.append(element)
            }
            #expect(received == [0, 2, 3], "\(timeout)")
            #expect(iterator.statistics.gapsTimedOut == 1)
            #expect(iterator.statistics.skippedSequences == 1)
            #expect(iterator.statistics.heldBehindGap == 0)
        }
    }

    @Test("a gap timeout under .fail ends the stream with SequenceGapError and cancels the silent producer")
    func gapTimeoutFails() async throws {
        let log = StreamCallLog()
        let stream = CallbackStream(
            of: Int.self, ordering: .sequenced(window: 8, gaps: .fail, gapTimeout: .milliseconds(20))
        ) { sink in
            sink.yield(0, sequence: 0)
            sink.yield(2, sequence: 2)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        var received: [Int] = []
        await #expect(throws: SequenceGapError(missingSequence: 1)) {
            for try await element in stream { received.append(element) }
        }
        #expect(received == [0])
        await streamPoll("the producer was cancelled") { log.all == ["cancel"] }
    }

    @Test("the gap timer of a gap that was filled in time does nothing")
    func filledGapTimerIsIgnored() {
        var machine = CallbackStreamStateMachine<Int>(
            buffering: .unbounded, ordering: .sequenced(window: 8, gapTimeout: .seconds(1)))
        guard case .perform(let opened, _) = machine.yield(2, sequence: 2), case .arm(let generation) = opened.gapTimer
        else {
            Issue.record("a gap opened: a timer is armed")
            return
        }
        _ = machine.yield(0, sequence: 0)
        _ = machine.yield(1, sequence: 1)
        if case .perform = machine.gapTimerFired(generation: generation) {
            Issue.record("the timer of a filled gap must do nothing")
        }
        #expect(machine.statistics.gapsTimedOut == 0)
        #expect(machine.statistics.enqueued == 3)
    }

    @Test("a stream keeps at most one pending gap timer: a newer gap's cancels the older, the end cancels the last")
    func gapTimersDoNotPileUp() throws {
        // Runs the storage's own arming path with generations as the machine counts them, and
        // returns the last timer once the storage is gone.
        let last = try { () throws -> DeadlineTimer in
            let live = CallbackStreamStorage<Int>(
                buffering: .unbounded, ordering: .sequenced(window: 8, gapTimeout: .seconds(600)))
            func pending() -> (generation: UInt64, timer: DeadlineTimer)? { live.box.withLock { $0.pendingGapTimer } }
            live.armGapTimer(1)
            let first = try #require(pending())
            #expect(first.generation == 1 && first.timer.heapIndex >= 0, "the first gap's timer is pending")
            live.armGapTimer(2)
            let second = try #require(pending())
            #expect(second.generation == 2 && second.timer.heapIndex >= 0)
            #expect(first.timer.heapIndex == -1, "the superseded timer left the heap at once")
            // A slower producer thread arms an older generation after the newer one: the newer stays.
            live.armGapTimer(1)
            #expect(pending()?.generation == 2 && second.timer.heapIndex >= 0)
            // 100 gaps opened and filled leave one pending timer, not 100.
            var timers: [DeadlineTimer] = []
            for generation in 3...102 {
                live.armGapTimer(UInt64(generation))
                timers.append(try #require(pending()).timer)
            }
            #expect(timers.dropLast().allSatisfy { $0.heapIndex == -1 } && second.timer.heapIndex == -1)
            let last = try #require(timers.last)
            #expect(last.heapIndex >= 0)
            return last
        }()
        #expect(last.heapIndex == -1, "the subscription's end cancelled the last gap timer")
    }

    @Test("a huge window neither allocates up front nor crashes on the first next()")
    func hugeWindow() async throws {
        let (received, _) = try await run([1, 0, 2], window: Int.max)
        #expect(received == [1, 0, 2])
    }

    @Test("gap timeouts of 100 years or more arm no timer")
    func hugeGapTimeout() {
        #expect(StreamOrdering.sequenced(window: 4, gapTimeout: .seconds(Int64.max)).effectiveGapTimeout == nil)
        #expect(StreamOrdering.sequenced(window: 4, gapTimeout: .seconds(-1)).effectiveGapTimeout == .zero)
        #expect(StreamOrdering.sequenced(window: 4, gapTimeout: .seconds(3)).effectiveGapTimeout == .seconds(3))
    }
}
