import LegacyBridge

/// One event of a ``LegacyClient/download(_:behavior:buffering:)`` stream.
public enum DownloadEvent: Sendable, Hashable {
    /// How far the download is: `bytesDone` of `totalBytes`.
    case progress(bytesDone: UInt64, totalBytes: UInt64)
    /// The content bytes starting at `offset`, in order.
    case data(offset: UInt64, bytes: [UInt8])
}
