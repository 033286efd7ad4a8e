// The id → waiter table of LegacyReplyClient: a pure value, asked under the client's lock; the
// waiters it hands back are resumed after the lock is released.
//
// Its one subtle case: an SDK-assigned id is known only when the send returns, and a reply can
// arrive before that (synchronously inside the send, or on another thread). While any
// assigned-id send is in flight, a reply for an id nobody waits for is parked; the send that
// returns that id claims it; parked replies nobody claimed are counted unmatched once no
// assigned-id send is in flight.

/// Waiters by id, and what happened to replies nobody waited for.
///
/// Rules:
/// - An id has at most one waiter; a second registration is refused.
/// - A reply completes the waiter of its id, which leaves the table; the id can be used again.
/// - A reply with attempt above 1 is a duplicate, a report after an earlier callback or a late
///   reply: it never completes a waiter (the id may name a newer request by now).
/// - While an assigned-id send is in flight, a first reply for an id without a waiter is parked,
///   the first one per id; `assignedSendEnded` claims the parked reply of the id it returns.
/// - When the last assigned-id send in flight ends, every unclaimed parked reply is counted
///   unmatched and dropped.
/// - An assigned id that already has a waiter (a chosen id registered and not yet sent: the two
///   kinds share one id space) is a collision: the assigned request is not registered.
/// - `removeAll` hands back every waiter (a disconnect nobody reported per request).
struct ReplyTable<Waiter> {
    /// What a reply does to the table.
    enum ReplyAction {
        /// Complete this waiter with the reply.
        case complete(Waiter)
        /// Kept until the assigned-id send in flight returns its id.
        case parked
        /// Nobody waits for it: counted.
        case unmatched
    }

    /// What the end of an assigned-id send does.
    enum SendEndAction {
        /// The waiter now waits for its reply.
        case registered
        /// Its reply came first: complete the waiter with it.
        case claimed(RawReply)
        /// The send failed: nothing was registered.
        case failed
        /// The assigned id has a waiter already: nothing was registered.
        case collision
    }

    /// Counts of what happened to replies.
    struct Statistics: Hashable {
        var matched = 0
        var unmatched = 0
        var duplicates = 0
        var claimedParked = 0
        var failedByDisconnect = 0
        var collisions = 0
    }

    private var waiters: [UInt64: Waiter] = [:]
    private var parked: [UInt64: RawReply] = [:]
    private var assignedSendsInFlight = 0
    private(set) var statistics = Statistics()

    /// Waiters now.
    var count: Int { waiters.count }

    /// Registers the waiter of a caller-chosen id, before its send.
    ///
    /// - Returns: `false` when the id already has a waiter (nothing changed).
    mutating func register(_ id: UInt64, _ waiter: Waiter) -> Bool {
        guard waiters[id] == nil else { return false }
        waiters[id] = waiter
        return true
    }

    /// Removes the waiter of `id`, if any: a cancel, a timeout, or a send the SDK refused.
    mutating func remove(_ id: UInt64) -> Waiter? {
        waiters.removeValue(forKey: id)
    }

    /// An assigned-id send is about to call the SDK.
    mutating func assignedSendStarted() {
        assignedSendsInFlight += 1
    }

    /// An assigned-id send returned: `id` on success, `nil` when the SDK refused it.
    mutating func assignedSendEnded(_ id: UInt64?, _ waiter: Waiter) -> SendEndAction {
        precondition(assignedSendsInFlight > 0, "ReplyTable: an assigned-id send ended that never started")
        assignedSendsInFlight -= 1
        let action: SendEndAction
        if let id {
            if let reply = parked.removeValue(forKey: id) {
                statistics.claimedParked += 1
                statistics.matched += 1
                action = .claimed(reply)
            } else if waiters[id] != nil {
                statistics.collisions += 1
                action = .collision
            } else {
                waiters[id] = waiter
                action = .registered
            }
        } else {
            action = .failed
        }
        if assignedSendsInFlight == 0 {
            statistics.unmatched += parked.count
            parked.removeAll()
        }
        return action
    }

    /// A reply arrived.
    mutating func reply(_ reply: RawReply) -> ReplyAction {
        guard reply.attempt == 1 else {
            statistics.duplicates += 1
            statistics.unmatched += 1
            return .unmatched
        }
        if let waiter = waiters.removeValue(forKey: reply.id) {
            statistics.matched += 1
            return .complete(waiter)
        }
        if assignedSendsInFlight > 0, parked[reply.id] == nil {
            parked[reply.id] = reply
            return .parked
        }
        statistics.unmatched += 1
        return .unmatched
    }

    /// Every waiter, removed: the connection dropped them all without a reply each.
    mutating func removeAll() -> [Waiter] {
        let all = Array(waiters.values)
        waiters.removeAll()
        statistics.failedByDisconnect += all.count
        return all
    }
}

extension ReplyTable: Sendable where Waiter: Sendable {}
