import LegacyBridge

// `--only shared`: one pthread producer (the loop of the stream section) feeds k consumers, each a
// task with its own `for try await` loop, through one `SharedSubscription` or through k independent
// `CallbackStream`s (the producer yields each event to every stream's sink). The producer starts
// once every consumer has joined; every consumer checks that it got 0 ..< n, each once, in order.
// Memory per idle consumer: N consumers suspended on one subscription, or on N streams, in a fresh
// child process each (the `memory` section's probe).

/// Figures of the `shared` section.
struct BenchSharedReport: Encodable {
    struct Fan: Encodable {
        var consumers = 0
        /// Events the producer yielded per second, every consumer having got each one.
        var sharedEventsPerSec = 0.0
        var independentEventsPerSec = 0.0
        var idiomEventsPerSec = 0.0
    }

    var fans: [Fan] = []
    var events = 0
    var rounds = 0
    var sharedBytesPerConsumer = 0.0
    var streamBytesPerConsumer = 0.0
    var idiomBytesPerConsumer = 0.0
    var memoryConsumers = 0
    var memoryRounds = 0
}

enum BenchShared {
    /// The sinks of the streams that started, handed to the producer once all are there.
    final class Sinks: Sendable {
        private let box = LockedBox<[EventSink<Int>]>([])

        func add(_ sink: EventSink<Int>) { box.withLock { $0.append(sink) } }
        var all: [EventSink<Int>] { box.withLock { $0 } }
    }

    /// One consumer: takes every event and checks that they are 0 ..< events in order.
    static func consume(_ stream: CallbackStream<Int>, events: Int) async throws {
        var expected = 0
        for try await value in stream {
            precondition(value == expected, "shared bench: a consumer got \(value) where \(expected) was due")
            expected += 1
        }
        precondition(expected == events, "shared bench: a consumer got \(expected) of \(events) events")
    }

    /// Polls (every 100 µs, an upper bound) until `ready`.
    static func waitUntil(_ ready: () -> Bool) async {
        while !ready() { try? await Task.sleep(for: .microseconds(100)) }
    }

