// The pure bookkeeping behind `PendingRequests`: which id belongs to which waiting request, which
// replies wait for a request still starting, and how recently ended ids ended.
//
// It owns no lock, calls no closure and resumes nothing: each event returns what the storage must
// do once it has released its lock (complete a request, fail some, hand values to `onDiscard`).
// Each request's own outcome (first wins, timeout, cancellation) is its one-shot gate's business;
// this table only decides which gate a reply or a failure goes to, so it never hands one request
// out twice and never keeps one after its caller has returned.

/// The table of one `PendingRequests`: pending requests by id, the starts of requests whose SDK
/// assigns the id, replies parked for them, and a bounded memory of ended ids.
///
/// Rules:
/// - An id is pending from its registration until a reply takes it, `failAll` takes it, or its
///   caller ends. A registration is handed out (to a reply, to `failAll`, to a takeover) at
///   most once, and nothing is kept for a caller that ended.
/// - A caller-assigned registration of a pending id is refused.
/// - An SDK-assigned start that returns a pending id takes the id over: the older registration
///   is handed back to be failed.
/// - While a start runs, a reply for an id that is not pending is parked: the first one per id,
///   a later one for the same id is a duplicate. A start that returns the id claims its parked
///   reply if it began before that reply arrived. A parked reply no running start can claim any
///   more is dropped and classified, so nothing stays parked once no start that could claim it
///   is running.
/// - `failAll` takes every pending registration and marks every running start failed; such a
///   start fails when it returns, unless a reply parked before the `failAll` claims it.
/// - A reply that finds no request is classified by the memory of ended ids: after a reply it is
///   a duplicate, after any other ending it is late, otherwise unknown. Its value is dropped.
/// - Tokens only grow, so a registration is told from a newer one with the same id.
/// - A cancel by id is made only for the request it was handed out for: if a newer registration
///   holds the id when the cancel is due, it is skipped. While it runs, the id stays taken: a
///   caller-assigned registration of it is refused, so the cancel cannot reach a newer request.
/// - With ``reservesAbandonedIDs`` (an SDK that cannot withdraw a request), an id whose caller
///   left before its reply (a timeout or a cancellation) stays reserved until that late reply
///   comes, a takeover by the SDK or `failAll`: a caller-assigned registration of it is refused
///   meanwhile, so the late reply cannot complete a newer request that reused the id. A request
///   whose start threw made no SDK call and reserves nothing.
@usableFromInline
struct PendingRequestsStateMachine<ID: Hashable, Value, Entry> {
    @usableFromInline typealias Reply = Result<Value, any Error>

    /// How a request ended, from its caller's point of view.
    @usableFromInline
    enum Outcome: Hashable, Sendable {
        case succeeded
        case failed
        case timedOut
        case cancelled
    }

    /// How a remembered id last ended, to classify replies that find no request.
    @usableFromInline
    enum Ending: Hashable, Sendable {
        /// A reply took its request: a further reply is a duplicate.
        case replied
        /// Its request ended another way (timeout, cancellation, `failAll`, a failed start): a
        /// reply is late.
        case abandoned
    }

    /// What a reply that found no request was.
    @usableFromInline
    enum Unmatched: Hashable, Sendable {
        case unknown
        case duplicate
        case late
    }

    @usableFromInline
    struct Registration {
        @usableFromInline let token: UInt64
        @usableFromInline let entry: Entry
        /// The memory of endings' serial when the id was registered: how the id ended before
        /// does not count while it is pending again.
        @usableFromInline let since: UInt64

        @inlinable
        init(token: UInt64, entry: Entry, since: UInt64) {
            self.token = token
            self.entry = entry
            self.since = since
        }
    }

    @usableFromInline
    struct Starting {
        @usableFromInline let token: UInt64
        /// Set by `failAll` while the start ran, with the clock of that `failAll`.
        @usableFromInline var failure: (error: any Error, clock: UInt64)?

        @inlinable
        init(token: UInt64) {
            self.token = token
            self.failure = nil
        }
    }

