/// The rows and status of one statement, copied out of libpq's `PGresult`.
public struct PostgresResult: Hashable, Sendable {
    /// The column names, in order.
    public var columns: [String] = []
    /// The rows, each a value per column in text form; nil for SQL NULL.
    public var rows: [[String?]] = []
    /// The command tag, e.g. "SELECT 3" or "INSERT 0 1".
    public var commandTag: String = ""

    /// Creates an empty result.
    public init() {}
}

/// A notification sent with NOTIFY (or `pg_notify`) to a channel the client listens on.
public struct PostgresNotification: Hashable, Sendable {
    /// The channel.
    public var channel: String
    /// The payload ("" when NOTIFY gave none).
    public var payload: String
    /// The process id of the server backend that sent it.
    public var senderPID: Int32
}

/// Why a PostgreSQL call failed.
public enum PostgresError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server failed the statement: its SQLSTATE code (e.g. "57014" for a statement timeout
    /// or a cancel, "42601" for a syntax error) and message.
    case server(sqlState: String, message: String)
    /// The connection could not be made: libpq's message.
    case connectFailed(String)
    /// The connection was lost: every pending query and every subscription fails with it. The
    /// client does not reconnect.
    case connectionLost(String)
    /// The client was shut down.
    case notConnected

    /// The SQLSTATE of a statement cancelled by `statement_timeout` or by a cancel request.
    public static let queryCanceledState = "57014"

    /// What happened, in a sentence.
    public var description: String {
        switch self {
        case .server(let state, let message): "PostgreSQL failed the statement (SQLSTATE \(state)): \(message)"
        case .connectFailed(let message): "cannot connect to PostgreSQL: \(message)"
        case .connectionLost(let message): "the connection to PostgreSQL was lost: \(message)"
        case .notConnected: "the PostgreSQL client is shut down"
        }
    }
}
