/// A libmosquitto status code as a Swift error, like swift-system's `Errno`.
///
/// A raw-value struct with a static member per status this example meets (the values of
/// `MOSQ_ERR_…` in `mosquitto.h`), so a code it does not name still survives as a value. The
/// description is libmosquitto's own text (`mosquitto_strerror`) followed by the code.
public struct MQTTError: Error, RawRepresentable, Hashable, CustomStringConvertible, Sendable {
    /// The libmosquitto status code (`MOSQ_ERR_…`).
    public let rawValue: Int32

    /// Creates the error for a libmosquitto status code.
    ///
    /// - Parameter rawValue: The status code.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// libmosquitto ran out of memory, or no loop thread could be started (`MOSQ_ERR_NOMEM`).
    public static let noMemory = MQTTError(rawValue: 1)
    /// An argument is invalid, for example a topic with wildcards given to publish (`MOSQ_ERR_INVAL`).
    public static let invalidArgument = MQTTError(rawValue: 3)
    /// The client is not connected: it was shut down, or never connected (`MOSQ_ERR_NO_CONN`).
    public static let noConnection = MQTTError(rawValue: 4)
    /// The broker refused the connection (`MOSQ_ERR_CONN_REFUSED`).
    public static let connectionRefused = MQTTError(rawValue: 5)
    /// The connection to the broker was lost (`MOSQ_ERR_CONN_LOST`): every pending publish and
    /// every subscription fails with it.
    public static let connectionLost = MQTTError(rawValue: 7)

    /// libmosquitto's description of the status followed by its code, e.g.
    /// "The connection was lost. (mosquitto status 7)".
    public var description: String {
        "\(Mosquitto.statusString(rawValue)) (mosquitto status \(rawValue))"
    }
}
