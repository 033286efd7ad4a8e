import ToolSupport
import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

/// The producer side of a pausable fake SDK: a plain thread that honours
/// pause/resume with a condition variable.
private final class StreamPauseSwitch: @unchecked Sendable {
    // @unchecked: `paused` and `stopped` are only touched with `condition` locked.
    private let condition = NSCondition()
    private var paused = false
    private var stopped = false

    func pause() { condition.lock(); paused = true; condition.unlock() }
    func resume() { condition.lock(); paused = false; condition.broadcast(); condition.unlock() }
    func stop() { condition.lock(); stopped = true; condition.broadcast(); condition.unlock() }
    var isPaused: Bool { condition.lock(); defer { condition.unlock() }; return paused }

    /// Returns false once stopped.
    func waitWhilePaused() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while paused && !stopped { condition.wait() }
        return !stopped
    }
}

private final class StreamAtomicCounter: Sendable {
    let value = AtomicCell<Int>(0)
    func add(_ n: Int = 1) { value.add(n, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}

@Suite("Stream: CallbackStream")
struct StreamCallbackStreamTests {
    // MARK: 1. Cold, one subscription per iterator

    @Test("start runs when an iterator first asks for an element, once per iterator")
    func coldPerIterator() async throws {
        let starts = StreamShared(0)
        let stream = CallbackStream(of: Int.self) { sink in
            let run = starts.update {
                $0 += 1; return $0
            }
            sink.yield(run)
            sink.finish()
            return nil
        }
        var first = stream.makeAsyncIterator()
        var second = stream.makeAsyncIterator()
        #expect(starts.value == 0)
        #expect(try await first.next() == 1)
        #expect(starts.value == 1)
        #expect(try await second.next() == 2)
        #expect(starts.value == 2)
        #expect(try await first.next() == nil)
        #expect(try await second.next() == nil)
        #expect(starts.value == 2)
    }

    // MARK: 2. Terminal

    @Test(
        "the terminal arrives after every element yielded before it, exactly once; later yields are .terminated and counted"
    )
    func terminalFromAnotherThread() async throws {
        let late = StreamShared<[YieldOutcome]>([])
        let stream = CallbackStream(of: Int.self) { sink in
            streamThread {
                for element in 0..<10_000 { sink.yield(element) }
                sink.finish(throwing: StreamTestError(code: 9))
                sink.finish()
                late.value = [sink.yield(-1), sink.yield(contentsOf: [-2, -3])]
            }
            return nil
        }
        var received: [Int] = []
        var iterator = stream.makeAsyncIterator()
        await #expect(throws: StreamTestError(code: 9)) {
            while let element = try await iterator.next() { received.append(element) }
        }
        #expect(received == Array(0..<10_000))
        #expect(try await iterator.next() == nil)
        await streamPoll("the late yields ran") { late.value.count == 2 }
        #expect(late.value == [.terminated, .terminated])
        #expect(iterator.statistics.yieldedAfterTermination == 3)
        #expect(iterator.statistics.enqueued == 10_000)
    }

    @Test("start that throws ends the stream with its error after the elements it yielded")
    func startThrows() async throws {
        let stream = CallbackStream(of: Int.self) { sink in
            sink.yield(contentsOf: [1, 2])
            throw StreamTestError(code: 4)
        }
        var received: [Int] = []
        await #expect(throws: StreamTestError(code: 4)) {
            for try await element in stream { received.append(element) }
        }
        #expect(received == [1, 2])
    }

    // MARK: 3. Consumer termination

    @Test("cancelling the consuming task while it waits cancels the producer exactly once and throws CancellationError")
    func taskCancelWhileWaiting() async throws {
        let log = StreamCallLog()
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self) { sink in
            sinkBox.value = sink
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        let task = Task { () -> String in
            var iterator = stream.makeAsyncIterator()
            do {
                _ = try await iterator.next()
                return "returned"
            } catch is CancellationError {
                return "cancelled"
            } catch {
                return "\(error)"
            }
        }
        await streamPoll("the consumer is suspended") { sinkBox.value.map(StreamProbe.isConsumerWaiting) ?? false }
        task.cancel()
        #expect(await task.value == "cancelled")
        // The cancel runs on a library thread, and the consumer does not wait for it.
        await streamPoll("the producer was cancelled") { !log.all.isEmpty }
        #expect(log.all == ["cancel"])
        let sink = try #require(sinkBox.value)
        #expect(sink.yield(1) == .terminated)
        #expect(sink.statistics.yieldedAfterTermination == 1)
        #expect(log.all == ["cancel"])
    }

