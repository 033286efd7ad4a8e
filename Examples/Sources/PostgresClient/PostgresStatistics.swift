import LegacyBridge
import Synchronization

/// What a ``PostgresClient`` did, counted as it happened. Read it with ``PostgresClient/statistics``.
public struct PostgresStatistics: Hashable, Sendable {
    /// Statements sent (`PQsendQueryParams` calls that succeeded), LISTEN and UNLISTEN included.
    public var statements = 0
    /// Statements sent per connection of the pool, in order.
    public var statementsPerConnection: [Int] = []
    /// Queries waiting for their result now (queued or running).
    public var pendingQueries = 0
    /// Results that reached no caller: their caller had timed out or been cancelled.
    public var lateResults = 0
    /// Queries whose caller left before the query was sent: removed from the queue, never sent.
    public var withdrawnBeforeSending = 0
    /// Cancel requests sent to the server (`PQcancel`), for queries running when their caller left.
    public var cancelRequests = 0
    /// `PQcancel` calls made on the loop thread. Always 0: it blocks on the network, so it runs on
    /// an `OffloadPool` thread.
    public var cancelRequestsOnLoopThread = 0
    /// LISTEN statements sent: one per channel while it has consumers.
    public var listens = 0
    /// UNLISTEN statements sent, when the last consumer of a channel left.
    public var unlistens = 0
    /// Notifications received, before the fan-out to consumers.
    public var notifications = 0
    /// Connections lost (not counting shutdown).
    public var connectionsLost = 0
    /// Connections of the pool that are up now. A lost one is not reconnected: queries go to the
    /// others, and once none is up every query fails with ``PostgresError/connectionLost(_:)``.
    public var connectionsUp = 0
    /// libpq calls made off the loop thread. Always 0: every call but `PQcancel` runs on it.
    public var callsOffLoopThread = 0
}

/// The live counters behind ``PostgresStatistics``, shared by the pool's connections.
final class PostgresCounters: Sendable {
    let withdrawnBeforeSending = Atomic<Int>(0)
    let cancelRequests = Atomic<Int>(0)
    let cancelRequestsOnLoopThread = Atomic<Int>(0)
    let listens = Atomic<Int>(0)
    let unlistens = Atomic<Int>(0)
    let notifications = Atomic<Int>(0)
    let connectionsLost = Atomic<Int>(0)
    let callsOffLoopThread = Atomic<Int>(0)
}
