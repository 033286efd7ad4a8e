/// A c-ares status code as a Swift error, like swift-system's `Errno`.
///
/// A raw-value struct with a static member per status c-ares documents (the values of `ARES_E…`
/// in `ares.h`), so a code this type does not name still survives as a value. The description is
/// c-ares's own text (`ares_strerror`) followed by the code.
public struct AresError: Error, RawRepresentable, Hashable, CustomStringConvertible, Sendable {
    /// The c-ares status code (`ARES_E…`).
    public let rawValue: Int32

    /// Creates the error for a c-ares status code.
    ///
    /// - Parameter rawValue: The status code.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The name exists but has no address of the requested family (`ARES_ENODATA`).
    public static let noData = AresError(rawValue: 1)
    /// The server could not interpret the query (`ARES_EFORMERR`).
    public static let formatError = AresError(rawValue: 2)
    /// The server failed (`ARES_ESERVFAIL`).
    public static let serverFailure = AresError(rawValue: 3)
    /// The name does not exist (`ARES_ENOTFOUND`).
    public static let notFound = AresError(rawValue: 4)
    /// The server does not implement the query (`ARES_ENOTIMP`).
    public static let notImplemented = AresError(rawValue: 5)
    /// The server refused the query (`ARES_EREFUSED`).
    public static let refused = AresError(rawValue: 6)
    /// The name is malformed (`ARES_EBADNAME`).
    public static let badName = AresError(rawValue: 8)
    /// The address family is not supported (`ARES_EBADFAMILY`).
    public static let badFamily = AresError(rawValue: 9)
    /// The server's response was malformed (`ARES_EBADRESP`).
    public static let badResponse = AresError(rawValue: 10)
    /// No server could be contacted (`ARES_ECONNREFUSED`): nothing listens at the server's address.
    public static let connectionRefused = AresError(rawValue: 11)
    /// No server answered within the configured attempts (`ARES_ETIMEOUT`).
    public static let timeout = AresError(rawValue: 12)
    /// A configuration file could not be read (`ARES_EFILE`).
    public static let fileError = AresError(rawValue: 14)
    /// c-ares ran out of memory, or no loop thread could be started (`ARES_ENOMEM`).
    public static let noMemory = AresError(rawValue: 15)
    /// The channel (or the resolver) was destroyed with the query pending (`ARES_EDESTRUCTION`);
    /// also thrown by a resolver that has been shut down.
    public static let destruction = AresError(rawValue: 16)
    /// A string argument, such as the server list, is malformed (`ARES_EBADSTR`).
    public static let badString = AresError(rawValue: 17)
    /// The name is not a valid host name (`ARES_ENONAME`).
    public static let noName = AresError(rawValue: 19)
    /// The query was cancelled (`ARES_ECANCELLED`). `resolve` throws `CancellationError` instead
    /// when its task was cancelled; this code only surfaces from c-ares itself.
    public static let cancelled = AresError(rawValue: 24)

    /// c-ares's description of the status followed by its code, e.g.
    /// "Domain name not found (c-ares status 4)".
    public var description: String {
        "\(Ares.statusString(rawValue)) (c-ares status \(rawValue))"
    }
}
