import LegacyBridge

/// A one-shot request to the simulated SDK.
public struct FetchRequest: Sendable, Hashable {
    /// The resource name (at most 255 bytes are kept by the SDK).
    public var path: String
    /// The size of the response body in bytes (0 ... 1 MiB; more makes the start fail with
    /// ``LegacySDKError/outOfRange``).
    public var responseSize: Int

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - path: The resource name.
    ///   - responseSize: The size of the response body in bytes.
    public init(path: String, responseSize: Int = 0) {
        self.path = path
        self.responseSize = responseSize
    }
}
