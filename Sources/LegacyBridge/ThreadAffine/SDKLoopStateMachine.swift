// The pure state machine behind `SDKLoop`: the FIFO of posted jobs, when the SDK's loop must be
// woken, and how shutdown drains. No lock, no thread, no closure called: `SDKLoopCore` asks it
// under its lock and acts after unlocking, so a job that posts another job cannot deadlock.

/// The job queue and lifecycle of one hosted SDK loop.
///
/// Rules:
/// - Jobs run in the order they were posted, each exactly once, on the loop thread.
/// - A post from another thread wakes the loop at most once per batch: the first post into an
///   empty queue asks for a wake, later ones ride on it until the loop takes the batch.
/// - A post from the loop thread asks for no wake only inside the loop's own drain (while it runs
///   posted jobs, or between two bounded batches of them): the drain takes it before the loop
///   blocks again. Anywhere else on that thread,
///   inside one of the SDK's callbacks for example, the SDK's loop may wait next: it is woken as
///   from another thread.
/// - After shutdown is requested every post is rejected; jobs accepted before it still run.
/// - The loop exits only when shutdown was requested and the queue is empty; every shutdown
///   waiter is handed out then, exactly once. Asking again after that finds nothing.
struct SDKLoopStateMachine<Job, Waiter> {
    enum State {
        /// Accepting jobs. `wakeRequested`: a wake was asked for and the loop has not taken the
        /// batch since.
        case running(queue: [Job], wakeRequested: Bool)
        /// Shutdown requested: the loop runs what is queued, then exits.
        case draining(queue: [Job], waiters: [Waiter])
        /// The loop thread has left.
        case stopped
        /// Transient placeholder while a payload is moved out (never observed outside a method).
        case modifying
    }

    /// Result of `post`.
    enum PostAction {
        /// Queued. `wake`: the caller must wake the loop (after unlocking).
        case accepted(wake: Bool)
        /// Shutdown was requested: the job is handed back, never runs.
        case rejected(Job)
    }

    /// Result of `takeJobs`, asked by the loop thread between iterations.
    enum TakeAction {
        /// Run these, in order, then ask again.
        case run([Job])
        /// Nothing to do: run one iteration of the SDK's loop (it blocks until the SDK has work
        /// or a wake comes).
        case iterate
        /// Shutdown requested and nothing left: leave, then resume these waiters.
        case exit([Waiter])
    }

    /// Result of `shutdown`.
    enum ShutdownAction {
        /// The loop must be woken to notice (after unlocking).
        case wake
        /// A shutdown was already under way: the waiter, if any, is resumed with the others.
        case none
        /// The loop is already gone: resume the waiter now.
        case resume(Waiter?)
    }

    private(set) var state: State = .running(queue: [], wakeRequested: false)
    /// Whether the loop thread is inside its drain: the last `takeJobs` handed it jobs, and it has
    /// not asked again since.
    private(set) var loopInDrain = false

    /// A job is posted; `fromLoopThread` when the loop thread posts it (in a drain or not: the
    /// machine knows which).
    mutating func post(_ job: Job, fromLoopThread: Bool) -> PostAction {
        switch state {
        case .running(var queue, let wakeRequested):
            state = .modifying
            queue.append(job)
            // We skip the wake only inside our own drain: it asks again before the loop waits.
            let wake = !wakeRequested && !(fromLoopThread && loopInDrain)
            state = .running(queue: queue, wakeRequested: wakeRequested || wake)
            return .accepted(wake: wake)
        case .draining, .stopped:
            return .rejected(job)
        case .modifying:
            preconditionFailure("SDKLoopStateMachine: re-entered while modifying")
        }
    }

    /// The loop thread asks what to do next.
    mutating func takeJobs() -> TakeAction {
        switch state {
        case .running(let queue, _):
            state = .running(queue: [], wakeRequested: false)
            loopInDrain = !queue.isEmpty
            return queue.isEmpty ? .iterate : .run(queue)
        case .draining(let queue, let waiters):
            if queue.isEmpty {
                state = .stopped
                loopInDrain = false
                return .exit(waiters)
            }
            state = .draining(queue: [], waiters: waiters)
            loopInDrain = true
            return .run(queue)
        case .stopped:
            // A running driver may call a drain it was asked for before the exit: nothing is left.
            return .exit([])
        case .modifying:
            preconditionFailure("SDKLoopStateMachine: re-entered while modifying")
        }
    }

    /// The loop thread ran a bounded batch of jobs (a descriptor loop) and looks at its
    /// descriptors and timers next. `holdingJobs`: it still holds jobs it took. Returns whether
    /// that look must not block: jobs are held or queued. While it returns true the loop takes
    /// jobs again before it blocks, so a post from the loop thread needs no wake. Once shutdown
    /// was requested it is always true: the loop must ask again to learn that it may leave.
    mutating func endBatch(holdingJobs: Bool) -> Bool {
        if case .draining = state {
            loopInDrain = true
            return true
        }
        loopInDrain = holdingJobs || queuedCount > 0
        return loopInDrain
    }

    /// Shutdown is requested; `waiter` (if any) is resumed once the loop has left.
    mutating func shutdown(waiter: Waiter?) -> ShutdownAction {
        switch state {
        case .running(let queue, _):
            state = .draining(queue: queue, waiters: waiter.map { [$0] } ?? [])
            return .wake
        case .draining(let queue, var waiters):
            state = .modifying
            if let waiter { waiters.append(waiter) }
            state = .draining(queue: queue, waiters: waiters)
            return .none
        case .stopped:
            return .resume(waiter)
        case .modifying:
            preconditionFailure("SDKLoopStateMachine: re-entered while modifying")
        }
    }

    /// The thread could not be started: nothing will ever run. The jobs are handed back.
    mutating func neverStarted() -> [Job] {
        switch state {
        case .running(let queue, _):
            state = .stopped
            return queue
        case .draining, .stopped, .modifying:
            preconditionFailure("SDKLoopStateMachine: neverStarted after the loop began")
        }
    }

    /// Jobs waiting to run (tests and debugging).
    var queuedCount: Int {
        switch state {
        case .running(let queue, _), .draining(let queue, _): return queue.count
        case .stopped, .modifying: return 0
        }
    }

    /// Whether the loop is accepting jobs (tests and debugging).
    var isAccepting: Bool {
        if case .running = state { return true }
        return false
    }
}

extension SDKLoopStateMachine: Sendable where Job: Sendable, Waiter: Sendable {}
extension SDKLoopStateMachine.State: Sendable where Job: Sendable, Waiter: Sendable {}
