// CallbackStream(scheduler:): `start` posted to the SDK's thread. Each order is forced by holding
// the loop (a TestLoop that does not drain until told) or by a gate inside `start`; nothing sleeps.

import ToolSupport
import Dispatch
import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

extension TestLoop {
    /// This loop's scheduler, with `isCurrent`, as an `SDKLoop` gives it.
    var currentAwareScheduler: SDKScheduler {
        SDKScheduler(post: { job in self.post(job) }, isCurrent: { self.isCurrent })
    }
}

/// A loop-driven SDK like an MQTT client on its network loop: it delivers one event per loop job,
/// on the loop's thread, and never looks at the yields' answers. Only `pause` stops it. Every
/// call must come from the loop's thread; calls from elsewhere are counted.
private final class LoopDrivenProducer: Sendable {
    private struct State {
        var next = 0
        var paused = false
        var cancelled = false
        var scheduled = false
        var sink: EventSink<Int>?
    }

    let post: @Sendable (@escaping @Sendable () -> Void) -> Void
    let isCurrent: @Sendable () -> Bool
    let total: Int
    private let state = LockedBox(State())
    let offLoopCalls = AtomicCell<Int>(0)
    let pauses = AtomicCell<Int>(0)
    let resumes = AtomicCell<Int>(0)
    let cancels = AtomicCell<Int>(0)

    init(loop: TestLoop, total: Int) {
        self.post = { job in loop.post(job) }
        self.isCurrent = { loop.isCurrent }
        self.total = total
    }

    init(loop: SDKLoop, total: Int) {
        self.post = { job in try? loop.post(job) }
        self.isCurrent = { loop.isCurrent }
        self.total = total
    }

    var isPaused: Bool { state.withLock { $0.paused } }

    private func checkThread() {
        if !isCurrent() { offLoopCalls.add(1, ordering: .relaxed) }
    }

    func subscribe(_ sink: EventSink<Int>) -> StreamControl {
        checkThread()
        state.withLock { $0.sink = sink }
        schedule()
        return StreamControl(
            cancel: CancelHandle { [self] in
                checkThread()
                cancels.add(1, ordering: .relaxed)
                state.withLock { $0.cancelled = true }
            },
            pause: { [self] in
                checkThread()
                pauses.add(1, ordering: .relaxed)
                state.withLock { $0.paused = true }
            },
            resume: { [self] in
                checkThread()
                resumes.add(1, ordering: .relaxed)
                state.withLock { $0.paused = false }
                schedule()
            })
    }

    /// Posts the next delivery job unless one is queued.
    private func schedule() {
        let post = state.withLock { state -> Bool in
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        if post { self.post { self.deliver() } }
    }

    /// One loop job: one event, then the next job is posted. A pause posted by that event's
    /// yield is queued before it.
    private func deliver() {
        checkThread()
        let (event, sink) = state.withLock { state -> (Int?, EventSink<Int>?) in
            state.scheduled = false
            guard !state.paused, !state.cancelled, state.next <= total else { return (nil, nil) }
            defer { state.next += 1 }
            return (state.next, state.sink)
        }
        guard let event, let sink else { return }
        if event == total {
            sink.finish()
            return
        }
        _ = sink.yield(event)
        schedule()
    }
}

@Suite("Stream: start posted through a scheduler")
struct StreamPostedStartTests {
    @Test(
        "start runs on the SDK's thread; a loop-driven SDK that ignores the answers is paused at high with no overshoot; every control call runs on the loop"
    )
    func loopDrivenProducerHoldsHigh() async throws {
        let loop = TestLoop()
        defer { loop.stop() }
        let total = 2_000
        let high = 16
        let producer = LoopDrivenProducer(loop: loop, total: total)
        let startOnLoop = StreamShared<Bool?>(nil)
        let stream = CallbackStream(
            of: Int.self, buffering: .backpressure(low: 4, high: high), scheduler: loop.currentAwareScheduler
        ) { sink in
            startOnLoop.value = loop.isCurrent
            return producer.subscribe(sink)
        }
        var received: [Int] = []
        var stalls = 0
        var iterator = stream.makeAsyncIterator()
        while let element = try await iterator.next() {
            received.append(element)
            // The consumer stalls now and then until the producer is paused: pauses are forced.
            if element % 500 == 0 {
                await streamPoll("the producer to pause for a stalled consumer") { producer.isPaused }
                stalls += 1
            }
        }
        let statistics = iterator.statistics
        #expect(startOnLoop.value == true)
        #expect(received == Array(0..<total))
        #expect(stalls == 4)
        #expect(statistics.pauses >= 4 && producer.pauses.load(ordering: .relaxed) == statistics.pauses)
        #expect(statistics.acceptedWhilePaused == 0, "the pause job is queued before the next event: \(statistics)")
        #expect(statistics.peakBuffered <= high, "\(statistics)")
        #expect(producer.offLoopCalls.load(ordering: .relaxed) == 0)
        #expect(producer.cancels.load(ordering: .relaxed) == 0, "a finished producer is not cancelled")
    }

