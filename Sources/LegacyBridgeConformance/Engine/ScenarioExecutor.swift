import Foundation
import LegacyBridge

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A task executor with threads of its own, for the tasks a scenario runs adapters on.
///
/// Why: an adapter that blocks the threads it runs on (a semaphore wait, a deadlock) would otherwise
/// block the cooperative pool, and then nothing async can run any more in the process — not even
/// the suite's watchdog, whose timer fires but whose waiter needs a pool thread to resume. With a
/// scenario's tasks preferring this executor, a blocking adapter blocks these threads only; the
/// pool stays free, and the watchdog reports on time.
///
/// Threads are started when jobs are waiting and no thread is idle (at most `maxThreads`), and end
/// after 250 ms without work, so an executor that is no longer used holds no threads — except the
/// ones a broken adapter keeps blocked, which are abandoned with it.
///
/// With `maxThreads == 1` it is a serial executor whose idleness a scenario can observe: when
/// ``isIdle`` is true, every task preferring it is suspended (or finished).
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
final class ScenarioExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `state` is only read or written with `mutex` held; `mutex` and
    // `condition` are allocated in init, destroyed in deinit, and only used through pthread calls.
    private struct State {
        var jobs: [UnownedJob] = []
        var head = 0
        var threads = 0
        var idleThreads = 0
        var running = 0

        var hasJobs: Bool { head < jobs.count }

        mutating func pop() -> UnownedJob? {
            guard hasJobs else { return nil }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            return job
        }
    }

    let label: String
    let maxThreads: Int
    /// Called on the enqueuing thread, outside the executor's lock, for every job enqueued: a
    /// scenario learns on which thread a task was scheduled (the caller's resumption).
    let onEnqueue: (@Sendable () -> Void)?
    private var state = State()
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// Creates an executor that starts at most `maxThreads` threads.
    init(label: String, maxThreads: Int, onEnqueue: (@Sendable () -> Void)? = nil) {
        precondition(maxThreads >= 1, "ScenarioExecutor needs at least one thread")
        self.label = label
        self.maxThreads = maxThreads
        self.onEnqueue = onEnqueue
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        // Every worker thread holds `self` while it runs, so no thread uses these any more.
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        onEnqueue?()
        pthread_mutex_lock(mutex)
        state.jobs.append(job)
        var startThread = false
        if state.idleThreads > 0 {
            pthread_cond_signal(condition)
        } else if state.threads < maxThreads {
            state.threads += 1
            startThread = true
        }
        pthread_mutex_unlock(mutex)
        if startThread {
            onDedicatedThread(label) { [self] in work() }
        }
    }

    /// Whether no job is running or waiting: every task that prefers this executor is suspended
    /// or finished. Meaningful as "the consumer is parked" only with `maxThreads == 1` and one task.
    var isIdle: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return state.running == 0 && !state.hasJobs
    }

    /// Whether a task queued now runs within `bound`. On a serial executor (`maxThreads == 1`)
    /// jobs run first come first served, so when it has run, every task queued before it has run
    /// up to its first suspension: each caller a scenario launched there is inside the adapter.
    func ranEverythingQueued(within bound: Duration? = nil) async -> Bool {
        let ran = LockedBox(false)
        Task(executorPreference: self) { ran.withLock { $0 = true } }
        return await eventually(within: bound) { ran.withLock { $0 } }
    }

    private func work() {
        pthread_mutex_lock(mutex)
        while true {
            if let job = state.pop() {
                state.running += 1
                pthread_mutex_unlock(mutex)
                job.runSynchronously(on: asUnownedTaskExecutor())
                pthread_mutex_lock(mutex)
                state.running -= 1
                continue
            }
            state.idleThreads += 1
            let timedOut = waitForWork(milliseconds: 250)
            state.idleThreads -= 1
            if timedOut && !state.hasJobs {
                state.threads -= 1
                pthread_mutex_unlock(mutex)
                return
            }
        }
    }

    /// Waits on the condition (mutex held) at most `milliseconds`; returns whether it timed out.
    private func waitForWork(milliseconds: Int) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var deadline = now
        let nanoseconds = Int(now.tv_nsec) + milliseconds * 1_000_000
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec = .init(nanoseconds % 1_000_000_000)
        return pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT
    }
}

/// Where the running scenario's adapter tasks go: its ``ScenarioExecutor``.
enum ScenarioThreads {
    /// The executor of the running scenario (type-erased so the task-local needs no availability).
    @TaskLocal static var executor: (any Sendable)?

    /// Starts `operation` in a new task on the running scenario's executor (or on the global
    /// executor when there is none, or the platform has no task executors).
    static func task<Success: Sendable>(
        _ operation: sending @escaping () async -> Success
    ) -> Task<Success, Never> {
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *),
            let executor = executor as? ScenarioExecutor
        {
            return Task(executorPreference: executor, operation: operation)
        }
        return Task(operation: operation)
    }
}
