/// Identifies one transfer of a ``CurlLoop``.
package struct TransferID: Hashable, Sendable, CustomStringConvertible {
    package let rawValue: UInt64
    package var description: String { "transfer \(rawValue)" }
}

/// How a transfer talks to its owner. Every closure runs on the loop thread, inside libcurl's
/// callbacks or between libcurl calls; none may block.
package struct TransferHandlers: Sendable {
    /// Asked at the top of every write callback, before any byte is taken: `true` makes the
    /// callback answer `CURL_WRITEFUNC_PAUSE`. libcurl then keeps those bytes, stops reading the
    /// socket, and delivers the same bytes again once ``CurlLoop/resumeTransfer(_:)`` ran.
    package var shouldPause: @Sendable () -> Bool
    /// Receives each chunk, copied out of libcurl's buffer.
    package var onData: @Sendable ([UInt8]) -> Void
    /// Called exactly once, when the transfer has ended and its easy handle is freed.
    package var onEnd: @Sendable (TransferEnd) -> Void

    package init(
        shouldPause: @escaping @Sendable () -> Bool = { false },
        onData: @escaping @Sendable ([UInt8]) -> Void,
        onEnd: @escaping @Sendable (TransferEnd) -> Void
    ) {
        self.shouldPause = shouldPause
        self.onData = onData
        self.onEnd = onEnd
    }
}

/// How a transfer ended.
package enum TransferEnd: Sendable, Equatable {
    /// libcurl finished the transfer; `status` is the HTTP response code.
    case completed(status: Int)
    /// The server answered with an HTTP status of 400 or more (libcurl stopped before the body:
    /// `CURLOPT_FAILONERROR`).
    case httpError(status: Int)
    /// libcurl failed it.
    case failed(CurlError)
    /// It was cancelled (``CurlLoop/cancelTransfer(_:)``) or the loop shut down first.
    case cancelled
}
