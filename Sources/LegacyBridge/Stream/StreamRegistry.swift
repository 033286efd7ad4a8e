// What a `CallbackStream` value knows of the subscriptions its iterators started, so that `stop()`
// reaches every live one and `statistics` outlives the last. One per stream value, not per
// subscription: its lock is taken when a subscription starts or ends, never per element.

/// The live subscriptions of one stream value and the statistics of the most recent one.
///
/// Rules:
/// - A subscription becomes live only if `stop()` was not called: checking and registering are one
///   step, so a first `next()` racing `stop()` either is stopped with the others or never starts.
/// - The statistics of the most recent subscription are kept after it ended.
@usableFromInline
final class StreamRegistry<Element: Sendable>: Sendable {
    struct Entry {
        weak var storage: CallbackStreamStorage<Element>?
    }

    struct State {
        var live: [Entry] = []
        var latest = Entry()
        var latestID = 0
        var lastStatistics = StreamStatistics()
        var stopped = false
    }

    let state = LockedBox(State())

    @usableFromInline
    init() {}

    /// A new subscription is being created: its number.
    func register() -> Int {
        state.withLock { state in
            state.latestID += 1
            state.latest = Entry()
            return state.latestID
        }
    }

    /// Makes a new subscription live, unless `stop()` was called: then it returns false and the
    /// subscription must end without running `start`.
    @usableFromInline
    func admit(_ storage: CallbackStreamStorage<Element>) -> Bool {
        state.withLock { state in
            if state.stopped { return false }
            state.live.removeAll { $0.storage == nil }
            state.live.append(Entry(storage: storage))
            if storage.subscriptionID == state.latestID { state.latest = Entry(storage: storage) }
            return true
        }
    }

    /// Called from a storage's deinit with its final counters.
    func subscriptionEnded(id: Int, statistics: StreamStatistics) {
        state.withLock { state in
            if id == state.latestID { state.lastStatistics = statistics }
        }
    }

    /// The most recent subscription's counters, live or as they were when it ended.
    @usableFromInline
    var statistics: StreamStatistics {
        let (latest, last) = state.withLock { ($0.latest.storage, $0.lastStatistics) }
        return latest?.statistics ?? last
    }

    /// Stops every live subscription, and every later one before it starts.
    @usableFromInline
    func stopAll() {
        let live = state.withLock { state -> [CallbackStreamStorage<Element>] in
            state.stopped = true
            return state.live.compactMap(\.storage)
        }
        for storage in live { storage.consumerTerminated(cancelled: false) }
    }
}
