/// An SQLite result code as a Swift error, like swift-system's `Errno`.
///
/// A raw-value struct with a static member per code the example names, so any other code still
/// survives as a value. The description is SQLite's own text (`sqlite3_errstr`), the connection's
/// message when there was one, and the code.
public struct SQLiteError: Error, Hashable, CustomStringConvertible, Sendable {
    /// The SQLite result code (`SQLITE_…`), extended codes included.
    public let code: Int32
    /// The connection's message (`sqlite3_errmsg`) when the error came with one.
    public let message: String

    /// Creates the error for an SQLite result code.
    ///
    /// - Parameters:
    ///   - code: The result code.
    ///   - message: The connection's message, if any.
    public init(code: Int32, message: String = "") {
        self.code = code
        self.message = message
    }

    /// A generic SQL error, for example a syntax error (`SQLITE_ERROR`).
    public static let error = SQLiteError(code: 1)
    /// The query was interrupted (`SQLITE_INTERRUPT`).
    public static let interrupted = SQLiteError(code: 9)

    /// Whether two errors have the same code; the message is not compared.
    public static func == (lhs: SQLiteError, rhs: SQLiteError) -> Bool {
        lhs.code == rhs.code
    }

    /// Hashes the code.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    /// SQLite's text for the code, the message, and the code.
    public var description: String {
        let text = SQLite.describe(code)
        return message.isEmpty ? "\(text) (SQLite code \(code))" : "\(text): \(message) (SQLite code \(code))"
    }
}
