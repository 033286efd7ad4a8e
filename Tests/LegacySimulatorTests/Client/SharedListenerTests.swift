// LegacySharedListener against the real simulated C SDK: one listener per topic, many consumers.

import Foundation
import TestSupport
import Testing

import LegacyBridge
@testable import LegacySimulator

/// Collects a consumer's events until `count` arrived or the stream ended.
private func collect(
    _ stream: CallbackStream<ListenerEvent>, count: Int = .max,
    joined: (@Sendable () -> Void)? = nil
) async -> (events: [ListenerEvent], error: (any Error)?) {
    var events: [ListenerEvent] = []
    do {
        var iterator = stream.makeAsyncIterator()
        while events.count < count, let event = try await iterator.next() {
            if events.isEmpty { joined?() }
            events.append(event)
        }
        return (events, nil)
    } catch {
        return (events, error)
    }
}

/// Two consumers of `listener` from its first event on. The client (one worker thread) is held
/// until both joined and the SDK listener runs. The first consumer then holds its first event
/// until the SDK listener was paused for it: with a small backpressure buffer that pause is made
/// inside a yield, before the listener can run ahead.
private func twoConsumers(
    isolation: isolated (any Actor)? = #isolation, _ listener: LegacySharedListener, _ client: LegacyClient
) async throws -> (
    first: (events: [ListenerEvent], error: (any Error)?), second: (events: [ListenerEvent], error: (any Error)?)
) {
    let blocker = try await ClientTestWorkerBlocker(client)
    let stream = listener.subscribe(buffering: .backpressure(low: 1, high: 2))
    let first = Task {
        var events: [ListenerEvent] = []
        do {
            var iterator = stream.makeAsyncIterator()
            while let event = try await iterator.next() {
                events.append(event)
                if events.count == 1 { _ = await eventually { client.counters.listenerPauses > 0 } }
            }
            return (events, nil as (any Error)?)
        } catch {
            return (events, error)
        }
    }
    let second = Task { await collect(stream) }
    try #require(await eventually { listener.statistics.consumers == 2 && listener.isRunning })
    blocker.open()
    return (await first.value, await second.value)
}

/// Waits until the SDK is done with every listener of `client`.
private func listenersSettled(
    isolation: isolated (any Actor)? = #isolation, _ client: LegacyClient
) async -> SDKCounters {
    _ = await eventually {
        let counters = client.counters
        return counters.listenerLive == 0 && counters.contextsCreated == counters.contextsReleased
            && counters.handlesOutstanding == 0
    }
    return client.counters
}

/// A listener that produces an event every 200 µs until stopped.
private let paced = SimulatedBehavior.wellBehaved.with {
    $0.chunkSize = 32
    $0.intervalMicroseconds = 200
}

