import LegacyBridge

/// An error reported by the legacy SDK: one of its status codes, plus the message the SDK
/// attached to it, if any.
///
/// Like `Errno`, this is a raw-value struct with a static member per known status, so unknown
/// codes from the SDK survive as values instead of being lost. Equality and hashing use the
/// status code only: `.remote` equals a remote failure with any message.
public struct LegacySDKError: Error, RawRepresentable, Hashable, CustomStringConvertible, Sendable {
    /// The SDK's status code (`lsdk_status_t`).
    public let rawValue: Int32

    /// The message the SDK delivered with the failure (for errors that arrive in a callback), or
    /// `nil` when the status came alone (for example, from a start function).
    public let message: String?

    /// Creates an error from a status code, without a message.
    ///
    /// - Parameter rawValue: The SDK's status code.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
        self.message = nil
    }

    /// Creates an error from a status code and the message that came with it.
    ///
    /// - Parameters:
    ///   - rawValue: The SDK's status code.
    ///   - message: The SDK's message, or `nil`.
    public init(rawValue: Int32, message: String?) {
        self.rawValue = rawValue
        self.message = message
    }

    /// A required argument was missing.
    public static let nullArgument = LegacySDKError(rawValue: 1)
    /// A numeric value (of a behaviour, request or configuration) is outside its documented range.
    public static let outOfRange = LegacySDKError(rawValue: 2)
    /// An enum-valued field holds a value the SDK does not know.
    public static let unknownEnum = LegacySDKError(rawValue: 3)
    /// The client was destroyed, or is being destroyed.
    public static let clientDestroyed = LegacySDKError(rawValue: 4)
    /// The operation handle is invalid or was already released.
    public static let invalidHandle = LegacySDKError(rawValue: 5)
    /// The operation was cancelled.
    public static let cancelled = LegacySDKError(rawValue: 6)
    /// The simulated remote end refused the request (the default injected failure).
    public static let remote = LegacySDKError(rawValue: 7)
    /// A call the SDK documents as not thread-safe was entered concurrently.
    public static let busy = LegacySDKError(rawValue: 8)
    /// The call was made from one of the client's own threads, where it is not allowed.
    public static let wrongThread = LegacySDKError(rawValue: 9)
    /// The SDK ran out of memory or threads.
    public static let resources = LegacySDKError(rawValue: 10)
    /// Pause or resume was called on an operation that is not a stream.
    public static let notAStream = LegacySDKError(rawValue: 11)
    /// A job was posted, or loop-thread delivery asked for, on a client without a loop thread.
    public static let noLoopThread = LegacySDKError(rawValue: 12)
    /// A blocking call was ended early by an interrupt (or by the client's destruction).
    public static let interrupted = LegacySDKError(rawValue: 13)
    /// An interrupt found no call blocked with its key; nothing was changed.
    public static let notBlocked = LegacySDKError(rawValue: 14)
    /// The connection was lost before the request was answered.
    public static let disconnected = LegacySDKError(rawValue: 15)
    /// A request with that id is still pending on the connection.
    public static let duplicateID = LegacySDKError(rawValue: 16)
    /// No request with that id is pending on the connection.
    public static let unknownID = LegacySDKError(rawValue: 17)
    /// The topic already has a listener on this client.
    public static let alreadyListening = LegacySDKError(rawValue: 18)

    /// The SDK's description of the status, followed by its message when there is one.
    public var description: String {
        let status = SDK.statusString(rawValue)
        guard let message, !message.isEmpty else { return "\(status) (\(rawValue))" }
        return "\(status) (\(rawValue)): \(message)"
    }

    /// Compares status codes only; messages are ignored.
    ///
    /// - Parameters:
    ///   - lhs: An error.
    ///   - rhs: Another error.
    /// - Returns: Whether both carry the same status code.
    public static func == (lhs: LegacySDKError, rhs: LegacySDKError) -> Bool {
        lhs.rawValue == rhs.rawValue
    }

    /// Hashes the status code only, consistently with `==`.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(rawValue)
    }
}
