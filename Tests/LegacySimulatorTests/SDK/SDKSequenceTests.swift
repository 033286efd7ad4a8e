import TestSupport
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("The SDK layer: hostile sequence numbers reach Swift as they are", .onOwnThread)
struct SDKSequenceTests {
    @Test("A wrapping start, a jump and a UInt64.max sentinel arrive unchanged; data offsets stay truthful")
    func hostileNumbers() throws {
        let client = try SDKClient()
        let events = SDKTestCollector<RawDownloadEvent>()
        let handle = try SDK.startDownload(
            client: client, request: DownloadRequest(path: "/s", totalBytes: 60),
            behavior: .synchronous.with {
                $0.chunkSize = 10
                $0.progressEvery = 0
                $0.firstSequence = .max - 1
                $0.sequenceJumpAt = 3
                $0.sequenceJump = 100
                $0.sequenceCorruptAt = 5
                $0.sequenceCorruptValue = .max
            },
            onEvent: { events.append($0) }, onRelease: { events.released() }
        ).get()
        #expect(events.waitReleased())
        let values = events.values
        // Indexes 1...7: max-1, max, 0 | jump: 1+100, 2+100, (5th chunk: garbage), 4+100 (the END).
        #expect(values.map(\.sequence) == [.max - 1, .max, 0, 101, .max, 103, 104])
        #expect(values.filter { $0.kind == .data }.map(\.bytesDone) == [0, 10, 20, 30, 40, 50])
        withExtendedLifetime(handle) {}
    }

    @Test("Invalid numbering knobs are the SDK's outOfRange")
    func invalidKnobs() throws {
        let client = try SDKClient()
        let tooWide = SDK.startDownload(
            client: client, request: DownloadRequest(path: "/s", totalBytes: 1),
            behavior: .wellBehaved.with { $0.sequenceBits = 65 }, onEvent: { _ in })
        #expect(throws: LegacySDKError.outOfRange) { try tooWide.get() }
        let startTooHigh = SDK.startDownload(
            client: client, request: DownloadRequest(path: "/s", totalBytes: 1),
            behavior: .wellBehaved.with {
                $0.sequenceBits = 16
                $0.firstSequence = 1 << 16
            }, onEvent: { _ in })
        #expect(throws: LegacySDKError.outOfRange) { try startTooHigh.get() }
    }
}
