import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// `loop-watches-released` over `SocketSDK`, a descriptor per request, on each backend. The
/// gallery's `socket-sdk-closes-under-watch` is proven flagged, crash-isolated, on the default
/// backend by `GalleryProofTests` (there the next request's descriptor gets the closed number, and
/// watching it again stops the process).
@Suite(
    "SocketSDK: a watch cancelled before its descriptor closes passes loop-watches-released; closed under it, failed")
struct SocketSDKTests {
    static let options = ConformanceOptions(
        watchdog: testWatchdog, only: ["success", "cancel-in-flight", "loop-watches-released"])

    @Test("the correct client passes, on every backend", arguments: DescriptorBackend.available)
    func correctPasses(backend: DescriptorBackend) async throws {
        let client = SocketClient(sdk: try SocketSDK(name: "socket-test", backend: backend))
        let report = await ConformanceSuite.run(SocketFixtures.oneShot(client: { client }), options: Self.options)
        #expect(report.results.count == 3)
        #expect(report.results.allSatisfy { $0.passed }, "\(report.rendered)")
        #expect(client.sdk.loop.statistics.watches == 0)
        await client.sdk.shutdown()
    }

    @Test(
        "the SDK closing each descriptor under its watch is failed, on every backend: the loop ends each such watch as invalid",
        arguments: DescriptorBackend.available)
    func closedUnderWatchFails(backend: DescriptorBackend) async throws {
        // Fresh numbers: a closed number reused by the next request stops the process (the loop
        // refuses to watch a number it still watches), which only a crash-isolated run survives.
        let sdk = try SocketSDK(name: "socket-test", backend: backend, freshNumbers: true)
        let client = SocketClient(sdk: sdk, cancelsWatchFirst: false)
        let report = await ConformanceSuite.run(
            SocketFixtures.oneShot(name: "closes-under-watch", client: { client }),
            options: .init(watchdog: flaggingWatchdog, only: ["loop-watches-released"]))
        #expect(report.failures.map(\.name) == ["loop-watches-released"], "\(report.rendered)")
        // The loop finds each descriptor closed when it re-arms the watch after the handler that
        // closed it, whatever the backend.
        let detail = report.failures.first?.detail ?? ""
        #expect(detail.contains("ended because their descriptor was closed under them"), "\(detail)")
        #expect(sdk.loop.statistics.watchesEndedInvalid >= 3)
        await sdk.shutdown()
    }

    @Test("a request cancelled before its answer is written does not answer the next request given its number")
    func answerFollowsTheRequestNotTheNumber() async throws {
        let sdk = try SocketSDK(name: "socket-test")
        // One job: the answer of the first request is posted behind it, so it runs after the
        // second request took the first one's number. Another test's thread may take the number
        // in between: such an attempt proves nothing and is made again.
        var reused = false
        for _ in 0..<20 where !reused {
            let (first, second) = try await sdk.loop.run {
                let first = sdk.open(.value(7))
                sdk.cancel(first)
                return (first, sdk.open(.hang))
            }
            _ = try await sdk.loop.run {}  // the first request's answer job has run
            let reply = try await sdk.loop.run { sdk.read(second).map(\.value) }
            if first == second {
                reused = true
                #expect(reply == nil)
            }
            try await sdk.loop.run { sdk.cancel(second) }
        }
        #expect(reused)
        await sdk.shutdown()
    }
}
