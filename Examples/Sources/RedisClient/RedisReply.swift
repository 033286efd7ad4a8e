/// A reply from Redis, copied out of hiredis's `redisReply` before its callback returned.
public enum RedisReply: Hashable, Sendable {
    /// A bulk string (`GET`, `ECHO`), as bytes: Redis strings are binary.
    case string([UInt8])
    /// A status line, such as "OK" or "PONG".
    case status(String)
    /// An integer (`INCR`, `DEL`, `PUBLISH`).
    case integer(Int64)
    /// An array of replies (`LRANGE`, `BLPOP`).
    case array([RedisReply])
    /// No value (a missing key).
    case null
    /// An error inside an array (an `EXEC` whose command failed). An error reply on its own is
    /// thrown as ``RedisError/server(_:)`` instead.
    case error(String)

    /// The bulk string or status as text (UTF-8, invalid bytes replaced); nil for other replies.
    public var text: String? {
        switch self {
        case .string(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let status): status
        default: nil
        }
    }
}

/// A message published to a channel the connection follows.
public struct RedisMessage: Hashable, Sendable {
    /// The channel it was published to.
    public var channel: String
    /// Its payload.
    public var payload: [UInt8]

    /// Creates a message.
    ///
    /// - Parameters:
    ///   - channel: The channel.
    ///   - payload: The payload bytes.
    public init(channel: String, payload: [UInt8]) {
        self.channel = channel
        self.payload = payload
    }
}
