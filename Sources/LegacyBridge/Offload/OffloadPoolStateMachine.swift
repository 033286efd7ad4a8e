// The pure state machine behind the offload pool and the SDK-thread executor.
//
// It owns no lock, starts no thread and calls nothing: each event returns an action, and the
// storage (OffloadPoolCore) performs it after releasing its lock. The caller-facing outcome of a
// call (value, error, CancellationError, a late value for onDiscard) is not decided here: that is
// the one-shot gate's job (CompletionStateMachine, through withCallback). This machine decides
// what happens to the *work*: which thread runs it and when, whether it runs at all, when its
// interrupt may be called, and when the threads stop.

/// A job's number within its pool, in submission order.
@usableFromInline
typealias OffloadJobID = UInt64

/// The life of a pool's jobs and threads.
///
/// Rules:
/// - At most `width` jobs run at once, one per worker; at most `queueLimit` more wait, in FIFO
///   order. A submission beyond that, or after shutdown began, is rejected and never kept.
/// - Every accepted job ends exactly one way: it runs once (a worker takes it), it is dropped
///   (cancelled while waiting), or it is rejected (waiting when `shutdown(.rejectQueued)` came).
/// - A job's interrupt is called at most once, only if the job was cancelled while it ran, and
///   only while its body has not returned. A worker whose body returned while the interrupt runs
///   waits for the interrupt to return before it takes another job, so an interrupt never
///   overlaps a later job on the same thread.
/// - Shutdown: `.drain` runs everything already accepted; `.rejectQueued` rejects what waits and
///   lets what runs finish. Workers leave once nothing waits; the last one to leave hands back
///   every shutdown waiter, each exactly once.
struct OffloadPoolStateMachine<Job, Waiter> {
    typealias ShutdownMode = OffloadPool.ShutdownMode

    enum Lifecycle: Hashable {
        /// Accepting work.
        case open
        /// Shutdown began: no new work; workers leave once the queue is empty.
        case draining
        /// Every worker has left.
        case stopped
    }

    /// Where a running job's interrupt stands.
    enum InterruptState: Hashable {
        /// The job has no interrupt.
        case unavailable
        /// It has one, not asked for.
        case armed
        /// Cancellation asked for it; the call is scheduled (elsewhere, not under the lock).
        case requested
        /// It is being called now.
        case inProgress
        /// It was called and returned, or will not be called any more.
        case done
    }

    struct QueuedJob {
        var id: OffloadJobID
        var job: Job
        var interruptible: Bool
    }

    /// A job a worker took. The job itself moved into the worker's slot: the machine keeps no
    /// reference to it, so finishing never releases user closures under the storage's lock.
    struct RunningJob {
        var id: OffloadJobID
        var interrupt: InterruptState
        /// The body returned while the interrupt was in progress: its worker waits for it.
        var bodyReturned: Bool
    }

    /// Result of `submit`.
    enum SubmitAction {
        /// Queued as `id`; signal one parked worker if `wakeWorker`.
        case accepted(OffloadJobID, wakeWorker: Bool)
        /// Refused; the job was not kept and never runs.
        case rejected(OffloadError)
    }

    /// Result of `workerNext`.
    enum NextAction {
        /// Run the job just moved into the worker's slot, outside the lock, then call `finish(id)`.
        case run(OffloadJobID)
        /// Nothing to do: park until signalled, then call `workerWoke()` and ask again.
        case wait
        /// Leave the loop and end the thread. The last worker to leave receives the shutdown
        /// waiters to resume (outside the lock); the others receive none.
        case exit([Waiter])
    }

    /// Result of `finish`.
    enum FinishAction {
        /// Ask for the next job.
        case next
        /// The job's interrupt is being called: wait (parked) while `isAwaitingInterrupt(id)`.
        case awaitInterrupt
    }

    /// Result of `cancel`.
    enum CancelAction {
        /// Nothing to do: the job runs without an interrupt, already finished, or was asked before.
        case none
        /// The job was still waiting and has been removed: it never runs. Release it outside the lock.
        case dropQueued(Job)
        /// The job is running and has an interrupt: schedule `interruptDue(id)` off this thread.
        case scheduleInterrupt(OffloadJobID)
    }

