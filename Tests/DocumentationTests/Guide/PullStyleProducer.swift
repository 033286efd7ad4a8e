// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

/// The snippet is one expression: the body of a function that returns it.
func guidePullStyleProducer(url: String, loop: EventLoop) -> CallbackStream<Chunk> {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/EventStreams.md
    CallbackStream(of: Chunk.self, buffering: .backpressure(low: 16, high: 64)) { sink in
        let transfer = Transfer(url)                       // lives on the loop thread
        transfer.onData = { bytes in                       // called on the loop thread
            if transfer.wantsPause { return .pause }       // the SDK keeps these bytes for later
            if sink.yield(Chunk(copying: bytes)).shouldStop { transfer.wantsPause = true }
            return .taken
        }
        transfer.onDone = { error in error.map { sink.finish(throwing: $0) } ?? sink.finish() }
        loop.post { transfer.start() }
        return StreamControl(scheduler: SDKScheduler { job in loop.post(job) },
                             cancel: CancelHandle { transfer.remove() },
                             resume: { transfer.wantsPause = false; transfer.unpause() })
    }
    // end snippet
}
