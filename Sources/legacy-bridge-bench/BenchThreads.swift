// The benchmark's own threads: a pthread worker like an SDK's, the stream producer's loop, and
// facts about this process. C is reached here through the system's libraries only; the simulated
// SDK is reached through LegacySimulator (SDKClient, SDK.startBareRequest).
//
// The thread entry is a nonisolated file-level C function; the thread's context goes to C retained
// (Unmanaged.passRetained) and is given back exactly once, by the entry when the loop ends.

import ToolSupport
import LegacyBridge
import LegacySimulator

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Mutex and condition variable

/// A pthread mutex and condition variable at stable addresses, for the benchmark's own threads.
private struct BenchCondition: ~Copyable {
    let mutex: UnsafeMutablePointer<pthread_mutex_t>
    let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        precondition(pthread_cond_init(condition, nil) == 0, "pthread_cond_init failed")
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func wait() { pthread_cond_wait(condition, mutex) }
    func signal() { pthread_cond_signal(condition) }
}

// MARK: - A worker thread like an SDK's

/// A dedicated pthread that runs submitted jobs in order, blocking on a condition variable while
/// it has none: the shape of a legacy SDK's worker. The one-shot floor and `withCallback` are
/// resumed by the very same thread through the very same queue, and the stream producer runs on one.
final class BenchThread: @unchecked Sendable {
    // @unchecked Sendable: `slots`, `head`, `count`, `submitted`, `completed` and `stopping` are
    // read and written only while `condition`'s mutex is held; `thread` is written before any
    // other thread sees the object and read by `stop()` only.

    /// What the thread does for one submission.
    enum Job: Sendable {
        /// Resume a bare continuation with the value.
        case resume(UnsafeContinuation<Int, Never>, Int)
        /// Call a `withCallback` completion with the value.
        case complete(Completion<Int>, Int)
        /// Run a closure (the stream producer's loop).
        case run(@Sendable () -> Void)
    }

    private static let capacity = 16
    private let condition = BenchCondition()
    private var slots: [Job?] = Array(repeating: nil, count: BenchThread.capacity)
    private var head = 0
    private var count = 0
    private var submitted = 0
    private var completed = 0
    private var stopping = false
    private var thread = pthread_t()

    init() {
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, benchThreadMain, context)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    /// Queues `job` and wakes the thread (one lock, one signal: what an SDK's worker pool does).
    func submit(_ job: Job) {
        condition.lock()
        precondition(count < Self.capacity, "BenchThread: too many jobs queued")
        var index = head + count
        if index >= Self.capacity { index -= Self.capacity }
        slots[index] = job
        count += 1
        submitted += 1
        condition.signal()
        condition.unlock()
    }

    /// Returns once every job submitted so far has returned on the thread (normally at once).
    ///
    /// A task resumed by a job can run on before the job's `resume` call has returned; the
    /// concurrency runtime orders the two with atomics that ThreadSanitizer does not see. Taking
    /// the thread's lock after the job marked itself done makes that order visible. Every variant
    /// that waits on this thread calls it after each operation, so they all pay the same.
    func confirmJobsDone() {
        condition.lock()
        while completed < submitted {
            condition.unlock()
            sched_yield()
            condition.lock()
        }
        condition.unlock()
    }

    /// Lets the thread finish its queued jobs, then joins it.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
        pthread_join(thread, nil)
    }

    fileprivate func loop() {
        condition.lock()
        while true {
            if count == 0 {
                if stopping { break }
                condition.wait()
                continue
            }
            let job = slots[head].take()
            head += 1
            if head == Self.capacity { head = 0 }
            count -= 1
            condition.unlock()
            switch job {
            case .resume(let continuation, let value)?: continuation.resume(returning: value)
            case .complete(let completion, let value)?: completion.succeed(value)
            case .run(let body)?: body()
            case nil: preconditionFailure("BenchThread: empty slot")
            }
            condition.lock()
            completed += 1
        }
        condition.unlock()
    }
}

private func benchThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    // The retain taken in init is given back when the loop ends.
    let thread = Unmanaged<BenchThread>.fromOpaque(context).takeRetainedValue()
    thread.loop()
    return nil
}

// MARK: - Stream producer

/// `CLOCK_MONOTONIC` in nanoseconds: cheap enough to read inside a condition variable's lock.
func benchMonotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// A pthread loop that produces `0 ..< count` as fast as it can through one `yield` function, the
/// same for every stream variant; it honours pause, resume and cancel the way an SDK stream does
/// (it checks one atomic flag per event and blocks on a condition variable while paused).
final class BenchStreamProducer: @unchecked Sendable {
    // @unchecked Sendable: `paused`, `cancelled`, `resumedAt` and `wakeUps` are read and written
    // only while `condition`'s mutex is held; `attention` is atomic.

