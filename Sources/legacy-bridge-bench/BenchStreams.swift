import LegacyBridge
import LegacySimulator

// Streams: one pthread producer (BenchStreamProducer on a BenchThread) yields 0 ..< n as fast as
// it can; a task consumes with `for try await` semantics (iterator.next()) and sums. The same
// producer loop feeds every variant; only the yield function differs.

enum BenchStreams {
    /// One timed stream run.
    struct Run: Sendable {
        var eventsPerSecond: Double
        /// Most elements held at once (CallbackStream only; 0 for AsyncStream).
        var peakBuffered: Int
        var pauses: Int
        /// Elements accepted while a pause was wanted but not yet made (CallbackStream only).
        var acceptedWhilePaused: Int = 0
        /// Mean time from `resume` to the paused producer running again (0 if never paused).
        var producerWakeUpNanoseconds: Double = 0
    }

    /// The watermarks of the backpressure variant.
    /// (16/64 pauses every 48 events and measures mostly the pause/resume round trip; 1024/4096
    /// rarely pauses at all when the consumer keeps up. 256/1024 pauses every few hundred events.)
    static let low = 256
    static let high = 1_024

    /// The watermarks of the batched backpressure pair (batched and its single-yield partner):
    /// `low` and `high` counted in batches, so a batch producer gets as many callbacks between two
    /// pauses as a single-yield one does with `low`/`high` events. With `low`/`high` events a
    /// batch producer refills `high` in 16 callbacks (~3 µs here) and every pause cycle costs two
    /// thread wake-ups (tens of µs on a VM): that figure is reported too, as information.
    static let batchedLow = low * batch
    static let batchedHigh = high * batch

