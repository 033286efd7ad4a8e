// SharedSubscription on real threads. Orders are forced: the test yields only once the consumers
// it needs have joined (polled, with the hang bound as the only timeout), and a slow consumer is
// held by a gate it awaits, never by a sleep.

import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

/// A listener-style producer: counts its starts and control calls, and keeps the current sink so
/// the test can yield through it.
private final class FakeListener: Sendable {
    let log = StreamCallLog()
    private let sinks = LockedBox<[EventSink<Int>]>([])
    let scheduler: SDKScheduler?
    let startError: (any Error)?

    init(scheduler: SDKScheduler? = nil, startError: (any Error)? = nil) {
        self.scheduler = scheduler
        self.startError = startError
    }

    func start(_ sink: EventSink<Int>) throws -> StreamControl {
        log.append("start")
        sinks.withLock { $0.append(sink) }
        if let startError { throw startError }
        // The control holds the log, not the listener: the listener holds the sink, which holds
        // the subscription, which holds the control.
        let log = self.log
        return StreamControl(
            scheduler: scheduler,
            cancel: CancelHandle { log.append("cancel") },
            pause: { log.append("pause") },
            resume: { log.append("resume") })
    }

    /// The sink of the latest start.
    var sink: EventSink<Int> { sinks.withLock { $0.last! } }

    /// A subscription whose `start` is this listener's. It holds the listener weakly: the
    /// listener keeps every sink it was given (tests yield through old ones) and a sink holds its
    /// subscription, so a strong hold would be a cycle that outlives the test, which
    /// LeakSanitizer reports. A real SDK lets go of the sink when it is cancelled.
    func subscription(
        replay: SharedSubscription<Int>.Replay = .none, linger: Duration = .zero
    ) -> SharedSubscription<Int> {
        SharedSubscription(of: Int.self, replay: replay, linger: linger) { [weak self] sink in
            guard let self else { throw CancellationError() }
            return try self.start(sink)
        }
    }
}

/// An async one-way gate: `wait` suspends the task (no thread is blocked) until `open`.
private final class AsyncGate: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream<Void>.makeStream()
    }

    func open() { continuation.finish() }
    func wait() async {
        for await _ in stream {}
    }
}

/// Collects a consumer's elements until `count` or the end.
private func collect(
    _ stream: CallbackStream<Int>, count: Int = .max, firstElement: (@Sendable () async -> Void)? = nil
) async -> (elements: [Int], error: (any Error)?) {
    var elements: [Int] = []
    var iterator = stream.makeAsyncIterator()
    do {
        while elements.count < count, let element = try await iterator.next() {
            elements.append(element)
            if elements.count == 1 { await firstElement?() }
        }
        return (elements, nil)
    } catch {
        return (elements, error)
    }
}

/// A consumer on its own task. Its result is awaited with the hang bound: one that has not ended
/// by then is recorded as an issue and cancelled, so a broken contract fails instead of hanging.
private struct Consumer {
    let task: Task<(elements: [Int], error: (any Error)?), Never>
    let done: StreamShared<Bool>

    init(_ stream: CallbackStream<Int>, count: Int = .max, firstElement: (@Sendable () async -> Void)? = nil) {
        let done = StreamShared(false)
        self.done = done
        self.task = Task {
            let result = await collect(stream, count: count, firstElement: firstElement)
            done.value = true
            return result
        }
    }

    func result(sourceLocation: SourceLocation = #_sourceLocation) async -> (elements: [Int], error: (any Error)?) {
        await streamPoll("the consumer ended", sourceLocation: sourceLocation) { done.value }
        task.cancel()
        return await task.value
    }
}