@Suite("LegacySharedListener")
struct SharedListenerTests {
    @Test("Two consumers share one SDK listener; both get every event from the start, then its end")
    func twoConsumersOneListener() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1))
        let listener = LegacySharedListener(client: client, topic: 1, eventCount: 200, behavior: paced)
        let (a, b) = try await twoConsumers(listener, client)
        #expect(a.error == nil && b.error == nil)
        #expect(a.events.map(\.offset) == (0..<200).map { UInt64($0 * 32) })
        #expect(b.events == a.events)
        let counters = await listenersSettled(client)
        #expect(counters.listenerStarts == 1 && counters.listenerEnds == 1 && counters.listenerBusy == 0)
        #expect(listener.statistics.starts == 1 && listener.statistics.ends == 1)
    }

    @Test("The last consumer to leave stops the SDK listener; the next one starts a new listener")
    func lastLeaves() async throws {
        let client = try LegacyClient()
        let listener = LegacySharedListener(client: client, topic: 2, behavior: paced)
        let stream = listener.subscribe()
        let a = await collect(stream, count: 5)
        #expect(a.events.count == 5)
        var counters = await listenersSettled(client)
        #expect(counters.listenerStarts == 1 && counters.listenerStops == 1)
        let b = await collect(stream, count: 3)
        #expect(b.events.count == 3)
        #expect(b.events[0].listenerID != a.events[0].listenerID)
        counters = await listenersSettled(client)
        #expect(counters.listenerStarts == 2 && counters.listenerStops == 2)
        #expect(listener.statistics.stops == 2)
    }

    @Test("A consumer leaving while another stays keeps the SDK listener running")
    func oneOfTwoLeaves() async throws {
        let client = try LegacyClient()
        let listener = LegacySharedListener(client: client, topic: 3, behavior: paced)
        let stream = listener.subscribe()
        let leaverGone = LockedBox(false)
        // The stayer consumes until the leaver is gone, then takes five more events.
        let stayer = Task {
            var events: [ListenerEvent] = []
            var iterator = stream.makeAsyncIterator()
            var after = 0
            while after < 5, let event = try? await iterator.next() {
                events.append(event)
                if leaverGone.withLock({ $0 }) { after += 1 }
            }
            return events
        }
        #expect(await eventually { listener.statistics.consumers == 1 })
        let leaver = await collect(stream, count: 2)
        #expect(leaver.events.count == 2)
        // Its leave runs on a library thread once its iterator is gone.
        #expect(await eventually { listener.statistics.consumers == 1 })
        #expect(client.counters.listenerStops == 0)
        leaverGone.withLock { $0 = true }
        let stayed = await stayer.value
        #expect(Set(stayed.map(\.listenerID)) == [leaver.events[0].listenerID])
        let counters = await listenersSettled(client)
        #expect(counters.listenerStarts == 1 && counters.listenerStops == 1)
    }

    @Test("A listener's error is thrown to every consumer")
    func errorReachesEveryone() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1))
        let listener = LegacySharedListener(
            client: client, topic: 4, eventCount: 50,
            behavior: paced.with {
                $0.streamEnd = .failure
                $0.errorStatus = .remote
            })
        let (a, b) = try await twoConsumers(listener, client)
        #expect(a.events.count == 50 && b.events.count == 50)
        #expect((a.error as? LegacySDKError) == .remote)
        #expect((b.error as? LegacySDKError) == .remote)
        let counters = await listenersSettled(client)
        #expect(counters.listenerEnds == 1)
    }

    @Test("A second shared listener on the same topic fails its consumers with .alreadyListening")
    func topicTaken() async throws {
        let client = try LegacyClient()
        let owner = LegacySharedListener(client: client, topic: 5, behavior: paced)
        let intruder = LegacySharedListener(client: client, topic: 5, behavior: paced)
        let ownerStream = owner.subscribe()
        let refusedYet = LockedBox(false)
        // The owner consumes until the intruder was refused, so it holds the topic meanwhile.
        let running = Task {
            var count = 0
            var iterator = ownerStream.makeAsyncIterator()
            while !refusedYet.withLock({ $0 }), (try? await iterator.next()) != nil { count += 1 }
            return count
        }
        // The SDK counts the start once the topic is taken (a consumer joins before that).
        #expect(await eventually { client.counters.listenerStarts == 1 })
        let refused = await collect(intruder.subscribe())
        refusedYet.withLock { $0 = true }
        #expect((refused.error as? LegacySDKError) == .alreadyListening)
        #expect(client.counters.listenerBusy == 1)
        #expect(await running.value > 0)
        #expect(owner.statistics.starts == 1 && intruder.statistics.starts == 1)
        _ = await listenersSettled(client)
    }

    @Test("A slow consumer pauses the SDK listener for everyone; nothing is dropped for anyone")
    func backpressureBySlowest() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1))
        let listener = LegacySharedListener(
            client: client, topic: 6, eventCount: 400, behavior: .wellBehaved.with { $0.chunkSize = 8 })
        // The first consumer is the slow one: it holds its first event until the SDK listener was
        // paused for it, which starves the other one meanwhile.
        let (slow, fast) = try await twoConsumers(listener, client)
        #expect(slow.error == nil && fast.error == nil)
        #expect(slow.events.map(\.offset) == (0..<400).map { UInt64($0 * 8) })
        #expect(fast.events == slow.events)
        let counters = await listenersSettled(client)
        #expect(counters.listenerPauses > 0 && counters.listenerResumes == counters.listenerPauses)
        #expect(counters.streamEventsDroppedPaused == 0)
        #expect(counters.listenerStarts == 1)
    }

    @Test("Consumers that join and leave at random: every SDK listener is stopped or ended, nothing leaks")
    func churn() async throws {
        let rounds = testsUnderThreadSanitizer ? 100 : 400
        let client = try LegacyClient(configuration: .init(workerThreads: 4, seed: 3))
        let listener = LegacySharedListener(
            client: client, topic: 7,
            behavior: paced.with {
                $0.streamConcurrency = 3
                $0.intervalMicroseconds = 50
            })
        let stream = listener.subscribe(buffering: .backpressure(low: 4, high: 16))
        await withTaskGroup(of: Void.self) { group in
            for round in 0..<rounds {
                group.addTask {
                    let task = Task { await collect(stream, count: 1 + round % 20) }
                    if round % 7 == 0 { task.cancel() }
                    _ = await task.value
                }
            }
        }
        let counters = await listenersSettled(client)
        #expect(listener.statistics.consumers == 0)
        #expect(counters.listenerLive == 0 && counters.listenerBusy == 0)
        #expect(counters.listenerStarts == UInt64(listener.statistics.starts))
        #expect(counters.listenerStops == UInt64(listener.statistics.stops))
    }
}
