import Foundation
import Testing

/// Runs `body` in the calling task, on a thread of its own instead of a thread of the cooperative
/// pool, and returns its value.
///
/// For CPU-bound tests (the enumerations of every ordering of a pure state machine): the test
/// process runs its tests in parallel on the cooperative pool, which has one thread per core. Two
/// enumerations that take a pool thread each for tens of seconds leave nothing to the tests that
/// wait for a callback with a bound, which then fail on a two-core machine. On a thread of its
/// own, an enumeration shares the cores through the system's scheduler, and the pool stays free.
/// The body runs in the same task, so its `#expect`s are recorded against the running test.
package func onOwnThread<T>(_ body: () async throws -> T) async rethrows -> T {
    if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
        let executor = OwnThreadExecutor()
        defer { executor.finish() }
        return try await withTaskExecutorPreference(executor, operation: body)
    } else {
        return try await body()
    }
}

/// A task executor with one thread, which ends once ``finish()`` was called and its queue is empty.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
private final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `jobs` and `finished` are only touched with `condition` locked.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "test enumeration"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// No more jobs will come: the thread ends once it ran those it has.
    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            guard !jobs.isEmpty else {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Runs each test of a suite (or one test) on a thread of its own instead of a thread of the
/// cooperative pool: `@Suite("...", .onOwnThread)`.
///
/// For tests that wait for other threads synchronously (a C SDK's callbacks with `spinUntil`, a
/// semaphore, a bounded `usleep` poll). Swift Testing calls a test's body from a task, so a
/// synchronous body runs on a pool thread, and the pool has one thread per core. A few such tests
/// at once held every pool thread for their whole duration, and the tests that need the pool to
/// make progress (the in-process conformance runs, each with a hang bound) stalled behind them on
/// a busy two-core machine. On threads of their own, the waiting tests share the cores through
/// the system's scheduler and the pool stays free.
package struct OnOwnThreadTrait: TestTrait, SuiteTrait, TestScoping {
    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // The suite's own scope runs its tests: only a test case's body moves.
        guard testCase != nil else { return try await function() }
        try await TestSupport.onOwnThread { try await function() }
    }
}

extension Trait where Self == OnOwnThreadTrait {
    /// Runs the test, or each test of the suite, on a thread of its own: see ``OnOwnThreadTrait``.
    package static var onOwnThread: Self { Self() }
}
