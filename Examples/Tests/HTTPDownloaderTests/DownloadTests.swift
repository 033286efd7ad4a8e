import Foundation
import HTTPDownloader
import LegacyBridge
import LoopbackFixtures
import Synchronization
import Testing

/// `CurlLoop.download(url:buffering:)` against `python3 -m http.server` on 127.0.0.1, through a
/// loop that refuses any non-loopback connection.
@Suite("libcurl download over CallbackStream")
struct DownloadTests {
    /// Checks that chunks arrive as consecutive pieces of `expected`, from its first byte.
    struct InOrderChecker {
        let expected: [UInt8]
        private(set) var offset = 0
        private(set) var chunks = 0
        private(set) var firstMismatch: Int?

        init(_ expected: [UInt8]) {
            self.expected = expected
        }

        mutating func check(_ chunk: [UInt8]) {
            chunks += 1
            guard firstMismatch == nil, !chunk.isEmpty else { return }
            guard offset + chunk.count <= expected.count else {
                firstMismatch = offset
                return
            }
            let same = expected.withUnsafeBytes { whole in
                chunk.withUnsafeBytes { piece in
                    memcmp(whole.baseAddress! + offset, piece.baseAddress!, piece.count) == 0
                }
            }
            if same {
                offset += chunk.count
            } else {
                firstMismatch = offset
            }
        }

        /// Every byte arrived, in order, and nothing more.
        var isComplete: Bool { firstMismatch == nil && offset == expected.count }
    }

    /// The consumer did not finish within the hang bound.
    struct Hang: Error, CustomStringConvertible {
        var description: String { "the download did not end within \(testHangBoundSeconds) s (a hang)" }
    }

