/// Why a Redis call failed.
public enum RedisError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server answered with an error reply, such as "WRONGTYPE …" or "ERR unknown command".
    case server(String)
    /// The connection could not be made: hiredis's message (for example "Connection refused").
    case connectFailed(String)
    /// The connection was lost while the call was pending: every pending call and every
    /// subscription fails with it. The connection does not reconnect.
    case connectionLost(String)
    /// The connection was shut down, or is not connected.
    case notConnected
    /// hiredis refused the command (it could not be formatted, or the context is closing).
    case commandRefused

    /// What happened, in a sentence.
    public var description: String {
        switch self {
        case .server(let message): "Redis replied with an error: \(message)"
        case .connectFailed(let message): "cannot connect to Redis: \(message)"
        case .connectionLost(let message): "the connection to Redis was lost: \(message)"
        case .notConnected: "the Redis connection is shut down or not connected"
        case .commandRefused: "hiredis refused the command (the connection is closing)"
        }
    }
}
