import Synchronization

/// What a ``Database`` has done so far: the counts its tests compare once it is closed.
public struct DatabaseStatistics: Sendable, Equatable {
    /// Calls to `query`.
    public var queries = 0
    /// Per-query interrupt states freed: equal to `queries` once nothing holds on to a call.
    public var queryStatesFreed = 0
    /// Connections opened (one per pool thread that ran a query).
    public var connectionsOpened = 0
    /// Connections closed.
    public var connectionsClosed = 0
    /// Statements prepared.
    public var statementsPrepared = 0
    /// Statements finalized.
    public var statementsFinalized = 0
    /// Cancellations or timeouts that reached a running query (its interrupt was requested).
    public var interruptsRequested = 0
    /// Queries that ended with `SQLITE_INTERRUPT` or saw the interrupt before their first step.
    public var queriesInterrupted = 0
    /// Queries that stepped to their end.
    public var queriesCompleted = 0
}

/// The counters behind ``DatabaseStatistics``.
final class DatabaseCounters: Sendable {
    let queries = Atomic<Int>(0)
    let queryStatesFreed = Atomic<Int>(0)
    let connectionsOpened = Atomic<Int>(0)
    let connectionsClosed = Atomic<Int>(0)
    let statementsPrepared = Atomic<Int>(0)
    let statementsFinalized = Atomic<Int>(0)
    let interruptsRequested = Atomic<Int>(0)
    let queriesInterrupted = Atomic<Int>(0)
    let queriesCompleted = Atomic<Int>(0)

    var snapshot: DatabaseStatistics {
        var out = DatabaseStatistics()
        out.queries = queries.load(ordering: .acquiring)
        out.queryStatesFreed = queryStatesFreed.load(ordering: .acquiring)
        out.connectionsOpened = connectionsOpened.load(ordering: .acquiring)
        out.connectionsClosed = connectionsClosed.load(ordering: .acquiring)
        out.statementsPrepared = statementsPrepared.load(ordering: .acquiring)
        out.statementsFinalized = statementsFinalized.load(ordering: .acquiring)
        out.interruptsRequested = interruptsRequested.load(ordering: .acquiring)
        out.queriesInterrupted = queriesInterrupted.load(ordering: .acquiring)
        out.queriesCompleted = queriesCompleted.load(ordering: .acquiring)
        return out
    }
}

extension Atomic where Value == Int {
    func increment() {
        add(1, ordering: .acquiringAndReleasing)
    }
}
