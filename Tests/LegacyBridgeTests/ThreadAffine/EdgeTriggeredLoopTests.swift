// SDKLoop over a descriptor that only says "go look" (EdgeTriggeredQueue.swift), on every backend
// the platform has: the loop asks the SDK's readiness query before each wait and after a wait in
// which the descriptor signalled, and `recheck()` wakes it from another thread. Orders are forced
// by round trips through the loop (each one is at least one iteration: a job runs only between
// two waits) and by the count of the query's answers, never by sleeping.

import ToolSupport
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

@Suite("SDKLoop over a descriptor that only says \"go look\"")
struct EdgeTriggeredLoopTests {
    @Test(
        "a send on the loop thread that takes the descriptor's signal: the loop asks the SDK before it waits, and the message is received",
        arguments: DescriptorBackend.available)
    func sendTakingTheSignal(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "edge-send", backend: backend)
        let queue = EdgeTriggeredQueue()
        let received = LockedBox<[Int]>([])
        let handler: @Sendable (DescriptorEvents) -> Void = { _ in
            while let message = queue.receive() { received.withLock { $0.append(message) } }
        }
        let watch = try loop.watch(queue.signal, for: .readable, readiness: { queue.events() }, handler)
        _ = try await loop.run { 0 }  // the watch is part of the wait
        // A reply arrives, and a send made on the loop thread right after processes the
        // SDK's mailbox: the descriptor is quiet while the reply waits to be received.
        try await loop.run {
            queue.arrive(1)
            queue.send(100)
        }
        #expect(!queue.signalPending)
        _ = try await loop.run { 0 }  // the loop has been round once since the send
        #expect(received.withLock { $0.map { $0 } } == [1], "the reply the send took the signal of was not received")
        watch.cancel()
        await loop.shutdown()
        queue.close()
    }

    @Test(
        "a handler that takes one message per call is called again while the SDK has more, with no new signal",
        arguments: DescriptorBackend.available)
    func oneMessagePerCall(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "edge-one", backend: backend)
        let queue = EdgeTriggeredQueue()
        let received = LockedBox<[Int]>([])
        let handler: @Sendable (DescriptorEvents) -> Void = { _ in
            if let message = queue.receive() { received.withLock { $0.append(message) } }
        }
        let watch = try loop.watch(queue.signal, for: .readable, readiness: { queue.events() }, handler)
        _ = try await loop.run { 0 }
        try await loop.run {
            for message in 1...3 { queue.arrive(message) }  // one signal for three messages
        }
        // Each round trip is at least one iteration of the loop, and each iteration takes one.
        for _ in 0..<10 where received.withLock({ $0.count }) < 3 { _ = try await loop.run { 0 } }
        #expect(received.withLock { $0.map { $0 } } == [1, 2, 3])
        watch.cancel()
        await loop.shutdown()
        queue.close()
    }

    @Test(
        "the descriptor's signal alone does not call the handler: the SDK is asked, and the handler gets what it says",
        arguments: DescriptorBackend.available)
    func signalIsChecked(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "edge-check", backend: backend)
        let queue = EdgeTriggeredQueue()
        let calls = LockedBox<[DescriptorEvents]>([])
        let handler: @Sendable (DescriptorEvents) -> Void = { events in
            calls.withLock { $0.append(events) }
            while queue.receive() != nil {}
        }
        let watch = try loop.watch(queue.signal, for: .readable, readiness: { queue.events() }, handler)
        _ = try await loop.run { 0 }
        queue.signalOnly()  // readable before the post below wakes the loop: that wait sees it
        _ = try await loop.run { 0 }
        #expect(!queue.signalPending, "the loop did not ask the SDK after the signal")
        #expect(calls.withLock { $0.map { $0 } } == [], "the handler ran with nothing to receive")
        queue.arrive(7)
        _ = try await loop.run { 0 }
        #expect(calls.withLock { $0.map { $0 } } == [.readable])
        watch.cancel()
        await loop.shutdown()
        queue.close()
    }

    @Test(
        "recheck() from another thread wakes the waiting loop to ask the SDK, after a send there took the signal",
        arguments: DescriptorBackend.available)
    func recheckFromAnotherThread(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "edge-recheck", backend: backend)
        let queue = EdgeTriggeredQueue()
        let received = LockedBox<[Int]>([])
        let handler: @Sendable (DescriptorEvents) -> Void = { _ in
            while let message = queue.receive() { received.withLock { $0.append(message) } }
        }
        let watch = try loop.watch(queue.signal, for: .readable, readiness: { queue.events() }, handler)
        // Read on the loop thread: the loop asks once more after this job, before its wait. From
        // then on nothing wakes it but the descriptor, which the send below keeps quiet, or a wake.
        let before = try await loop.run { queue.asked.load(ordering: .acquiring) }
        #expect(await eventually { queue.asked.load(ordering: .acquiring) > before })
        // On this thread, as an SDK with thread-safe sends allows: the descriptor never signals.
        queue.send(100, replyArriving: 1)
        watch.recheck()
        #expect(await eventually { received.withLock { $0.count } == 1 }, "the waiting loop was not woken to ask")
        watch.cancel()
        await loop.shutdown()
        queue.close()
    }

    @Test("recheck() does nothing for a watch without a readiness query, nor once the watch ended")
    func recheckWithoutQuery() async throws {
        let loop = try SDKLoop(name: "edge-plain")
        let pipe = TestPipe()
        let watch = try loop.watch(pipe.readEnd, for: .readable) { _ in pipe.drain() }
        #expect(!loop.core.poller!.isQueried(watch.id))
        watch.recheck()
        let queue = EdgeTriggeredQueue()
        let queried = try loop.watch(queue.signal, for: .readable, readiness: { queue.events() }, { _ in })
        #expect(loop.core.poller!.isQueried(queried.id))
        queried.cancel()
        #expect(!loop.core.poller!.isQueried(queried.id))
        queried.recheck()
        watch.cancel()
        await loop.shutdown()
        queue.close()
        pipe.closeAll()
    }
}
