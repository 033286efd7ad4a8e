import DocumentationSDK
import Foundation
import LegacyBridge
import TestSupport
import Testing

/// The documentation's quick starts, run as written in a module that is MainActor by default
/// (this target's setting, as in a new app target), over stand-in SDKs that call back from
/// CLegacySDK's threads through plain closures. A snippet whose callback literal is isolated to
/// the main actor traps here, in the runtime's isolation check, when the SDK calls it.
///
/// Every test here is itself isolated to the main actor (the module's default): the callers are
/// what an app's view model is. Serialized: two of them count the quotes the snippets show, in one
/// counter.
@Suite(
    "documentation quick starts run in a MainActor-by-default module, with callbacks from SDK threads",
    .serialized)
struct QuickStartRunTests {
    @Test("README one-shot: a value, a timeout and a cancel; the caller stays on the main actor")
    func readmeOneShot() async throws {
        _ = try await thumbnail(for: "a")
        MainActor.assertIsolated("a @MainActor caller resumes on the main actor")
        await #expect(throws: BridgeTimeoutError.self) {
            _ = try await thumbnail(for: "never", timeout: .milliseconds(20))
        }
        let caller = Task { try await thumbnail(for: "never", timeout: nil) }
        caller.cancel()
        await #expect(throws: CancellationError.self) { _ = try await caller.value }
    }

    @Test("README stream: every chunk, in order, through a backpressured, sequenced stream")
    func readmeStream() async throws {
        var sequences: [UInt64] = []
        try await readmeStreamQuickStart(url: "u") { chunk in sequences.append(chunk.sequence) }
        #expect(sequences == Array(0..<LegacyDownloader.chunkCount))
    }

    @Test("README keyed requests: the reply callback, registered in main-actor code, runs on an SDK thread")
    func readmeKeyed() async throws {
        try await readmeKeyedQuickStart(client: MQTTClient(), bytes: [1, 2, 3])
    }

    @Test("README latest-wins and coalesced calls: the SDK's callback literals run on SDK threads")
    func readmeLatestWinsAndCoalesced() async throws {
        #expect(try await readmeLatestWinsQuickStart(text: "swift").count == 1)
        _ = try await readmeCoalescedQuickStart(url: "u")
    }

    @Test("README shared subscription: every quote of the listener reaches the consumer")
    func readmeShared() async throws {
        let before = shownQuotes.withLock { $0 }
        try await readmeSharedQuickStart()
        #expect(shownQuotes.withLock { $0 } - before == Int(Ticker.quoteCount))
    }

    @Test("guide, one callback for many calls: a publisher, a search model and coalesced thumbnails")
    func guideManyCalls() async throws {
        try await Publisher(client: MQTTClient()).publish([1], to: "t")
        let model = SearchModel()
        await model.queryChanged("swift")
        #expect(model.hits.count == 1)
        _ = try await guideCoalesced(url: "u")
        let before = shownQuotes.withLock { $0 }
        try await guideShared()
        #expect(shownQuotes.withLock { $0 } - before == Int(Ticker.quoteCount))
    }

    @Test("guide, blocking calls: an OffloadPool query from the main actor")
    func guideOffload() async throws {
        try await GuideBlockingStubs.example()
    }

    @Test("guide, single-threaded libraries: an SDKLoop with its scheduler answers a lookup")
    func guideLoop() async throws {
        let driver = AresDriver()
        let loop = try guideMakeLoop(driver: driver)
        let resolver = GuideResolver(loop: loop, driver: driver)
        #expect(try await resolver.resolve(host: "example.com", timeout: .seconds(60)).count == 1)
        await loop.shutdown()
    }

    @Test("guide, single-threaded libraries: a watched socket's handler reads what arrives; a driven loop runs jobs")
    func guideSocketLoop() async throws {
        let loop = try SDKLoop(name: "guide-socket")
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        let (watch, ticks) = try guideWatchSocket(loop: loop, socket: pair[0])
        let before = socketBytesRead.withLock { $0 }
        #expect(write(pair[1], "hello", 5) == 5)
        #expect(await eventually { socketBytesRead.withLock { $0 } - before == 5 })
        watch.cancel(closingDescriptor: true)
        ticks.cancel()
        await loop.shutdown()
        close(pair[1])
        let driven = try guideMakeDrivenLoop(driver: LoopFunctionDriver())
        #expect(try await driven.run { 42 } == 42)
        await driven.shutdown()
    }

    @Test("guide, single-threaded libraries: a reply whose signal the send took is delivered by the readiness query")
    func guideMessageQueueLoop() async throws {
        let loop = try SDKLoop(name: "guide-mq")
        let socket = MessageQueueSocket()
        let watch = try guideWatchMessageQueue(loop: loop, socket: socket, request: 41)
        #expect(await eventually { mqDelivered.withLock { $0 }.contains(42) })
        watch.cancel()
        await loop.shutdown()
        close(socket.signal)
        close(socket.raise)
    }

    @Test("guide, single-threaded libraries: a LoopBound table is filled by a job and emptied by a handler")
    func guideLoopBoundTable() async throws {
        let loop = try SDKLoop(name: "guide-bound")
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        let (pending, replies) = try guideLoopBound(loop: loop, socket: pair[0])
        #expect(try await loop.run { pending.value } == [7: "GET /"])
        #expect(write(pair[1], "x", 1) == 1)
        let deadline = ContinuousClock.now + .seconds(testHangBoundSeconds)
        while try await loop.run({ !pending.value.isEmpty }), ContinuousClock.now < deadline {}
        #expect(try await loop.run { pending.value.isEmpty })
        replies.cancel(closingDescriptor: true)
        await loop.shutdown()
        close(pair[1])
    }

    @Test("guide, MainActor by default: the documented adapter runs; without its @Sendable, the SDK's call traps")
    func guideMainActorByDefault() async throws {
        #expect(try await readSensor(4).value == 40)
    }

    @Test(
        "the same adapter without @Sendable traps when the SDK calls back from its own thread",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func withoutSendableTraps() async {
        let result = await #expect(processExitsWith: .failure) {
            _ = try? await readSensorWithoutSendable(4)
        }
        // The runtime's isolation check traps (SIGILL on Linux, SIGTRAP on Apple's arm64): a
        // signal, not an exit with a status.
        if case .exitCode(let code)? = result?.exitStatus {
            Issue.record("the child exited with status \(code) instead of trapping")
        }
    }
}
