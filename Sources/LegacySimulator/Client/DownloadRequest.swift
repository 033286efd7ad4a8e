import LegacyBridge

/// A streaming download from the simulated SDK.
public struct DownloadRequest: Sendable, Hashable {
    /// The resource name (at most 255 bytes are kept by the SDK).
    public var path: String
    /// The content size in bytes (0 ... 2^40; more, or a negative value, makes the start fail with
    /// ``LegacySDKError/outOfRange``).
    public var totalBytes: Int

    /// Creates a download request.
    ///
    /// - Parameters:
    ///   - path: The resource name.
    ///   - totalBytes: The content size in bytes.
    public init(path: String, totalBytes: Int) {
        self.path = path
        self.totalBytes = totalBytes
    }
}