    /// Set while paused or cancelled: the loop's only per-event check.
    private let attention = AtomicCell<Bool>(false)
    /// Bumped by every `resume`: a producer that stops itself on a yield's answer does so only if
    /// no resume came in between (see `stopIfNoResumeSince(_:)`).
    private let resumes = AtomicCell<Int>(0)
    private let condition = BenchCondition()
    private var paused = false
    private var cancelled = false
    /// When the latest `resume` was called (monotonic ns), for `wakeUps`.
    private var resumedAt: UInt64 = 0
    private var wakeUps = WakeUps()

    /// How long a paused producer took to run again once `resume` was called: the thread
    /// wake-up every pause cycle costs, whatever the stream does.
    struct WakeUps: Sendable {
        var count = 0
        var totalNanoseconds: UInt64 = 0
        var meanNanoseconds: Double { count == 0 ? 0 : Double(totalNanoseconds) / Double(count) }
    }

    /// The wake-ups measured so far; read after the run.
    var resumeWakeUps: WakeUps {
        condition.lock()
        defer { condition.unlock() }
        return wakeUps
    }

    init() {}

    /// Produces `0 ..< count` on the calling thread, then calls `finish` (not if cancelled).
    /// `yield` returns whether the consumer side asked the producer to stop (a CallbackStream's
    /// `.stopProducing`); the producer then pauses itself until `resume`, the way a pull-style SDK
    /// does. Variants whose yield has no such answer return false.
    ///
    /// - Returns: How many events were yielded.
    @discardableResult
    func produce(count: Int, yield: (Int) -> Bool, finish: () -> Void) -> Int {
        for value in 0..<count {
            if attention.load(ordering: .acquiring) && !waitWhilePaused() { return value }
            let epoch = resumes.load(ordering: .acquiring)
            if yield(value) { stopIfNoResumeSince(epoch) }
        }
        finish()
        return count
    }

    /// Pauses, unless a `resume` arrived since the yield that asked to stop began (that resume
    /// answers a later decision of the stream: stopping now could leave the producer paused
    /// while the stream wants it running).
    private func stopIfNoResumeSince(_ epoch: Int) {
        condition.lock()
        if resumes.load(ordering: .relaxed) == epoch {
            paused = true
            attention.store(true, ordering: .releasing)
        }
        condition.unlock()
    }

    /// Produces `0 ..< count` in batches of `batch` (the last may be shorter), reusing one buffer,
    /// the way an SDK hands over an array of events per callback; then calls `finish`.
    ///
    /// - Returns: How many events were yielded.
    @discardableResult
    func produce(count: Int, batch: Int, yield: (UnsafeBufferPointer<Int>) -> Bool, finish: () -> Void) -> Int {
        var buffer = [Int](repeating: 0, count: batch)
        var value = 0
        while value < count {
            if attention.load(ordering: .acquiring) && !waitWhilePaused() { return value }
            let size = min(batch, count - value)
            buffer.withUnsafeMutableBufferPointer { slots in
                for offset in 0..<size { slots[offset] = value + offset }
            }
            let epoch = resumes.load(ordering: .acquiring)
            let stop = buffer.withUnsafeBufferPointer { yield(UnsafeBufferPointer(rebasing: $0[0..<size])) }
            if stop { stopIfNoResumeSince(epoch) }
            value += size
        }
        finish()
        return count
    }

    /// Blocks while paused; false once cancelled.
    private func waitWhilePaused() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        var waited = false
        while paused && !cancelled {
            condition.wait()
            waited = true
        }
        if waited && !cancelled {
            wakeUps.count += 1
            wakeUps.totalNanoseconds &+= benchMonotonicNanoseconds() &- resumedAt
        }
        return !cancelled
    }

    func pause() {
        condition.lock()
        paused = true
        attention.store(true, ordering: .releasing)
        condition.unlock()
    }

    func resume() {
        condition.lock()
        resumes.add(1, ordering: .releasing)
        resumedAt = benchMonotonicNanoseconds()
        paused = false
        attention.store(cancelled, ordering: .releasing)
        condition.signal()
        condition.unlock()
    }

    func cancel() {
        condition.lock()
        cancelled = true
        attention.store(true, ordering: .releasing)
        condition.signal()
        condition.unlock()
    }
}

// MARK: - The simulated SDK, bare

extension SDKBareRequest {
    /// Returns once the SDK released the request (normally at once); see
    /// `BenchThread.confirmJobsDone()` for why the awaiting task confirms this.
    func confirmReleased() {
        while !isReleased { sched_yield() }
    }
}

// MARK: - Process facts

/// Resident set size of this process, in bytes (the second field of /proc/self/statm, in pages;
/// 0 where it cannot be read).
func benchResidentBytes() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 256)
    guard fgets(&buffer, Int32(buffer.count), file) != nil else { return 0 }
    let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let fields = text.split(separator: " ")
    guard fields.count >= 2, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Gives freed heap memory back to the system, so a measurement that follows starts from pages
/// that are really resident only if used (glibc; a no-op elsewhere).
func benchTrimHeap() {
    #if canImport(Glibc)
    // malloc_trim is not in the Glibc module map; look it up at run time.
    typealias MallocTrim = @convention(c) (Int) -> Int32
    if let symbol = dlsym(nil, "malloc_trim") {
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    }
    #endif
}