    /// Result of `interruptDue`.
    enum InterruptAction {
        /// The body already returned: do not call the interrupt.
        case none
        /// Call the job's interrupt now, outside the lock, then `interruptReturned(id)`.
        case call
    }

    /// Result of `interruptReturned`.
    enum InterruptReturnedAction {
        case none
        /// The job's worker waits for this interrupt: wake it (broadcast the interrupt condition).
        case wakeWorker
    }

    /// Result of `shutdown`.
    struct ShutdownAction {
        /// Waiting jobs that will never run: reject each, outside the lock.
        var rejected: [Job] = []
        /// Wake every parked worker so that it notices (broadcast the work condition).
        var wakeWorkers = false
        /// The pool has stopped (before, or now because no worker is left): resume these waiters now.
        var resume: [Waiter] = []
    }

    let width: Int
    let queueLimit: Int
    private(set) var lifecycle: Lifecycle = .open
    private(set) var queue = RingBuffer<QueuedJob>()
    private(set) var running: [RunningJob] = []
    /// Workers parked in `wait`.
    private(set) var parkedWorkers = 0
    /// Signals sent to parked workers that have not woken yet.
    private(set) var pendingWakeUps = 0
    /// Workers that have not left.
    private(set) var liveWorkers: Int
    private var nextID: OffloadJobID = 1
    private var shutdownWaiters: [Waiter] = []

    /// A pool of `width` workers (all counted live from the start) and room for `queueLimit`
    /// waiting jobs. Both must be valid (`width >= 1`, `queueLimit >= 0`).
    init(width: Int, queueLimit: Int) {
        precondition(width >= 1 && queueLimit >= 0, "OffloadPoolStateMachine: validate width and queueLimit first")
        self.width = width
        self.queueLimit = queueLimit
        self.liveWorkers = width
    }

    // MARK: - Events

    /// Someone submits a job (with an interrupt, or not).
    mutating func submit(_ job: Job, interruptible: Bool) -> SubmitAction {
        guard case .open = lifecycle else { return .rejected(.shutDown) }
        // Jobs beyond one per thread wait; written so that `queueLimit == Int.max` cannot overflow.
        let accepted = queue.count + running.count
        if accepted >= width && accepted - width >= queueLimit {
            return .rejected(.queueFull(limit: queueLimit))
        }
        let id = nextID
        nextID += 1
        queue.append(QueuedJob(id: id, job: job, interruptible: interruptible))
        let wake = parkedWorkers > pendingWakeUps
        if wake { pendingWakeUps += 1 }
        return .accepted(id, wakeWorker: wake)
    }

    /// A worker asks for work. A job to run is moved into `slot` (so the worker can release it
    /// outside the lock by clearing the slot).
    mutating func workerNext(into slot: inout Job?) -> NextAction {
        if let next = queue.popFirst() {
            running.append(
                RunningJob(
                    id: next.id, interrupt: next.interruptible ? .armed : .unavailable, bodyReturned: false))
            slot = next.job
            return .run(next.id)
        }
        switch lifecycle {
        case .open:
            parkedWorkers += 1
            return .wait
        case .draining:
            return .exit(leave())
        case .stopped:
            preconditionFailure("OffloadPoolStateMachine: a worker asked for work after every worker had left")
        }
    }

    /// A parked worker woke up (signalled, broadcast, or spuriously).
    mutating func workerWoke() {
        precondition(parkedWorkers > 0, "OffloadPoolStateMachine: a worker woke that was not parked")
        parkedWorkers -= 1
        pendingWakeUps = min(max(0, pendingWakeUps - 1), parkedWorkers)
    }

    /// The body of job `id` returned (or threw).
    mutating func finish(_ id: OffloadJobID) -> FinishAction {
        guard let index = running.firstIndex(where: { $0.id == id }), !running[index].bodyReturned else {
            preconditionFailure("OffloadPoolStateMachine: finish(\(id)) for a job that is not running")
        }
        switch running[index].interrupt {
        case .inProgress:
            running[index].bodyReturned = true
            return .awaitInterrupt
        case .unavailable, .armed, .requested, .done:
            running.remove(at: index)
            return .next
        }
    }

