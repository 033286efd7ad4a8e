/// A message the broker delivered to a subscription, copied out of libmosquitto's callback.
public struct MQTTMessage: Sendable, Hashable {
    /// The topic the message was published to.
    public var topic: String
    /// The payload bytes.
    public var payload: [UInt8]
    /// The quality of service it was delivered with: 0 or 1.
    public var qos: Int
    /// Whether the broker delivered a retained message.
    public var retained: Bool

    /// Creates a message.
    ///
    /// - Parameters:
    ///   - topic: The topic.
    ///   - payload: The payload bytes.
    ///   - qos: The quality of service.
    ///   - retained: Whether it was a retained message.
    public init(topic: String, payload: [UInt8], qos: Int, retained: Bool) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retained = retained
    }
}
