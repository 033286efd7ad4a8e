// LegacyClient.download against the real simulated C SDK, in every stream behaviour the SDK has.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

/// A named stream behaviour (readable test arguments).
struct ClientTestStreamCase: Sendable, CustomTestStringConvertible {
    var name: String
    var behavior: SimulatedBehavior
    var testDescription: String { name }

    /// Every way the SDK delivers a stream that ends by itself.
    static var deliveries: [ClientTestStreamCase] {
        var cases: [ClientTestStreamCase] = [
            .init(name: "worker", behavior: .wellBehaved),
            .init(name: "fresh thread", behavior: .freshThread),
            .init(name: "synchronous", behavior: .synchronous),
        ]
        for seed in UInt64(1)...3 {
            cases.append(.init(name: "mixed, seed \(seed)", behavior: .mixedDelivery(seed: seed)))
        }
        for concurrency in UInt32(2)...8 {
            for seed in UInt64(1)...3 {
                cases.append(
                    .init(
                        name: "out of order, concurrency \(concurrency), seed \(seed)",
                        behavior: .wellBehaved.with {
                            $0.streamConcurrency = concurrency
                            $0.seed = seed
                            $0.chunkSize = 1024
                            $0.delivery = seed == 3 ? .mixed : .worker
                        }))
            }
        }
        return cases
    }
}

@Suite("LegacyClient.download")
struct ClientDownloadTests {
    // MARK: Delivery and order

    @Test(
        "every delivery: the bytes received equal the bytes sent, in order, and progress never goes backwards",
        arguments: ClientTestStreamCase.deliveries)
    func delivery(streamCase: ClientTestStreamCase) async throws {
        let client = try LegacyClient()
        let totalBytes = 100_003
        let chunk = Int(streamCase.behavior.chunkSize)
        let dataEvents = (totalBytes + chunk - 1) / chunk
        let result = await clientTestConsume(
            client.download(DownloadRequest(path: "/d", totalBytes: totalBytes), behavior: streamCase.behavior),
            requestID: 1, totalBytes: totalBytes)
        #expect(result.end == .finished)
        #expect(result.problems == [])
        #expect(result.receivedEverything)
        #expect(result.check.dataEvents == dataEvents)
        #expect(result.check.progressEvents == dataEvents)  // progress after every data event
        #expect(result.check.lastProgress == UInt64(totalBytes))
        #expect(result.endsOnce)
        #expect(result.statistics.dropped == 0)
        let counters = await clientTestSettledCounters(client)
        let events = UInt64(2 * dataEvents + 1)
        #expect(counters.streamEvents == events)
        #expect(counters.clientTestAllCallbacks == events)
        switch streamCase.behavior.delivery {
        case .synchronous: #expect(counters.callbacksSync == events)
        case .worker: #expect(counters.callbacksWorker == events)
        case .freshThread: #expect(counters.callbacksFreshThread == events)
        case .mixed: #expect(counters.callbacksWorker + counters.callbacksFreshThread > 0)
        case .loop: #expect(counters.callbacksLoop == events)
        }
        #expect(counters.cancels == 0)
        #expect(counters.contextsCreated == 1 && counters.contextsReleased == 1)
        #expect(counters.handlesOutstanding == 0)
    }

    @Test("an empty download ends at once, with nothing but its end")
    func emptyDownload() async throws {
        let client = try LegacyClient()
        let result = await clientTestConsume(
            client.download(DownloadRequest(path: "/0", totalBytes: 0)), requestID: 1, totalBytes: 0)
        #expect(result.end == .finished)
        #expect(result.check.dataEvents == 0 && result.check.progressEvents == 0)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamEvents == 1 && counters.handlesOutstanding == 0)
    }

    // MARK: Terminal

