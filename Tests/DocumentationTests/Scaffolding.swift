// The imaginary SDKs the documentation's snippets wrap: just enough surface for the snippets to
// compile as written. Nothing here is called by a test; the snippets are checked by the compiler
// (and README's adapter snippet, a real test, by Swift Testing).

import CLegacySDK
import LegacyBridge

// MARK: - README, quick start: an image loader with a callback and a cancellable request

/// An image as the loader hands it to its callback (valid only during the callback).
struct LoaderImage {}

/// A decoded image the caller owns.
struct Image: Sendable {
    init(copying image: LoaderImage) {}
    /// Frees what the image holds (called for values that lost the race).
    func release() {}
}

struct LoaderError: Error {
    init(_ code: Int32?) {}
}

final class LegacyImageLoader: Sendable {
    static let shared = LegacyImageLoader()

    final class Request: Sendable {
        func cancel() {}
    }

    func load(_ url: String, completion: @escaping @Sendable (LoaderImage?, Int32?) -> Void) -> Request { Request() }
}

// MARK: - README, event streams: a downloader with chunk and done callbacks

struct DownloaderChunk {
    var sequence: UInt64
}

final class DownloaderTask: Sendable {
    func cancel() {}
    func pause() {}
    func resume() {}
}

enum LegacyDownloader {
    static func start(
        _ url: String, onChunk: @escaping @Sendable (DownloaderChunk) -> Void,
        onDone: @escaping @Sendable ((any Error)?) -> Void
    ) throws -> DownloaderTask { DownloaderTask() }
}

/// The element type of every stream snippet.
struct Chunk: Sendable {
    init(copying chunk: DownloaderChunk) {}
    init(copying event: DownloadCallbackEvent) {}
    init(copying bytes: [UInt8]) {}
}

// MARK: - Guide, one-shot: the bundled C SDK (CLegacySDK) as "your" SDK

/// The client the guide's functions use.
nonisolated(unsafe) let client: OpaquePointer? = nil

/// A request as the caller describes it; `c` is the SDK's struct.
struct Request: Sendable {
    var c: lsdk_request_t { lsdk_request_t(path: nil, response_size: 0) }
}

struct Response: Sendable {
    init(copying response: lsdk_response_t) {}
}

struct SDKError: Error {
    init(_ status: lsdk_status_t) {}
}

// MARK: - Guide, event streams: a download SDK with one event callback

struct DownloadCallbackEvent {
    enum Kind { case data, end }
    var kind: Kind
    var sequence: UInt64
    var status: Int32
}

final class DownloadHandle: Sendable {
    func cancel() {}
    func pause() {}
    func resume() {}
}

func startDownload(
    _ request: Request, onEvent: @escaping @Sendable (DownloadCallbackEvent) -> Void
) throws -> DownloadHandle {
    DownloadHandle()
}

// MARK: - Guide, pull-style producer: a transfer that lives on a loop thread

/// A loop thread's job queue.
final class EventLoop: Sendable {
    func post(_ job: @escaping @Sendable () -> Void) {}
}

/// A transfer driven by its loop thread; every member is used on that thread only.
final class Transfer: @unchecked Sendable {
    // @unchecked Sendable: touched only on the loop thread (the SDK's rule, as in libcurl).
    enum DataAnswer { case taken, pause }
    var wantsPause = false
    var onData: (@Sendable ([UInt8]) -> DataAnswer)?
    var onDone: (@Sendable ((any Error)?) -> Void)?
    init(_ url: String) {}
    func start() {}
    func remove() {}
    func unpause() {}
}