    @usableFromInline
    struct Parked {
        @usableFromInline let reply: Reply
        /// When the reply arrived, on the machine's clock.
        @usableFromInline let clock: UInt64
        /// The newest token issued when it arrived: only starts up to it may claim it.
        @usableFromInline let newestToken: UInt64
        /// Tells this parked reply from a later one for the same id in `parkedOrder`.
        @usableFromInline let serial: UInt64

        @inlinable
        init(reply: Reply, clock: UInt64, newestToken: UInt64, serial: UInt64) {
            self.reply = reply
            self.clock = clock
            self.newestToken = newestToken
            self.serial = serial
        }
    }

    /// Counters kept by the machine.
    @usableFromInline
    struct Counters: Hashable, Sendable {
        @usableFromInline var succeeded = 0
        @usableFromInline var failed = 0
        @usableFromInline var timedOut = 0
        @usableFromInline var cancelled = 0
        @usableFromInline var refused = 0
        @usableFromInline var unknownReplies = 0
        @usableFromInline var duplicateReplies = 0
        @usableFromInline var lateReplies = 0
        @usableFromInline var skippedCancels = 0
    }

    // MARK: Actions

    /// Result of `register`.
    @usableFromInline
    enum RegisterAction {
        /// The id is now pending under `token`.
        case registered(token: UInt64)
        /// The id is pending already: refuse the request without starting it.
        case refused
    }

    /// What a start that returned its id gets.
    @usableFromInline
    enum StartOutcome {
        /// The id is pending: wait for its reply.
        case registered
        /// A reply parked while the start ran: complete the request with it now.
        case claimed(Reply)
        /// `failAll` ran while the start ran: fail the request with its error now.
        case failed(any Error)
    }

    /// Result of `startReturned`.
    @usableFromInline
    struct StartReturnedAction {
        @usableFromInline var outcome: StartOutcome
        /// An older registration of the same id, taken over: fail it (the SDK reassigned its id).
        @usableFromInline var takenOver: Entry?
        /// Success values of parked replies that were dropped: to `onDiscard`.
        @usableFromInline var discarded: [Value]

        @inlinable
        init(outcome: StartOutcome, takenOver: Entry?, discarded: [Value]) {
            self.outcome = outcome
            self.takenOver = takenOver
            self.discarded = discarded
        }
    }

    /// Result of `complete`.
    @usableFromInline
    enum CompleteAction {
        /// Complete this request with the reply.
        case deliver(Entry)
        /// Kept for a start that may return this id.
        case parked
        /// Dropped and counted; a success value goes to `onDiscard`.
        case dropped(Unmatched, discard: Value?)
    }

    // MARK: State

    @usableFromInline var pending: [ID: Registration] = [:]
    /// Running starts in token order (tokens only grow, so appending keeps the order).
    @usableFromInline var starting: [Starting] = []
    @usableFromInline var parked: [ID: Parked] = [:]
    /// Parked replies in arrival order (by `newestToken`, which never decreases); entries whose
    /// reply was claimed or replaced are skipped by their serial.
    @usableFromInline var parkedOrder: [(id: ID, serial: UInt64)] = []
    @usableFromInline var parkedOrderHead = 0
    @usableFromInline var endings: RecentEndings<ID, Ending>
    @usableFromInline var newestToken: UInt64 = 0
    @usableFromInline var clock: UInt64 = 0
    @usableFromInline var counters = Counters()
    /// Ids whose SDK cancel is running, with the token of the request it cancels.
    @usableFromInline var cancelling: [ID: UInt64] = [:]
    /// Whether an abandoned id stays reserved until its late reply (the SDK cannot withdraw a
    /// request, so its reply will come).
    @usableFromInline let reservesAbandonedIDs: Bool
    /// Ids whose caller ended before their reply, reserved until it comes (only with
    /// ``reservesAbandonedIDs``).
    @usableFromInline var awaitingLateReply: Set<ID> = []

    /// A table that remembers how the last `rememberedEndings` ids ended; with
    /// `reservesAbandonedIDs`, an abandoned id stays reserved until its late reply.
    init(rememberedEndings: Int, reservesAbandonedIDs: Bool = false) {
        self.endings = RecentEndings(capacity: rememberedEndings)
        self.reservesAbandonedIDs = reservesAbandonedIDs
    }

