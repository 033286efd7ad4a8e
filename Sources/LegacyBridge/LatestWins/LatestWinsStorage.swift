// The shared state of a `LatestWins`: its revision machine behind one lock, the scheduler for the
// runs' cancel handles and `onDiscard`.
//
// Every method locks, asks the machine, unlocks, and only then acts: a superseded run's gate is
// cancelled after unlocking, because cancelling it may call the SDK's cancel and resume a caller.

/// The lock and the machine; `LatestWins` is its public face.
@usableFromInline
final class LatestWinsStorage<Value: Sendable>: Sendable {
    typealias Machine = LatestWinsStateMachine<Completion<Value>>

    let box = LockedBox(Machine())
    @usableFromInline let scheduler: SDKScheduler?
    @usableFromInline let onDiscard: (@Sendable (Value) -> Void)?

    init(scheduler: SDKScheduler?, onDiscard: (@Sendable (Value) -> Void)?) {
        self.scheduler = scheduler
        self.onDiscard = onDiscard
    }

    /// A run begins: returns its revision, after cancelling the run it supersedes.
    @usableFromInline
    func begin() -> UInt64 {
        let action = box.withLock { $0.begin() }
        Self.cancel(action.superseded)
        return action.revision
    }

    /// Whether the run of `revision` may make its SDK call.
    @usableFromInline
    func register(_ revision: UInt64, completion: Completion<Value>) -> Bool {
        switch box.withLock({ $0.register(revision, entry: completion) }) {
        case .start: return true
        case .superseded: return false
        }
    }

    /// Whether the run of `revision`, now back, is still the newest.
    @usableFromInline
    func end(_ revision: UInt64) -> Bool {
        switch box.withLock({ $0.end(revision) }) {
        case .commit: return true
        case .superseded: return false
        }
    }

    func cancelCurrent() {
        Self.cancel(box.withLock { $0.cancel() })
    }

    /// Cancels a superseded run's gate: it decides `CancellationError` unless its outcome is
    /// already decided, and then calls the run's cancel handle. The run's caller turns that
    /// into `SupersededError` when it ends.
    private static func cancel(_ superseded: Completion<Value>?) {
        superseded?.storage.cancel()
    }

    var statistics: LatestWins<Value>.Statistics {
        box.withLock { LatestWins<Value>.Statistics(runs: $0.runs, superseded: $0.supersededRuns) }
    }

    /// A snapshot of the machine (tests).
    var machine: Machine { box.withLock { $0 } }
}
