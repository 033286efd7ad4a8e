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
/// - An id belongs to one request from its registration until the SDK is done with it. When a
///   caller leaves (a timeout or a cancellation) after its SDK call was made, its id is held:
///   with an SDK cancel, until that cancel ended (ran, or was refused by the scheduler) or the
///   late reply came; without one (``reservesAbandonedIDs``), until the late reply. A takeover by
///   the SDK and `failAll` end a hold too. A caller-assigned registration of a held id is
///   refused, and a reply for it is late, never parked for a start.
/// - A cancel by id runs only while the id still belongs to the request it was handed out for,
///   pending or held, and at most once: a cancel that finds a newer request on the id, or finds
///   the SDK done with its request, is skipped. So a cancel decided before a newer request took
///   the id never reaches it, whatever order the cancel, the newer start and the late reply take.
/// - At most ``reservedIDLimit`` ids stay reserved for late replies; past it, the oldest
///   reservation is released and counted.
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

    /// How far the SDK's cancel of a request has got.
    @usableFromInline
    enum CancelProgress: Hashable, Sendable {
        /// Not begun: not decided, or queued on the scheduler.
        case notBegun
        /// The SDK's cancel runs now.
        case running
        /// The SDK's cancel returned, or the scheduler refused it: the SDK is done with the request.
        case done
    }

    @usableFromInline
    struct Registration {
        @usableFromInline let token: UInt64
        @usableFromInline let entry: Entry
        /// The memory of endings' serial when the id was registered: how the id ended before
        /// does not count while it is pending again.
        @usableFromInline let since: UInt64
        /// How far the SDK's cancel of this request has got (it may begin before the caller is back).
        @usableFromInline var cancel = CancelProgress.notBegun

        @inlinable
        init(token: UInt64, entry: Entry, since: UInt64) {
            self.token = token
            self.entry = entry
            self.since = since
        }
    }

    /// An id whose caller left while the SDK may still act on it: its cancel is due or running,
    /// or, for an SDK without a cancel, its late reply will come.
    @usableFromInline
    struct Held: Sendable {
        @usableFromInline let token: UInt64
        @usableFromInline var cancel: CancelProgress

        @inlinable
        init(token: UInt64, cancel: CancelProgress) {
            self.token = token
            self.cancel = cancel
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
        @usableFromInline var releasedReservations = 0
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
    /// Ids whose caller left while the SDK may still act on them (see ``Held``).
    @usableFromInline var held: [ID: Held] = [:]
    /// Whether an abandoned id stays reserved until its late reply (the SDK cannot withdraw a
    /// request, so its reply will come).
    @usableFromInline let reservesAbandonedIDs: Bool
    /// At most this many ids stay reserved for late replies; past it the oldest is released.
    @usableFromInline let reservedIDLimit: Int
    /// Reserved ids in the order they were reserved, for releasing the oldest; entries whose
    /// hold already ended are skipped by their token.
    @usableFromInline var reservedOrder: [(id: ID, token: UInt64)] = []
    @usableFromInline var reservedOrderHead = 0

    /// A table that remembers how the last `rememberedEndings` ids ended; with
    /// `reservesAbandonedIDs`, an abandoned id stays reserved until its late reply, for at most
    /// `reservedIDLimit` ids at once.
    init(rememberedEndings: Int, reservesAbandonedIDs: Bool = false, reservedIDLimit: Int = .max) {
        precondition(reservedIDLimit > 0, "PendingRequests: reservedIDLimit must be positive")
        self.endings = RecentEndings(capacity: rememberedEndings)
        self.reservesAbandonedIDs = reservesAbandonedIDs
        self.reservedIDLimit = reservedIDLimit
    }

    // MARK: Events

    /// A caller-assigned request registers `id` before its SDK call.
    @inlinable
    mutating func register(_ id: ID, entry: Entry) -> RegisterAction {
        if pending[id] != nil || (!held.isEmpty && held[id] != nil) {
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
        // The SDK gave the id to a new request: it is done with the abandoned one, whose cancel,
        // if still due, must now never run.
        if !held.isEmpty { held[id] = nil }
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
            keepWhileCancelRuns(id, registration)
            return .deliver(registration.entry)
        }
        if !held.isEmpty, let hold = held[id] {
            // The late reply of a request whose caller left: the SDK is done with it, so its
            // cancel, if still due, must never run. A running cancel keeps the id until it returns.
            if hold.cancel != .running { held[id] = nil }
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
    /// whether it may: only while the id still belongs to that request, pending or held. Not
    /// when a newer request holds the id, whose request it would stop, and not when the SDK is
    /// done with the request already (its late reply came, or the SDK gave its id to a newer
    /// request). When it may, the id stays taken until ``cancelEnded(_:token:)``.
    @inlinable
    mutating func cancelBegins(_ id: ID, token: UInt64) -> Bool {
        if var registration = pending[id], registration.token == token, registration.cancel == .notBegun {
            registration.cancel = .running
            pending[id] = registration
            return true
        }
        if !held.isEmpty, var hold = held[id], hold.token == token, hold.cancel == .notBegun {
            hold.cancel = .running
            held[id] = hold
            return true
        }
        counters.skippedCancels += 1
        return false
    }

    /// The SDK's cancel for request `token` with `id` returned, or the scheduler refused to run
    /// it: the SDK is done with that request, and its id is free once its caller is back.
    @inlinable
    mutating func cancelEnded(_ id: ID, token: UInt64) {
        if var registration = pending[id], registration.token == token {
            registration.cancel = .done
            pending[id] = registration
        } else if !held.isEmpty, held[id]?.token == token {
            held[id] = nil
        }
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
        // The connection is gone: no late reply will come for what it abandoned, and a cancel
        // still due for it finds no hold and is not made.
        // A cancel that runs now keeps its id until it returns, so it cannot reach a newer request.
        held = held.filter { $0.value.cancel == .running }
        reservedOrder.removeAll()
        reservedOrderHead = 0
        var entries: [Entry] = []
        entries.reserveCapacity(taken.count)
        for (id, registration) in taken {
            keepWhileCancelRuns(id, registration)
            endings.record(id, .abandoned)
            entries.append(registration.entry)
        }
        return entries
    }

    /// The caller of a request returned or threw with `outcome`. `registration` is its id and
    /// token if it was registered; `madeSDKCall` tells whether its start returned (a start that
    /// threw made no SDK call). If it is still pending (its outcome was decided by its timeout,
    /// its cancellation or its start's error), it is removed and returned, to be released outside
    /// the lock. If its caller left while the SDK may still act on the id, the id is held: until
    /// its cancel ended or its late reply came, or, without an SDK cancel, until its late reply.
    @inlinable
    mutating func requestEnded(
        _ registration: (id: ID, token: UInt64)?, outcome: Outcome, madeSDKCall: Bool = true
    ) -> Entry? {
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
        guard madeSDKCall && (outcome == .cancelled || outcome == .timedOut) else { return current.entry }
        if reservesAbandonedIDs {
            hold(registration.id, Held(token: registration.token, cancel: .notBegun))
        } else if current.cancel != .done {
            // Its cancel is due (the gate calls it when the timeout or the cancellation decides)
            // or running: the id stays its request's until that cancel ended or its reply came.
            held[registration.id] = Held(token: registration.token, cancel: current.cancel)
        }
        return current.entry
    }

    // MARK: Helpers

    /// A registration leaves the table while its SDK cancel runs: the id stays held until that
    /// cancel returned, so a newer request cannot take it and be stopped by it.
    @inlinable
    mutating func keepWhileCancelRuns(_ id: ID, _ registration: Registration) {
        if registration.cancel == .running {
            held[id] = Held(token: registration.token, cancel: .running)
        }
    }

    /// Reserves `id` for a late reply; past ``reservedIDLimit`` the oldest reservation is released.
    @inlinable
    mutating func hold(_ id: ID, _ hold: Held) {
        held[id] = hold
        reservedOrder.append((id, hold.token))
        while held.count > reservedIDLimit, reservedOrderHead < reservedOrder.count {
            let (oldest, token) = reservedOrder[reservedOrderHead]
            reservedOrderHead += 1
            if held[oldest]?.token == token {
                held[oldest] = nil
                counters.releasedReservations += 1
            }
        }
        // Entries of holds that ended are dropped once they are the older half of the queue.
        if reservedOrderHead > 64 && reservedOrderHead * 2 > reservedOrder.count {
            reservedOrder.removeFirst(reservedOrderHead)
            reservedOrderHead = 0
        }
        if reservedOrder.count - reservedOrderHead > 2 * max(held.count, 32) {
            reservedOrder = Array(reservedOrder[reservedOrderHead...].filter { held[$0.id]?.token == $0.token })
            reservedOrderHead = 0
        }
    }

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
    /// Ids held for a request whose caller left: reserved until a late reply (no SDK cancel), or
    /// until its cancel ended (with one).
    var heldCount: Int { held.count }
    /// Abandoned ids reserved until their late reply.
    var awaitingLateReplyCount: Int { reservesAbandonedIDs ? held.count : 0 }
    /// Ids held until the SDK's cancel for their abandoned request ended.
    var awaitingCancelCount: Int { reservesAbandonedIDs ? 0 : held.count }
    /// The token of the request whose cancel runs for `id`, if one runs.
    func cancelRunning(_ id: ID) -> UInt64? {
        if let registration = pending[id], registration.cancel == .running { return registration.token }
        if let hold = held[id], hold.cancel == .running { return hold.token }
        return nil
    }
    /// The token of the abandoned request holding `id`, if any.
    func holder(of id: ID) -> UInt64? { held[id]?.token }
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