    // MARK: Events

    /// A caller-assigned request registers `id` before its SDK call.
    @inlinable
    mutating func register(_ id: ID, entry: Entry) -> RegisterAction {
        if pending[id] != nil || (!cancelling.isEmpty && cancelling[id] != nil)
            || (!awaitingLateReply.isEmpty && awaitingLateReply.contains(id))
        {
            counters.refused += 1
            return .refused
        }
        let token = issueToken()
        pending[id] = Registration(token: token, entry: entry, since: endings.serial)
        return .registered(token: token)
    }

    /// An SDK-assigned request begins its start; the returned token names it.
    @inlinable
    mutating func beginStart() -> UInt64 {
        let token = issueToken()
        starting.append(Starting(token: token))
        return token
    }

    /// The start `token` returned `id`.
    @inlinable
    mutating func startReturned(_ token: UInt64, id: ID, entry: Entry) -> StartReturnedAction {
        // The SDK gave the id to a new request: it is done with the abandoned one.
        if !awaitingLateReply.isEmpty { awaitingLateReply.remove(id) }
        let failure = removeStarting(token)
        var action = StartReturnedAction(outcome: .registered, takenOver: nil, discarded: [])
        let parkedReply = takeParked(id)
        let claimable = parkedReply.map { $0.newestToken >= token } ?? false

        if let parkedReply, claimable, failure.map({ $0.clock > parkedReply.clock }) ?? true {
            // The reply arrived while this start ran, before any failAll it saw: it is this
            // request's reply.
            action.outcome = .claimed(parkedReply.reply)
            endings.record(id, .replied)
        } else {
            if let parkedReply {
                // Arrived before this start began, or after a failAll that fails this start.
                drop(parkedReply.reply, id: id, into: &action.discarded)
            }
            if let failure {
                action.outcome = .failed(failure.error)
                endings.record(id, .abandoned)
            } else {
                let registration = Registration(token: token, entry: entry, since: endings.serial)
                action.takenOver = pending.updateValue(registration, forKey: id)?.entry
            }
        }
        evictUnclaimable(into: &action.discarded)
        return action
    }

    /// The start `token` threw: no id, no request. Returns the success values of parked replies
    /// that nobody can claim any more.
    @inlinable
    mutating func startThrew(_ token: UInt64) -> [Value] {
        _ = removeStarting(token)
        var discarded: [Value] = []
        evictUnclaimable(into: &discarded)
        return discarded
    }

    /// A reply for `id` arrived.
    @inlinable
    mutating func complete(_ id: ID, with reply: Reply) -> CompleteAction {
        if let registration = pending.removeValue(forKey: id) {
            endings.record(id, .replied)
            return .deliver(registration.entry)
        }
        if !awaitingLateReply.isEmpty, awaitingLateReply.remove(id) != nil {
            counters.lateReplies += 1
            endings.record(id, .replied)
            return .dropped(.late, discard: Self.value(of: reply))
        }
        if !starting.isEmpty {
            if parked[id] != nil {
                counters.duplicateReplies += 1
                return .dropped(.duplicate, discard: Self.value(of: reply))
            }
            clock += 1
            parked[id] = Parked(reply: reply, clock: clock, newestToken: newestToken, serial: clock)
            parkedOrder.append((id, clock))
            return .parked
        }
        let kind = classify(id)
        return .dropped(kind, discard: Self.value(of: reply))
    }

    /// The cancel handed out for request `token` with `id` is about to call the SDK. Returns
    /// whether it may: not when a newer registration holds the id, whose request it would stop.
    /// When it may, the id stays taken until ``cancelReturned(_:token:)``.
    @inlinable
    mutating func cancelBegins(_ id: ID, token: UInt64) -> Bool {
        if let registration = pending[id], registration.token != token {
            counters.skippedCancels += 1
            return false
        }
        if let running = cancelling[id], running != token {
            counters.skippedCancels += 1
            return false
        }
        cancelling[id] = token
        return true
    }