    @Test(
        "a task cancelled while it holds a batch stops within 64 elements (where cancellation is checked), drops the rest and cancels once"
    )
    func taskCancelWithBuffered() async throws {
        let log = StreamCallLog()
        let stream = CallbackStream(of: Int.self) { sink in
            sink.yield(contentsOf: 0..<200)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        let received = StreamShared<[Int]>([])
        let task = Task {
            do {
                for try await element in stream {
                    received.update { $0.append(element) }
                    if element == 2 { withUnsafeCurrentTask { $0?.cancel() } }
                }
                return false
            } catch {
                return error is CancellationError
            }
        }
        #expect(await task.value)
        // Checked when the batch was taken (element 0) and then every 64 elements.
        #expect(received.value == Array(0..<64))
        await streamPoll("the producer was cancelled") { log.all == ["cancel"] }
    }

    @Test("leaving the loop with break cancels the producer exactly once")
    func breakCancels() async throws {
        let log = StreamCallLog()
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self) { sink in
            sinkBox.value = sink
            sink.yield(contentsOf: 0..<5)
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        for try await element in stream where element == 1 { break }
        await streamPoll("cancel was called") { !log.all.isEmpty }
        #expect(log.all == ["cancel"])
        let sink = try #require(sinkBox.value)
        #expect(sink.yield(9) == .terminated)
        #expect(sink.statistics.discardedAtTermination == 0)  // the batch was already in the consumer's hands
    }

    @Test("dropping an iterator cancels the producer exactly once and discards what was buffered")
    func droppedIteratorCancels() async throws {
        let log = StreamCallLog()
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self) { sink in
            sinkBox.value = sink
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        do {
            var iterator = stream.makeAsyncIterator()
            // Feed the first element once the consumer waits for it.
            streamThread {
                _ = spinUntil { sinkBox.value.map(StreamProbe.isConsumerWaiting) ?? false }
                sinkBox.value?.yield(0)
            }
            #expect(try await iterator.next() == 0)
            sinkBox.value?.yield(contentsOf: [1, 2, 3])
            #expect(log.all.isEmpty)
            withExtendedLifetime(iterator) {}  // dropped at the end of this scope
        }
        await streamPoll("cancel was called") { !log.all.isEmpty }
        #expect(log.all == ["cancel"])
        #expect(sinkBox.value?.statistics.discardedAtTermination == 3)
    }

    // MARK: 4. Cancel before control

    @Test(
        "a consumer cancelled while start is still running gets the producer cancelled exactly once, as soon as start returns"
    )
    func cancelBeforeControl() async throws {
        let log = StreamCallLog()
        let entered = StreamGate()
        let release = StreamGate()
        let stream = CallbackStream(of: Int.self) { _ in
            entered.open()
            release.wait(what: "the test to cancel the task")
            log.append("start returns")
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        let task = Task { () -> Bool in
            do {
                for try await _ in stream {}
                return false
            } catch {
                return error is CancellationError
            }
        }
        streamThread {
            entered.wait(what: "start to run")
            task.cancel()
            log.append("task cancelled")
            release.open()
        }
        #expect(await task.value)
        // The cancel runs on a library job thread, which may come after the consumer resumed.
        await streamPoll("cancel was called") { log.count(of: "cancel") == 1 }
        #expect(log.all == ["task cancelled", "start returns", "cancel"])
    }

    // MARK: Re-entrancy

    @Test("a cancel closure that yields and finishes synchronously does not deadlock")
    func reentrantCancel() async throws {
        let outcomes = StreamShared<[YieldOutcome]>([])
        let stream = CallbackStream(of: Int.self) { sink in
            sink.yield(contentsOf: 0..<3)
            return StreamControl(
                cancel: CancelHandle {
                    outcomes.update { $0.append(sink.yield(100)) }
                    sink.finish()
                    sink.finish(throwing: StreamTestError(code: 1))
                })
        }
        for try await _ in stream { break }
        await streamPoll("cancel ran") { !outcomes.value.isEmpty }
        #expect(outcomes.value == [.terminated])
    }

    @Test("pause and resume closures that call back into the sink synchronously do not deadlock")
    func reentrantPauseResume() async throws {
        let log = StreamCallLog()
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 1, high: 2)) { sink in
            sinkBox.value = sink
            sink.yield(0)
            sink.yield(1)
            return StreamControl(
                cancel: CancelHandle { log.append("cancel") },
                pause: {
                    log.append("pause"); sinkBox.value?.yield(100)
                },
                resume: {
                    log.append("resume"); sinkBox.value?.yield(101); sinkBox.value?.finish()
                }
            )
        }
        var received: [Int] = []
        for try await element in stream { received.append(element) }
        #expect(received == [0, 1, 100, 101])
        #expect(log.all == ["pause", "resume"])
        #expect(sinkBox.value?.statistics.acceptedWhilePaused == 1)
    }

