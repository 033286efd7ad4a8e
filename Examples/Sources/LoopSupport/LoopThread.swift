import Synchronization

/// A thread of our own that runs one single-threaded C library's event loop, and the queue other
/// threads post jobs to.
///
/// Libraries such as c-ares and libcurl's multi interface must be called from one thread only.
/// A `LoopThread` is that thread: every call into the library is a job posted here and run there,
/// one at a time, in the order posted. Posting never blocks and never runs the job inline, so it is
/// safe from any thread, including the library's own callbacks and the task runtime's cancellation
/// handlers.
///
/// The loop body (the example's) repeatedly calls ``takeJobs()``, runs them with its context,
/// and sleeps in `poll` (or the library's own poll) on ``wakeupDescriptor`` plus the library's
/// descriptors; when the descriptor is readable it calls ``drainWakeup()``. When ``takeJobs()``
/// reports `closed`, the body frees everything it owns and returns; the thread then ends.
package final class LoopThread<Context>: Sendable {
    /// A unit of work for the loop thread; it receives the loop's context (owned by that thread).
    package typealias Job = @Sendable (Context) -> Void

    /// The thread's name.
    package let name: String
    private let queue = LockedBox(LoopQueueStateMachine<Job>())
    private let wakeup: WakeupPipe
    private let threadID = Atomic<UInt>(0)

    /// Starts the thread, which runs `body` once.
    ///
    /// - Parameters:
    ///   - name: The loop's name, used in messages.
    ///   - body: The event loop; runs on the new thread and returns after ``takeJobs()`` reported
    ///     `closed` and everything the loop owned was freed.
    /// - Throws: ``SystemError`` if the pipe or the thread cannot be created.
    package init(name: String, body: @escaping @Sendable (LoopThread<Context>) -> Void) throws(SystemError) {
        self.name = name
        self.wakeup = try WakeupPipe()
        try spawnDetachedThread { [self] in
            self.threadID.store(currentThreadID(), ordering: .releasing)
            body(self)
            // Thread ids are reused after a thread ends: from now on no thread is this loop's.
            self.threadID.store(0, ordering: .releasing)
            let waiters = self.queue.withLock { $0.finish() }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Queues `job` to run on the loop thread. Never blocks; never runs `job` inline.
    ///
    /// - Parameter job: The work; it runs after every job posted before it.
    /// - Returns: `false` if the loop is closed: the job was dropped and will never run.
    @discardableResult
    package func post(_ job: @escaping Job) -> Bool {
        switch queue.withLock({ $0.post(job) }) {
        case .wake:
            wakeup.signal()
            return true
        case .none:
            return true
        case .rejected:
            return false
        }
    }

    /// The loop thread takes the queued jobs (the loop thread only).
    ///
    /// - Returns: The jobs in posting order, and whether the loop was closed: then no job will
    ///   ever be queued again, and the loop runs these, frees what it owns and returns.
    package func takeJobs() -> (jobs: [Job], closed: Bool) {
        precondition(isCurrent, "LoopThread.takeJobs() is for the loop thread of \(name)")
        return queue.withLock { $0.take() }
    }

    /// The descriptor to poll for readability: readable when jobs may be waiting.
    package var wakeupDescriptor: Int32 { wakeup.readDescriptor }

    /// Empties the wake-up descriptor (the loop thread, after a poll showed it readable, before
    /// calling ``takeJobs()``).
    package func drainWakeup() {
        wakeup.drain()
    }

    /// Asks the loop to shut down: later posts are rejected, queued jobs still run.
    package func close() {
        if queue.withLock({ $0.close() }) {
            wakeup.signal()
        }
    }

    /// Closes the loop and returns when its thread has freed everything and returned.
    ///
    /// Suspends; never blocks a thread.
    package func closeAndWait() async {
        close()
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            if !queue.withLock({ $0.addWaiter(waiter) }) {
                waiter.resume()
            }
        }
    }

    /// Whether the loop thread has returned.
    package var isFinished: Bool { queue.withLock { $0.isFinished } }

    /// Whether the caller runs on this loop's thread.
    package var isCurrent: Bool {
        threadID.load(ordering: .acquiring) == currentThreadID()
    }
}