    /// The SDK's cancel for request `token` with `id` returned: the id is free again (if its
    /// request ended).
    @inlinable
    mutating func cancelReturned(_ id: ID, token: UInt64) {
        if cancelling[id] == token { cancelling[id] = nil }
    }

    /// A reply delivered by `complete` lost: its request's outcome had been decided already
    /// (timeout or cancellation, its caller not yet back). It was a late reply.
    @inlinable
    mutating func deliveredReplyLost() {
        counters.lateReplies += 1
    }

    /// Every pending request and every running start fails. Returns the pending registrations.
    @inlinable
    mutating func failAll(_ error: any Error) -> [Entry] {
        clock += 1
        for index in starting.indices where starting[index].failure == nil {
            starting[index].failure = (error, clock)
        }
        let taken = pending
        pending.removeAll()
        // The connection is gone: no late reply will come for what it abandoned.
        awaitingLateReply.removeAll()
        var entries: [Entry] = []
        entries.reserveCapacity(taken.count)
        for (id, registration) in taken {
            endings.record(id, .abandoned)
            entries.append(registration.entry)
        }
        return entries
    }

    /// The caller of a request returned or threw with `outcome`. `registration` is its id and
    /// token if it was registered; if it is still pending (its outcome was decided by its
    /// timeout, its cancellation or its start's error), it is removed and returned, to be
    /// released outside the lock.
    @inlinable
    mutating func requestEnded(_ registration: (id: ID, token: UInt64)?, outcome: Outcome) -> Entry? {
        switch outcome {
        case .succeeded: counters.succeeded += 1
        case .failed: counters.failed += 1
        case .timedOut: counters.timedOut += 1
        case .cancelled: counters.cancelled += 1
        }
        guard let registration, let current = pending[registration.id], current.token == registration.token else {
            return nil
        }
        pending[registration.id] = nil
        endings.record(registration.id, .abandoned)
        // Only a caller that left (timeout, cancellation) leaves a request running in the SDK; a
        // start that threw made none, and no reply will come for it.
        if reservesAbandonedIDs && (outcome == .cancelled || outcome == .timedOut) {
            awaitingLateReply.insert(registration.id)
        }
        return current.entry
    }

    // MARK: Helpers

    @inlinable
    mutating func issueToken() -> UInt64 {
        newestToken += 1
        return newestToken
    }

    @inlinable
    mutating func removeStarting(_ token: UInt64) -> (error: any Error, clock: UInt64)? {
        guard let index = binarySearch(token) else {
            preconditionFailure("PendingRequests: a start ended that was not running (token \(token))")
        }
        return starting.remove(at: index).failure
    }

    @inlinable
    func binarySearch(_ token: UInt64) -> Int? {
        var low = 0
        var high = starting.count
        while low < high {
            let middle = (low + high) / 2
            if starting[middle].token < token { low = middle + 1 } else { high = middle }
        }
        return low < starting.count && starting[low].token == token ? low : nil
    }

    @inlinable
    mutating func takeParked(_ id: ID) -> Parked? {
        parked.removeValue(forKey: id)
    }

    /// Drops parked replies that no running start can claim: those that arrived before the
    /// oldest running start began (all of them once no start runs).
    @inlinable
    mutating func evictUnclaimable(into discarded: inout [Value]) {
        let oldestRunning = starting.first?.token ?? .max
        while parkedOrderHead < parkedOrder.count {
            let (id, serial) = parkedOrder[parkedOrderHead]
            if let entry = parked[id], entry.serial == serial {
                guard entry.newestToken < oldestRunning else { break }
                parked[id] = nil
                drop(entry.reply, id: id, into: &discarded)
            }
            parkedOrderHead += 1
        }
        if parkedOrderHead == parkedOrder.count {
            parkedOrder.removeAll(keepingCapacity: parkedOrder.count <= 64)
            parkedOrderHead = 0
        } else if parkedOrderHead > 64 && parkedOrderHead * 2 > parkedOrder.count {
            parkedOrder.removeFirst(parkedOrderHead)
            parkedOrderHead = 0
        }
    }

    @inlinable
    mutating func drop(_ reply: Reply, id: ID, into discarded: inout [Value]) {
        _ = classify(id)
        if let value = Self.value(of: reply) { discarded.append(value) }
    }

