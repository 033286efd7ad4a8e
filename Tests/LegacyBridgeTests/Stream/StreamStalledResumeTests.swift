// A producer-control call in flight on a descheduled thread must not let the producer run away.

import Dispatch
import Foundation
import Synchronization
import Testing

@testable import LegacyBridge

/// The producer's side of the stalled-resume scenario.
private final class StreamStallingProducer: Sendable {
    let paused = Atomic<Bool>(false)
    let resumes = Atomic<Int>(0)
    let pauses = Atomic<Int>(0)
    let cancelled = Atomic<Bool>(false)

    /// How the stream controls the producer. The first resume call takes 200 ms after the
    /// producer was resumed, as when the consumer's thread is descheduled right there.
    var control: StreamControl {
        StreamControl(
            cancel: { self.cancelled.store(true, ordering: .releasing) },
            pause: {
                self.pauses.add(1, ordering: .relaxed)
                self.paused.store(true, ordering: .releasing)
            },
            resume: {
                self.paused.store(false, ordering: .releasing)
                if self.resumes.add(1, ordering: .relaxed).newValue == 1 { usleep(200_000) }
            })
    }

    /// Yields `count` numbers from a plain thread, checking the pause before every one (as the
    /// SDK's producer does).
    func run(count: Int, into sink: EventSink<Int>) {
        let thread = Thread {
            for number in 0..<count {
                while self.paused.load(ordering: .acquiring) && !self.cancelled.load(ordering: .acquiring) {
                    usleep(20)
                }
                if self.cancelled.load(ordering: .acquiring) { return }
                sink.yield(number)
            }
            sink.finish()
        }
        thread.start()
    }
}

@Suite("Stream: a pause held up behind a stalled resume call")
struct StreamStalledResumeTests {
    @Test("a pause that becomes due while another thread is still inside a resume call keeps holding the producer")
    func pauseDueBehindStalledResume() async throws {
        let high = 16
        let count = 20_000
        let producer = StreamStallingProducer()
        let stream = CallbackStream<Int>(buffering: .backpressure(low: 4, high: high)) { sink in
            producer.run(count: count, into: sink)
            return producer.control
        }
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        // Nothing is consumed until the stream paused the producer at `high`.
        #expect(await streamStalledEventually { producer.pauses.load(ordering: .relaxed) == 1 })
        // Draining resumes the producer; that resume call stalls for 200 ms on this thread.
        var expected = 1
        while let number = try await iterator.next() {
            #expect(number == expected)
            expected += 1
        }
        #expect(expected == count)
        // The producer honours every pause before its next element, so only the 10 ms waits of
        // the yields behind the stalled resume could let it past `high`: 20 elements at most in
        // 200 ms, with a margin.
        #expect(iterator.statistics.peakBuffered <= high + 100)
    }
}

@Suite("Stream: a pause held up because start has not returned its control")
struct StreamStalledStartTests {
    @Test("a pause that becomes due while start is still running holds a producer on another thread")
    func pauseDueBeforeControl() async throws {
        let high = 16
        let count = 5_000
        let producer = StreamStallingProducer()
        let stream = CallbackStream<Int>(buffering: .backpressure(low: 4, high: high)) { sink in
            producer.run(count: count, into: sink)
            // A start that is slow to return its control (a descheduled thread): the producer
            // runs meanwhile, and the pause it makes due cannot be made before the control exists.
            usleep(200_000)
            return producer.control
        }
        var iterator = stream.makeAsyncIterator()
        var expected = 0
        while let number = try await iterator.next() {
            #expect(number == expected)
            expected += 1
        }
        #expect(expected == count)
        #expect(producer.pauses.load(ordering: .relaxed) >= 1)
        // Held at most 10 ms per element while start stalls for 200 ms: about 20 past `high`.
        #expect(iterator.statistics.peakBuffered <= high + 100)
    }
}

/// Polls `condition` (1 ms steps) up to the hang bound: an upper bound, not a schedule.
private func streamStalledEventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(testHangBoundSeconds)
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
