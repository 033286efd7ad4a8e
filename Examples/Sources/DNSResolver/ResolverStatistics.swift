import Synchronization

/// What a ``Resolver`` did, counted as it happened. Read it with ``Resolver/statistics``.
///
/// The context contract of c-ares: its callback fires exactly once per query and there is no
/// separate release callback, so the resolver gives its retained context back inside that one
/// callback. When the resolver is idle, `contextsRetained == contextsReleased == contextsFreed`
/// and `channelsCreated == channelsDestroyed`.
public struct ResolverStatistics: Hashable, Sendable {
    /// Queries handed to c-ares (`ares_getaddrinfo` calls).
    public var queriesStarted = 0
    /// Contexts retained for c-ares (one per query).
    public var contextsRetained = 0
    /// Contexts given back, inside c-ares's callback.
    public var contextsReleased = 0
    /// Contexts deallocated (counted in their deinit).
    public var contextsFreed = 0
    /// Channels created (`ares_init_options`), one per query plus one to check the configuration.
    public var channelsCreated = 0
    /// Channels destroyed (`ares_destroy`).
    public var channelsDestroyed = 0
    /// Answers c-ares gave inside `ares_getaddrinfo`, before it returned (`/etc/hosts`,
    /// `localhost`, numeric addresses of the requested family).
    public var answersInsideStart = 0
    /// Answers c-ares gave later, from the event loop (a DNS reply, a timeout, a refused server).
    public var answersFromEventLoop = 0
    /// Answers c-ares gave inside `ares_cancel` (`ARES_ECANCELLED`): re-entrant cancels.
    public var answersInsideCancel = 0
    /// Answers c-ares gave inside `ares_destroy` (`ARES_EDESTRUCTION`), when the resolver shut
    /// down with queries pending.
    public var answersInsideDestroy = 0
    /// `ares_cancel` calls made for a pending query.
    public var cancelsApplied = 0
    /// Cancels that arrived on the loop thread after the query had been answered (nothing to do).
    public var cancelsAfterAnswer = 0
    /// Callbacks c-ares made for a query that had already been answered. Always 0 unless c-ares
    /// breaks its contract (the context is then not released twice).
    public var repeatedCallbacks = 0
    /// c-ares calls made off the loop thread. Always 0: every channel call is posted to it.
    public var callsOffLoopThread = 0

    /// Creates empty statistics.
    public init() {}
}

/// The live counters behind ``ResolverStatistics``: atomics, so any thread may read them.
final class ResolverCounters: Sendable {
    let queriesStarted = Atomic<Int>(0)
    let contextsRetained = Atomic<Int>(0)
    let contextsReleased = Atomic<Int>(0)
    let contextsFreed = Atomic<Int>(0)
    let channelsCreated = Atomic<Int>(0)
    let channelsDestroyed = Atomic<Int>(0)
    let answersInsideStart = Atomic<Int>(0)
    let answersFromEventLoop = Atomic<Int>(0)
    let answersInsideCancel = Atomic<Int>(0)
    let answersInsideDestroy = Atomic<Int>(0)
    let cancelsApplied = Atomic<Int>(0)
    let cancelsAfterAnswer = Atomic<Int>(0)
    let repeatedCallbacks = Atomic<Int>(0)
    let callsOffLoopThread = Atomic<Int>(0)

    var snapshot: ResolverStatistics {
        var out = ResolverStatistics()
        out.queriesStarted = queriesStarted.load(ordering: .relaxed)
        out.contextsRetained = contextsRetained.load(ordering: .relaxed)
        out.contextsReleased = contextsReleased.load(ordering: .relaxed)
        out.contextsFreed = contextsFreed.load(ordering: .relaxed)
        out.channelsCreated = channelsCreated.load(ordering: .relaxed)
        out.channelsDestroyed = channelsDestroyed.load(ordering: .relaxed)
        out.answersInsideStart = answersInsideStart.load(ordering: .relaxed)
        out.answersFromEventLoop = answersFromEventLoop.load(ordering: .relaxed)
        out.answersInsideCancel = answersInsideCancel.load(ordering: .relaxed)
        out.answersInsideDestroy = answersInsideDestroy.load(ordering: .relaxed)
        out.cancelsApplied = cancelsApplied.load(ordering: .relaxed)
        out.cancelsAfterAnswer = cancelsAfterAnswer.load(ordering: .relaxed)
        out.repeatedCallbacks = repeatedCallbacks.load(ordering: .relaxed)
        out.callsOffLoopThread = callsOffLoopThread.load(ordering: .relaxed)
        return out
    }
}

extension Atomic where Value == Int {
    /// Adds one (relaxed: these are counters, read for reports and tests).
    func increment() {
        self.add(1, ordering: .relaxed)
    }
}