    /// Counts a reply that found no request, by the memory of how its id last ended.
    @inlinable
    mutating func classify(_ id: ID) -> Unmatched {
        switch ending(of: id) {
        case .replied:
            counters.duplicateReplies += 1
            return .duplicate
        case .abandoned:
            counters.lateReplies += 1
            return .late
        case nil:
            counters.unknownReplies += 1
            return .unknown
        }
    }

    @inlinable
    static func value(of reply: Reply) -> Value? {
        switch reply {
        case .success(let value): return value
        case .failure: return nil
        }
    }

    // MARK: Introspection (statistics, tests)

    /// Requests waiting for a reply.
    var pendingCount: Int { pending.count }
    /// Abandoned ids reserved until their late reply.
    var awaitingLateReplyCount: Int { awaitingLateReply.count }
    /// SDK-assigned starts running.
    var startingCount: Int { starting.count }
    /// Replies parked for running starts.
    var parkedCount: Int { parked.count }
    /// Whether `id` is pending.
    func isPending(_ id: ID) -> Bool { pending[id] != nil }
    /// The token `id` is pending under.
    func token(of id: ID) -> UInt64? { pending[id]?.token }
    /// Whether a reply for `id` is parked.
    func isParked(_ id: ID) -> Bool { parked[id] != nil }
    /// How `id` last ended, if it is remembered and it ended since it was last registered.
    @inlinable
    func ending(of id: ID) -> Ending? { endings.ending(of: id, after: pending[id]?.since ?? 0) }
    /// Entries in the parked-order queue, stale ones included (tests check it stays bounded).
    var parkedOrderBacklog: Int { parkedOrder.count - parkedOrderHead }
}

/// A bounded memory of how ids ended: the most recent `capacity` records, older ones forgotten.
///
/// A ring of records and nothing else, so that recording an ending costs no hashing: every
/// request records one, and only a reply that finds no request reads them, newest first.
@usableFromInline
struct RecentEndings<ID: Hashable, Ending> {
    @usableFromInline let capacity: Int
    /// The last `capacity` records; `next` is where the next one goes once the ring is full.
    @usableFromInline var ring: [(id: ID, ending: Ending, serial: UInt64)] = []
    @usableFromInline var next = 0
    /// The serial of the latest record (0: none yet).
    @usableFromInline var serial: UInt64 = 0

    init(capacity: Int) {
        precondition(capacity > 0, "RecentEndings needs a positive capacity")
        self.capacity = capacity
    }

    @inlinable
    mutating func record(_ id: ID, _ ending: Ending) {
        serial += 1
        if ring.count < capacity {
            ring.append((id, ending, serial))
            return
        }
        ring[next] = (id, ending, serial)
        next = next + 1 == capacity ? 0 : next + 1
    }

    /// How `id` ended last, if that record is still remembered and newer than serial `after`.
    @inlinable
    func ending(of id: ID, after: UInt64 = 0) -> Ending? {
        // Newest first: the slot before `next` going backwards (the ring is in order when not full).
        let count = ring.count
        var index = count < capacity ? count - 1 : (next == 0 ? count - 1 : next - 1)
        for _ in 0..<count {
            let record = ring[index]
            if record.serial <= after { return nil }
            if record.id == id { return record.ending }
            index = index == 0 ? count - 1 : index - 1
        }
        return nil
    }

    /// Ids remembered now (at most `capacity`).
    var count: Int { Set(ring.map(\.id)).count }
}

extension PendingRequestsStateMachine: Sendable where ID: Sendable, Value: Sendable, Entry: Sendable {}
extension PendingRequestsStateMachine.Registration: Sendable where ID: Sendable, Value: Sendable, Entry: Sendable {}
extension PendingRequestsStateMachine.Parked: Sendable where ID: Sendable, Value: Sendable, Entry: Sendable {}
extension PendingRequestsStateMachine.Starting: Sendable where ID: Sendable, Value: Sendable, Entry: Sendable {}
extension RecentEndings: Sendable where ID: Sendable, Ending: Sendable {}
