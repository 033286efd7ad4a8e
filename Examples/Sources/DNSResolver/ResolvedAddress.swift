/// One address a name resolved to, copied out of c-ares's answer.
public struct ResolvedAddress: Hashable, Sendable, CustomStringConvertible {
    /// An address family.
    public enum Family: Hashable, Sendable {
        /// IPv4 (`AF_INET`): 4 bytes.
        case ipv4
        /// IPv6 (`AF_INET6`): 16 bytes.
        case ipv6
    }

    /// The address's family.
    public let family: Family
    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public let bytes: [UInt8]
    /// The presentation form, e.g. "127.0.0.1" or "::1".
    public let description: String

    /// Creates an address.
    ///
    /// - Parameters:
    ///   - family: The family.
    ///   - bytes: The address in network byte order (4 or 16 bytes).
    ///   - description: Its presentation form.
    public init(family: Family, bytes: [UInt8], description: String) {
        self.family = family
        self.bytes = bytes
        self.description = description
    }
}
