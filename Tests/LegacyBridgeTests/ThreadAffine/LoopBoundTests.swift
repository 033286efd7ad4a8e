// LoopBound: state confined to one SDK thread, checked at each access. Uses on the thread are
// counted; a use off it must stop the process with a message that says what to do.

import ToolSupport
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

@Suite("LoopBound keeps state on one SDK thread")
struct LoopBoundTests {
    @Test("a LoopBound is read and changed on its loop's thread: in posted jobs, descriptor handlers and timers")
    func onTheLoop() async throws {
        let loop = try SDKLoop(name: "bound-loop")
        let counts = LoopBound([String: Int](), on: loop.scheduler)
        #expect(!counts.isAccessible)
        try loop.post { counts.value["job", default: 0] += 1 }
        let pipe = TestPipe()
        let watch = try loop.watch(pipe.readEnd, for: .readable) { _ in
            pipe.drain()
            counts.withValue { $0["handler", default: 0] += 1 }
        }
        pipe.put()
        try loop.schedule(after: .zero) { counts.value["timer", default: 0] += 1 }
        // Round trips until the handler and the timer have run too (each one is an iteration).
        let deadline = ContinuousClock.now + .seconds(testHangBoundSeconds)
        while try await loop.run({ counts.value.count }) < 3, ContinuousClock.now < deadline {}
        #expect(try await loop.run { counts.isAccessible })
        let final = try await loop.run { counts.value }
        #expect(final == ["job": 1, "handler": 1, "timer": 1])
        watch.cancel()
        await loop.shutdown()
        pipe.closeAll()
    }

    @Test("a LoopBound works on an SDKThreadExecutor's thread and on an SDK's own thread named by a scheduler")
    func onOtherThreads() async throws {
        let executor = try SDKThreadExecutor(name: "bound-exec")
        let onExecutor = LoopBound(0, on: executor.scheduler)
        for _ in 0..<3 { try await executor.run { onExecutor.value += 1 } }
        #expect(try await executor.run { onExecutor.value } == 3)

        // An SDK's own loop thread, wrapped as an SDK that offers "post to my loop" is (here the
        // SDK's thread is a second executor's).
        let sdkThread = try SDKThreadExecutor(name: "bound-sdk")
        let scheduler = SDKScheduler(
            post: { job in sdkThread.execute(job) }, isCurrent: { sdkThread.isCurrentThread })
        let onSDK = LoopBound([Int](), on: scheduler)
        try await sdkThread.run { onSDK.value.append(7) }
        #expect(try await sdkThread.run { onSDK.value } == [7])
        #expect(try await executor.run { !onSDK.isAccessible })
    }

    @Test("a LoopBound used off its thread stops the process with a message that says what to do")
    func offTheThreadStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let loop = try SDKLoop(name: "bound-off")
            let flags = LoopBound(false, on: loop.scheduler)
            flags.value = true  // from the test's thread
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("LoopBound<Bool> was used off its thread"), "\(message)")
        #expect(message.contains("post the access to that thread"))
    }

    @Test("a LoopBound on a scheduler that cannot tell its thread stops the process with a message")
    func schedulerMustKnowItsThread() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = LoopBound(0, on: SDKScheduler { job in job() })
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("SDKScheduler(post:isCurrent:)"), "\(message)")
    }
}
