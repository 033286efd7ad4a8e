import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

/// A stand-in for an SDK's own loop thread: a dedicated thread that runs posted jobs one at a
/// time, in order, and can be held (not draining) so a test decides when jobs run.
final class TestLoop: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var draining = true
        var stopped = false
        var thread: pthread_t?
        var posted = 0
        var ran = 0
    }

    private let state = LockedBox(State())
    private let wake = DispatchSemaphore(value: 0)

    init(draining: Bool = true) {
        state.withLock { $0.draining = draining }
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            state.withLock { $0.thread = pthread_self() }
            started.signal()
            run()
        }
        thread.name = "test-loop"
        thread.start()
        started.wait()
    }

    /// The scheduler a stream control uses to post to this loop.
    var scheduler: SDKScheduler {
        SDKScheduler { job in self.post(job) }
    }

    func post(_ job: @escaping @Sendable () -> Void) {
        state.withLock {
            $0.jobs.append(job)
            $0.posted += 1
        }
        wake.signal()
    }

    /// Whether the caller runs on the loop's thread.
    var isCurrent: Bool {
        state.withLock { state in state.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    var counts: (posted: Int, ran: Int, queued: Int) {
        state.withLock { ($0.posted, $0.ran, $0.jobs.count) }
    }

    /// Lets the loop run its queued jobs (and later ones).
    func drain() {
        state.withLock { $0.draining = true }
        wake.signal()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    private func run() {
        while true {
            wake.wait()
            while true {
                let next = state.withLock { state -> (@Sendable () -> Void)?? in
                    if state.stopped { return .some(nil) }
                    guard state.draining, !state.jobs.isEmpty else { return nil }
                    return state.jobs.removeFirst()
                }
                guard let job = next else { break }
                guard let job else { return }
                job()
                state.withLock { $0.ran += 1 }
            }
        }
    }
}

/// Whether the caller runs inside a Swift task (a consumer, a cancellation
/// handler invoked by `task.cancel()` from a task, a cooperative-pool job).
private func insideTask() -> Bool {
    withUnsafeCurrentTask { $0 != nil }
}

@Suite("Stream: the producer-control threading contract")
struct StreamThreadingContractTests {
    // MARK: With a scheduler

    @Test(
        "with a scheduler, every pause, resume and cancel runs only as a posted job, on the loop, one at a time, in decided order"
    )
    func schedulerRunsEveryCall() async throws {
        let loop = TestLoop(draining: false)
        defer { loop.stop() }
        let log = StreamCallLog()
        let offLoop = StreamShared(0)
        let inFlight = StreamShared(0)
        let maxInFlight = StreamShared(0)
        @Sendable func call(_ name: String) {
            if !loop.isCurrent { offLoop.update { $0 += 1 } }
            let now = inFlight.update {
                $0 += 1; return $0
            }
            maxInFlight.update { $0 = max($0, now) }
            log.append(name)
            inFlight.update { $0 -= 1 }
        }
        let storage = CallbackStreamStorage<Int>(buffering: .backpressure(low: 0, high: 2), ordering: .arrival)
        storage.runStart { sink in
            StreamControl(
                scheduler: loop.scheduler,
                cancel: CancelHandle { call("cancel") }, pause: { call("pause") }, resume: { call("resume") })
        }
        let sink = EventSink(storage: storage)
        #expect(sink.yield(0) == .enqueued)
        #expect(sink.yield(1) == .stopProducing, "high reached: the yield itself says stop")
        #expect(log.all.isEmpty, "the pause must not run on the yielding thread")
        var batch = RingBuffer<Int>()
        guard case .batch = storage.next(into: &batch) else { Issue.record("expected a batch"); return }
        batch.removeAll()
        guard case .suspend = storage.next(into: &batch) else { Issue.record("expected to wait"); return }
        #expect(log.all.isEmpty, "the resume must not run on the consumer")
        // One job holds the deliverer role and makes every call due, in decided order.
        loop.drain()
        await streamPoll("the loop made the pause and the resume") { log.all.count == 2 }
        #expect(log.all == ["pause", "resume"])
        storage.consumerTerminated(cancelled: true)
        await streamPoll("the loop made the cancel") { log.all.count == 3 }
        #expect(log.all == ["pause", "resume", "cancel"])
        #expect(offLoop.value == 0, "no call may run off the loop")
        #expect(maxInFlight.value == 1)
        #expect(loop.counts.posted == 2, "one job for pause+resume, one for cancel")
        #expect(sink.yield(9) == .terminated)
    }

    @Test(
        "a pull-style producer on its own loop, told to stop by the yield alone (no pause), never goes past high and finishes"
    )
    func pullStyleProducerOnItsLoop() async throws {
        let loop = TestLoop()
        defer { loop.stop() }
        let total = 2_000
        let high = 16
        let stoppedOnce = StreamShared(false)
        /// Loop-only state of the producer: the next element, and whether it was told to stop.
        final class Producer: @unchecked Sendable {
            // @unchecked Sendable: touched only by jobs on the test loop, one at a time.
            var next = 0
            var stopped = false
        }
        let producer = Producer()
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 4, high: high)) { sink in
            @Sendable func produce() {
                precondition(loop.isCurrent)
                while !producer.stopped && producer.next < total {
                    let outcome = sink.yield(producer.next)
                    producer.next += 1
                    if outcome.shouldStop {
                        producer.stopped = true
                        stoppedOnce.value = true
                    }
                }
                if producer.next == total { sink.finish() }
            }
            loop.post(produce)
            return StreamControl(
                scheduler: loop.scheduler,
                cancel: CancelHandle { producer.stopped = true },
                resume: {
                    producer.stopped = false
                    produce()
                })
        }
        var iterator = stream.makeAsyncIterator()
        var received: [Int] = []
        while let element = try await iterator.next() {
            received.append(element)
            // Stall once until the producer stopped by itself: the forced order under test.
            if received.count == 1 { await streamPoll("the producer stopped") { stoppedOnce.value } }
        }
        #expect(received == Array(0..<total))
        let statistics = iterator.statistics
        #expect(statistics.peakBuffered <= high, "a producer that obeys .stopProducing has no overshoot")
        #expect(statistics.acceptedWhilePaused == 0)
        #expect(statistics.resumes >= 1)
        #expect(statistics.pauses == statistics.resumes || statistics.pauses == statistics.resumes + 1)
    }

    // MARK: Without a scheduler

    @Test(
        "without a scheduler, a gap failure's cancel is made on another thread, after the yield that found the gap returned"
    )
    func gapCancelNeverInsideYield() async throws {
        let yieldReturned = StreamGate()
        let cancelRecorded = StreamGate()
        let cancelThread = StreamShared<pthread_t?>(nil)
        let producerThread = StreamShared<pthread_t?>(nil)
        let outcome = StreamShared<YieldOutcome?>(nil)
        let stream = CallbackStream(of: Int.self, ordering: .sequenced(window: 2, gaps: .fail)) { sink in
            streamThread {
                producerThread.value = pthread_self()
                sink.yield(0, sequence: 0)
                sink.yield(2, sequence: 2)
                // 1 is missing and 3 does not fit: the stream fails and cancels the producer. If the
                // cancel ran inside this yield, the gate below would never open (a recorded hang).
                outcome.value = sink.yield(3, sequence: 3)
                yieldReturned.open()
                // Stay alive until the cancel has recorded its thread: a thread that has exited can
                // hand its pthread_t to the next thread created, which would make the two compare
                // equal although they are different threads.
                cancelRecorded.wait(what: "the cancel to record its thread")
            }
            return StreamControl(
                cancel: CancelHandle {
                    cancelThread.value = pthread_self()
                    cancelRecorded.open()
                    yieldReturned.wait(what: "the yield that found the gap to return before the cancel runs")
                })
        }
        await #expect(throws: SequenceGapError(missingSequence: 1)) {
            for try await _ in stream {}
        }
        // The cancel records its thread before it waits for the yield, so the yield's answer may
        // still be on its way when the cancel has run: wait for both.
        await streamPoll("the cancel ran and the yield that found the gap returned") {
            cancelThread.value != nil && outcome.value != nil
        }
        #expect(outcome.value == .dropped)
        let (cancel, producer) = (try #require(cancelThread.value), try #require(producerThread.value))
        #expect(pthread_equal(cancel, producer) == 0)
    }

    @Test(
        "a consuming task cancelled while the SDK's cancel is stuck resumes at once, and the pool stays free for other tasks"
    )
    func slowCancelDelaysNobody() async throws {
        // Two streams whose cancel blocks until the test opens the gate (an SDK whose cancel takes
        // seconds). If the stream made the cancel inside the cancellation handler, or on the
        // consumer, or on the cooperative pool, the steps below could not finish before the gate opens.
        let releaseCancels = StreamGate()
        let cancelsStarted = StreamShared(0)
        let cancelsInsideTask = StreamShared(0)
        let waiting = StreamShared(0)
        func makeStream() -> CallbackStream<Int> {
            CallbackStream(of: Int.self) { sink in
                streamThread {
                    _ = spinUntil { StreamProbe.isConsumerWaiting(sink) }
                    waiting.update { $0 += 1 }
                }
                return StreamControl(
                    cancel: CancelHandle {
                        if insideTask() { cancelsInsideTask.update { $0 += 1 } }
                        cancelsStarted.update { $0 += 1 }
                        releaseCancels.wait(what: "the test to release the stuck cancels")
                    })
            }
        }
        let streams = [makeStream(), makeStream()]
        let consumers = streams.map { stream in
            Task { () -> String in
                do {
                    for try await _ in stream {}
                    return "ended"
                } catch {
                    return "\(type(of: error))"
                }
            }
        }
        await streamPoll("both consumers wait for elements") { waiting.value == 2 }
        for consumer in consumers { consumer.cancel() }
        // Both consumers resume while both cancels are still stuck.
        for consumer in consumers { #expect(await consumer.value == "CancellationError") }
        await streamPoll("both cancels started") { cancelsStarted.value == 2 }
        // An unrelated task still runs: the stuck cancels hold no pool thread.
        #expect(await Task { 42 }.value == 42)
        #expect(await Task.detached { 43 }.value == 43)
        #expect(cancelsInsideTask.value == 0, "cancel must not run inside a task or its cancellation handler")
        releaseCancels.open()
        releaseCancels.open()
    }

    @Test(
        "while start is still running, a large synchronous snapshot is accepted without waiting, whatever the watermarks"
    )
    func snapshotInsideStartNeverWaits() async throws {
        let outcomes = StreamShared<[YieldOutcome]>([])
        let log = StreamCallLog()
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 1, high: 4)) { sink in
            // 204 elements before the control exists: no way to pause yet, and no waiting.
            outcomes.value = (0..<204).map { sink.yield($0) }
            return StreamControl(
                cancel: CancelHandle {}, pause: { log.append("pause") },
                resume: {
                    log.append("resume")
                    sink.finish()
                })
        }
        var received: [Int] = []
        for try await element in stream { received.append(element) }
        #expect(received == Array(0..<204))
        #expect(
            outcomes.value == Array(repeating: .enqueued, count: 3) + Array(repeating: .stopProducing, count: 201),
            "every yield returns at once; from high on, the answer says stop")
        #expect(log.all == ["pause", "resume"], "the pause due at high is made once the control arrives")
    }

    @Test(
        "backpressure(low: 0, high:) resumes once everything held was consumed; all elements of a pausing producer arrive"
    )
    func lowZeroWorks() async throws {
        let total = 1_000
        let paused = StreamShared(false)
        let resumeSignal = DispatchSemaphore(value: 0)
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 0, high: 4)) { sink in
            streamThread {
                // Produce once start has returned (the consumer waits): a producer that finished
                // before the control arrived would rightly never be paused.
                _ = spinUntil { StreamProbe.isConsumerWaiting(sink) }
                for element in 0..<total {
                    while paused.value { _ = resumeSignal.wait(timeout: .now() + .milliseconds(100)) }
                    sink.yield(element)
                }
                sink.finish()
            }
            return StreamControl(
                cancel: CancelHandle {}, pause: { paused.value = true },
                resume: {
                    paused.value = false
                    resumeSignal.signal()
                })
        }
        var iterator = stream.makeAsyncIterator()
        var received: [Int] = []
        while let element = try await iterator.next() {
            received.append(element)
            // Stall once until the stream paused the producer: the forced order under test.
            if received.count == 1 { await streamPoll("the producer was paused") { paused.value } }
        }
        #expect(received == Array(0..<total))
        // The last pause may stay unanswered: the producer finished while paused.
        #expect((0...1).contains(iterator.statistics.pauses - iterator.statistics.resumes))
        #expect(iterator.statistics.resumes >= 1)

        // The machine: with low 0, the resume is due only when nothing is held.
        var machine = CallbackStreamStateMachine<Int>(buffering: .backpressure(low: 0, high: 2), ordering: .arrival)
        _ = machine.handleArrived(StreamControl(cancel: CancelHandle {}, pause: {}, resume: {}))
        _ = machine.yield(0)
        guard case .perform(let effects, .stopProducing) = machine.yield(1), case .make(let pause) = effects.producer
        else {
            Issue.record("reaching high must answer stopProducing and hand out the pause")
            return
        }
        #expect(pause.operation == .pause)
        _ = machine.callReturned(.pause)
        var batch = RingBuffer<Int>()
        guard case .batch(nil) = machine.next(into: &batch) else {
            Issue.record("two elements still in the consumer's batch: no resume")
            return
        }
        _ = batch.popFirst()
        _ = machine.yield(2)
        batch.removeAll()
        guard case .batch(nil) = machine.next(into: &batch) else {
            Issue.record("one element still waiting: no resume")
            return
        }
        batch.removeAll()
        guard case .suspend(let resume?) = machine.next(into: &batch) else {
            Issue.record("nothing held: the resume is due")
            return
        }
        #expect(resume.operation == .resume)
    }

    // MARK: Statistics and stop for `for try await`

    @Test("a for-try-await consumer reads the stream's statistics after the loop")
    func statisticsAfterForAwait() async throws {
        let stream = CallbackStream(of: Int.self, buffering: .bufferingNewest(2)) { sink in
            for element in 0..<10 { sink.yield(element) }
            sink.finish()
            return nil
        }
        #expect(stream.statistics == StreamStatistics())
        var received: [Int] = []
        for try await element in stream { received.append(element) }
        #expect(received == [8, 9])
        #expect(stream.statistics.droppedByBuffering == 8)
        #expect(stream.statistics.peakBuffered == 2)
    }

    @Test(
        "stop() ends a running for-try-await loop normally, cancels the producer once, and later iterations end at once"
    )
    func stopEndsSubscriptions() async throws {
        let log = StreamCallLog()
        let starts = StreamShared(0)
        let stream = CallbackStream(of: Int.self) { sink in
            starts.update { $0 += 1 }
            sink.yield(1)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        let firstReceived = StreamShared(false)
        let consumer = Task { () -> [Int] in
            var received: [Int] = []
            for try await element in stream {
                received.append(element)
                firstReceived.value = true
            }
            return received
        }
        await streamPoll("the consumer got its first element") { firstReceived.value }
        stream.stop()
        #expect(try await consumer.value == [1])
        await streamPoll("the producer was cancelled") { log.all == ["cancel"] }
        var again = stream.makeAsyncIterator()
        #expect(try await again.next() == nil)
        #expect(starts.value == 1, "a stopped stream does not start again")
        #expect(log.all == ["cancel"])
    }
}