    @Test(
        "a duplicate terminal and events after it: the stream ends once and nothing after the end reaches the consumer",
        arguments: [UInt32(1), 4])
    func eventsAfterTerminal(concurrency: UInt32) async throws {
        let client = try LegacyClient()
        let totalBytes = 40_000
        let behavior = SimulatedBehavior.wellBehaved.with {
            $0.duplicateTerminal = true
            $0.eventsAfterTerminal = 16
            $0.streamConcurrency = concurrency
        }
        let stream = client.download(DownloadRequest(path: "/t", totalBytes: totalBytes), behavior: behavior)
        var iterator = stream.makeAsyncIterator()
        var check = ClientTestDownloadCheck(requestID: 1, totalBytes: UInt64(totalBytes))
        while let event = try await iterator.next() {
            check.check(event)
        }
        #expect(check.problems == [])
        #expect(check.receivedEverything)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamEventsAfterTerminal == 17)  // the duplicate end and 16 data events
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
        // Everything after the end was offered to the stream and refused.
        #expect(iterator.statistics.yieldedAfterTermination == 16)
        #expect(try await iterator.next() == nil)
        #expect(try await iterator.next() == nil)
    }

    @Test(
        "a failing stream throws LegacySDKError with its message, after all the data before it",
        arguments: [SimulatedBehavior.Delivery.synchronous, .worker, .freshThread, .mixed])
    func failingStream(delivery: SimulatedBehavior.Delivery) async throws {
        let client = try LegacyClient()
        let totalBytes = 30_000
        let behavior = SimulatedBehavior.failing(LegacySDKError(rawValue: 77), message: "disk on fire").with {
            $0.delivery = delivery
        }
        let result = await clientTestConsume(
            client.download(DownloadRequest(path: "/f", totalBytes: totalBytes), behavior: behavior),
            requestID: 1, totalBytes: totalBytes)
        #expect(result.end == .sdkError(77, "disk on fire"))
        #expect(result.problems == [])
        #expect(result.receivedEverything)
        #expect(result.endsOnce)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 0)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    @Test(
        "a stream that goes silent after its data: the consumer's task cancel ends it and cancels the SDK download once"
    )
    func silentStreamCancelled() async throws {
        let client = try LegacyClient()
        let totalBytes = 20_000
        let received = AtomicCell<Int>(0)
        let call = ClientTestCall {
            await clientTestConsume(
                client.download(DownloadRequest(path: "/silent", totalBytes: totalBytes), behavior: .neverCompletes),
                requestID: 1, totalBytes: totalBytes
            ) { check in
                received.store(Int(check.receivedBytes), ordering: .releasing)
                return true
            }
        }
        // Every byte arrived; the SDK now stays silent, with the operation in flight.
        #expect(await eventually { received.load(ordering: .acquiring) == Int(totalBytes) })
        #expect(client.counters.contextsReleased == 0)
        call.cancel()
        let result = try #require(await call.result()).get()
        #expect(result.end == .cancelled)
        #expect(result.problems == [])
        #expect(result.receivedEverything)
        #expect(result.endsOnce)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    // MARK: Live stream

    @Test(
        "a live stream drops events while paused: gaps are skipped, everything received is in order and correct at its offset"
    )
    func liveStreamGaps() async throws {
        let client = try LegacyClient()
        // 1 TiB on a 20 µs schedule: the source outlives the test, which stops it with `break`.
        let totalBytes = 1 << 40
        let behavior = SimulatedBehavior.liveStream.with {
            $0.chunkSize = 1024
            $0.intervalMicroseconds = 20
        }
        var eventsAfterGap = 0
        let result = await clientTestConsume(
            client.download(DownloadRequest(path: "/live", totalBytes: totalBytes), behavior: behavior),
            requestID: 1, totalBytes: totalBytes, gapsAllowed: true
        ) { check in
            if check.dataEvents == 1 {
                // Stop consuming until the stream has paused the source and the source dropped
                // events: a forced gap, followed by new data once the consumer drains the buffer.
                guard await eventually({ client.counters.streamEventsDroppedPaused > 0 }) else {
                    return false
                }
            }
            if check.gaps > 0 { eventsAfterGap += 1 }
            // The source never ends: a bound in case no gap ever shows.
            return eventsAfterGap < 200 && check.dataEvents < 100_000
        }
        #expect(result.end == .stopped)
        #expect(result.problems == [])
        #expect(result.check.gaps > 0)
        #expect(result.statistics.skippedSequences > 0)
        #expect(result.statistics.droppedStale == 0)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamEventsDroppedPaused > 0)
        #expect(counters.streamPauses > 0 && counters.streamResumes > 0)
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    @Test("a live stream that drops the rest of its data while paused still ends normally, after what was delivered")
    func liveStreamEnds() async throws {
        let client = try LegacyClient()
        let totalBytes = 4 << 20
        let behavior = SimulatedBehavior.liveStream.with {
            $0.chunkSize = 1024
            $0.progressEvery = 0  // every dropped event is data: the consumer must miss bytes
        }
        let result = await clientTestConsume(
            client.download(DownloadRequest(path: "/live", totalBytes: totalBytes), behavior: behavior),
            requestID: 1, totalBytes: totalBytes, gapsAllowed: true
        ) { check in
            if check.dataEvents == 1 {
                _ = await eventually { client.counters.streamEventsDroppedPaused > 0 }
            }
            return true
        }
        #expect(result.end == .finished)
        #expect(result.problems == [])
        #expect(result.endsOnce)
        #expect(result.check.receivedBytes < UInt64(totalBytes))
        #expect(result.statistics.droppedStale == 0)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamEventsDroppedPaused > 0)
        // Everything the SDK delivered (data and the end) reached the consumer.
        #expect(UInt64(result.check.dataEvents) + 1 == counters.streamEvents)
        #expect(counters.cancels == 0)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    @Test(
        "a live stream that goes silent after a gap: every event the SDK delivered after the gap reaches the consumer")
    func liveStreamSilentAfterGap() async throws {
        // One worker: a callback that holds it stops the source (production, drops included).
        let client = try LegacyClient(configuration: .init(workerThreads: 1))
        // 95 data events on a 10 ms schedule, then silence (no end event). The stream pauses the
        // source at 32 held events, so fewer than 64 events can follow the gap (the window a
        // reorderer would wait in vain), and a consumer late by less than 320 ms keeps up.
        let events = 95
        let high = 32
        let totalBytes = events * 1024
        let behavior = SimulatedBehavior.liveStream.with {
            $0.chunkSize = 1024
            $0.progressEvery = 0
            $0.intervalMicroseconds = 10_000
            $0.streamEnd = .none
        }
        // A plain thread stops the source right after its first drop: the gap is then made,
        // and the rest of the data waits until the test lets the worker go.
        let blocker = LockedBox<ClientTestWorkerBlocker?>(nil)
        let watcher = Thread {
            guard spinUntil({ client.counters.streamEventsDroppedPaused > 0 }) else { return }
            let started = try? ClientTestWorkerBlocker(starting: client)
            blocker.withLock { $0 = started }
        }
        watcher.start()
        defer { blocker.withLock { $0 }?.open() }
        let received = AtomicCell<Int>(0)
        let receivedAfterGap = AtomicCell<Int>(0)
        let call = ClientTestCall {
            await clientTestConsume(
                client.download(
                    DownloadRequest(path: "/live", totalBytes: totalBytes), behavior: behavior,
                    buffering: .backpressure(low: 1, high: high)),
                requestID: 1, totalBytes: totalBytes, gapsAllowed: true
            ) { check in
                if check.dataEvents == 1 {
                    // Hold the first event: the stream pauses the source, which drops events
                    // until the watcher stops it.
                    guard await eventually({ blocker.withLock { $0?.isInside ?? false } }) else {
                        return false
                    }
                }
                if check.gaps > 0 { receivedAfterGap.add(1, ordering: .relaxed) }
                received.store(check.dataEvents, ordering: .releasing)
                return true
            }
        }
        // The consumer drained what came before the gap and the stream resumed the source.
        #expect(
            await eventually {
                client.counters.streamResumes == 1 && received.load(ordering: .acquiring) == high
            })
        #expect(client.counters.streamEventsDroppedPaused < UInt64(events - high))
        blocker.withLock { $0 }?.open()
        // The source delivers the rest of its data (nothing more is dropped) and goes silent.
        #expect(
            await eventually {
                let counters = client.counters
                return counters.streamEvents + counters.streamEventsDroppedPaused == UInt64(events)
            })
        let delivered = Int(client.counters.streamEvents)
        #expect(delivered > high)
        // Everything delivered reaches the consumer; nothing waits for the dropped events.
        #expect(
            await eventually(within: Double(testHangBoundSeconds)) {
                received.load(ordering: .acquiring) == delivered
            })
        #expect(receivedAfterGap.load(ordering: .relaxed) == delivered - high)
        call.cancel()
        let result = try #require(await call.result()).get()
        #expect(result.end == .cancelled)
        #expect(result.problems == [])
        #expect(result.check.gaps >= 1)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 2 && counters.handlesOutstanding == 0)
    }

    // MARK: The consumer stops

    enum StopKind: String, Sendable, CaseIterable {
        case breakOut = "break"
        case taskCancel = "task cancel"
    }

    @Test(
        "the consumer stops (break or task cancel): the SDK download is cancelled once and produces nothing more",
        arguments: StopKind.allCases,
        [
            ClientTestStreamCase(name: "worker, cancel later", behavior: .wellBehaved),
            ClientTestStreamCase(
                name: "worker, cancel calls back synchronously", behavior: .cancelCallsBackSynchronously),
            ClientTestStreamCase(name: "worker, silent cancel", behavior: .cancelSilently),
            ClientTestStreamCase(name: "out of order, cancel later", behavior: .concurrentOutOfOrderStream),
            ClientTestStreamCase(
                name: "fresh threads, late callback", behavior: .freshThread.with { $0.lateCallbackAfterCancel = true }),
        ])
    func consumerStops(stop: StopKind, streamCase: ClientTestStreamCase) async throws {
        let client = try LegacyClient()
        // 1 TiB: only a cancel ends it.
        let totalBytes = 1 << 40
        let consumed = AtomicCell<Int>(0)
        let call = ClientTestCall {
            await clientTestConsume(
                client.download(DownloadRequest(path: "/big", totalBytes: totalBytes), behavior: streamCase.behavior),
                requestID: 1, totalBytes: totalBytes
            ) { check in
                let events = check.dataEvents + check.progressEvents
                consumed.store(events, ordering: .releasing)
                return stop == .taskCancel || events < 300
            }
        }
        if stop == .taskCancel {
            #expect(await eventually { consumed.load(ordering: .acquiring) >= 300 })
            call.cancel()
        }
        let result = try #require(await call.result()).get()
        #expect(result.end == (stop == .taskCancel ? .cancelled : .stopped))
        #expect(result.problems == [])
        // The SDK is done with the operation: only its cancel can have ended a 1 TiB download.
        #expect(await eventually { client.counters.contextsReleased == 1 })
        let atRelease = client.counters
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamEvents == atRelease.streamEvents)
        #expect(counters.cancels == 1)
        #expect(counters.handlesOutstanding == 0)
        #expect(counters.streamEventsAfterTerminal <= 1)  // a late data event after the cancellation end
    }

    @Test(
        "the consumer stops while backpressure has paused an SDK download whose cancel is ignored: the download still runs to its end and is released"
    )
    func stopWhilePausedWithIgnoredCancel() async throws {
        let client = try LegacyClient()
        let totalBytes = 1 << 20
        let result = await clientTestConsume(
            client.download(DownloadRequest(path: "/paused", totalBytes: totalBytes), behavior: .cancelIgnored),
            requestID: 1, totalBytes: totalBytes
        ) { _ in
            // Hold the first event until the stream has paused the SDK (the consumer takes
            // nothing, so it must), then leave the loop while the SDK is parked.
            _ = await eventually { client.counters.streamPauses == 1 }
            return false
        }
        #expect(result.end == .stopped)
        #expect(result.problems == [])
        #expect(result.statistics.pauses == 1)
        // The cancel is ignored: only resuming lets the parked download go on to its end; the
        // SDK is done with it once its context is released.
        let counters = await clientTestSettledCounters(client, seconds: Double(testHangBoundSeconds))
        #expect(counters.cancels == 1)
        #expect(counters.contextsReleased == 1)
        #expect(counters.handlesOutstanding == 0)
        #expect(counters.streamEvents == UInt64(2 * (totalBytes / 4096) + 1))
    }

    @Test(
        "the consumer's task is cancelled while a synchronous download is still delivering inside start: CancellationError, nothing buffered after the cancel"
    )
    func cancelDuringSynchronousStart() async throws {
        let client = try LegacyClient()
        // Every event is delivered inside the start call, on the consumer's thread.
        let totalBytes = 200_000
        let behavior = SimulatedBehavior.synchronous.with {
            $0.chunkSize = 1
            $0.progressEvery = 0
        }
        let call = ClientTestCall {
            await clientTestConsume(
                client.download(DownloadRequest(path: "/sync", totalBytes: totalBytes), behavior: behavior),
                requestID: 1, totalBytes: totalBytes)
        }
        // A plain thread cancels the consumer as soon as the first event was delivered: the
        // start call (200,000 synchronous callbacks) is then still running.
        let cancelledDuringStart = LockedBox<Bool?>(nil)
        let watcher = Thread {
            guard spinUntil({ client.counters.streamEvents > 0 }) else { return }
            call.cancel()
            // A synchronous download releases its context before its start call returns.
            let during = client.counters.contextsReleased == 0
            cancelledDuringStart.withLock { $0 = during }
        }
        watcher.start()
        let result = try #require(await call.result()).get()
        #expect(await eventually { cancelledDuringStart.withLock { $0 } != nil })
        #expect(cancelledDuringStart.withLock { $0 } == true, "the cancel landed while start was running")
        let counters = await clientTestSettledCounters(client)
        #expect(result.end == .cancelled)
        #expect(result.check.dataEvents == 0)
        // What the SDK delivered after the cancel was refused, not buffered.
        #expect(result.statistics.yieldedAfterTermination > 0)
        #expect(result.problems == [])
        #expect(counters.callbacksSync == UInt64(totalBytes + 1))
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    // MARK: Backpressure

    @Test(
        "backpressure: a slow consumer of a fast million-event download stays bounded (high plus the overshoot the stream counts), drops nothing, receives everything"
    )
    func backpressure() async throws {
        let client = try LegacyClient()
        // Under ThreadSanitizer every event costs far more; 200,000 events still make thousands
        // of pause/resume rounds.
        let totalBytes = testsUnderThreadSanitizer ? 200_000 : 1_000_000
        let high = 64
        let low = 16
        // What may be held beyond `high`: the events the SDK produced before the pause landed.
        // The pause is made by the callback that reached `high` unless the consumer is in the
        // middle of its resume call at that moment; then (yields never wait) the consumer makes
        // it right after, and a descheduled consumer lets the SDK run on for a while. That
        // overshoot is counted exactly (acceptedWhilePaused); this generous bound only tells
        // "bounded" from "buffers the whole download" (an unpaused run holds ~all of it).
        let overshootBound = totalBytes / 20
        let behavior = SimulatedBehavior.wellBehaved.with {
            $0.chunkSize = 1
            $0.progressEvery = 0
        }
        var pausesSeen: UInt64 = 0
        var maxLag: UInt64 = 0
        var forcedPauses = 0
        let result = await clientTestConsume(
            client.download(
                DownloadRequest(path: "/fast", totalBytes: totalBytes), behavior: behavior,
                buffering: .backpressure(low: low, high: high)),
            requestID: 1, totalBytes: totalBytes
        ) { check in
            let consumed = UInt64(check.dataEvents)
            if consumed % 1024 == 0 {
                let counters = client.counters
                maxLag = max(maxLag, counters.streamEvents - consumed)
                // Deliberately slow: every 10,000 events, wait until the SDK was paused again
                // (the stream must pause it: nothing is consumed meanwhile).
                if consumed % 10_240 == 0 && consumed + UInt64(high) * 2 < UInt64(totalBytes) {
                    // A stream that never pauses the SDK ends the test here.
                    guard await eventually({ client.counters.streamPauses > pausesSeen }) else {
                        return false
                    }
                    forcedPauses += 1
                    pausesSeen = client.counters.streamPauses
                    maxLag = max(maxLag, client.counters.streamEvents - consumed)
                }
            }
            return true
        }
        #expect(result.end == .finished)
        #expect(result.problems == [])
        #expect(result.receivedEverything)
        #expect(result.check.dataEvents == totalBytes)
        #expect(result.statistics.dropped == 0)
        #expect(forcedPauses == (totalBytes - 2 * high - 1) / 10_240)
        #expect(result.statistics.peakBuffered >= high)
        // Everything held beyond `high` was accepted while a pause was due: the overshoot.
        #expect(result.statistics.peakBuffered <= high + result.statistics.acceptedWhilePaused)
        #expect(result.statistics.peakBuffered <= high + overshootBound)
        #expect(maxLag <= UInt64(high + overshootBound))
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamPauses >= UInt64(forcedPauses))
        #expect(counters.streamResumes >= UInt64(forcedPauses))
        #expect(counters.streamPauses == UInt64(result.statistics.pauses))
        #expect(counters.streamEvents == UInt64(totalBytes + 1))
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    // MARK: Invalid input and cold streams

    @Test(
        "an invalid behaviour or request throws the SDK's outOfRange on the first next(), with no SDK operation",
        arguments: [
            ("chunk size 0", SimulatedBehavior.wellBehaved.with { $0.chunkSize = 0 }, 10),
            ("stream concurrency 0", SimulatedBehavior.wellBehaved.with { $0.streamConcurrency = 0 }, 10),
            ("17 events after the end", SimulatedBehavior.wellBehaved.with { $0.eventsAfterTerminal = 17 }, 10),
            ("nine outcomes", SimulatedBehavior.repeats(Array(repeating: .success, count: 9)), 10),
            ("more than 2^40 bytes", SimulatedBehavior.synchronous, (1 << 40) + 1),
            ("negative size", SimulatedBehavior.synchronous, -1),
        ])
    func invalidInput(name: String, behavior: SimulatedBehavior, totalBytes: Int) async throws {
        let client = try LegacyClient()
        let stream = client.download(DownloadRequest(path: "/bad", totalBytes: totalBytes), behavior: behavior)
        #expect(client.counters == SDKCounters(), "\(name): creating the stream calls nothing")
        var iterator = stream.makeAsyncIterator()
        await #expect(throws: LegacySDKError.outOfRange, "\(name)") { _ = try await iterator.next() }
        #expect(try await iterator.next() == nil)
        let counters = client.counters
        #expect(counters.badCalls == 1)
        #expect(counters.contextsCreated == 0 && counters.handlesCreated == 0)
        #expect(counters.clientTestAllCallbacks == 0)
    }

    @Test("a download is cold: each iteration starts its own SDK operation (with its own content)")
    func cold() async throws {
        let client = try LegacyClient()
        let totalBytes = 10_000
        let stream = client.download(DownloadRequest(path: "/cold", totalBytes: totalBytes))
        #expect(client.counters.operationsStarted == 0)
        let first = await clientTestConsume(stream, requestID: 1, totalBytes: totalBytes)
        let second = await clientTestConsume(stream, requestID: 2, totalBytes: totalBytes)
        #expect(first.end == .finished && second.end == .finished)
        #expect(first.problems == [] && second.problems == [])
        #expect(first.receivedEverything && second.receivedEverything)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.operationsStarted == 2)
        #expect(counters.contextsReleased == 2 && counters.handlesOutstanding == 0)
    }
}
