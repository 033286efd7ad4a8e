// The pure state machine behind the library's bounded set of job threads (BridgeThreadPool).
//
// It owns no lock, starts no thread and runs no job: each event returns an action, and the pool
// performs it after releasing its lock. Being a value, it lets the tests drive a storm of
// submissions, refused thread starts and limit changes without a single thread.

/// Which job threads exist and which job each takes next.
///
/// Rules:
/// - At most `limit` threads exist at once: running a job, starting, woken or parked.
/// - A job that finds threads parked wakes one, unless a woken thread is already on its way;
///   a job that finds none starts a thread if that stays within `limit`; else it waits. Jobs
///   are taken in submission order.
/// - A woken thread that takes a job and sees more waiting wakes the next parked thread: a burst
///   of short jobs wakes few threads, a burst of slow ones spreads over all of them.
/// - A thread takes the oldest job whenever it is free and parks only when none waits, so a
///   waiting job always has a thread on its way, or none exists at all (see the next rule).
/// - A refused thread start gives its place back and loses nothing: the job waits for a thread
///   that exists, and when none does, `retry()` (asked for by the answer) or the next submission
///   starts one.
/// - A thread stays, parked, for later work: it ends only when it is above a lowered `limit`,
///   before its next job, handing what waits to a parked thread. So, while the limit does not go
///   down, no thread ever ends and no more than `limit` threads ever exist, even for the moment
///   an ending thread takes to be gone.
/// - After `shutdown()`, a thread that finds no job waiting ends instead of parking, and the
///   parked ones are woken to end: jobs submitted later still run, on threads that end once idle.
struct BridgeThreadPoolStateMachine<Job> {
    /// The most threads alive at once.
    private(set) var limit: Int
    /// Waiting jobs, oldest at `head`.
    private var queue: [Job?] = []
    private var head = 0
    /// Threads alive or starting.
    private(set) var threads = 0
    /// Parked threads not handed a wake-up.
    private(set) var parked = 0
    /// Wake-ups handed to parked threads and not yet taken.
    private var wakeups = 0
    /// The most threads there ever were at once.
    private(set) var peakThreads = 0
    /// Thread starts the system refused.
    private(set) var refusedStarts = 0
    /// Whether `shutdown()` ran: idle threads end instead of parking.
    private(set) var isShutDown = false

    /// Result of `submit`.
    enum SubmitAction: Hashable {
        /// The job waits for a busy thread.
        case queued
        /// Signal one parked thread.
        case wakeParked
        /// Start a thread (then report `threadStartFailed()` if the system refuses).
        case startThread
    }

    /// Result of `threadStartFailed` and `retry`.
    enum RecoveryAction: Hashable {
        case none
        /// No thread exists while jobs wait: call `retry()` later.
        case retryLater
        /// Start a thread.
        case startThread
    }

    /// What a thread does next.
    enum NextAction: Hashable {
        /// Run the job moved into the thread's slot, outside the lock, then ask `workerNext`;
        /// first signal one parked thread if `wakeParked` (more jobs wait).
        case run(wakeParked: Bool)
        /// Park until signalled, then report `workerWoke`.
        case park
        /// End the thread; first signal one parked thread if `wakeParked` (it takes the jobs
        /// this one leaves).
        case exit(wakeParked: Bool)
    }

    /// Result of `setLimit`.
    struct LimitAction: Hashable {
        /// Threads to start for jobs that wait.
        var start = 0
        /// Wake every parked thread (some must end).
        var wakeAllParked = false
    }

    init(limit: Int) {
        precondition(limit >= 1, "BridgeThreadPoolStateMachine: limit must be at least 1")
        self.limit = limit
    }

    /// Jobs waiting for a thread.
    var queuedJobs: Int { queue.count - head }

    // MARK: - Events

    /// A job was submitted.
    mutating func submit(_ job: Job) -> SubmitAction {
        queue.append(job)
        if parked > 0 {
            // A thread already woken takes the oldest job and wakes the next if more wait.
            guard wakeups == 0 else { return .queued }
            parked -= 1
            wakeups += 1
            return .wakeParked
        }
        if threads < limit {
            addThread()
            return .startThread
        }
        return .queued
    }

    /// The thread that `submit`, `retry` or `setLimit` asked for could not be started.
    mutating func threadStartFailed() -> RecoveryAction {
        precondition(threads > 0, "BridgeThreadPoolStateMachine: a start failed that was never asked for")
        threads -= 1
        refusedStarts += 1
        return threads == 0 && queuedJobs > 0 ? .retryLater : .none
    }

    /// The retry that `threadStartFailed` asked for is due.
    mutating func retry() -> RecoveryAction {
        guard threads == 0, queuedJobs > 0 else { return .none }
        addThread()
        return .startThread
    }

    /// A thread started, or finished its job: the next job moves into `slot`.
    mutating func workerNext(into slot: inout Job?) -> NextAction {
        if threads > limit { return leave() }
        if let job = pop() {
            slot = job
            guard queuedJobs > 0, parked > 0, wakeups == 0 else { return .run(wakeParked: false) }
            parked -= 1
            wakeups += 1
            return .run(wakeParked: true)
        }
        if isShutDown {
            threads -= 1
            return .exit(wakeParked: false)
        }
        parked += 1
        return .park
    }

    /// A parked thread woke: signalled, or spuriously.
    mutating func workerWoke(into slot: inout Job?) -> NextAction {
        if wakeups > 0 {
            // Any parked thread may take a wake-up, whichever one it was meant for.
            wakeups -= 1
        } else {
            parked -= 1
        }
        return workerNext(into: &slot)
    }

    /// The limit changed (at least 1).
    mutating func setLimit(_ newLimit: Int) -> LimitAction {
        precondition(newLimit >= 1, "BridgeThreadPoolStateMachine: limit must be at least 1")
        limit = newLimit
        var action = LimitAction()
        if threads > limit {
            action.wakeAllParked = parked > 0
        } else {
            action.start = min(queuedJobs - wakeups, limit - threads)
            for _ in 0..<max(action.start, 0) { addThread() }
            action.start = max(action.start, 0)
        }
        return action
    }

    /// The pool is shut down: returns whether to wake every parked thread (each then ends).
    mutating func shutdown() -> Bool {
        isShutDown = true
        return parked > 0
    }

    // MARK: - Helpers

    /// The calling thread ends; a job it leaves behind goes to a parked thread.
    private mutating func leave() -> NextAction {
        threads -= 1
        if queuedJobs > wakeups && parked > 0 {
            parked -= 1
            wakeups += 1
            return .exit(wakeParked: true)
        }
        return .exit(wakeParked: false)
    }

    private mutating func addThread() {
        threads += 1
        peakThreads = max(peakThreads, threads)
    }

    private mutating func pop() -> Job? {
        guard head < queue.count else { return nil }
        let job = queue[head].take()
        head += 1
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return job
    }
}
