// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

/// The snippet has a statement, so it lives in a function body.
func readmeStreamQuickStart(url: String, write: (Chunk) -> Void) async throws {
    // snippet: README.md
    func download(_ url: String) -> CallbackStream<Chunk> {
        CallbackStream(buffering: .backpressure(low: 16, high: 64),
                       ordering: .sequenced(window: 64)) { sink in
            let task = try LegacyDownloader.start(url,
                onChunk: { chunk in sink.yield(Chunk(copying: chunk), sequence: chunk.sequence) },  // any thread
                onDone: { error in error.map { sink.finish(throwing: $0) } ?? sink.finish() })
            return StreamControl(cancel: CancelHandle { task.cancel() }, pause: { task.pause() }, resume: { task.resume() })
        }
    }

    for try await chunk in download(url) { write(chunk) }   // break, or cancel the task: the SDK is cancelled
    // end snippet
}
