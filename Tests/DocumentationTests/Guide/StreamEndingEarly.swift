// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

/// The snippet has statements, so it lives in a function body; `download` is the README's quick start.
func readmeStreamEndingEarly(url: String, download: (String) -> CallbackStream<Chunk>, write: (Chunk) -> Bool) async throws {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/EventStreams.md
    let stream = download(url)
    for try await chunk in stream {
        if !write(chunk) { break }        // in main.swift, leaving the loop alone does not cancel the SDK
    }
    stream.stop()                         // this does (and later loops over stream end at once)
    let counters = stream.statistics      // the loop's subscription, as it ended
    print("dropped \(counters.dropped), peak buffered \(counters.peakBuffered), pauses \(counters.pauses)")
    // end snippet
}