    @Test(
        "over an SDKLoop: start and every control call run on the loop thread, the bound holds; once the loop shut down, an iteration throws its error and start never runs"
    )
    func overSDKLoop() async throws {
        let wake = DispatchSemaphore(value: 0)
        let loop = try SDKLoop(
            name: "posted-start", driver: .iterating(runOnce: { wake.wait() }, wake: { wake.signal() }))
        let total = 1_000
        let high = 8
        let producer = LoopDrivenProducer(loop: loop, total: total)
        let starts = AtomicCell<Int>(0)
        let stream = CallbackStream(
            of: Int.self, buffering: .backpressure(low: 2, high: high), scheduler: loop.scheduler
        ) { sink in
            starts.add(1, ordering: .relaxed)
            return producer.subscribe(sink)
        }
        var received: [Int] = []
        var iterator = stream.makeAsyncIterator()
        while let element = try await iterator.next() {
            received.append(element)
            if element == 0 {
                await streamPoll("the producer to pause for a stalled consumer") { producer.isPaused }
            }
        }
        #expect(received == Array(0..<total))
        #expect(iterator.statistics.peakBuffered <= high && iterator.statistics.acceptedWhilePaused == 0)
        #expect(producer.offLoopCalls.load(ordering: .relaxed) == 0)
        await loop.shutdown()
        await #expect(throws: OffloadError.shutDown) {
            for try await _ in stream {}
        }
        #expect(starts.load(ordering: .relaxed) == 1)
    }

    @Test("a consumer cancelled before the posted start began: the iteration ends at once and start never runs")
    func cancelledBeforeStart() async throws {
        let loop = TestLoop(draining: false)
        defer { loop.stop() }
        let starts = AtomicCell<Int>(0)
        let stream = CallbackStream(of: Int.self, scheduler: loop.currentAwareScheduler) { sink in
            starts.add(1, ordering: .relaxed)
            sink.finish()
            return nil
        }
        let consumer = Task {
            for try await _ in stream {}
        }
        await streamPoll("the start job is posted") { loop.counts.posted == 1 }
        consumer.cancel()
        await #expect(throws: CancellationError.self) { try await consumer.value }
        #expect(loop.counts.ran == 0, "the consumer did not wait for the loop")
        loop.drain()
        await streamPoll("the loop ran the start job") { loop.counts.ran == 1 }
        #expect(starts.load(ordering: .relaxed) == 0)
    }

    @Test("stop() before the posted start began: next() returns nil and start never runs")
    func stoppedBeforeStart() async throws {
        let loop = TestLoop(draining: false)
        defer { loop.stop() }
        let starts = AtomicCell<Int>(0)
        let stream = CallbackStream(of: Int.self, scheduler: loop.currentAwareScheduler) { sink in
            starts.add(1, ordering: .relaxed)
            sink.yield(1)
            return nil
        }
        let consumer = Task { () -> Int? in
            var iterator = stream.makeAsyncIterator()
            return try await iterator.next()
        }
        await streamPoll("the start job is posted") { loop.counts.posted == 1 }
        stream.stop()
        #expect(try await consumer.value == nil)
        loop.drain()
        await streamPoll("the loop ran the start job") { loop.counts.ran == 1 }
        #expect(starts.load(ordering: .relaxed) == 0)
    }

