@testable import HTTPDownloader
import LegacyBridge
import LoopbackFixtures
import Synchronization
import Testing

/// Every transfer here goes to `python3 -m http.server` on 127.0.0.1 (or a loopback port where
/// nothing listens), through a loop that refuses any non-loopback connection.
@Suite("libcurl multi loop thread")
struct CurlLoopTests {
    static func expectClean(_ s: CurlStatistics, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(s.callsOffLoopThread == 0, sourceLocation: sourceLocation)
        #expect(s.callbacksOffLoopThread == 0, sourceLocation: sourceLocation)
        #expect(s.callsOnLoopThread > 0, sourceLocation: sourceLocation)
        #expect(
            s.easyHandlesCleanedUp == s.easyHandlesCreated, "every easy handle freed", sourceLocation: sourceLocation)
        #expect(s.connectionsRefused == 0, "nothing tried to leave the machine", sourceLocation: sourceLocation)
    }

    @Test("a file is downloaded from the loopback server through the loop thread, bytes intact, handles freed")
    func rawDownload() async throws {
        let server = try await LoopbackHTTPServer.start(size: 8 << 20, seed: 7)
        let loop = try CurlLoop(loopbackOnly: true)
        let probe = TransferProbe(loop: loop)
        #expect(loop.startTransfer(url: server.url, handlers: probe.handlers) != nil)
        #expect(try await probe.ended() == .completed(status: 200))
        #expect(probe.bytes.count == server.content.count)
        #expect(probe.bytes == server.content, "bytes intact")
        #expect(probe.handlersOffLoop.load(ordering: .relaxed) == 0, "every handler ran on the loop thread")
        await loop.shutdown()
        let s = loop.statistics
        Self.expectClean(s)
        #expect(s.easyHandlesCreated == 1)
        #expect(s.multiHandlesCreated == 1 && s.multiHandlesCleanedUp == 1)
        #expect(s.bytesDelivered == server.content.count)
        #expect(s.connectionsOpened >= 1)
        #expect(server.log().contains("127.0.0.1"), "the server logged the request from loopback")
        await server.stop()
    }

    @Test("a write callback that answers pause loses nothing: curl delivers the same bytes again after a posted resume")
    func pauseAndResume() async throws {
        let server = try await LoopbackHTTPServer.start(size: 4 << 20, seed: 8)
        let loop = try CurlLoop(loopbackOnly: true)
        let probe = TransferProbe(loop: loop, pauseAfterChunks: 3)
        let id = try #require(loop.startTransfer(url: server.url, handlers: probe.handlers))
        // Hold the order: resume only once the write callback has answered "pause".
        #expect(await eventually { loop.statistics.pausesAnswered >= 1 })
        let chunksWhilePaused = probe.chunks.load(ordering: .relaxed)
        #expect(chunksWhilePaused == 3, "nothing was delivered after the pause answer")
        probe.wantsPause.store(false, ordering: .releasing)
        loop.resumeTransfer(id)
        #expect(try await probe.ended() == .completed(status: 200))
        #expect(probe.bytes == server.content, "the bytes of the paused callback came again, once")
        await loop.shutdown()
        let s = loop.statistics
        #expect(s.resumes == 1)
        Self.expectClean(s)
        await server.stop()
    }

    @Test("cancelling a paused transfer removes and frees its handle on the loop thread and reports cancelled")
    func cancelPaused() async throws {
        let server = try await LoopbackHTTPServer.start(size: 4 << 20, seed: 9)
        let loop = try CurlLoop(loopbackOnly: true)
        let probe = TransferProbe(loop: loop, pauseAfterChunks: 1)
        let id = try #require(loop.startTransfer(url: server.url, handlers: probe.handlers))
        #expect(await eventually { loop.statistics.pausesAnswered >= 1 })
        loop.cancelTransfer(id)
        #expect(try await probe.ended() == .cancelled)
        #expect(await eventually { loop.statistics.easyHandlesCleanedUp == 1 })
        loop.cancelTransfer(id)  // a second cancel finds nothing to do
        loop.resumeTransfer(id)  // so does a resume after the end
        await loop.shutdown()
        let s = loop.statistics
        #expect(s.transfersFinished == 1)
        #expect(s.resumes == 0)
        Self.expectClean(s)
        await server.stop()
    }

    @Test("shutting down cancels running transfers and frees every handle, the multi handle included")
    func shutdownCancels() async throws {
        let server = try await LoopbackHTTPServer.start(size: 4 << 20, seed: 10)
        let loop = try CurlLoop(loopbackOnly: true)
        let probe = TransferProbe(loop: loop, pauseAfterChunks: 1)
        #expect(loop.startTransfer(url: server.url, handlers: probe.handlers) != nil)
        #expect(await eventually { loop.statistics.pausesAnswered >= 1 })
        await loop.shutdown()
        #expect(try await probe.ended() == .cancelled)
        let late = TransferProbe(loop: loop)
        #expect(loop.startTransfer(url: server.url, handlers: late.handlers) == nil, "a closed loop takes no work")
        #expect(try await late.ended() == .cancelled)
        let s = loop.statistics
        #expect(s.multiHandlesCleanedUp == 1)
        Self.expectClean(s)
        await server.stop()
    }

    @Test("failures are CurlError values: refused port, HTTP 404, and a non-loopback address refused by the guard")
    func failures() async throws {
        let server = try await LoopbackHTTPServer.start(size: 1024, seed: 11)
        let responder = try await LoopbackDNSResponder.start()  // only for its dead port
        let loop = try CurlLoop(loopbackOnly: true)

        let refused = TransferProbe(loop: loop)
        loop.startTransfer(url: "http://127.0.0.1:\(responder.deadPort)/", handlers: refused.handlers)
        #expect(try await refused.ended() == .failed(.couldNotConnect))

        let missing = TransferProbe(loop: loop)
        loop.startTransfer(url: "http://127.0.0.1:\(server.port)/no-such-file", handlers: missing.handlers)
        #expect(try await missing.ended() == .httpError(status: 404))

        // 192.0.2.1 is TEST-NET-1 (never routed); the guard refuses it before a socket exists.
        let outside = TransferProbe(loop: loop)
        loop.startTransfer(url: "http://192.0.2.1:9/", handlers: outside.handlers)
        #expect(try await outside.ended() == .failed(.couldNotConnect))
        await loop.shutdown()
        let s = loop.statistics
        #expect(s.connectionsRefused == 1)
        #expect(s.callsOffLoopThread == 0)
        #expect(s.easyHandlesCleanedUp == s.easyHandlesCreated)
        #expect(CurlError.couldNotConnect.description == "Couldn't connect to server (curl code 7)")
        await responder.stop()
        await server.stop()
    }

    @Test("16 transfers at once share one loop thread, every one intact")
    func sixteenTransfers() async throws {
        let server = try await LoopbackHTTPServer.start(size: 1 << 20, seed: 12)
        let loop = try CurlLoop(loopbackOnly: true)
        let probes = (0..<16).map { _ in TransferProbe(loop: loop) }
        for probe in probes {
            loop.startTransfer(url: server.url, handlers: probe.handlers)
        }
        for probe in probes {
            #expect(try await probe.ended() == .completed(status: 200))
            #expect(probe.bytes == server.content)
        }
        await loop.shutdown()
        let s = loop.statistics
        #expect(s.easyHandlesCreated == 16)
        #expect(s.bytesDelivered == 16 * server.content.count)
        Self.expectClean(s)
        await server.stop()
    }

    final class JobWitness: Sendable {
        let seen = LockedValue<[[Int]]>(Array(repeating: [], count: 4))
        let offLoop = Atomic<Int>(0)
        let running = Atomic<Int>(0)
        let overlapping = Atomic<Int>(0)
    }

    @Test("posted jobs run on the loop thread, one at a time, in the order each thread posted them")
    func postedJobsRunInOrder() async throws {
        let loop = try CurlLoop()
        let witness = JobWitness()
        await withTaskGroup(of: Void.self) { group in
            for poster in 0..<4 {
                group.addTask {
                    for index in 0..<500 {
                        loop.post {
                            if witness.running.add(1, ordering: .relaxed).newValue != 1 {
                                witness.overlapping.add(1, ordering: .relaxed)
                            }
                            if !loop.isCurrent { witness.offLoop.add(1, ordering: .relaxed) }
                            witness.seen.withLock { $0[poster].append(index) }
                            witness.running.subtract(1, ordering: .relaxed)
                        }
                    }
                }
            }
        }
        #expect(await eventually { witness.seen.withLock { $0.allSatisfy { $0.count == 500 } } })
        #expect(witness.seen.withLock { $0 } == Array(repeating: Array(0..<500), count: 4))
        #expect(witness.offLoop.load(ordering: .relaxed) == 0)
        #expect(witness.overlapping.load(ordering: .relaxed) == 0)
        await loop.shutdown()
        #expect(loop.post {} == false, "a closed loop rejects jobs")
    }
}