    /// Runs `body` (a consumer) and throws ``Hang`` if it has not returned within the hang bound;
    /// the consumer's task is then cancelled, which ends a `for try await` loop over a stream.
    static func hangBounded<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(testHangBoundSeconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw Hang() }
            return value
        }
    }

    /// Runs a job on the loop thread and waits for it: everything the loop was doing before has
    /// been done.
    static func roundTrip(_ loop: CurlLoop) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            if !loop.post({ done.resume() }) { done.resume() }
        }
    }

    static func expectClean(_ s: CurlStatistics, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(s.callsOffLoopThread == 0, sourceLocation: sourceLocation)
        #expect(s.callbacksOffLoopThread == 0, sourceLocation: sourceLocation)
        #expect(
            s.easyHandlesCleanedUp == s.easyHandlesCreated, "every easy handle freed", sourceLocation: sourceLocation)
        #expect(s.connectionsRefused == 0, "nothing tried to leave the machine", sourceLocation: sourceLocation)
    }

    @Test("a slow consumer (2 ms a chunk) of 32 MiB holds at most 64 chunks and receives every byte in order")
    func slowConsumerIsBounded() async throws {
        let server = try await LoopbackHTTPServer.start(size: 32 << 20, seed: 21)
        let loop = try CurlLoop(loopbackOnly: true)
        let stream = loop.download(url: server.url, buffering: .backpressure(low: 16, high: 64))
        let started = ContinuousClock.now
        let (checker, largestChunk) = try await Self.hangBounded {
            var checker = InOrderChecker(server.content)
            var largestChunk = 0
            for try await chunk in stream {
                checker.check(chunk)
                largestChunk = max(largestChunk, chunk.count)
                try await Task.sleep(for: .milliseconds(2))  // the consumer's work
            }
            return (checker, largestChunk)
        }
        let elapsed = ContinuousClock.now - started
        #expect(
            checker.isComplete, "every byte in order (first mismatch: \(String(describing: checker.firstMismatch)))")
        let s = stream.statistics
        // The write callback answers CURL_WRITEFUNC_PAUSE *before* taking a chunk once a yield
        // said stop, so nothing is accepted past the high watermark: no overshoot at all.
        #expect(s.peakBuffered <= 64, "peak buffered \(s.peakBuffered) chunks")
        #expect(s.acceptedWhilePaused == 0)
        #expect(s.pauses >= 1 && s.resumes >= 1, "the consumer was slow enough to pause the transfer")
        #expect(s.enqueued == checker.chunks)
        await loop.shutdown()
        let curl = loop.statistics
        #expect(curl.pausesAnswered >= 1)
        // A transfer that answered pause goes on only after curl_easy_pause(CONT); it finished.
        #expect(curl.resumes >= curl.pausesAnswered && curl.resumes <= s.resumes)
        #expect(curl.bytesDelivered == server.content.count, "no byte was delivered twice")
        Self.expectClean(curl)
        print(
            "download figures: slow consumer, \(server.content.count) bytes in \(checker.chunks) chunks "
                + "(largest \(largestChunk) B), peak buffered \(s.peakBuffered) chunks, pauses \(s.pauses), "
                + "resumes \(s.resumes), pause answers \(curl.pausesAnswered), \(elapsed)")
        await server.stop()
    }

    @Test("a fast consumer receives the whole 16 MiB file, in order, and the transfer's handle is freed")
    func fastConsumerGetsEverything() async throws {
        let server = try await LoopbackHTTPServer.start(size: 16 << 20, seed: 22)
        let loop = try CurlLoop(loopbackOnly: true)
        let started = ContinuousClock.now
        let checker = try await Self.hangBounded {
            var checker = InOrderChecker(server.content)
            for try await chunk in loop.download(url: server.url) {
                checker.check(chunk)
            }
            return checker
        }
        let elapsed = ContinuousClock.now - started
        #expect(checker.isComplete)
        await loop.shutdown()
        let s = loop.statistics
        #expect(s.easyHandlesCreated == 1 && s.transfersFinished == 1 && s.transfersCancelled == 0)
        #expect(s.bytesDelivered == server.content.count)
        Self.expectClean(s)
        print("download figures: fast consumer, \(server.content.count) bytes in \(checker.chunks) chunks, \(elapsed)")
        await server.stop()
    }

    @Test("leaving the loop after a few chunks cancels the transfer on the loop thread; nothing is delivered after")
    func breakStopsTheTransfer() async throws {
        let server = try await LoopbackHTTPServer.start(size: 32 << 20, seed: 23)
        let loop = try CurlLoop(loopbackOnly: true)
        let stream = loop.download(url: server.url)
        let checker = try await Self.hangBounded {
            var checker = InOrderChecker(server.content)
            for try await chunk in stream {
                checker.check(chunk)
                if checker.chunks == 3 { break }
            }
            return checker
        }
        #expect(checker.chunks == 3)
        #expect(checker.firstMismatch == nil)
        #expect(await eventually { loop.statistics.transfersCancelled == 1 }, "the transfer was removed")
        let atCancel = loop.statistics
        await Self.roundTrip(loop)
        await Self.roundTrip(loop)
        let later = loop.statistics
        #expect(later.bytesDelivered == atCancel.bytesDelivered, "no write callback after the removal")
        #expect(later.callbacksOnLoopThread == atCancel.callbacksOnLoopThread)
        #expect(atCancel.bytesDelivered < server.content.count, "the transfer stopped early")
        #expect(atCancel.easyHandlesCleanedUp == 1)
        // Between the consumer leaving and the posted cancel, at most the one write callback that
        // was running may yield; its answer (.terminated) makes the next callback pause.
        #expect(stream.statistics.yieldedAfterTermination <= 1)
        // The server sees the connection close under it (python logs the failed write).
        #expect(await eventually { server.log().contains("Exception occurred during processing of request") })
        await loop.shutdown()
        Self.expectClean(loop.statistics)
        await server.stop()
    }

    /// Holds a consumer at a point the test chooses, ignoring task cancellation (so the test can
    /// cancel the task while the consumer is held and only then let it go on).
    final class Hold: Sendable {
        private let state = LockedValue<(reached: Bool, released: Bool, waiter: CheckedContinuation<Void, Never>?)>(
            (false, false, nil))

        /// The consumer waits here until `release()`.
        func wait() async {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    state.reached = true
                    if state.released { return true }
                    state.waiter = waiter
                    return false
                }
                if resumeNow { waiter.resume() }
            }
        }

        var reached: Bool { state.withLock { $0.reached } }

        func release() {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.released = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    @Test("cancelling the consuming task ends its loop with CancellationError and cancels the transfer")
    func taskCancellationStopsTheTransfer() async throws {
        let server = try await LoopbackHTTPServer.start(size: 8 << 20, seed: 24)
        let loop = try CurlLoop(loopbackOnly: true)
        let hold = Hold()
        let consumerEnded = Atomic<Bool>(false)
        let consumer = Task {
            defer { consumerEnded.store(true, ordering: .releasing) }
            var chunks = 0
            for try await _ in loop.download(url: server.url) {
                chunks += 1
                if chunks == 3 { await hold.wait() }
            }
            return chunks
        }
        // The order under test: the task is cancelled while it holds chunk 3 and the transfer
        // is (at most) paused, never finished: 64 held chunks cannot hold 8 MiB.
        #expect(await eventually { hold.reached })
        consumer.cancel()
        hold.release()
        try #require(await eventually { consumerEnded.load(ordering: .acquiring) }, "the consumer's loop ended")
        let result = await consumer.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(await eventually { loop.statistics.transfersCancelled == 1 })
        let s = loop.statistics
        #expect(s.bytesDelivered < server.content.count)
        await loop.shutdown()
        Self.expectClean(loop.statistics)
        await server.stop()
    }

    @Test("16 downloads at once on one loop thread all complete, every byte in order")
    func sixteenDownloads() async throws {
        let server = try await LoopbackHTTPServer.start(size: 2 << 20, seed: 25)
        let loop = try CurlLoop(loopbackOnly: true)
        let complete = try await Self.hangBounded {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        var checker = InOrderChecker(server.content)
                        for try await chunk in loop.download(url: server.url) {
                            checker.check(chunk)
                        }
                        return checker.isComplete
                    }
                }
                return try await group.reduce(into: 0) { count, ok in count += ok ? 1 : 0 }
            }
        }
        #expect(complete == 16)
        await loop.shutdown()
        let s = loop.statistics
        #expect(s.easyHandlesCreated == 16 && s.transfersFinished == 16 && s.transfersCancelled == 0)
        #expect(s.bytesDelivered == 16 * server.content.count)
        Self.expectClean(s)
        await server.stop()
    }

    @Test("an HTTP 404 throws HTTPStatusError(404) and a refused connection throws CurlError.couldNotConnect")
    func failuresThrow() async throws {
        let server = try await LoopbackHTTPServer.start(size: 1024, seed: 26)
        let responder = try await LoopbackDNSResponder.start()  // only for its dead port
        let loop = try CurlLoop(loopbackOnly: true)

        /// Consumes a download and returns how it ended and how many chunks came first.
        func outcome(_ url: String) async throws -> (chunks: Int, error: (any Error)?) {
            try await Self.hangBounded {
                var chunks = 0
                do {
                    for try await _ in loop.download(url: url) { chunks += 1 }
                    return (chunks, nil)
                } catch {
                    return (chunks, error)
                }
            }
        }
        let missing = try await outcome("http://127.0.0.1:\(server.port)/no-such-file")
        #expect(missing.error as? HTTPStatusError == HTTPStatusError(status: 404))
        #expect(missing.chunks == 0, "no byte of the error page is delivered")
        let refused = try await outcome("http://127.0.0.1:\(responder.deadPort)/")
        #expect(refused.error as? CurlError == .couldNotConnect)
        #expect(refused.chunks == 0)
        #expect(HTTPStatusError(status: 404).description == "the server answered HTTP status 404")
        await loop.shutdown()
        Self.expectClean(loop.statistics)
        await responder.stop()
        await server.stop()
    }

    @Test("shutting the loop down fails a running download with CurlError.aborted; a later download fails at once")
    func shutdownAborts() async throws {
        let server = try await LoopbackHTTPServer.start(size: 8 << 20, seed: 27)
        let loop = try CurlLoop(loopbackOnly: true)
        let stream = loop.download(url: server.url)
        let outcome = try await Self.hangBounded { () -> (any Error)? in
            var iterator = stream.makeAsyncIterator()
            _ = try await iterator.next()
            await loop.shutdown()
            do {
                while try await iterator.next() != nil {}
                return nil
            } catch {
                return error
            }
        }
        #expect(outcome as? CurlError == .aborted)
        let s = loop.statistics
        #expect(s.transfersCancelled == 1 && s.multiHandlesCleanedUp == 1)
        Self.expectClean(s)
        await #expect(throws: CurlError.aborted) {
            for try await _ in loop.download(url: server.url) {}  // the loop refuses the start job
        }
        await server.stop()
    }
}
