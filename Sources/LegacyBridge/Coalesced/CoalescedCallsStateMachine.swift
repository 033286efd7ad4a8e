// The pure bookkeeping behind `CoalescedCalls`: which call is in flight for which key, and which
// callers wait for it.
//
// It owns no lock, calls no closure and resumes nothing: each event returns what the storage must
// do once it has released its lock (run the SDK call, cancel it, hand its result to the waiters).
// Each caller's own outcome (the shared result, its timeout, its cancellation) is its one-shot
// gate's business, and so is the shared call's (its result against its cancellation).

/// The calls in flight of one `CoalescedCalls`, by key, with their waiters.
///
/// Rules:
/// - A key has at most one call in flight. The first caller for a key leads: it starts the call.
///   A caller that finds a call in flight joins it.
/// - A caller that leaves is removed from its call alone. When the last one leaves, the call is
///   removed from the table and handed back once, to be cancelled.
/// - When the call's result is in, the call is removed from the table and its waiters are handed
///   back once, to receive it. A caller that arrives afterwards leads a new call.
/// - Events for a call that is no longer in the table (a leave after the result, a result after
///   the last leave) change nothing: tokens tell a call and a caller from later ones.
@usableFromInline
struct CoalescedCallsStateMachine<Key: Hashable, Waiter, Call> {
    @usableFromInline
    struct InFlight {
        @usableFromInline let token: UInt64
        /// The SDK call's gate, once the leader created it.
        @usableFromInline var call: Call?
        @usableFromInline var waiters: [UInt64: Waiter]

        @inlinable
        init(token: UInt64, call: Call?, waiters: [UInt64: Waiter]) {
            self.token = token
            self.call = call
            self.waiters = waiters
        }
    }

    /// Result of `join`.
    @usableFromInline
    enum JoinAction {
        /// No call was in flight: the caller leads and must start call `call`.
        case lead(waiter: UInt64, call: UInt64)
        /// The caller joined the call in flight.
        case joined(waiter: UInt64)
    }

    /// Result of `leave`.
    @usableFromInline
    struct LeaveAction {
        /// The caller's waiter, removed: released after unlocking.
        @usableFromInline var removed: Waiter?
        /// The call every caller left: cancel it after unlocking.
        @usableFromInline var cancel: Call?

        @inlinable
        init(removed: Waiter?, cancel: Call?) {
            self.removed = removed
            self.cancel = cancel
        }
    }

    /// Counters kept by the machine.
    @usableFromInline
    struct Counters: Hashable, Sendable {
        @usableFromInline var calls = 0
        @usableFromInline var joined = 0
        @usableFromInline var abandoned = 0
    }

    @usableFromInline var inFlight: [Key: InFlight] = [:]
    @usableFromInline var nextToken: UInt64 = 0
    @usableFromInline var counters = Counters()

    init() {}

    /// A caller asks for `key`.
    @inlinable
    mutating func join(_ key: Key, waiter: Waiter) -> JoinAction {
        let waiterToken = issueToken()
        if inFlight[key] != nil {
            inFlight[key]!.waiters[waiterToken] = waiter
            counters.joined += 1
            return .joined(waiter: waiterToken)
        }
        let callToken = issueToken()
        inFlight[key] = InFlight(token: callToken, call: nil, waiters: [waiterToken: waiter])
        counters.calls += 1
        return .lead(waiter: waiterToken, call: callToken)
    }

    /// The leader created the gate of call `token` for `key`, before starting it.
    @inlinable
    mutating func callCreated(_ key: Key, token: UInt64, call: Call) {
        guard inFlight[key]?.token == token, inFlight[key]?.call == nil else {
            preconditionFailure("CoalescedCalls: call \(token) was not waiting for its gate")
        }
        inFlight[key]!.call = call
    }

    /// The caller `waiter` for `key` left (its timeout or its cancellation decided).
    @inlinable
    mutating func leave(_ key: Key, waiter: UInt64) -> LeaveAction {
        guard var entry = inFlight[key], let removed = entry.waiters.removeValue(forKey: waiter) else {
            return LeaveAction(removed: nil, cancel: nil)
        }
        guard entry.waiters.isEmpty else {
            inFlight[key] = entry
            return LeaveAction(removed: removed, cancel: nil)
        }
        guard let call = entry.call else {
            preconditionFailure("CoalescedCalls: every caller left call \(entry.token) before its start ran")
        }
        inFlight[key] = nil
        counters.abandoned += 1
        return LeaveAction(removed: removed, cancel: call)
    }

    /// The result of call `token` for `key` is in. Returns the waiters to hand it to, none if
    /// the call was abandoned.
    @inlinable
    mutating func finished(_ key: Key, token: UInt64) -> [Waiter] {
        guard let entry = inFlight[key], entry.token == token else { return [] }
        inFlight[key] = nil
        return Array(entry.waiters.values)
    }

    @inlinable
    mutating func issueToken() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    // MARK: Introspection (statistics, tests)

    /// Calls in flight.
    var inFlightCount: Int { inFlight.count }
    /// Callers waiting, over every call.
    var waiterCount: Int { inFlight.values.reduce(0) { $0 + $1.waiters.count } }
    /// The token of the call in flight for `key`.
    func callToken(for key: Key) -> UInt64? { inFlight[key]?.token }
    /// Whether the call in flight for `key` has its gate.
    func hasCall(for key: Key) -> Bool { inFlight[key]?.call != nil }
    /// The waiter tokens of the call in flight for `key`.
    func waiters(for key: Key) -> Set<UInt64> { inFlight[key].map { Set($0.waiters.keys) } ?? [] }
}

extension CoalescedCallsStateMachine: Sendable where Key: Sendable, Waiter: Sendable, Call: Sendable {}
extension CoalescedCallsStateMachine.InFlight: Sendable where Key: Sendable, Waiter: Sendable, Call: Sendable {}
