// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

// snippet: Sources/LegacyBridge/LegacyBridge.docc/EventStreams.md
func download(_ request: Request) -> CallbackStream<Chunk> {
    CallbackStream(buffering: .backpressure(low: 16, high: 64),
                   ordering: .sequenced(window: 64)) { sink in
        let handle = try startDownload(request) { event in            // any SDK thread
            switch event.kind {
            case .data: sink.yield(Chunk(copying: event), sequence: event.sequence)
            case .end:  event.status == 0 ? sink.finish() : sink.finish(throwing: SDKError(event.status))
            }
        }
        return StreamControl(cancel: CancelHandle { handle.cancel() },
                             pause: { handle.pause() }, resume: { handle.resume() })
    }
}
// end snippet
