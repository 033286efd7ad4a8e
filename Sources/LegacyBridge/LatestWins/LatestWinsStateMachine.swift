// The pure revision logic behind `LatestWins`: which run is the newest, which runs a new one
// supersedes, and whether a run that comes back may commit.
//
// It owns no lock, calls no closure and resumes nothing. The runs' own outcomes (first wins,
// timeout, cancellation, `onDiscard`) are their one-shot gates' business; this machine only hands
// back the gate of the run a newer one supersedes, once, for the storage to cancel it after
// unlocking.

/// The revision counter of one `LatestWins` and the gate of its newest run.
///
/// Rules:
/// - Every `begin` and `cancel` makes a new revision; only a run of the current revision is the
///   newest. `cancel` leaves no newest run.
/// - The gate of the run that a `begin` or a `cancel` supersedes is handed back once, to be
///   cancelled. A run that registers its gate after it was superseded is told so and must not
///   start its SDK call.
/// - A run commits only if it is still the newest when it ends; ending clears it. Every other
///   run ends superseded.
/// - The machine keeps at most one gate: the newest run's, from its registration to its end.
struct LatestWinsStateMachine<Entry> {
    fileprivate enum State {
        /// No run of the current revision holds a gate.
        case idle
        /// The run of the current revision began and has not registered its gate yet.
        case beginning
        /// The run of the current revision registered its gate.
        case running(Entry)
    }

    /// Result of `begin`.
    struct BeginAction {
        /// The new run's revision.
        var revision: UInt64
        /// The gate of the run it supersedes, to cancel after unlocking.
        var superseded: Entry?
    }

    /// Result of `register`.
    enum RegisterAction {
        /// The run is the newest: start the SDK call.
        case start
        /// A newer run began (or `cancel` ran) before this one registered: do not start.
        case superseded
    }

    /// Result of `end`.
    enum EndAction {
        /// The run is the newest: its caller gets its outcome.
        case commit
        /// A newer run began (or `cancel` ran): its caller gets `SupersededError`.
        case superseded
    }

    private var state: State = .idle
    private(set) var revision: UInt64 = 0
    private(set) var runs = 0
    private(set) var supersededRuns = 0

    init() {}

    /// A new run begins.
    mutating func begin() -> BeginAction {
        let superseded = supersede()
        state = .beginning
        runs += 1
        return BeginAction(revision: revision, superseded: superseded)
    }

    /// The run of `revision` registers its gate, before its SDK call.
    mutating func register(_ revision: UInt64, entry: Entry) -> RegisterAction {
        guard revision == self.revision else { return .superseded }
        switch state {
        case .beginning:
            state = .running(entry)
            return .start
        case .idle, .running:
            preconditionFailure("LatestWins: run \(revision) registered twice")
        }
    }

    /// The caller of the run of `revision` came back with its outcome.
    mutating func end(_ revision: UInt64) -> EndAction {
        guard revision == self.revision else {
            supersededRuns += 1
            return .superseded
        }
        switch state {
        case .beginning, .running:
            state = .idle
            return .commit
        case .idle:
            preconditionFailure("LatestWins: run \(revision) ended twice")
        }
    }

    /// No run is the newest any more: the current one is superseded without a successor.
    mutating func cancel() -> Entry? {
        supersede()
    }

    private mutating func supersede() -> Entry? {
        revision += 1
        switch state {
        case .idle, .beginning:
            state = .idle
            return nil
        case .running(let entry):
            state = .idle
            return entry
        }
    }

    // MARK: Introspection (tests)

    /// Whether the machine holds a gate.
    var holdsEntry: Bool {
        switch state {
        case .running: return true
        case .idle, .beginning: return false
        }
    }

    /// Whether the run of the current revision has begun and not ended.
    var hasNewestRun: Bool {
        switch state {
        case .idle: return false
        case .beginning, .running: return true
        }
    }
}

extension LatestWinsStateMachine: Sendable where Entry: Sendable {}
extension LatestWinsStateMachine.State: Sendable where Entry: Sendable {}
