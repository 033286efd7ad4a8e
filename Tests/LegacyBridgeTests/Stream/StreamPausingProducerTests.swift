import ToolSupport
import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

/// A push producer like libcurl's: a plain thread that checks a paused flag before each event and
/// blocks while paused. It never looks at the yields' answers: only `pause` stops it.
private final class PushProducer: @unchecked Sendable {
    // @unchecked: `paused` and `cancelled` are only touched with `condition` locked; `attention` is atomic.
    private let condition = NSCondition()
    private var paused = false
    private var cancelled = false
    /// Set while paused or cancelled: the per-event check.
    private let attention = AtomicCell<Bool>(false)

    func pause() {
        condition.lock()
        paused = true
        attention.store(true, ordering: .releasing)
        condition.unlock()
    }

    func resume() {
        condition.lock()
        paused = false
        attention.store(cancelled, ordering: .releasing)
        condition.broadcast()
        condition.unlock()
    }

    func cancel() {
        condition.lock()
        cancelled = true
        attention.store(true, ordering: .releasing)
        condition.broadcast()
        condition.unlock()
    }

    var isPaused: Bool {
        condition.lock()
        defer { condition.unlock() }
        return paused
    }

    /// Blocks while paused; false once cancelled.
    func mayProduce() -> Bool {
        guard attention.load(ordering: .acquiring) else { return true }
        condition.lock()
        defer { condition.unlock() }
        while paused && !cancelled { condition.wait() }
        return !cancelled
    }
}

@Suite("Stream: backpressure holds for a producer that only stops on pause")
struct StreamPausingProducerTests {
    static let low = 256
    static let high = 1_024

    /// Runs `total` events through a `.backpressure(low: 256, high: 1024)` stream from a push
    /// producer, in batches of `batch` (1: single yields), into a consumer in a detached task.
    static func run(total: Int, batch: Int) async throws -> (received: Int, statistics: StreamStatistics) {
        let producer = PushProducer()
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: low, high: high)) { sink in
            streamThread {
                // Start once `start` has returned: before the handle exists only the answers can
                // stop a producer, and this one ignores them.
                _ = spinUntil { StreamProbe.isConsumerWaiting(sink) }
                var next = 0
                var buffer = [Int](repeating: 0, count: batch)
                while next < total {
                    guard producer.mayProduce() else { return }
                    if batch == 1 {
                        sink.yield(next)
                        next += 1
                    } else {
                        let size = min(batch, total - next)
                        for offset in 0..<size { buffer[offset] = next + offset }
                        sink.yield(contentsOf: buffer[0..<size])
                        next += size
                    }
                }
                sink.finish()
            }
            return StreamControl(
                cancel: CancelHandle { producer.cancel() },
                pause: { producer.pause() },
                resume: { producer.resume() })
        }
        return try await Task.detached {
            var iterator = stream.makeAsyncIterator()
            var expected = 0
            while let element = try await iterator.next() {
                if element != expected {
                    Issue.record("out of order: got \(element), expected \(expected)")
                    break
                }
                // Whether this consumer outpaces the producer depends on the schedule, so it
                // stalls once, at the first event, until the producer is paused: every run
                // has at least one pause and resume.
                if element == 0 {
                    await streamPoll("the producer to pause for a stalled consumer") { producer.isPaused }
                }
                expected += 1
            }
            return (expected, iterator.statistics)
        }.value
    }

    @Test(
        "single yields and batches of 64 hold at most 2 × high, with every event delivered in order",
        arguments: [1, 64])
    func peakStaysBelowTwiceHigh(batch: Int) async throws {
        let total = testsUnderSanitizer ? 200_000 : 2_000_000
        let (received, statistics) = try await Self.run(total: total, batch: batch)
        #expect(received == total)
        #expect(statistics.peakBuffered <= 2 * Self.high, "\(statistics)")
        #expect(statistics.peakBuffered <= Self.high + statistics.acceptedWhilePaused, "\(statistics)")
        #expect(statistics.acceptedWhilePaused < batch * (statistics.pauses + 1), "\(statistics)")
        #expect(statistics.pauses >= 1)
        #expect(statistics.resumes == statistics.pauses || statistics.resumes == statistics.pauses - 1)
    }
}