    @Test(
        "a consumer cancelled while the posted start runs: its control is cancelled once, after start returned, on the loop"
    )
    func cancelledDuringStart() async throws {
        let loop = TestLoop()
        defer { loop.stop() }
        let startEntered = StreamShared(false)
        let releaseStart = StreamGate()
        let log = StreamCallLog()
        let stream = CallbackStream(of: Int.self, scheduler: loop.currentAwareScheduler) { _ in
            startEntered.value = true
            releaseStart.wait(what: "the consumer to be cancelled")
            log.append("start returns")
            return StreamControl(
                cancel: CancelHandle { log.append(loop.isCurrent ? "cancel on loop" : "cancel off loop") })
        }
        let consumer = Task {
            for try await _ in stream {}
        }
        // Polled, not waited for on a semaphore: the consumer needs a cooperative thread to post
        // `start`, and this test must not hold one of the pool's few threads meanwhile.
        await streamPoll("the loop to run start") { startEntered.value }
        consumer.cancel()
        await #expect(throws: CancellationError.self) { try await consumer.value }
        #expect(log.all.isEmpty, "the consumer resumed while start still ran")
        releaseStart.open()
        await streamPoll("the control was cancelled") { log.all.count == 2 }
        #expect(log.all == ["start returns", "cancel on loop"])
    }

    @Test("a scheduler that refuses the post ends the iteration with its error; start never runs")
    func refusedPost() async throws {
        struct LoopGone: Error, Equatable {}
        let starts = AtomicCell<Int>(0)
        let stream = CallbackStream(
            of: Int.self, scheduler: SDKScheduler(post: { _ in throw LoopGone() }, isCurrent: { false })
        ) { _ in
            starts.add(1, ordering: .relaxed)
            return nil
        }
        await #expect(throws: LoopGone.self) {
            for try await _ in stream {}
        }
        #expect(starts.load(ordering: .relaxed) == 0)
    }

    @Test("a consumer already on the SDK's thread runs start inline, with no post")
    func inlineWhenCurrent() async throws {
        let posts = AtomicCell<Int>(0)
        let stream = CallbackStream(
            of: Int.self,
            scheduler: SDKScheduler(
                post: { job in
                    posts.add(1, ordering: .relaxed); job()
                }, isCurrent: { true })
        ) { sink in
            sink.yield(7)
            sink.finish()
            return nil
        }
        var received: [Int] = []
        for try await element in stream { received.append(element) }
        #expect(received == [7])
        #expect(posts.load(ordering: .relaxed) == 0)
    }

    @Test("a control that names its own scheduler keeps it; one that names none uses the stream's")
    func controlSchedulerPrecedence() async throws {
        let streamLoop = TestLoop()
        let controlLoop = TestLoop()
        defer {
            streamLoop.stop()
            controlLoop.stop()
        }
        let log = StreamCallLog()
        for ownScheduler in [false, true] {
            let stream = CallbackStream(of: Int.self, scheduler: streamLoop.currentAwareScheduler) { sink in
                sink.yield(1)
                return StreamControl(
                    scheduler: ownScheduler ? controlLoop.scheduler : nil,
                    cancel: CancelHandle {
                        log.append(
                            streamLoop.isCurrent ? "stream loop" : controlLoop.isCurrent ? "control loop" : "elsewhere")
                    })
            }
            for try await _ in stream { break }
            await streamPoll("the control was cancelled") { log.all.count == (ownScheduler ? 2 : 1) }
        }
        #expect(log.all == ["stream loop", "control loop"])
    }
}