@Suite("SharedSubscription")
struct SharedSubscriptionTests {
    @Test("Two consumers share one run of start; both get every element in order, then the terminal")
    func twoConsumersOneRun() async throws {
        let listener = FakeListener()
        let shared = listener.subscription()
        let stream = shared.subscribe()
        let a = Consumer(stream)
        let b = Consumer(stream)
        await streamPoll("both consumers joined") { shared.statistics.consumers == 2 }
        let sink = listener.sink
        streamThread {
            for element in 1...200 { sink.yield(element) }
            sink.finish(throwing: StreamTestError(code: 7))
        }
        let (resultA, resultB) = (await a.result(), await b.result())
        #expect(resultA.elements == Array(1...200) && resultB.elements == Array(1...200))
        #expect((resultA.error as? StreamTestError)?.code == 7 && (resultB.error as? StreamTestError)?.code == 7)
        #expect(listener.log.count(of: "start") == 1 && listener.log.count(of: "cancel") == 0)
        #expect(shared.statistics.starts == 1 && shared.statistics.failures == 1)
    }

    @Test("The last consumer to leave stops the run once, on the control's scheduler; the next one starts anew")
    func lastLeaves() async throws {
        let loop = CallsManualScheduler()
        let listener = FakeListener(scheduler: loop.scheduler)
        let shared = listener.subscription()
        let stream = shared.subscribe()
        let stayer = Consumer(stream, count: 2)
        let leaver = Consumer(stream, count: 1)
        await streamPoll("both consumers joined") { shared.statistics.consumers == 2 }
        listener.sink.yield(1)
        #expect(await leaver.result().elements == [1])
        await streamPoll("the leaver left") { shared.statistics.consumers == 1 }
        #expect(loop.pending == 0 && listener.log.count(of: "cancel") == 0)
        listener.sink.yield(2)
        #expect(await stayer.result().elements == [1, 2])
        await streamPoll("the cancel was posted") { loop.pending == 1 }
        #expect(listener.log.count(of: "cancel") == 0)
        loop.runAll()
        #expect(listener.log.all == ["start", "cancel"])
        #expect(listener.sink.yield(3) == .terminated)
        let next = Consumer(stream, count: 1)
        await streamPoll("a second run started") { listener.log.count(of: "start") == 2 }
        listener.sink.yield(4)
        #expect(await next.result().elements == [4])
        #expect(shared.statistics.starts == 2 && shared.statistics.yieldedWhileStopped == 1)
        // The second run stops the same way; a job left on the loop would hold the subscription.
        await streamPoll("the second cancel was posted") { loop.pending == 1 }
        loop.runAll()
        #expect(listener.log.all == ["start", "cancel", "start", "cancel"])
    }

    @Test("A consumer arriving while the stop is under way waits; start runs again once the cancel returned")
    func startWaitsForStop() async throws {
        let loop = CallsManualScheduler()
        let listener = FakeListener(scheduler: loop.scheduler)
        let shared = listener.subscription()
        let stream = shared.subscribe()
        let first = Consumer(stream, count: 1)
        await streamPoll("the first consumer joined") { shared.statistics.consumers == 1 }
        listener.sink.yield(1)
        #expect(await first.result().elements == [1])
        await streamPoll("the cancel was posted") { loop.pending == 1 }
        let second = Consumer(stream, count: 1)
        await streamPoll("the second consumer joined") { shared.statistics.consumers == 1 }
        #expect(listener.log.all == ["start"])
        loop.runAll()
        await streamPoll("start ran again") { listener.log.count(of: "start") == 2 }
        #expect(listener.log.all == ["start", "cancel", "start"])
        listener.sink.yield(2)
        #expect(await second.result().elements == [2])
        // The second run stops the same way; a job left on the loop would hold the subscription.
        await streamPoll("the second cancel was posted") { loop.pending == 1 }
        loop.runAll()
        #expect(listener.log.all == ["start", "cancel", "start", "cancel"])
    }

