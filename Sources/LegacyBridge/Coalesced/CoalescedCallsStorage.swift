// The shared state of a `CoalescedCalls`: its table behind one lock, the scheduler for the calls'
// cancel handles and `onDiscard`.
//
// Every method locks, asks the machine, unlocks, and only then acts: starts the SDK call, cancels
// it, hands its result to the waiters' gates. Each of those may call the SDK or resume a caller,
// so none runs under the lock.
//
// A shared call has a one-shot gate of its own: the SDK's completion against the cancellation
// that the last leaving caller asks for. It is a relay gate: its outcome is handed to the
// waiters on the thread that decided it (the SDK's callback, or the last caller's leave), so no
// task waits for it and no caller waits for a cooperative-pool thread to hear it.

/// The lock, the machine and the configuration; `CoalescedCalls` is its public face.
@usableFromInline
final class CoalescedCallsStorage<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Gate = CompletionGateStorage<Value>
    @usableFromInline typealias Machine = CoalescedCallsStateMachine<Key, Completion<Value>, Gate>

    @usableFromInline let box = LockedBox(Machine())
    @usableFromInline let scheduler: SDKScheduler?
    @usableFromInline let onDiscard: (@Sendable (Value) -> Void)?

    init(scheduler: SDKScheduler?, onDiscard: (@Sendable (Value) -> Void)?) {
        self.scheduler = scheduler
        self.onDiscard = onDiscard
    }

    @inlinable
    func join(_ key: Key, waiter: Completion<Value>) -> Machine.JoinAction {
        box.withLock { $0.join(key, waiter: waiter) }
    }

    /// The caller `waiter` left: if it was the last, its call is cancelled.
    @inlinable
    func leave(_ key: Key, waiter: UInt64) {
        let action = box.withLock { $0.leave(key, waiter: waiter) }
        // The lock is released: cancelling may call the SDK's cancel handle.
        action.cancel?.cancel()
        _ = action.removed
    }

    /// The leader starts call `token` for `key`: runs `start` with the call's completion. The
    /// call's gate hands its outcome to ``finish(_:token:_:)`` where it is decided, inside `start`
    /// or later on the SDK's thread.
    @inlinable
    func startCall(_ key: Key, token: UInt64, _ start: (Completion<Value>) throws -> CancelHandle?) {
        let gate = Gate(onDiscard: onDiscard, relay: GateRelay { [self] outcome in finish(key, token: token, outcome) })
        box.withLock { $0.callCreated(key, token: token, call: gate) }
        let handle: CancelHandle?
        do {
            handle = try start(Completion(storage: gate))
        } catch {
            _ = gate.finish(.failure(error))
            handle = nil
        }
        var owner = gate
        // An outcome decided inside `start` went to the relay already.
        _ = owner.startReturned(handle?.posted(through: scheduler))
    }

    /// Hands call `token`'s outcome to its waiters. A value that reaches none of them (every
    /// caller left meanwhile) goes to `onDiscard`.
    @inlinable
    func finish(_ key: Key, token: UInt64, _ outcome: Result<Value, any Error>) {
        let waiters = box.withLock { $0.finished(key, token: token) }
        var reached = 0
        for waiter in waiters where waiter(outcome) {
            reached += 1
        }
        if reached == 0, case .success(let value) = outcome {
            onDiscard?(value)
        }
    }

    var statistics: CoalescedCalls<Key, Value>.Statistics {
        box.withLock { machine in
            CoalescedCalls<Key, Value>.Statistics(
                calls: machine.counters.calls,
                joined: machine.counters.joined,
                abandoned: machine.counters.abandoned,
                inFlight: machine.inFlightCount
            )
        }
    }

    /// A snapshot of the machine (tests).
    var machine: Machine { box.withLock { $0 } }
}
