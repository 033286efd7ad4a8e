// The library's own job threads: SDK cancels (CancelHandle, a stream's cancel without a scheduler,
// an offload interrupt) and the timer's actions that may block, in one bounded set.
//
// Not Dispatch: on Linux the cooperative pool *is* Dispatch's default global queue, so a job that
// blocks for the seconds an SDK's cancel can take would hold a thread every task needs. Here a
// job that finds no parked thread starts one, up to `BridgeThreads.limit`; what comes beyond
// waits in order. A refused `pthread_create` is an answer like any other (see the state machine's
// rules): the process never stops over it, and no job is lost.

/// A bounded set of threads for short jobs that may block; `shared` is the library's.
///
/// Every method locks, asks the machine, unlocks, and only then acts: starts a thread, signals
/// one, runs a job, or releases one (which may run user deinit code). Only this pool's threads
/// ever wait on its condition variable.
///
/// `@unchecked Sendable`: `machine` is read and written only while `parking`'s mutex is held.
final class BridgeThreadPool: @unchecked Sendable {
    typealias Job = @Sendable () -> Void
    typealias Machine = BridgeThreadPoolStateMachine<Job>
    /// Starts a detached thread named `name` running `body`; returns 0 or the error code.
    typealias ThreadStarter = @Sendable (_ name: String, _ body: @escaping () -> Void) -> Int32

    /// The library's pool, for every job of its own.
    static let shared = BridgeThreadPool(name: "lbridge-job", limit: BridgeThreads.defaultLimit)

    /// When no thread exists and the system refused one, how long until the pool tries again.
    static let retryDelay = Duration.milliseconds(100)

    let name: String
    private let startThread: ThreadStarter
    private let parking = ThreadParking(conditionCount: 1)
    private var machine: Machine

    /// A pool whose threads are named `name` and start through `startThread` (tests pass one
    /// that refuses or counts). No thread starts before the first job.
    init(
        name: String, limit: Int, startThread: @escaping ThreadStarter = { startDetachedThread(name: $0, $1) }
    ) {
        self.name = name
        self.startThread = startThread
        self.machine = Machine(limit: limit)
    }

    /// Runs `job` soon on one of this pool's threads, after the jobs submitted before it are
    /// taken. Never runs it inline, never blocks, never fails.
    func run(_ job: @escaping Job) {
        let action = locked { $0.submit(job) }
        switch action {
        case .queued: break
        case .wakeParked: parking.signal(0)
        case .startThread: startOneThread()
        }
    }

    /// Runs `jobs` soon, in order, as `run` would one by one, under one turn of the lock.
    func run(contentsOf jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        let (wake, start) = locked { machine -> (Int, Int) in
            var wake = 0
            var start = 0
            for job in jobs {
                switch machine.submit(job) {
                case .queued: break
                case .wakeParked: wake += 1
                case .startThread: start += 1
                }
            }
            return (wake, start)
        }
        for _ in 0..<wake { parking.signal(0) }
        for _ in 0..<start { startOneThread() }
    }

    /// Hands `job` to the shared pool. On the timer thread the job is gathered with the others
    /// of its batch of expiries and handed over with them (one turn of the lock, few wake-ups).
    static func submit(_ job: @escaping Job) {
        if DeadlineTimers.isCurrentThread {
            DeadlineTimers.gather(job)
        } else {
            shared.run(job)
        }
    }

    /// The most threads alive at once (see `BridgeThreads.limit`).
    var limit: Int { locked { $0.limit } }

    /// Changes the limit: a higher one starts threads for the jobs that wait, a lower one ends the
    /// threads above it as they finish their jobs.
    func setLimit(_ limit: Int) {
        let action = locked { $0.setLimit(limit) }
        if action.wakeAllParked { parking.broadcast(0) }
        for _ in 0..<action.start { startOneThread() }
    }

    /// Ends every thread once it has no job: parked threads now, busy ones after their jobs. Jobs
    /// submitted later still run, each on a thread that ends when idle. For pools that are not
    /// the process's own (the tests make some), so that they leave no thread behind.
    func shutdown() {
        if locked({ $0.shutdown() }) { parking.broadcast(0) }
    }

    /// Whether the calling code runs on one of this pool's threads.
    var isCurrentThread: Bool { ThreadOwnerMarker.isMarked(self) }

    /// A snapshot of the machine (tests and debugging).
    var snapshot: Machine { locked { $0 } }

    // MARK: - Threads

    /// Starts the thread the machine asked for; a refusal goes back to the machine.
    private func startOneThread() {
        let rc = startThread(name) { [self] in self.workerMain() }
        guard rc != 0 else { return }
        if case .retryLater = locked({ $0.threadStartFailed() }) { scheduleRetry() }
    }

    /// No thread exists while jobs wait: try again later, from the timer thread (which only
    /// starts a thread here). The timer holds the pool until it fires, a `retryDelay` at most:
    /// the jobs that wait need the pool anyway.
    private func scheduleRetry() {
        _ = DeadlineTimers.schedule(at: .now + Self.retryDelay, onTimerThread: true) {
            if case .startThread = self.locked({ $0.retry() }) { self.startOneThread() }
        }
    }

    private func workerMain() {
        ThreadOwnerMarker.mark(self)
        var slot: Job? = nil
        parking.lock()
        var action = machine.workerNext(into: &slot)
        while true {
            switch action {
            case .run(let wakeParked):
                if wakeParked { parking.signal(0) }
                parking.unlock()
                slot!()
                slot = nil  // the job, and what it captured, is released before locking again
                parking.lock()
                action = machine.workerNext(into: &slot)
            case .park:
                parking.wait(0)
                action = machine.workerWoke(into: &slot)
            case .exit(let wakeParked):
                if wakeParked { parking.signal(0) }
                parking.unlock()
                return
            }
        }
    }

    private func locked<Result>(_ body: (inout Machine) -> Result) -> Result {
        parking.lock()
        defer { parking.unlock() }
        return body(&machine)
    }
}