    @Test("A consumer arriving within the linger keeps the run; once the linger passes, the run stops")
    func linger() async throws {
        let listener = FakeListener()
        let keeper = listener.subscription(linger: .seconds(600))
        let stream = keeper.subscribe()
        let first = Consumer(stream, count: 1)
        await streamPoll("the first consumer joined") { keeper.statistics.consumers == 1 }
        listener.sink.yield(1)
        #expect(await first.result().elements == [1])
        await streamPoll("the first consumer left") { keeper.statistics.consumers == 0 }
        let second = Consumer(stream, count: 1)
        await streamPoll("the second consumer joined") { keeper.statistics.consumers == 1 }
        listener.sink.yield(2)
        #expect(await second.result().elements == [2])
        #expect(keeper.statistics.lingerRescues == 1 && keeper.statistics.starts == 1)

        let brief = FakeListener()
        let stopper = brief.subscription(linger: .milliseconds(1))
        let third = Consumer(stopper.subscribe(), count: 1)
        await streamPoll("the third consumer joined") { stopper.statistics.consumers == 1 }
        brief.sink.yield(3)
        #expect(await third.result().elements == [3])
        await streamPoll("the linger passed and the run stopped") { brief.log.count(of: "cancel") == 1 }
        #expect(stopper.statistics.stops == 1 && stopper.statistics.lingerRescues == 0)
        #expect(listener.log.count(of: "cancel") == 0)
    }

    @Test("After the end, a late consumer gets the replay and the terminal until restart(); then start runs again")
    func terminalReplayedUntilRestart() async throws {
        let listener = FakeListener()
        let shared = listener.subscription(replay: .last(2))
        let stream = shared.subscribe()
        let present = Consumer(stream)
        await streamPoll("a consumer joined") { shared.statistics.consumers == 1 }
        for element in 1...5 { listener.sink.yield(element) }
        listener.sink.finish(throwing: StreamTestError(code: 3))
        #expect(await present.result().elements == [1, 2, 3, 4, 5])
        for _ in 0..<2 {
            let late = await Consumer(stream).result()
            #expect(late.elements == [4, 5] && (late.error as? StreamTestError)?.code == 3)
        }
        #expect(listener.log.count(of: "start") == 1 && shared.statistics.terminalsReplayed == 2)
        shared.restart()
        let fresh = Consumer(stream, count: 1)
        await streamPoll("a second run started") { listener.log.count(of: "start") == 2 }
        listener.sink.yield(6)
        #expect(await fresh.result().elements == [6])
    }

    @Test("A new consumer gets the latest element before the live ones")
    func replayLatest() async throws {
        let listener = FakeListener()
        let shared = listener.subscription(replay: .latest)
        let stream = shared.subscribe()
        let first = Consumer(stream)
        await streamPoll("a consumer joined") { shared.statistics.consumers == 1 }
        listener.sink.yield(1)
        listener.sink.yield(2)
        let second = Consumer(stream)
        await streamPoll("a second consumer joined") { shared.statistics.consumers == 2 }
        listener.sink.yield(3)
        listener.sink.finish()
        #expect(await first.result().elements == [1, 2, 3])
        #expect(await second.result().elements == [2, 3])
        #expect(shared.statistics.replayed == 1)
    }

    @Test("A slow consumer with a dropping policy drops for itself alone, counted; the producer never waits")
    func slowConsumerDrops() async throws {
        let listener = FakeListener()
        let shared = listener.subscription()
        let gate = AsyncGate()
        let slowStream = shared.subscribe(buffering: .bufferingNewest(2))
        let slowHolds = StreamShared(false)
        let slow = Consumer(
            slowStream,
            firstElement: {
                slowHolds.value = true
                await gate.wait()
            })
        let fast = Consumer(shared.subscribe())
        await streamPoll("both consumers joined") { shared.statistics.consumers == 2 }
        listener.sink.yield(0)
        await streamPoll("the slow consumer holds its first element") { slowHolds.value }
        for element in 1...100 { listener.sink.yield(element) }
        listener.sink.finish()
        #expect(await fast.result().elements == Array(0...100))
        gate.open()
        #expect(await slow.result().elements == [0, 99, 100])
        #expect(slowStream.statistics.droppedByBuffering == 98)
    }

