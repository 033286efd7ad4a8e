@testable import HTTPDownloader
import LegacyBridge
import Synchronization

/// Records what one raw transfer delivered, and answers "pause" while the test wants it to.
final class TransferProbe: Sendable {
    let received = LockedValue<[UInt8]>([])
    let chunks = Atomic<Int>(0)
    /// While true, the write callback answers CURL_WRITEFUNC_PAUSE.
    let wantsPause = Atomic<Bool>(false)
    /// Set `wantsPause` after this many chunks (the write callback does it itself).
    let pauseAfterChunks: Int?
    /// Whether every handler ran on the loop thread.
    let handlersOffLoop = Atomic<Int>(0)
    let end = CompletionGate<TransferEnd>()
    let loop: CurlLoop

    init(loop: CurlLoop, pauseAfterChunks: Int? = nil) {
        self.loop = loop
        self.pauseAfterChunks = pauseAfterChunks
    }

    var handlers: TransferHandlers {
        TransferHandlers(
            shouldPause: { [self] in
                if !loop.isCurrent { handlersOffLoop.add(1, ordering: .relaxed) }
                return wantsPause.load(ordering: .acquiring)
            },
            onData: { [self] bytes in
                if !loop.isCurrent { handlersOffLoop.add(1, ordering: .relaxed) }
                received.withLock { $0 += bytes }
                let count = chunks.add(1, ordering: .relaxed).newValue
                if let pauseAfterChunks, count == pauseAfterChunks {
                    wantsPause.store(true, ordering: .releasing)
                }
            },
            onEnd: { [self] outcome in
                if !loop.isCurrent { handlersOffLoop.add(1, ordering: .relaxed) }
                end.completion.succeed(outcome)
            })
    }

    /// Waits for the transfer's end (bounded by the hang bound).
    func ended() async throws -> TransferEnd {
        try await end.value(timeout: .seconds(120))
    }

    var bytes: [UInt8] { received.withLock { $0 } }
}
