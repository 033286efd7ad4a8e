/// A libcurl result code (`CURLcode`) as a Swift error, like swift-system's `Errno`.
///
/// A raw-value struct with a static member per code this example meets (the values of `CURLE_…`
/// in `curl.h`); any other code survives as a value. The description is libcurl's own text
/// (`curl_easy_strerror`) followed by the code.
public struct CurlError: Error, RawRepresentable, Hashable, CustomStringConvertible, Sendable {
    /// The `CURLcode`.
    public let rawValue: Int32

    /// Creates the error for a libcurl result code.
    ///
    /// - Parameter rawValue: The `CURLcode`.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The URL's scheme is not allowed (only `http` and `https` are) (`CURLE_UNSUPPORTED_PROTOCOL`).
    public static let unsupportedProtocol = CurlError(rawValue: 1)
    /// libcurl could not be initialised (`CURLE_FAILED_INIT`).
    public static let failedInit = CurlError(rawValue: 2)
    /// The URL is malformed (`CURLE_URL_MALFORMAT`).
    public static let malformedURL = CurlError(rawValue: 3)
    /// The host name could not be resolved (`CURLE_COULDNT_RESOLVE_HOST`).
    public static let couldNotResolveHost = CurlError(rawValue: 6)
    /// No connection could be made, or the loopback guard refused it (`CURLE_COULDNT_CONNECT`).
    public static let couldNotConnect = CurlError(rawValue: 7)
    /// The transfer ended before the announced size (`CURLE_PARTIAL_FILE`).
    public static let partialFile = CurlError(rawValue: 18)
    /// The server answered with an HTTP status of 400 or more (`CURLE_HTTP_RETURNED_ERROR`).
    /// A download reports ``HTTPStatusError`` instead, which carries the status.
    public static let httpReturnedError = CurlError(rawValue: 22)
    /// The write callback refused the data (`CURLE_WRITE_ERROR`).
    public static let writeError = CurlError(rawValue: 23)
    /// libcurl ran out of memory, or no loop thread could be started (`CURLE_OUT_OF_MEMORY`).
    public static let outOfMemory = CurlError(rawValue: 27)
    /// The transfer took longer than allowed (`CURLE_OPERATION_TIMEDOUT`).
    public static let timedOut = CurlError(rawValue: 28)
    /// The transfer was cancelled (`CURLE_ABORTED_BY_CALLBACK`): reported for transfers the loop
    /// removed because they were cancelled or because the loop shut down.
    public static let aborted = CurlError(rawValue: 42)
    /// The server sent nothing (`CURLE_GOT_NOTHING`).
    public static let gotNothing = CurlError(rawValue: 52)
    /// Receiving data failed (`CURLE_RECV_ERROR`).
    public static let receiveError = CurlError(rawValue: 56)

    /// libcurl's description of the code followed by the code, e.g.
    /// "Couldn't connect to server (curl code 7)".
    public var description: String {
        "\(Curl.codeString(rawValue)) (curl code \(rawValue))"
    }
}
