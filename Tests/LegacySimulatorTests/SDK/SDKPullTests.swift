import CLegacySDK
import Foundation
import TestSupport
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("The SDK layer: pull-style downloads", .onOwnThread)
struct SDKPullTests {
    @Test("Answering true refuses the event: the stream pauses and the same event comes first after resume")
    func refuseThenResume() throws {
        let client = try SDKClient()
        let events = SDKTestCollector<RawDownloadEvent>()
        let refusedOnce = SDKTestCounter()
        let handle = try SDK.startPullDownload(
            client: client, request: DownloadRequest(path: "/p", totalBytes: 50),
            behavior: .synchronous.with {
                $0.chunkSize = 10
                $0.progressEvery = 0
            },
            onEvent: { event in
                events.append(event)
                guard event.sequence == 2, refusedOnce.value == 0 else { return false }
                refusedOnce.increment()
                return true
            },
            onRelease: { events.released() }
        ).get()
        // Synchronous delivery: the refusal stopped the stream inside the start call.
        #expect(events.values.map(\.sequence) == [0, 1, 2])
        #expect(client.counters.streamPausesByCallback == 1)
        try handle.resume()
        #expect(events.waitReleased())
        let values = events.values
        #expect(values.map(\.sequence) == [0, 1, 2, 2, 3, 4, 5])
        #expect(values[2].data == values[3].data && values[2].bytesDone == values[3].bytesDone)
        #expect(values.last?.kind == .end && values.last?.error == nil)
    }

    @Test("A pull start with an invalid behaviour fails with the SDK's error and frees its closures")
    func invalidStart() throws {
        let client = try SDKClient()
        let freed = SDKTestCounter()
        let result = SDK.startPullDownload(
            client: client, request: DownloadRequest(path: "/p", totalBytes: 50),
            behavior: .wellBehaved.with { $0.chunkSize = 0 },
            onEvent: { [token = SDKTestLifetimeToken(freed)] _ in withExtendedLifetime(token) { false } })
        #expect(throws: LegacySDKError.outOfRange) { try result.get() }
        #expect(freed.value == 1)
    }
}
