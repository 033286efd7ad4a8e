// The thread and shared state of one `SDKLoop`: the state machine behind a lock, the driver's
// calls made only after unlocking, and the loop thread's body.

/// How a hosted loop is driven; see `SDKLoop.Driver`.
enum SDKLoopDriverKind: Sendable {
    /// The library calls `runOnce` repeatedly and runs posted jobs between calls; `wake` makes a
    /// blocked (or the next) `runOnce` return.
    case iterating(runOnce: @Sendable () -> Void, wake: @Sendable () -> Void)
    /// The SDK's own `run` holds the thread; `schedule(drain)` makes the SDK call `drain` on its
    /// loop thread soon; `stop` makes `run` return.
    case running(
        run: @Sendable () -> Void,
        schedule: @Sendable (_ drain: @escaping @Sendable () -> Void) -> Void,
        stop: @Sendable () -> Void)
    /// The library's own loop: waits on the poller's descriptors, timers and wake pipe.
    case descriptors(DescriptorPoller)
}

/// The machine lives in a `LockedBox`; everything else is immutable.
final class SDKLoopCore: Sendable {
    typealias Job = @Sendable () -> Void
    typealias Machine = SDKLoopStateMachine<Job, UnsafeContinuation<Void, Never>>

    let name: String
    let driver: SDKLoopDriverKind
    private let box = LockedBox(Machine())
    /// Set by the loop thread once it has left, just before it resumes its waiters.
    private let gone = LockedBox(false)
    /// A running driver's drain that saw the exit leaves the waiters here for the thread, which
    /// resumes them once `run` has returned.
    private let exitWaiters = LockedBox<[UnsafeContinuation<Void, Never>]>([])

    init(name: String, driver: SDKLoopDriverKind) {
        self.name = name
        self.driver = driver
    }

    /// Starts the loop thread.
    func start() throws(OffloadError) {
        let rc = startDetachedThread(name: name) { [self] in self.threadMain() }
        if rc != 0 {
            let jobs = box.withLock { $0.neverStarted() }
            _ = jobs  // released outside the lock
            gone.withLock { $0 = true }
            throw .threadCreationFailed(code: rc)
        }
    }

    /// Whether the calling code runs on the loop thread.
    var isCurrent: Bool { ThreadOwnerMarker.isMarked(self) }

    /// The descriptors and timers of a loop made without a driver.
    var poller: DescriptorPoller? {
        if case .descriptors(let poller) = driver { return poller }
        return nil
    }

    /// Queues `job`; wakes the loop if it may be waiting.
    func post(_ job: @escaping Job) throws(OffloadError) {
        let fromLoop = isCurrent
        switch box.withLock({ $0.post(job, fromLoopThread: fromLoop) }) {
        case .accepted(let wake):
            if wake { self.wake() }
        case .rejected(let job):
            _ = job  // released outside the lock
            throw .shutDown
        }
    }

    /// Requests shutdown; `waiter` is resumed once the loop thread has left.
    func requestShutdown(waiter: UnsafeContinuation<Void, Never>?) {
        switch box.withLock({ $0.shutdown(waiter: waiter) }) {
        case .wake: wake()
        case .none: break
        case .resume(let waiter): waiter?.resume()
        }
    }

    /// Whether the loop still accepts jobs (tests).
    var acceptsJobs: Bool { box.withLock { $0.isAccepting } }

    /// Whether the loop thread has left (after resuming the shutdown waiters).
    var isGone: Bool { gone.withLock { $0 } }

    private func wake() {
        switch driver {
        case .iterating(_, let wake): wake()
        case .descriptors(let poller): poller.wake()
        case .running(_, let schedule, _):
            schedule { [self] in
                if let waiters = self.drain(stoppingRun: true) {
                    exitWaiters.withLock { $0.append(contentsOf: waiters) }
                }
            }
        }
    }

    /// Runs every queued job, in order, until the queue is empty. Returns the waiters to resume
    /// when shutdown is complete (the caller leaves the loop), nil otherwise. `stoppingRun`: a
    /// drain inside a running driver's `run`, which must be told to return at the end.
    private func drain(stoppingRun: Bool = false) -> [UnsafeContinuation<Void, Never>]? {
        while true {
            switch box.withLock({ $0.takeJobs() }) {
            case .run(let jobs):
                for job in jobs { job() }
            case .iterate:
                return nil
            case .exit(let waiters):
                if stoppingRun, case .running(_, _, let stop) = driver { stop() }
                return waiters
            }
        }
    }

    /// How many posted jobs a descriptor loop runs before it looks at its descriptors and timers
    /// again: a burst of posts must not starve them.
    static let jobBatch = 64

    /// A descriptor loop's iterations: a bounded batch of posted jobs, then a look at the
    /// descriptors and timers that blocks only when no job waits. Returns the shutdown waiters.
    private func runDescriptorLoop(_ poller: DescriptorPoller) -> [UnsafeContinuation<Void, Never>] {
        // Jobs taken from the machine and not run yet, oldest first: they were posted before
        // anything still in its queue.
        var held: [Job] = []
        var next = 0
        while true {
            if next == held.count {
                held = []
                next = 0
                switch box.withLock({ $0.takeJobs() }) {
                case .run(let jobs): held = jobs
                case .iterate: break
                case .exit(let leaving): return leaving
                }
            }
            let end = min(held.count, next + Self.jobBatch)
            while next < end {
                held[next]()
                next += 1
            }
            let holding = next < held.count
            let busy = box.withLock { $0.endBatch(holdingJobs: holding) }
            poller.runOnce(mayBlock: !busy)
        }
    }

    private func threadMain() {
        ThreadOwnerMarker.mark(self)
        var waiters: [UnsafeContinuation<Void, Never>]
        switch driver {
        case .iterating(let runOnce, _):
            while true {
                if let leaving = drain() {
                    waiters = leaving
                    break
                }
                runOnce()
            }
        case .descriptors(let poller):
            waiters = runDescriptorLoop(poller)
            poller.finish()
        case .running(let run, _, _):
            run()
            // `run` returned: by `stop` after shutdown, or because the SDK's loop ended on its
            // own. Either way nothing more can run inside it: refuse new jobs (no wake: nothing
            // runs the SDK's loop any more) and run the rest here.
            _ = box.withLock { $0.shutdown(waiter: nil) }
            let remaining = drain() ?? []
            waiters = exitWaiters.withLock { $0 } + remaining
        }
        gone.withLock { $0 = true }
        for waiter in waiters { waiter.resume() }
    }
}
