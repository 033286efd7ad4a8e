import LegacyBridge
import Synchronization

/// What a ``RedisConnection`` did, counted as it happened. Read it with ``RedisConnection/statistics``.
public struct RedisStatistics: Hashable, Sendable {
    /// Commands handed to hiredis (`redisAsyncCommandArgv` calls that succeeded).
    public var commands = 0
    /// Replies received for commands (not for subscriptions).
    public var replies = 0
    /// Commands waiting for their reply now.
    public var pendingCommands = 0
    /// Replies that reached no caller: their caller had timed out or been cancelled (hiredis
    /// cannot withdraw a command, so its reply still comes), or a lost connection failed it.
    public var lateReplies = 0
    /// SUBSCRIBE commands sent: one per channel while it has consumers.
    public var subscribes = 0
    /// The server's confirmations of SUBSCRIBE: from then on the channel's messages arrive.
    public var subscribeConfirmations = 0
    /// UNSUBSCRIBE commands sent, when the last consumer of a channel left.
    public var unsubscribes = 0
    /// Messages received on followed channels, before the fan-out to consumers.
    public var messages = 0
    /// Connections lost or closed after they were made.
    public var disconnects = 0
    /// hiredis calls made off the loop thread. Always 0: every call runs on it.
    public var callsOffLoopThread = 0
}

/// The live counters behind ``RedisStatistics``, shared by a connection's two contexts.
final class RedisCounters: Sendable {
    let commands = Atomic<Int>(0)
    let replies = Atomic<Int>(0)
    let subscribes = Atomic<Int>(0)
    let subscribeConfirmations = Atomic<Int>(0)
    let unsubscribes = Atomic<Int>(0)
    let messages = Atomic<Int>(0)
    let disconnects = Atomic<Int>(0)
    let callsOffLoopThread = Atomic<Int>(0)

    func snapshot(_ table: PendingRequests<UInt64, RedisReply>.Statistics) -> RedisStatistics {
        var s = RedisStatistics()
        s.commands = commands.load(ordering: .relaxed)
        s.replies = replies.load(ordering: .relaxed)
        s.pendingCommands = table.pending
        s.lateReplies = table.lateReplies + table.unknownReplies
        s.subscribes = subscribes.load(ordering: .relaxed)
        s.subscribeConfirmations = subscribeConfirmations.load(ordering: .relaxed)
        s.unsubscribes = unsubscribes.load(ordering: .relaxed)
        s.messages = messages.load(ordering: .relaxed)
        s.disconnects = disconnects.load(ordering: .relaxed)
        s.callsOffLoopThread = callsOffLoopThread.load(ordering: .relaxed)
        return s
    }
}