    @Test("A consumer over its limit alone ends with SlowConsumerError after what it holds; the others go on")
    func slowConsumerEnded() async throws {
        let listener = FakeListener()
        let shared = listener.subscription()
        let gate = AsyncGate()
        let slowHolds = StreamShared(false)
        let slow = Consumer(
            shared.subscribe(failingAbove: 2),
            firstElement: {
                slowHolds.value = true
                await gate.wait()
            })
        let fast = Consumer(shared.subscribe())
        await streamPoll("both consumers joined") { shared.statistics.consumers == 2 }
        #expect(listener.sink.yield(0) == .enqueued)
        await streamPoll("the slow consumer holds its first element") { slowHolds.value }
        // It holds 0 in its batch: 1 and 2 make three held, over the limit of 2.
        #expect(listener.sink.yield(1) == .enqueued)
        #expect(shared.statistics.slowConsumersEnded == 0)
        #expect(listener.sink.yield(2) == .enqueued)
        #expect(shared.statistics.slowConsumersEnded == 1 && shared.statistics.consumers == 1)
        for element in 3...50 { #expect(listener.sink.yield(element) == .enqueued) }
        listener.sink.finish()
        #expect(await fast.result().elements == Array(0...50))
        gate.open()
        let slowResult = await slow.result()
        #expect(slowResult.elements == [0, 1, 2])
        #expect(slowResult.error as? SlowConsumerError == SlowConsumerError(limit: 2))
        #expect(listener.log.all == ["start"])
        #expect(shared.statistics.pauses == 0 && shared.statistics.finishes == 1)
    }

    @Test("A sole consumer ended as slow leaves: the producer is stopped as when the last consumer leaves")
    func lastSlowConsumerStops() async throws {
        let listener = FakeListener()
        let shared = listener.subscription()
        let gate = AsyncGate()
        let holds = StreamShared(false)
        let slow = Consumer(
            shared.subscribe(failingAbove: 1),
            firstElement: {
                holds.value = true
                await gate.wait()
            })
        await streamPoll("the consumer joined") { shared.statistics.consumers == 1 }
        listener.sink.yield(0)
        await streamPoll("the consumer holds its first element") { holds.value }
        listener.sink.yield(1)
        #expect(shared.statistics.slowConsumersEnded == 1 && shared.statistics.stops == 1)
        await streamPoll("the producer was cancelled") { listener.log.count(of: "cancel") == 1 }
        #expect(listener.sink.yield(2) == .terminated)
        gate.open()
        let result = await slow.result()
        #expect(result.elements == [0, 1] && result.error as? SlowConsumerError == SlowConsumerError(limit: 1))
        #expect("\(SlowConsumerError(limit: 1))".contains("more than 1 elements"))
    }

    @Test("Backpressure by the slowest: one consumer at high pauses the producer, its drain resumes it")
    func backpressureBySlowest() async throws {
        let listener = FakeListener()
        let shared = listener.subscription()
        let gate = AsyncGate()
        let slowHolds = StreamShared(false)
        let slow = Consumer(
            shared.subscribe(buffering: .backpressure(low: 0, high: 2)),
            firstElement: {
                slowHolds.value = true
                await gate.wait()
            })
        let fast = Consumer(shared.subscribe())
        await streamPoll("both consumers joined") { shared.statistics.consumers == 2 }
        #expect(listener.sink.yield(1) == .enqueued)
        await streamPoll("the slow consumer holds its first element") { slowHolds.value }
        #expect(listener.sink.yield(2) == .stopProducing)
        #expect(listener.log.all == ["start", "pause"])
        #expect(listener.sink.yield(3) == .stopProducing)
        gate.open()
        // The slow consumer comes back for more with nothing held: the resume.
        await streamPoll("the producer was resumed") { listener.log.count(of: "resume") == 1 }
        #expect(listener.sink.yield(4) == .enqueued)
        listener.sink.finish()
        #expect(await fast.result().elements == [1, 2, 3, 4])
        #expect(await slow.result().elements == [1, 2, 3, 4])
        #expect(listener.log.all == ["start", "pause", "resume"])
        #expect(shared.statistics.pauses == 1 && shared.statistics.resumes == 1)
    }

    @Test(
        "Yields from two threads reach every consumer in one order, the terminal after them: an element held up in its delivery is neither overtaken nor lost"
    )
    func concurrentYieldsKeepOneOrder() async throws {
        // The first pause is made inline, inside the delivery of element 2 to the slow consumer
        // (the first to join): the producer's pause holds that thread there, before the other
        // consumer got 2, while this task yields 3 and finishes.
        let heldInDelivery = StreamShared(false)
        let release = DispatchSemaphore(value: 0)
        let firstPause = StreamShared(true)
        // The box holds the sink, which holds the subscription, which holds `start`, which holds
        // the box: emptied at the end, or LeakSanitizer reports the cycle.
        let sinks = LockedBox<EventSink<Int>?>(nil)
        defer { sinks.withLock { $0 = nil } }
        let shared = SharedSubscription(of: Int.self) { sink in
            sinks.withLock { $0 = sink }
            return StreamControl(
                cancel: CancelHandle {},
                pause: {
                    guard firstPause.value else { return }
                    firstPause.value = false
                    heldInDelivery.value = true
                    release.wait()
                },
                resume: {})
        }
        let gate = AsyncGate()
        let slowHolds = StreamShared(false)
        let slow = Consumer(
            shared.subscribe(buffering: .backpressure(low: 0, high: 2)),
            firstElement: {
                slowHolds.value = true
                await gate.wait()
            })
        await streamPoll("the slow consumer joined") { shared.statistics.consumers == 1 }
        let other = Consumer(shared.subscribe())
        await streamPoll("both consumers joined") { shared.statistics.consumers == 2 }
        let sink = try #require(sinks.withLock { $0 })
        #expect(sink.yield(1) == .enqueued)
        await streamPoll("the slow consumer holds its first element") { slowHolds.value }
        let producer = Thread { _ = sink.yield(2) }
        producer.start()
        await streamPoll("the yield of 2 is held inside its delivery") { heldInDelivery.value }
        #expect(sink.yield(3) != .terminated)
        sink.finish()
        release.signal()
        gate.open()
        #expect(await other.result().elements == [1, 2, 3])
        #expect(await slow.result().elements == [1, 2, 3])
    }

    @Test("Four producer threads yield at once: every consumer gets every element once, all in the same order")
    func concurrentProducersOneOrder() async throws {
        let sinks = LockedBox<EventSink<Int>?>(nil)
        defer { sinks.withLock { $0 = nil } }  // the cycle through `start`, as above
        let shared = SharedSubscription(of: Int.self) { sink in
            sinks.withLock { $0 = sink }
            return nil
        }
        let consumers = (0..<3).map { _ in Consumer(shared.subscribe()) }
        await streamPoll("the consumers joined") { shared.statistics.consumers == 3 }
        let sink = try #require(sinks.withLock { $0 })
        let (threads, each) = (4, 2_000)
        let done = StreamShared(0)
        for thread in 0..<threads {
            Thread {
                for index in 0..<each { _ = sink.yield(thread * each + index) }
                done.update { $0 += 1 }
            }.start()
        }
        await streamPoll("the producer threads finished") { done.value == threads }
        sink.finish()
        var orders: [[Int]] = []
        for consumer in consumers { orders.append(await consumer.result().elements) }
        #expect(orders.allSatisfy { $0.count == threads * each })
        #expect(Set(orders[0]) == Set(0..<(threads * each)))
        #expect(orders.allSatisfy { $0 == orders[0] })
        // Each thread's own yields keep their order.
        for thread in 0..<threads {
            let mine = orders[0].filter { $0 / each == thread }
            #expect(mine == Array((thread * each)..<((thread + 1) * each)))
        }
    }

    @Test("A start that throws fails the consumers present and, until restart(), the later ones")
    func startThrows() async throws {
        let listener = FakeListener(startError: StreamTestError(code: 9))
        let shared = listener.subscription()
        for _ in 0..<2 {
            let result = await Consumer(shared.subscribe()).result()
            #expect(result.elements.isEmpty && (result.error as? StreamTestError)?.code == 9)
        }
        #expect(listener.log.count(of: "start") == 1 && shared.statistics.failures == 1)
    }
}
