/// The job queue of a ``LoopThread``, as a pure value: what each event does, no locks, no calls.
///
/// The loop thread is woken (by its wake-up pipe) only when a post finds no wake-up pending; the
/// loop clears that flag when it takes the jobs, so a post that lands after the take wakes it
/// again and no job waits for an unrelated wake-up.
package struct LoopQueueStateMachine<Job> {
    private enum State {
        /// Accepting jobs. `wakePending`: the pipe was signalled and the loop has not taken since.
        case open(jobs: [Job], wakePending: Bool)
        /// Closed: no job is accepted any more; the loop still takes (and runs) what is queued.
        case closed(jobs: [Job])
        /// The loop thread has returned.
        case finished
    }

    private var state: State = .open(jobs: [], wakePending: false)
    private var waiters: [CheckedContinuation<Void, Never>] = []

    package init() {}

    /// What a post asks of its caller, after unlocking.
    package enum PostAction: Equatable {
        /// Signal the wake-up pipe: the loop may be asleep.
        case wake
        /// Nothing: a wake-up is already pending.
        case none
        /// The job was not queued: the loop is closed or finished.
        case rejected
    }

    /// A job is posted.
    package mutating func post(_ job: Job) -> PostAction {
        switch state {
        case .open(var jobs, let wakePending):
            jobs.append(job)
            state = .open(jobs: jobs, wakePending: true)
            return wakePending ? .none : .wake
        case .closed, .finished:
            return .rejected
        }
    }

    /// The loop thread takes every queued job; `closed` tells it to shut down after running them.
    package mutating func take() -> (jobs: [Job], closed: Bool) {
        switch state {
        case .open(let jobs, _):
            state = .open(jobs: [], wakePending: false)
            return (jobs, false)
        case .closed(let jobs):
            state = .closed(jobs: [])
            return (jobs, true)
        case .finished:
            preconditionFailure("LoopThread: the loop took jobs after it finished")
        }
    }

    /// The loop is asked to shut down. Returns whether to wake it.
    package mutating func close() -> Bool {
        switch state {
        case .open(let jobs, _):
            state = .closed(jobs: jobs)
            return true
        case .closed, .finished:
            return false
        }
    }

    /// The loop thread returned. Returns the waiters to resume.
    package mutating func finish() -> [CheckedContinuation<Void, Never>] {
        switch state {
        case .closed(let jobs):
            precondition(jobs.isEmpty, "LoopThread: the loop returned with jobs still queued")
        case .open:
            preconditionFailure("LoopThread: the loop returned before it was closed")
        case .finished:
            preconditionFailure("LoopThread: the loop finished twice")
        }
        state = .finished
        defer { waiters = [] }
        return waiters
    }

    /// A task waits for the loop to finish. Returns `false` if it already has (resume at once).
    package mutating func addWaiter(_ waiter: CheckedContinuation<Void, Never>) -> Bool {
        switch state {
        case .open, .closed:
            waiters.append(waiter)
            return true
        case .finished:
            return false
        }
    }

    /// Whether the loop thread has returned.
    package var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }
}
