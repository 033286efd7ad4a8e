/// The server answered a download with an HTTP status of 400 or more.
///
/// libcurl stops such a transfer before its body (`CURLOPT_FAILONERROR`), so the stream delivers
/// no byte of the error page and then throws this error.
public struct HTTPStatusError: Error, Hashable, CustomStringConvertible, Sendable {
    /// The HTTP status, e.g. 404.
    public let status: Int

    /// Creates the error for an HTTP status.
    ///
    /// - Parameter status: The status the server answered.
    public init(status: Int) {
        self.status = status
    }

    /// A readable description, e.g. "the server answered HTTP status 404".
    public var description: String {
        "the server answered HTTP status \(status)"
    }
}
