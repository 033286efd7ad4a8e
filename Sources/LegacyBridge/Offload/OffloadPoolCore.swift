/// A blocking call submitted by `OffloadPool.run`, as a worker sees it: called with `nil`, it runs
/// the body on the calling (worker) thread and reports the result to the call's gate; called with
/// an error, it reports that error without running the body (the call will never run). The pool
/// calls it exactly once.
@usableFromInline
typealias OffloadSettle = @Sendable (OffloadError?) -> Void

/// One unit of work for a pool thread.
@usableFromInline
enum OffloadWork: Sendable {
    /// A blocking call from `OffloadPool.run`.
    case call(OffloadSettle)
    /// A closure posted with `execute`. Dropped uncalled if it is rejected at shutdown.
    case closure(@Sendable () -> Void)
    /// A job of an actor whose executor is an `SDKThreadExecutor`.
    case job(UnownedJob, UnownedSerialExecutor)
}

/// The threads and the shared state of one pool (or of one SDK-thread executor, a pool of one
/// thread): the state machine behind one pthread mutex, and the condition variables the workers
/// park on.
///
/// Every method locks, asks the machine for an action, unlocks, and only then acts: runs a job,
/// calls an interrupt, rejects a job, resumes a shutdown waiter, or releases a job (which may run
/// user deinit code). Only the pool's own worker threads ever wait on the condition variables.
///
/// `@unchecked Sendable`: `machine` is read and written only while `parking`'s mutex is held.
@usableFromInline
final class OffloadPoolCore: @unchecked Sendable {
    typealias Machine = OffloadPoolStateMachine<OffloadWork, UnsafeContinuation<Void, Never>>

    /// Parked idle workers wait here for work (or for shutdown).
    private static let workCondition = 0
    /// A worker whose body returned while its interrupt runs waits here for the interrupt to return.
    private static let interruptCondition = 1

    private let parking = ThreadParking(conditionCount: 2)
    private var machine: Machine
    /// Workers that have left for good: after resuming the shutdown waiters they were handed, or
    /// because their thread never started. Guarded by `parking`'s mutex, like `machine`.
    private var workersGone = 0
    let name: String

    /// A core for `width` threads and `queueLimit` waiting jobs (both already validated). No
    /// thread runs until `start()`.
    init(name: String, width: Int, queueLimit: Int) {
        self.name = name
        self.machine = Machine(width: width, queueLimit: queueLimit)
    }

    /// Starts the worker threads. If one cannot be created, the ones already started are shut
    /// down and the error is thrown.
    func start() throws(OffloadError) {
        let width = self.locked { $0.width }
        for index in 0..<width {
            let threadName = width == 1 ? self.name : "\(self.name)-\(index)"
            let rc = startDetachedThread(name: threadName) { [self] in self.workerMain() }
            if rc != 0 {
                self.parking.lock()
                _ = self.machine.workersNeverStarted(width - index)
                self.workersGone += width - index
                self.parking.unlock()
                self.beginShutdown(.rejectQueued, waiter: nil)
                throw .threadCreationFailed(code: rc)
            }
        }
    }

    /// Whether the calling thread is one of this core's workers.
    var isCurrentThread: Bool { ThreadOwnerMarker.isMarked(self) }

    // MARK: - Events

    /// Queues `work`. On rejection nothing is kept and the work never runs.
    @usableFromInline
    func submit(_ work: OffloadWork, interruptible: Bool) -> Result<OffloadJobID, OffloadError> {
        let action = self.locked { $0.submit(work, interruptible: interruptible) }
        switch action {
        case .accepted(let id, let wakeWorker):
            if wakeWorker { self.parking.signal(Self.workCondition) }
            return .success(id)
        case .rejected(let error):
            return .failure(error)
        }
    }

    /// The caller of job `id` was cancelled or timed out: a waiting job is dropped (never runs); a
    /// running one with an interrupt gets it called, here. This is the call's `CancelHandle`, so
    /// it runs on a job thread of the library's own, never inside the task's cancellation handler.
    @usableFromInline
    func cancel(_ id: OffloadJobID, interrupt: (@Sendable () -> Void)?) {
        let action = self.locked { $0.cancel(id) }
        switch action {
        case .none:
            break
        case .dropQueued(let work):
            _ = work  // released here, after unlocking
        case .scheduleInterrupt(let id):
            self.deliverInterrupt(id, interrupt: interrupt)
        }
    }

    /// Calls the interrupt of job `id` if its body is still running.
    func deliverInterrupt(_ id: OffloadJobID, interrupt: (@Sendable () -> Void)?) {
        guard case .call = self.locked({ $0.interruptDue(id) }) else { return }
        interrupt?()
        if case .wakeWorker = self.locked({ $0.interruptReturned(id) }) {
            self.parking.broadcast(Self.interruptCondition)
        }
    }

    /// Begins shutdown (idempotent; `.rejectQueued` after `.drain` rejects what still waits).
    /// `waiter` is resumed once every worker has left, at once if they already have.
    func beginShutdown(_ mode: OffloadPool.ShutdownMode, waiter: UnsafeContinuation<Void, Never>?) {
        let action = self.locked { $0.shutdown(mode, waiter: waiter) }
        if action.wakeWorkers { self.parking.broadcast(Self.workCondition) }
        for work in action.rejected {
            switch work {
            case .call(let settle): settle(.shutDown)
            case .closure: break  // documented: a posted closure that never ran is dropped
            case .job: preconditionFailure("OffloadPoolCore: an actor job was rejected; executors only drain")
            }
        }
        for waiter in action.resume { waiter.resume() }
    }

    // MARK: - Workers

    private func workerMain() {
        ThreadOwnerMarker.mark(self)
        self.parking.lock()
        while true {
            var slot: OffloadWork? = nil
            switch self.machine.workerNext(into: &slot) {
            case .run(let id):
                self.parking.unlock()
                Self.perform(slot!)
                slot = nil  // the job (and what it captured) is released before locking again
                self.parking.lock()
                if case .awaitInterrupt = self.machine.finish(id) {
                    while self.machine.isAwaitingInterrupt(id) { self.parking.wait(Self.interruptCondition) }
                }
            case .wait:
                self.parking.wait(Self.workCondition)
                self.machine.workerWoke()
            case .exit(let waiters):
                self.parking.unlock()
                for waiter in waiters { waiter.resume() }
                // Counted after the resumes, under the lock: see `allWorkersGone`.
                self.parking.lock()
                self.workersGone += 1
                self.parking.unlock()
                return
            }
        }
    }

    private static func perform(_ work: OffloadWork) {
        switch work {
        case .call(let settle): settle(nil)
        case .closure(let body): body()
        case .job(let job, let executor): job.runSynchronously(on: executor)
        }
    }

    // MARK: - Helpers

    private func locked<Result>(_ body: (inout Machine) -> Result) -> Result {
        self.parking.lock()
        defer { self.parking.unlock() }
        return body(&self.machine)
    }

    /// Whether every worker has left, including the resumes of the shutdown waiters it made.
    ///
    /// A shutdown waiter is resumed by the last worker just before it leaves. The runtime orders
    /// that resume before the waiter runs on, but with atomics ThreadSanitizer does not see; a
    /// waiter that checks this (under the same mutex the worker takes after resuming) makes the
    /// order visible, so the task memory the resume touched is never reported as raced when it
    /// is reused.
    var allWorkersGone: Bool {
        self.parking.lock()
        defer { self.parking.unlock() }
        return self.workersGone == self.machine.width
    }

    /// A snapshot of the machine (tests and debugging).
    var snapshot: Machine { self.locked { $0 } }
}