    /// `AsyncStream<Int>`, `.unbounded`.
    static func asyncStream(events: Int, on thread: BenchThread) async -> Run {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .unbounded)
        let producer = BenchStreamProducer()
        let start = ContinuousClock.now
        thread.submit(
            .run {
                producer.produce(
                    count: events,
                    yield: {
                        _ = continuation.yield($0); return false
                    }, finish: { continuation.finish() })
            })
        var sum = 0
        var received = 0
        for await value in stream {
            sum &+= value
            received += 1
        }
        let elapsed = ContinuousClock.now - start
        thread.confirmJobsDone()
        check(received: received, sum: sum, events: events)
        return Run(eventsPerSecond: Double(events) / elapsed.benchNanoseconds * 1e9, peakBuffered: 0, pauses: 0)
    }

    /// `CallbackStream<Int>` with `buffering`; the producer's pause, resume and cancel back its
    /// control. `obeysAnswers`: the producer also stops itself when a yield answers
    /// `.stopProducing` (pull style); otherwise only `pause` stops it (push style).
    static func callbackStream(
        events: Int, buffering: StreamBuffering, obeysAnswers: Bool = true, on thread: BenchThread
    ) async throws -> Run {
        let producer = BenchStreamProducer()
        let stream = CallbackStream(of: Int.self, buffering: buffering) { sink in
            thread.submit(
                .run {
                    producer.produce(
                        count: events, yield: { sink.yield($0).shouldStop && obeysAnswers }, finish: { sink.finish() })
                })
            return StreamControl(
                cancel: CancelHandle { producer.cancel() }, pause: { producer.pause() }, resume: { producer.resume() })
        }
        return try await consume(stream, events: events, from: producer, on: thread)
    }

    /// The batch size of the batched variants: what an SDK hands over per callback.
    static let batch = 64

    /// `CallbackStream<Int>` fed with `yield(contentsOf:)`, `batch` events per call.
    static func batchedCallbackStream(
        events: Int, buffering: StreamBuffering, on thread: BenchThread
    ) async throws -> Run {
        let producer = BenchStreamProducer()
        let stream = CallbackStream(of: Int.self, buffering: buffering) { sink in
            thread.submit(
                .run {
                    producer.produce(
                        count: events, batch: batch, yield: { sink.yield(contentsOf: $0).shouldStop },
                        finish: { sink.finish() })
                })
            return StreamControl(
                cancel: CancelHandle { producer.cancel() }, pause: { producer.pause() }, resume: { producer.resume() })
        }
        return try await consume(stream, events: events, from: producer, on: thread)
    }

    /// Drains `stream` (timed from the first `next()`), checks that every event arrived once, and
    /// reports the rate, the stream's statistics and `producer`'s wake-ups after a resume.
    private static func consume(
        _ stream: CallbackStream<Int>, events: Int, from producer: BenchStreamProducer, on thread: BenchThread
    ) async throws -> Run {
        let start = ContinuousClock.now
        var iterator = stream.makeAsyncIterator()
        var sum = 0
        var received = 0
        while let value = try await iterator.next() {
            sum &+= value
            received += 1
        }
        let elapsed = ContinuousClock.now - start
        thread.confirmJobsDone()
        check(received: received, sum: sum, events: events)
        let statistics = iterator.statistics
        return Run(
            eventsPerSecond: Double(events) / elapsed.benchNanoseconds * 1e9,
            peakBuffered: statistics.peakBuffered, pauses: statistics.pauses,
            acceptedWhilePaused: statistics.acceptedWhilePaused,
            producerWakeUpNanoseconds: producer.resumeWakeUps.meanNanoseconds)
    }

    /// The hand-written locked channel (the ceiling of a lock-based hand-off), single sends or
    /// batches of `batch`.
    static func lockedChannel(events: Int, batched: Bool, spinning: Bool = false, on thread: BenchThread) async -> Run {
        let channel = BenchLockedChannel(spinning: spinning)
        let producer = BenchStreamProducer()
        let start = ContinuousClock.now
        thread.submit(
            .run {
                if batched {
                    producer.produce(
                        count: events, batch: batch,
                        yield: {
                            channel.send(contentsOf: $0); return false
                        }, finish: { channel.finish() })
                } else {
                    producer.produce(
                        count: events,
                        yield: {
                            channel.send($0); return false
                        }, finish: { channel.finish() })
                }
            })
        var consumer = BenchLockedChannel.Consumer(channel: channel)
        var sum = 0
        var received = 0
        while let value = await consumer.next() {
            sum &+= value
            received += 1
        }
        let elapsed = ContinuousClock.now - start
        thread.confirmJobsDone()
        check(received: received, sum: sum, events: events)
        return Run(eventsPerSecond: Double(events) / elapsed.benchNanoseconds * 1e9, peakBuffered: 0, pauses: 0)
    }

    /// The producer alone, yielding into a function that only records the value: what the producer
    /// itself costs per event, to compare with the streams it feeds.
    static func producerOnly(events: Int, on thread: BenchThread) async -> Run {
        let recorder = BenchEventRecorder()
        let nanoseconds: Double = await withUnsafeContinuation { continuation in
            thread.submit(
                .run {
                    let producer = BenchStreamProducer()
                    let start = ContinuousClock.now
                    producer.produce(
                        count: events,
                        yield: {
                            recorder.note($0); return false
                        }, finish: {})
                    continuation.resume(returning: (ContinuousClock.now - start).benchNanoseconds)
                })
        }
        thread.confirmJobsDone()
        check(received: recorder.count, sum: recorder.sum, events: events)
        return Run(eventsPerSecond: Double(events) / nanoseconds * 1e9, peakBuffered: 0, pauses: 0)
    }

    private static func check(received: Int, sum: Int, events: Int) {
        precondition(received == events, "stream delivered \(received) of \(events) events")
        precondition(sum == events * (events - 1) / 2, "stream delivered wrong values")
    }
}

/// Counts and sums events on the producer's thread; read after the producer has finished.
final class BenchEventRecorder: @unchecked Sendable {
    // @unchecked Sendable: written only by the producer thread, read after it resumed the reader's
    // continuation (which orders the writes before the reads).
    private(set) var count = 0
    private(set) var sum = 0

    @inline(never)
    func note(_ value: Int) {
        count &+= 1
        sum &+= value
    }
}
