// The shared state of a `PendingRequests` table: its state machine behind one lock, the
// SDK's cancel-by-id, its scheduler and `onDiscard`.
//
// Every method locks, asks the machine, unlocks, and only then acts: completes or fails a
// request's gate, hands a value to `onDiscard`, releases what was removed. A gate's completion
// may resume a caller and `onDiscard` is user code, so neither runs under the lock; the SDK's
// global reply callback can therefore call `complete` from inside any of them.

/// The lock, the machine and the table's configuration; `PendingRequests` is its public face.
@usableFromInline
final class PendingRequestsStorage<ID: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Machine = PendingRequestsStateMachine<ID, Value, Completion<Value>>

    /// How many ended ids the table remembers to tell late and duplicate replies from unknown ones.
    static var rememberedEndings: Int { 128 }

    @usableFromInline let box: LockedBox<Machine>
    @usableFromInline let scheduler: SDKScheduler?
    @usableFromInline let cancel: (@Sendable (ID) -> Void)?
    @usableFromInline let onDiscard: (@Sendable (Value) -> Void)?

    init(
        scheduler: SDKScheduler?, onDiscard: (@Sendable (Value) -> Void)?, cancel: (@Sendable (ID) -> Void)?,
        reservedIDLimit: Int
    ) {
        // An SDK that cannot withdraw a request will still reply to it: its id stays reserved
        // until then, so that the late reply cannot complete a newer request that reused it.
        self.box = LockedBox(
            Machine(
                rememberedEndings: Self.rememberedEndings, reservesAbandonedIDs: cancel == nil,
                reservedIDLimit: reservedIDLimit))
        self.scheduler = scheduler
        self.cancel = cancel
        self.onDiscard = onDiscard
    }

    // MARK: Requests

    /// Registers a caller-assigned `id`; nil if it is in use.
    @inlinable
    func register(_ id: ID, completion: Completion<Value>) -> UInt64? {
        switch box.withLock({ $0.register(id, entry: completion) }) {
        case .registered(let token): return token
        case .refused: return nil
        }
    }

    @inlinable
    func beginStart() -> UInt64 {
        box.withLock { $0.beginStart() }
    }

    /// The start `token` returned `id`: registers it, or settles the request at once with a
    /// parked reply or a `failAll` error. Returns whether the request is now pending.
    @inlinable
    func startReturned(_ token: UInt64, id: ID, completion: Completion<Value>) -> Bool {
        let action = box.withLock { $0.startReturned(token, id: id, entry: completion) }
        // The lock is released: resume, fail and discard from here.
        if let older = action.takenOver {
            older.fail(RequestIDError(.reassigned, id: String(describing: id)))
        }
        discard(action.discarded)
        switch action.outcome {
        case .registered:
            return true
        case .claimed(let reply):
            completion(reply)
            return false
        case .failed(let error):
            completion.fail(error)
            return false
        }
    }

    @inlinable
    func startThrew(_ token: UInt64) {
        discard(box.withLock { $0.startThrew(token) })
    }

    /// The caller of a request ended; removes what is left of it.
    @inlinable
    func requestEnded(_ registration: (id: ID, token: UInt64)?, outcome: Machine.Outcome, madeSDKCall: Bool) {
        let removed = box.withLock { $0.requestEnded(registration, outcome: outcome, madeSDKCall: madeSDKCall) }
        _ = removed  // released here, after unlocking
    }

    /// The handle that cancels request `token` with `id` through the SDK, on the scheduler if
    /// there is one. When it runs it asks the table first: a newer request may have taken the id
    /// since, or the SDK may be done with the request, and then the SDK is not called. The id
    /// stays its request's until the SDK's cancel returned, or the scheduler refused it.
    @inlinable
    func cancelHandle(for id: ID, token: UInt64) -> CancelHandle? {
        guard let cancel else { return nil }
        let run: @Sendable () -> Void = { [self] in
            guard box.withLock({ $0.cancelBegins(id, token: token) }) else { return }
            // The lock is released: the SDK's cancel may reply or post from inside.
            cancel(id)
            box.withLock { $0.cancelEnded(id, token: token) }
        }
        guard let scheduler else { return CancelHandle(run) }
        return CancelHandle { [self] in
            do {
                try scheduler.post(run)
            } catch {
                // The SDK's loop is gone, and the cancel with it: the id is free.
                box.withLock { $0.cancelEnded(id, token: token) }
            }
        }
    }

    // MARK: Replies

    @inlinable
    func complete(_ id: ID, with reply: Result<Value, any Error>) -> Bool {
        switch box.withLock({ $0.complete(id, with: reply) }) {
        case .deliver(let completion):
            // A losing success value goes to the gate's onDiscard, which is this table's.
            if completion(reply) { return true }
            box.withLock { $0.deliveredReplyLost() }
            return false
        case .parked:
            return false
        case .dropped(_, let value):
            if let value { onDiscard?(value) }
            return false
        }
    }

    @inlinable
    func failAll(_ error: any Error) -> Int {
        let completions = box.withLock { $0.failAll(error) }
        var failed = 0
        for completion in completions where completion.fail(error) {
            failed += 1
        }
        return failed
    }

    @inlinable
    func discard(_ values: [Value]) {
        guard let onDiscard else { return }
        for value in values { onDiscard(value) }
    }

    // MARK: Introspection

    var statistics: PendingRequests<ID, Value>.Statistics {
        box.withLock { machine in
            let counters = machine.counters
            return PendingRequests<ID, Value>.Statistics(
                pending: machine.pendingCount,
                succeeded: counters.succeeded,
                failed: counters.failed,
                timedOut: counters.timedOut,
                cancelled: counters.cancelled,
                refused: counters.refused,
                unknownReplies: counters.unknownReplies,
                duplicateReplies: counters.duplicateReplies,
                lateReplies: counters.lateReplies,
                skippedCancels: counters.skippedCancels,
                awaitingLateReply: machine.awaitingLateReplyCount,
                awaitingCancel: machine.awaitingCancelCount,
                releasedReservations: counters.releasedReservations
            )
        }
    }

    /// A snapshot of the machine (tests).
    var machine: Machine { box.withLock { $0 } }
}

extension PendingRequestsStateMachine.Outcome {
    /// The outcome a caller saw, from what its request returned or threw.
    @inlinable
    init(_ result: Result<some Any, any Error>) {
        switch result {
        case .success: self = .succeeded
        case .failure(is BridgeTimeoutError): self = .timedOut
        case .failure(is CancellationError): self = .cancelled
        case .failure: self = .failed
        }
    }
}
