@testable import HTTPDownloader
import LegacyBridge
import LegacyBridgeConformance
import LoopbackFixtures
import Testing

/// The conformance suite's real-adapter path on the shipped `CurlLoop.download(url:)`, over
/// libcurl and `python3 -m http.server` on 127.0.0.1: the adapter's own code, with its probe.
@Suite("libcurl download: the conformance suite checks the shipped adapter")
struct DownloadConformanceTests {
    /// One subscription of the adapter under test.
    typealias Download =
        @Sendable (_ loop: CurlLoop, _ url: String, _ probe: StreamProbe<[UInt8]>) -> CallbackStream<
            [UInt8]
        >

    /// A 256 KiB file to finish, a missing one to fail (404), and a 32 MiB one whose consumer
    /// leaves or stalls long before its end.
    static func fixture(
        _ name: String, loop: CurlLoop, small: LoopbackHTTPServer, big: LoopbackHTTPServer,
        download: @escaping Download
    ) -> StreamFixture<[UInt8]> {
        StreamFixture(
            name: name,
            threading: .sdkThread(SDKScheduler(post: { job in _ = loop.post(job) }, isCurrent: { loop.isCurrent })),
            finite: { probe in download(loop, small.url, probe) },
            failing: { probe in download(loop, small.url + ".missing", probe) },
            endless: .init(start: { probe in download(loop, big.url, probe) }, release: {}),
            bound: .backpressure(high: 64),
            liveResources: {
                let s = loop.statistics
                return s.easyHandlesCreated - s.easyHandlesCleanedUp
            },
            offThreadCalls: {
                let s = loop.statistics
                return s.callsOffLoopThread + s.callbacksOffLoopThread
            })
    }

    @Test("the shipped download(url:) passes every stream scenario, none left unchecked")
    func shippedAdapterPasses() async throws {
        let small = try await LoopbackHTTPServer.start(size: 256 << 10, seed: 31)
        let big = try await LoopbackHTTPServer.start(size: 32 << 20, seed: 32)
        let loop = try CurlLoop(loopbackOnly: true)
        let fixture = Self.fixture("download", loop: loop, small: small, big: big) { loop, url, probe in
            loop.download(url: url, probe: probe)
        }
        let report = await ConformanceSuite.run(fixture, options: .init(watchdog: .seconds(60)))
        #expect(report.results.count == ConformanceSuite.fixtureScenarios(for: .stream).count)
        #expect(report.results.allSatisfy { $0.passed }, "\(report.rendered)")
        await loop.shutdown()
        await small.stop()
        await big.stop()
    }

    /// WRONG ON PURPOSE: `download(url:)` with one change, the cancel forgets to remove the
    /// transfer (`curl_multi_remove_handle`, `curl_easy_cleanup`). When the consumer leaves, the
    /// paused transfer and its easy handle stay on the loop for good.
    static let downloadKeepingTransfer: Download = { loop, url, probe in
        CallbackStream(of: [UInt8].self, buffering: .backpressure(low: 16, high: 64)) { sink in
            let download = HTTPDownloader.Download(id: loop.makeTransferID(), sink: sink, probe: probe)
            guard loop.postToDriver({ driver in probe.start { download.start(url: url, on: driver) } }) else {
                throw CurlError.aborted
            }
            return StreamControl(
                scheduler: SDKScheduler { job in _ = loop.post(job) },
                cancel: CancelHandle { probe.cancel {} },  // forgot: download.cancel()
                resume: { probe.resume { download.resume() } })
        }
    }

    @Test(
        "a variant whose cancel keeps the transfer is failed when its consumer leaves: the easy handle is never freed")
    func keptTransferIsFlagged() async throws {
        let small = try await LoopbackHTTPServer.start(size: 256 << 10, seed: 33)
        let big = try await LoopbackHTTPServer.start(size: 32 << 20, seed: 34)
        let loop = try CurlLoop(loopbackOnly: true)
        let report = await ConformanceSuite.run(
            Self.fixture(
                "download-keeping-transfer", loop: loop, small: small, big: big, download: Self.downloadKeepingTransfer),
            options: .init(watchdog: .seconds(20), only: ["stream-break"]))
        #expect(report.failures.map(\.name) == ["stream-break"], "\(report.rendered)")
        let detail = report.failures.first?.detail ?? ""
        #expect(detail.contains("the SDK still held 1 resource(s) more"), "\(detail)")
        #expect(
            detail.contains("The SDK's cancel was called, yet what the subscription allocated was not freed"),
            "\(detail)")
        await loop.shutdown()
        await small.stop()
        await big.stop()
    }
}
