// LegacyClient.download on a client with a loop thread, against an SDK that enforces its loop
// affinity and counts every call from another thread.

import Testing
import TestSupport

import LegacyBridge
@testable import LegacySimulator

@Suite("LegacyClient.download on a loop-thread client")
struct ClientLoopDownloadTests {
    /// A client whose SDK must only be called from its loop thread (the public configuration does
    /// not enforce it; the SDK's counter proves the download never breaks the rule).
    static func loopOnlyClient() throws -> LegacyClient {
        try LegacyClient(
            sdk: SDKClient(workerThreads: 2, loopThread: true, affinity: .loop),
            configuration: .init(workerThreads: 2, loopThread: true))
    }

    /// Consumes a download, stalling after the first event until `paused` says the SDK stopped,
    /// then takes everything (or stops after `limit` events).
    static func consumeStalling(
        _ stream: CallbackStream<DownloadEvent>, totalBytes: Int, limit: Int = .max,
        paused: @escaping @Sendable () -> Bool
    ) async -> (ClientTestDownloadResult, stalledUntilPaused: Bool) {
        var stalled: Bool?
        let result = await clientTestConsume(stream, requestID: 1, totalBytes: totalBytes) { check in
            if stalled == nil { stalled = await eventually(paused) }
            return check.dataEvents < limit
        }
        return (result, stalled ?? false)
    }

    @Test(
        "push-style on a loop-only SDK: start, pause, resume and cancel all run on the loop thread (no affinity violation)"
    )
    func pushStyleOnLoopThread() async throws {
        let client = try Self.loopOnlyClient()
        // Paced (4,000 events, 200 µs apart) so that the pause, which travels through the loop
        // thread's queue, lands while the SDK still has events to produce, even on a busy machine.
        let totalBytes = 4_000 * 64
        let behavior = SimulatedBehavior.wellBehaved.with {
            $0.chunkSize = 64
            $0.progressEvery = 0
            $0.intervalMicroseconds = 200
        }
        // A complete download, paused by backpressure while the consumer stalls, then resumed.
        let (complete, stalled) = await Self.consumeStalling(
            client.download(
                DownloadRequest(path: "/loop", totalBytes: totalBytes), behavior: behavior,
                buffering: .backpressure(low: 4, high: 16)),
            totalBytes: totalBytes, paused: { client.counters.streamPauses >= 1 })
        #expect(stalled, "the SDK was never paused while the consumer stalled")
        #expect(complete.end == .finished)
        #expect(complete.problems == [])
        #expect(complete.receivedEverything)
        #expect(complete.statistics.resumes >= 1)
        // A second download of the same client, left after 10 events: cancelled on the loop.
        let endless = behavior.with {
            $0.streamEnd = .none
            $0.intervalMicroseconds = 0
        }
        let left = await clientTestConsume(
            client.download(DownloadRequest(path: "/loop", totalBytes: 1 << 30), behavior: endless),
            requestID: 2, totalBytes: 1 << 30
        ) { $0.dataEvents < 10 }
        #expect(left.end == .stopped)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.cancels == 1)
        #expect(counters.streamPauses >= 1 && counters.streamResumes >= 1)
        #expect(counters.loopJobs >= 4, "start, pause, resume and cancel jobs")
        #expect(counters.affinityViolations == 0)
        #expect(counters.contextsCreated == 2 && counters.contextsReleased == 2 && counters.handlesOutstanding == 0)
    }

    @Test(
        "pull-style (loop delivery): the event callback refuses once a yield says stopProducing, no pause call is made, nothing is lost or repeated"
    )
    func pullStyleObeysStopProducing() async throws {
        let client = try Self.loopOnlyClient()
        let totalBytes = 300 * 32
        let behavior = SimulatedBehavior.wellBehaved.with {
            $0.delivery = .loop
            $0.chunkSize = 32
            $0.progressEvery = 3
        }
        let (result, stalled) = await Self.consumeStalling(
            client.download(
                DownloadRequest(path: "/pull", totalBytes: totalBytes), behavior: behavior,
                buffering: .backpressure(low: 0, high: 8)),
            totalBytes: totalBytes, paused: { client.counters.streamPausesByCallback >= 1 })
        #expect(stalled, "the event callback never refused an event while the consumer stalled")
        #expect(result.end == .finished)
        #expect(result.problems == [])
        #expect(result.receivedEverything)
        // A refused event comes again after the resume; had it been yielded as well, the stream
        // would have dropped the repeat as stale.
        #expect(result.statistics.dropped == 0)
        #expect(result.statistics.resumes >= 1)
        let counters = await clientTestSettledCounters(client)
        #expect(counters.streamPausesByCallback >= 1)
        #expect(counters.streamPauses == 0, "a pull-style download stops by its callback's answer, not by pause")
        #expect(counters.streamResumes >= 1)
        #expect(counters.affinityViolations == 0)
        #expect(counters.contextsReleased == 1 && counters.handlesOutstanding == 0)
    }

    @Test("a start error on a loop-thread client is thrown by the first next(), with no SDK operation")
    func startErrorOnLoopThread() async throws {
        let client = try Self.loopOnlyClient()
        var iterator = client.download(
            DownloadRequest(path: "/bad", totalBytes: 64), behavior: .wellBehaved.with { $0.chunkSize = 0 }
        ).makeAsyncIterator()
        await #expect(throws: LegacySDKError.outOfRange) { _ = try await iterator.next() }
        #expect(try await iterator.next() == nil)
        let counters = client.counters
        #expect(counters.contextsCreated == 0 && counters.affinityViolations == 0)
    }
}