    /// Whether the worker that ran `id` must keep waiting for its interrupt to return.
    func isAwaitingInterrupt(_ id: OffloadJobID) -> Bool {
        running.contains { $0.id == id && $0.bodyReturned }
    }

    /// The caller of job `id` was cancelled (or timed out).
    mutating func cancel(_ id: OffloadJobID) -> CancelAction {
        if let removed = queue.remove(firstWhere: { $0.id == id }) {
            return .dropQueued(removed.job)
        }
        guard let index = running.firstIndex(where: { $0.id == id }) else { return .none }
        switch running[index].interrupt {
        case .armed:
            running[index].interrupt = .requested
            return .scheduleInterrupt(id)
        case .unavailable, .requested, .inProgress, .done:
            return .none
        }
    }

    /// The scheduled interrupt of job `id` is about to be called.
    mutating func interruptDue(_ id: OffloadJobID) -> InterruptAction {
        guard let index = running.firstIndex(where: { $0.id == id }) else { return .none }
        switch running[index].interrupt {
        case .requested:
            running[index].interrupt = .inProgress
            return .call
        case .unavailable, .armed, .inProgress, .done:
            preconditionFailure("OffloadPoolStateMachine: interruptDue(\(id)) without a scheduled interrupt")
        }
    }

    /// The interrupt of job `id` returned.
    mutating func interruptReturned(_ id: OffloadJobID) -> InterruptReturnedAction {
        guard let index = running.firstIndex(where: { $0.id == id }), running[index].interrupt == .inProgress else {
            preconditionFailure("OffloadPoolStateMachine: interruptReturned(\(id)) without an interrupt in progress")
        }
        if running[index].bodyReturned {
            running.remove(at: index)
            return .wakeWorker
        }
        running[index].interrupt = .done
        return .none
    }

    /// Shutdown was asked for (by `shutdown` or by the pool going away). `waiter`, if any, is
    /// resumed once every worker has left.
    mutating func shutdown(_ mode: ShutdownMode, waiter: Waiter?) -> ShutdownAction {
        var action = ShutdownAction()
        switch lifecycle {
        case .open, .draining:
            lifecycle = .draining
            if mode.kind == .rejectQueued { action.rejected = queue.popAll().map(\.job) }
            if let waiter { shutdownWaiters.append(waiter) }
            action.wakeWorkers = parkedWorkers > 0
            if liveWorkers == 0 {
                // No thread was ever started (they all failed): nothing can drain, stop now.
                lifecycle = .stopped
                action.rejected += queue.popAll().map(\.job)
                action.resume = shutdownWaiters
                shutdownWaiters = []
            }
        case .stopped:
            if let waiter { action.resume = [waiter] }
        }
        return action
    }

    /// `count` workers were counted live but their threads could not be created. Returns the
    /// shutdown waiters to resume if that leaves no worker and shutdown already began.
    mutating func workersNeverStarted(_ count: Int) -> [Waiter] {
        precondition(count >= 0 && count <= liveWorkers, "OffloadPoolStateMachine: more workers failed than exist")
        liveWorkers -= count
        if liveWorkers == 0 && lifecycle == .draining {
            lifecycle = .stopped
            defer { shutdownWaiters = [] }
            return shutdownWaiters
        }
        return []
    }

    // MARK: - Helpers

    private mutating func leave() -> [Waiter] {
        liveWorkers -= 1
        guard liveWorkers == 0 else { return [] }
        lifecycle = .stopped
        defer { shutdownWaiters = [] }
        return shutdownWaiters
    }

    // MARK: - Introspection (tests and debugging)

    /// The ids of the waiting jobs, in order.
    var queuedIDs: [OffloadJobID] { queue.elements.map(\.id) }
    /// The ids of the running jobs (bodies running, or returned and waiting for their interrupt).
    var runningIDs: [OffloadJobID] { running.map(\.id) }
    /// The interrupt state of a running job.
    func interruptState(of id: OffloadJobID) -> InterruptState? { running.first { $0.id == id }?.interrupt }
    /// The id of the last job accepted (0: none yet).
    var lastAcceptedID: OffloadJobID { nextID - 1 }
    /// Shutdown waiters not yet handed back.
    var waitingForShutdown: Int { shutdownWaiters.count }
}
