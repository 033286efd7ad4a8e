import LegacyBridge
import Synchronization

/// What an ``MQTTConnection`` did, counted as it happened. Read it with ``MQTTConnection/statistics``.
public struct MQTTStatistics: Hashable, Sendable {
    /// Messages handed to libmosquitto (`mosquitto_publish` calls that succeeded).
    public var publishes = 0
    /// `on_publish` callbacks: QoS 1 PUBACKs and written QoS 0 messages.
    public var acknowledgements = 0
    /// Acknowledgements libmosquitto gave inside `mosquitto_publish`, before it returned the id.
    public var acknowledgementsInsidePublish = 0
    /// Publishes waiting for their acknowledgement now.
    public var pendingPublishes = 0
    /// Acknowledgements that reached no caller: their caller had been cancelled, had timed out or
    /// had been failed by a disconnect.
    public var lateAcknowledgements = 0
    /// SUBSCRIBE requests sent (`mosquitto_subscribe` calls): one per topic while it has consumers.
    public var subscribes = 0
    /// SUBACKs received.
    public var subscribeAcknowledgements = 0
    /// UNSUBSCRIBE requests sent, when the last consumer of a topic left.
    public var unsubscribes = 0
    /// Messages received (`on_message` callbacks), before the fan-out to consumers.
    public var messages = 0
    /// Connections lost or closed.
    public var disconnects = 0
    /// libmosquitto calls made off the loop thread. Always 0: every call runs on it.
    public var callsOffLoopThread = 0
}

/// The live counters behind ``MQTTStatistics``.
final class MQTTCounters: Sendable {
    let publishes = Atomic<Int>(0)
    let acknowledgements = Atomic<Int>(0)
    let acknowledgementsInsidePublish = Atomic<Int>(0)
    let subscribes = Atomic<Int>(0)
    let subscribeAcknowledgements = Atomic<Int>(0)
    let unsubscribes = Atomic<Int>(0)
    let messages = Atomic<Int>(0)
    let disconnects = Atomic<Int>(0)
    let callsOffLoopThread = Atomic<Int>(0)

    func snapshot(_ table: PendingRequests<Int32, Void>.Statistics) -> MQTTStatistics {
        var s = MQTTStatistics()
        s.publishes = publishes.load(ordering: .relaxed)
        s.acknowledgements = acknowledgements.load(ordering: .relaxed)
        s.acknowledgementsInsidePublish = acknowledgementsInsidePublish.load(ordering: .relaxed)
        s.pendingPublishes = table.pending
        s.lateAcknowledgements = table.lateReplies + table.unknownReplies
        s.subscribes = subscribes.load(ordering: .relaxed)
        s.subscribeAcknowledgements = subscribeAcknowledgements.load(ordering: .relaxed)
        s.unsubscribes = unsubscribes.load(ordering: .relaxed)
        s.messages = messages.load(ordering: .relaxed)
        s.disconnects = disconnects.load(ordering: .relaxed)
        s.callsOffLoopThread = callsOffLoopThread.load(ordering: .relaxed)
        return s
    }
}
