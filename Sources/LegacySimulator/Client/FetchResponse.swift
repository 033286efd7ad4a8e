import LegacyBridge

/// A successful completion of a one-shot request, copied out of the SDK's callback.
public struct FetchResponse: Sendable, Hashable {
    /// The operation's number within its client, starting at 1.
    public var requestID: UInt64
    /// Which completion this is: 1 for the first; repeats count up.
    public var attempt: Int
    /// The body (`body[i] == SDK content byte (requestID, i)`).
    public var body: [UInt8]
    /// The SDK's message: the request path for a success.
    public var message: String

    /// Creates a response.
    ///
    /// - Parameters:
    ///   - requestID: The operation's number within its client.
    ///   - attempt: Which completion this is, from 1.
    ///   - body: The body bytes.
    ///   - message: The SDK's message.
    public init(requestID: UInt64, attempt: Int, body: [UInt8], message: String) {
        self.requestID = requestID
        self.attempt = attempt
        self.body = body
        self.message = message
    }
}
