// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK

// snippet: README.md
import LegacyBridge

func thumbnail(for url: String, timeout: Duration? = .seconds(5),
               isolation: isolated (any Actor)? = #isolation) async throws -> Image {
    try await withCallback(isolation: isolation, timeout: timeout,
                           onDiscard: { late in late.release() }) { completion in
        let request = LegacyImageLoader.shared.load(url) { @Sendable image, error in   // any thread, any number of times
            if let image { completion.succeed(Image(copying: image)) } else { completion.fail(LoaderError(error)) }
        }
        return CancelHandle { request.cancel() }                             // may call back synchronously
    }
}
// end snippet