    /// k consumers of one shared subscription; events per second of the producer.
    static func shared(consumers: Int, events: Int, on thread: BenchThread) async throws -> Double {
        let sinks = Sinks()
        let subscription = SharedSubscription(of: Int.self) { sink in
            sinks.add(sink)
            return nil
        }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<consumers {
                group.addTask { try await consume(subscription.subscribe(), events: events) }
            }
            await waitUntil { subscription.statistics.consumers == consumers && !sinks.all.isEmpty }
            let sink = sinks.all[0]
            let start = ContinuousClock.now
            thread.submit(
                .run {
                    BenchStreamProducer().produce(
                        count: events,
                        yield: {
                            _ = sink.yield($0); return false
                        }, finish: { sink.finish() })
                })
            try await group.waitForAll()
            let elapsed = ContinuousClock.now - start
            thread.confirmJobsDone()
            precondition(subscription.statistics.starts == 1, "shared bench: the producer started more than once")
            return Double(events) / elapsed.benchNanoseconds * 1e9
        }
    }

    /// k independent streams, the producer yielding each event to every one; events per second.
    static func independent(consumers: Int, events: Int, on thread: BenchThread) async throws -> Double {
        let sinks = Sinks()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<consumers {
                let stream = CallbackStream(of: Int.self) { sink in
                    sinks.add(sink)
                    return nil
                }
                group.addTask { try await consume(stream, events: events) }
            }
            await waitUntil { sinks.all.count == consumers }
            let all = sinks.all
            let start = ContinuousClock.now
            thread.submit(
                .run {
                    BenchStreamProducer().produce(
                        count: events,
                        yield: { value in
                            for sink in all { _ = sink.yield(value) }
                            return false
                        },
                        finish: { for sink in all { sink.finish() } })
                })
            try await group.waitForAll()
            let elapsed = ContinuousClock.now - start
            thread.confirmJobsDone()
            return Double(events) / elapsed.benchNanoseconds * 1e9
        }
    }

    /// k consumers of the hand-written broadcaster (an `AsyncStream` each, fed under its lock);
    /// events per second.
    static func idiom(consumers: Int, events: Int, on thread: BenchThread) async throws -> Double {
        let broadcaster = HandWrittenBroadcaster()
        return await withTaskGroup(of: Void.self) { group in
            for _ in 0..<consumers {
                let stream = broadcaster.subscribe()
                group.addTask {
                    var expected = 0
                    for await value in stream {
                        precondition(
                            value == expected, "shared bench: a consumer got \(value) where \(expected) was due")
                        expected += 1
                    }
                    precondition(expected == events, "shared bench: a consumer got \(expected) of \(events) events")
                }
            }
            await waitUntil { broadcaster.consumers == consumers }
            let start = ContinuousClock.now
            thread.submit(
                .run {
                    BenchStreamProducer().produce(
                        count: events,
                        yield: {
                            broadcaster.yield($0)
                            return false
                        }, finish: { broadcaster.finish() })
                })
            await group.waitForAll()
            let elapsed = ContinuousClock.now - start
            thread.confirmJobsDone()
            return Double(events) / elapsed.benchNanoseconds * 1e9
        }
    }

    // MARK: - Memory per idle consumer (child process)

    /// `count` consumers suspended in `next()` on the hand-written broadcaster's streams; as
    /// `suspendConsumers`.
    static func suspendIdiomConsumers(count: Int) async -> (Int, Int, Int) {
        let broadcaster = HandWrittenBroadcaster()
        let started = LockedValue(0)
        let baseline = benchResidentBytes()
        return await withTaskGroup(of: Int.self) { group in
            for _ in 0..<count {
                let stream = broadcaster.subscribe()
                group.addTask {
                    started.withLock { $0 += 1 }
                    for await _ in stream {}
                    return 1
                }
            }
            // Every consumer task ran up to its first next(), where it waits.
            await waitUntil { started.withLock { $0 } == count }
            let suspended = benchResidentBytes()
            // The end alone, in subscription order (see `HandWrittenBroadcaster.finish`).
            broadcaster.finish()
            var ended = 0
            for await value in group { ended += value }
            return (baseline, suspended, ended)
        }
    }

    /// `count` consumers suspended in `next()` on one subscription (`shared`) or on `count`
    /// streams; RSS before and while they wait; then one event and the end reach every one.
    /// Returns RSS before, RSS while suspended, and how many consumers got the event.
    static func suspendConsumers(shared: Bool, count: Int) async -> (Int, Int, Int) {
        let sinks = Sinks()
        let subscription = SharedSubscription(of: Int.self) { sink in
            sinks.add(sink)
            return nil
        }
        let streams = (0..<(shared ? 0 : count)).map { _ in
            CallbackStream(of: Int.self) { sink in
                sinks.add(sink)
                return nil
            }
        }
        let baseline = benchResidentBytes()
        return await withTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                let stream = shared ? subscription.subscribe() : streams[index]
                group.addTask {
                    var sum = 0
                    do {
                        for try await value in stream { sum += value }
                    } catch {
                        preconditionFailure("shared bench: a consumer failed: \(error)")
                    }
                    return sum
                }
            }
            if shared {
                await waitUntil { subscription.statistics.consumers == count && !sinks.all.isEmpty }
            } else {
                await waitUntil { sinks.all.count == count }
            }
            let suspended = benchResidentBytes()
            for sink in shared ? [sinks.all[0]] : sinks.all {
                _ = sink.yield(1)
                sink.finish()
            }
            var received = 0
            for await value in group { received += value }
            return (baseline, suspended, received)
        }
    }
}

extension BenchShared {
    /// Lower bound on SharedSubscription / independent CallbackStreams. The shared path takes one
    /// more lock per yield and then makes the same k sink yields, so half the independent rate is
    /// the goal; Benchmarks.md has the measured figures.
    static func throughputTarget(consumers: Int) -> Double { 0.5 }

    /// Upper bound on bytes per idle consumer, SharedSubscription / CallbackStream.
    static let memoryTarget = 1.5

    /// Lower bound on SharedSubscription / the hand-written broadcaster (issue: no slower).
    static let idiomTarget = 1.0
    /// Upper bound on bytes per idle consumer, SharedSubscription / the hand-written broadcaster.
    static let idiomMemoryTarget = 1.2
    /// Consumer counts of the runs.
    static let fans = [1, 4, 16, 64]
}
