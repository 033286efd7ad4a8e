// The imaginary SDKs the documentation's snippets wrap. The README's quick starts run (over
// DocSDK, in SDKThreads.swift: callbacks from the SDK's own threads, see QuickStartRunTests); the
// rest is just enough surface for the snippets to compile as written. Everything here stands for
// an SDK imported from another module, so it is `nonisolated` in this MainActor-by-default target.

import CLegacySDK
import DocumentationSDK
import LegacyBridge

// MARK: - README, quick start: an image loader with a callback and a cancellable request

/// A decoded image the caller owns.
nonisolated struct Image: Sendable {
    init(copying image: LoaderImage) {}
    /// Frees what the image holds (called for values that lost the race).
    func release() {}
}

nonisolated struct LoaderError: Error {
    init(_ code: Int32?) {}
}

// MARK: - README, event streams: a downloader with chunk and done callbacks

/// The element type of every stream snippet.
nonisolated struct Chunk: Sendable {
    var sequence: UInt64 = 0
    init(copying chunk: DownloaderChunk) { sequence = chunk.sequence }
    init(copying event: DownloadCallbackEvent) {}
    init(copying bytes: [UInt8]) {}
}

// MARK: - Guide, one-shot: the bundled C SDK (CLegacySDK) as "your" SDK

/// The client the guide's functions use.
nonisolated(unsafe) let client: OpaquePointer? = nil

/// A request as the caller describes it; `c` is the SDK's struct.
nonisolated struct Request: Sendable {
    var c: lsdk_request_t { lsdk_request_t(path: nil, response_size: 0) }
}

nonisolated struct Response: Sendable {
    init(copying response: lsdk_response_t) {}
}

nonisolated struct SDKError: Error {
    init(_ status: lsdk_status_t) {}
}

// MARK: - Guide, event streams: a download SDK with one event callback

nonisolated struct DownloadCallbackEvent {
    enum Kind { case data, end }
    var kind: Kind
    var sequence: UInt64
    var status: Int32
}

nonisolated final class DownloadHandle: Sendable {
    func cancel() {}
    func pause() {}
    func resume() {}
}

nonisolated func startDownload(
    _ request: Request, onEvent: @escaping @Sendable (DownloadCallbackEvent) -> Void
) throws -> DownloadHandle {
    DownloadHandle()
}

// MARK: - Guide, pull-style producer: a transfer that lives on a loop thread

/// A loop thread's job queue.
nonisolated final class EventLoop: Sendable {
    func post(_ job: @escaping @Sendable () -> Void) {}
}

/// A transfer driven by its loop thread; every member is used on that thread only.
nonisolated final class Transfer: @unchecked Sendable {
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