    // MARK: 5. Buffering

    @Test("drop counts of bufferingOldest/bufferingNewest are readable from the iterator and the sink")
    func dropCountsReadable() async throws {
        for (buffering, expected) in [
            (StreamBuffering.bufferingOldest(3), [0, 1, 2]), (.bufferingNewest(3), [7, 8, 9]),
        ] {
            let sinkBox = StreamShared<EventSink<Int>?>(nil)
            let stream = CallbackStream(of: Int.self, buffering: buffering) { sink in
                sinkBox.value = sink
                for element in 0..<10 { sink.yield(element) }
                sink.finish()
                return nil
            }
            var iterator = stream.makeAsyncIterator()
            #expect(iterator.statistics == StreamStatistics())
            var received: [Int] = []
            while let element = try await iterator.next() { received.append(element) }
            #expect(received == expected)
            #expect(iterator.statistics.droppedByBuffering == 7)
            #expect(iterator.statistics.dropped == 7)
            #expect(sinkBox.value?.statistics.droppedByBuffering == 7)
        }
    }

    @Test(
        "a pause due while the consumer's resume is still returning is made at once, inside the yield that reached high, on the producer's thread; the producer ends paused"
    )
    func pauseBesideReturningResume() async throws {
        // The interleaving that let a pausing producer run far past high: the consumer's thread is
        // still inside `resume` (held open here by a gate) when the producer that resume woke
        // reaches high again. The pause must not wait for the resume to return.
        let log = StreamCallLog()
        let resumeEntered = StreamGate()
        let releaseResume = StreamGate()
        let snapshot = StreamShared<[String]>([])
        let outcomes = StreamShared<[YieldOutcome]>([])
        let producerThread = StreamShared<pthread_t?>(nil)
        let pauseThreads = StreamShared<[pthread_t]>([])
        let insideYield = StreamShared(false)
        let pausedInsideYield = StreamShared<[Bool]>([])
        let producerFinished = StreamShared(false)
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 1, high: 2)) { sink in
            // Both wait in the buffer, nobody can take them while start runs: high is reached and
            // the pause is made as soon as the handle arrives.
            sink.yield(0)
            sink.yield(1)
            streamThread {
                producerThread.value = pthread_self()
                resumeEntered.wait(what: "the consumer to start its resume call")
                insideYield.value = true
                outcomes.value = [sink.yield(2), sink.yield(3)]  // back at high while the resume is in flight
                insideYield.value = false
                snapshot.value = log.all
                releaseResume.open()
                _ = spinUntil { log.all.count >= 4 }
                sink.finish()
                producerFinished.value = true
            }
            return StreamControl(
                cancel: CancelHandle { log.append("cancel") },
                pause: {
                    pauseThreads.update { $0.append(pthread_self()) }
                    pausedInsideYield.update { $0.append(insideYield.value) }
                    log.append("pause")
                },
                resume: {
                    log.append("resume begins")
                    resumeEntered.open()
                    releaseResume.wait(what: "the producer to reach high again")
                    log.append("resume ends")
                }
            )
        }
        var received: [Int] = []
        for try await element in stream {
            received.append(element)
            // Hold the consumer until the producer is done, so no later resume is decided.
            if element == 2 { await streamPoll("the producer finished") { producerFinished.value } }
        }
        #expect(received == [0, 1, 2, 3])
        #expect(outcomes.value == [.enqueued, .stopProducing], "the yield that reached high answers at once")
        #expect(
            snapshot.value == ["pause", "resume begins", "pause"],
            "the second pause is made inside the yield that reached high, while the resume is still returning")
        #expect(log.all == ["pause", "resume begins", "pause", "resume ends"])
        #expect(pausedInsideYield.value == [false, true])
        let producer = try #require(producerThread.value)
        let second = try #require(pauseThreads.value.last)
        #expect(pthread_equal(second, producer) != 0, "the pause runs on the producer's thread")
    }

    @Test(
        "with a scheduler, a pause due while a resume job runs waits for it and is made by that job right after; the yield returns at once with .stopProducing"
    )
    func serialPauseBehindResumeNeverWaits() async throws {
        let loop = TestLoop()
        defer { loop.stop() }
        let log = StreamCallLog()
        let resumeEntered = StreamGate()
        let releaseResume = StreamGate()
        let outcomes = StreamShared<[YieldOutcome]>([])
        let snapshot = StreamShared<[String]>([])
        let offLoop = StreamShared(0)
        let producerFinished = StreamShared(false)
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 1, high: 2)) { sink in
            sink.yield(0)
            sink.yield(1)  // high, while nobody can take them: paused when the handle arrives
            streamThread {
                resumeEntered.wait(what: "the loop to start the resume call")
                // The resume call is held open: neither yield may wait for it.
                outcomes.value = [sink.yield(2), sink.yield(3)]
                snapshot.value = log.all
                releaseResume.open()
                // The loop makes the pause after its resume; finishing before that would (rightly)
                // drop the pending pause, so wait for it here, in the test.
                _ = spinUntil { log.all.count == 4 }
                sink.finish()
                producerFinished.value = true
            }
            @Sendable func call(_ name: String) {
                if !loop.isCurrent { offLoop.update { $0 += 1 } }
                log.append(name)
            }
            return StreamControl(
                scheduler: loop.scheduler,
                cancel: CancelHandle { call("cancel") },
                pause: { call("pause") },
                resume: {
                    call("resume begins")
                    resumeEntered.open()
                    releaseResume.wait(what: "the producer to yield past high")
                    call("resume ends")
                }
            )
        }
        var received: [Int] = []
        for try await element in stream {
            received.append(element)
            if element == 2 { await streamPoll("the producer finished") { producerFinished.value } }
        }
        #expect(received == [0, 1, 2, 3])
        #expect(outcomes.value == [.enqueued, .stopProducing], "the yield that reached high must answer at once")
        #expect(snapshot.value == ["pause", "resume begins"], "nothing may overtake the resume job in flight")
        #expect(log.all == ["pause", "resume begins", "resume ends", "pause"])
        #expect(offLoop.value == 0)
    }

    @Test(
        "elements the consumer has taken but not yet consumed count towards high, so batching cannot double the bound")
    func batchCountsTowardsHigh() async throws {
        let log = StreamCallLog()
        let holdingBatch = StreamGate()
        let releaseConsumer = StreamGate()
        let snapshot = StreamShared<[String]>([])
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 1, high: 4)) { sink in
            sink.yield(0)
            sink.yield(1)
            streamThread {
                holdingBatch.wait(what: "the consumer to hold the batch [0, 1]")
                sink.yield(2)
                sink.yield(3)  // 2 in the consumer's batch + 2 waiting = high
                snapshot.value = log.all
                releaseConsumer.open()
                _ = spinUntil { log.all.count >= 2 }  // the consumer's resume
                sink.finish()
            }
            return StreamControl(
                cancel: CancelHandle { log.append("cancel") },
                pause: { log.append("pause") },
                resume: { log.append("resume") }
            )
        }
        var received: [Int] = []
        for try await element in stream {
            received.append(element)
            if element == 0 {
                holdingBatch.open()
                releaseConsumer.wait(what: "the producer to check for the pause")
            }
        }
        #expect(received == [0, 1, 2, 3])
        #expect(snapshot.value == ["pause"])
        #expect(log.all == ["pause", "resume"])
    }

    @Test(
        "a slow consumer over a fast producer with backpressure(low: 16, high: 64) holds at most high plus in-flight, drops none, gets all in order"
    )
    func backpressureStress() async throws {
        let total = testsUnderSanitizer ? 100_000 : 1_000_000
        let high = 64
        let stallEvery = total / 4
        let produced = StreamAtomicCounter()
        let pauseSwitch = StreamPauseSwitch()
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 16, high: high)) { sink in
            sinkBox.value = sink
            streamThread {
                for element in 0..<total {
                    guard pauseSwitch.waitWhilePaused() else { return }
                    produced.add()
                    sink.yield(element)
                }
                sink.finish()
            }
            return StreamControl(
                cancel: CancelHandle { pauseSwitch.stop() },
                pause: { pauseSwitch.pause() },
                resume: { pauseSwitch.resume() }
            )
        }
        var expected = 0
        var maxHeld = 0
        var checksum = 0
        var iterator = stream.makeAsyncIterator()
        while let element = try await iterator.next() {
            if element != expected {
                Issue.record("out of order: got \(element), expected \(expected)")
                break
            }
            // Everything produced and not yet consumed, this element included.
            maxHeld = max(maxHeld, produced.current - element)
            // A slow consumer: some work per element, and a hop every so often.
            for step in 0..<4 { checksum &+= element &* step }
            if element % 4096 == 0 { await Task.yield() }
            // Whether the work above outpaces the producer depends on the schedule,
            // so the consumer also stalls a few times until the producer is paused:
            // at least one pause and resume happen in every run.
            if element % stallEvery == 0 && total - element > 2 * high {
                await streamPoll("the producer to pause for a stalled consumer") { pauseSwitch.isPaused }
            }
            expected += 1
        }
        let stats = iterator.statistics
        #expect(expected == total)
        #expect(stats.droppedByBuffering == 0)
        #expect(stats.enqueued == total)
        #expect(stats.pauses >= 1)
        #expect(stats.resumes == stats.pauses || stats.resumes == stats.pauses - 1)
        #expect(stats.peakBuffered <= high + stats.acceptedWhilePaused, "\(stats)")
        #expect(maxHeld <= high + 1 + stats.acceptedWhilePaused, "held \(maxHeld): \(stats)")
        #expect(checksum != 1)  // keep the work
    }

    @Test(
        "invalid buffering and ordering arguments stop the program with a message",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func validatesArguments() async {
        await #expect(processExitsWith: .failure) {
            _ = CallbackStream(of: Int.self, buffering: .bufferingOldest(0)) { _ in nil }
        }
        await #expect(processExitsWith: .failure) {
            _ = CallbackStream(of: Int.self, buffering: .bufferingNewest(-1)) { _ in nil }
        }
        await #expect(processExitsWith: .failure) {
            _ = CallbackStream(of: Int.self, buffering: .backpressure(low: 4, high: 4)) { _ in nil }
        }
        await #expect(processExitsWith: .failure) {
            _ = CallbackStream(of: Int.self, buffering: .backpressure(low: -1, high: 4)) { _ in nil }
        }
        await #expect(processExitsWith: .failure) {
            _ = CallbackStream(of: Int.self, ordering: .sequenced(window: 0)) { _ in nil }
        }
    }

    // MARK: 7. Batching

    @Test("waiting elements are taken in one batch under one lock; the consumer suspends only when nothing is waiting")
    func batchesWithoutContinuations() async throws {
        let sinkBox = StreamShared<EventSink<Int>?>(nil)
        let stream = CallbackStream(of: Int.self) { sink in
            sinkBox.value = sink
            sink.yield(contentsOf: 0..<1_000)
            return nil
        }
        var iterator = stream.makeAsyncIterator()
        for expected in 0..<1_000 { #expect(try await iterator.next() == expected) }
        let sink = try #require(sinkBox.value)
        let storage = sink.storage
        #expect(storage.box.withLock { ($0.trace.batches, $0.trace.suspensions) } == (1, 0))
        // Now the consumer has to wait: exactly one suspension; woken, it takes the element as a batch.
        streamThread {
            _ = spinUntil { StreamProbe.isConsumerWaiting(sink) }
            sink.yield(1_000)
        }
        #expect(try await iterator.next() == 1_000)
        sink.finish()
        #expect(try await iterator.next() == nil)
        #expect(storage.box.withLock { ($0.trace.batches, $0.trace.suspensions) } == (2, 1))
    }

    // MARK: 6. Ordering

    @Test("concurrent producers yielding numbered events out of order are delivered in sequence order")
    func concurrentSequencedProducers() async throws {
        let threads = 4
        let window = 64
        let rounds = testsUnderSanitizer ? 200 : 1_000
        let stream = CallbackStream(of: Int.self, ordering: .sequenced(window: window)) { sink in
            // Each round spreads a shuffled block of `window` numbers over the
            // threads; a barrier between rounds keeps every number inside the window.
            let barrier = StreamBarrier(parties: threads)
            let finished = StreamAtomicCounter()
            for thread in 0..<threads {
                streamThread {
                    var generator = SplitMix64(seed: UInt64(thread))
                    for round in 0..<rounds {
                        var block = Array(0..<window)
                        var roundGenerator = SplitMix64(seed: UInt64(round))
                        block.shuffle(using: &roundGenerator)
                        let mine = block.enumerated().filter { $0.offset % threads == thread }.map { $0.element }
                        for offset in mine.shuffled(using: &generator) {
                            let sequence = round * window + offset
                            sink.yield(sequence, sequence: UInt64(sequence))
                        }
                        barrier.arriveAndWait()
                    }
                    finished.add()
                    if finished.current == threads { sink.finish() }
                }
            }
            return nil
        }
        var iterator = stream.makeAsyncIterator()
        var expected = 0
        while let element = try await iterator.next() {
            if element != expected {
                Issue.record("out of order: got \(element), expected \(expected)")
                break
            }
            expected += 1
        }
        #expect(expected == rounds * window)
        #expect(iterator.statistics.droppedStale == 0)
        #expect(iterator.statistics.skippedSequences == 0)
    }

    @Test(
        "a sequenced stream under .fail ends with SequenceGapError after the in-order prefix and cancels the producer once"
    )
    func sequencedGapFails() async throws {
        let log = StreamCallLog()
        let stream = CallbackStream(of: Int.self, ordering: .sequenced(window: 2, firstSequence: 5, gaps: .fail)) {
            sink in
            sink.yield(5, sequence: 5)
            sink.yield(7, sequence: 7)
            sink.yield(8, sequence: 8)  // 6 is missing and 8 does not fit the window
            return StreamControl(cancel: CancelHandle { log.append("cancel") })
        }
        var received: [Int] = []
        await #expect(throws: SequenceGapError(missingSequence: 6)) {
            for try await element in stream { received.append(element) }
        }
        #expect(received == [5])
        // The cancel is never made inside the yield that found the gap: a thread of the library's own makes it.
        await streamPoll("the producer was cancelled") { log.all == ["cancel"] }
        #expect(log.all == ["cancel"])
    }

    // MARK: Races

    @Test("random races of producer finish and consumer cancel never cancel twice, and never after a completed stream")
    func finishCancelRaces() async throws {
        let iterations = testsUnderSanitizer ? 100 : 300
        for iteration in 0..<iterations {
            let cancels = StreamAtomicCounter()
            let stream = CallbackStream(of: Int.self, buffering: .bufferingNewest(8)) { sink in
                streamThread {
                    for element in 0..<(iteration % 50) { sink.yield(element) }
                    sink.finish()
                }
                return StreamControl(cancel: CancelHandle { cancels.add() })
            }
            let task = Task { () -> Bool in
                do {
                    for try await _ in stream {}
                    return true
                } catch {
                    return false
                }
            }
            if iteration % 2 == 0 { task.cancel() }
            let completed = await task.value
            await streamPoll("cancel settles") { completed ? true : cancels.current <= 1 }
            #expect(cancels.current <= 1)
            if completed { #expect(cancels.current == 0) }
        }
    }
}

/// A reusable barrier for a fixed number of threads.
private final class StreamBarrier: @unchecked Sendable {
    // @unchecked: the counters are only touched with `condition` locked.
    private let condition = NSCondition()
    private let parties: Int
    private var waiting = 0
    private var generation = 0

    init(parties: Int) { self.parties = parties }

    func arriveAndWait() {
        condition.lock()
        defer { condition.unlock() }
        let myGeneration = generation
        waiting += 1
        if waiting == parties {
            waiting = 0
            generation += 1
            condition.broadcast()
            return
        }
        while generation == myGeneration { condition.wait() }
    }
}
