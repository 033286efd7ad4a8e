// Threads of our own: the offload pool's workers, the SDK-thread executor's thread, the job
// threads and the timer thread.
//
// A pthread mutex with condition variables (the one place in the core that parks a thread: only
// threads this library created ever wait here), thread creation, and a thread-local marker that
// says which pool a thread belongs to. Built on pthreads rather than Synchronization.Mutex for the
// reason Lock.swift gives: ThreadSanitizer must see every lock.

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pthread mutex and `conditionCount` condition variables, at stable addresses.
///
/// `@unchecked Sendable`: it only wraps the pthread objects, which are made for use from
/// several threads; the state they guard lives in the owner, which touches it only while locked.
final class ThreadParking: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let conditions: UnsafeMutablePointer<pthread_cond_t>
    private let conditionCount: Int

    init(conditionCount: Int) {
        self.conditionCount = conditionCount
        self.mutex = .allocate(capacity: 1)
        self.mutex.initialize(to: pthread_mutex_t())
        #if DEBUG && !canImport(Darwin)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        let rc = pthread_mutex_init(self.mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        #else
        let rc = pthread_mutex_init(self.mutex, nil)
        #endif
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
        self.conditions = .allocate(capacity: conditionCount)
        #if canImport(Darwin)
        for index in 0..<conditionCount {
            (self.conditions + index).initialize(to: pthread_cond_t())
            precondition(pthread_cond_init(self.conditions + index, nil) == 0, "pthread_cond_init failed")
        }
        #else
        // Timed waits measure on the monotonic clock: setting the wall clock moves no deadline.
        var conditionAttributes = pthread_condattr_t()
        pthread_condattr_init(&conditionAttributes)
        pthread_condattr_setclock(&conditionAttributes, CLOCK_MONOTONIC)
        for index in 0..<conditionCount {
            (self.conditions + index).initialize(to: pthread_cond_t())
            precondition(
                pthread_cond_init(self.conditions + index, &conditionAttributes) == 0, "pthread_cond_init failed")
        }
        pthread_condattr_destroy(&conditionAttributes)
        #endif
    }

    deinit {
        for index in 0..<self.conditionCount { pthread_cond_destroy(self.conditions + index) }
        self.conditions.deinitialize(count: self.conditionCount)
        self.conditions.deallocate()
        pthread_mutex_destroy(self.mutex)
        self.mutex.deinitialize(count: 1)
        self.mutex.deallocate()
    }

    func lock() {
        let rc = pthread_mutex_lock(self.mutex)
        precondition(rc == 0, "pthread_mutex_lock failed (re-entrant locking?): \(rc)")
    }

    func unlock() {
        let rc = pthread_mutex_unlock(self.mutex)
        precondition(rc == 0, "pthread_mutex_unlock failed (not the owner?): \(rc)")
    }

    /// Releases the mutex, waits for a signal on `condition`, and takes the mutex again.
    /// Callers re-check their predicate afterwards: wake-ups may be spurious.
    func wait(_ condition: Int) {
        let rc = pthread_cond_wait(self.conditions + condition, self.mutex)
        precondition(rc == 0, "pthread_cond_wait failed: \(rc)")
    }

    /// The same, giving up after `duration` if no signal came (at least a nanosecond, at most
    /// a minute: callers re-check their clock anyway). Returns true if it gave up.
    ///
    /// Measured on the monotonic clock, which stops while the machine sleeps: for a thread's
    /// linger, not for a deadline (the timer thread waits on its deadlines' clock, see
    /// DeadlineTimers.swift).
    @discardableResult
    func wait(_ condition: Int, for duration: Duration) -> Bool {
        let (seconds, attoseconds) = min(max(duration, .nanoseconds(1)), .seconds(60)).components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        #if canImport(Darwin)
        var relative = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        let rc = pthread_cond_timedwait_relative_np(self.conditions + condition, self.mutex, &relative)
        #else
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let total = Int64(now.tv_nsec) + nanoseconds % 1_000_000_000
        var deadline = timespec()
        deadline.tv_sec = now.tv_sec + Int(nanoseconds / 1_000_000_000) + Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        let rc = pthread_cond_timedwait(self.conditions + condition, self.mutex, &deadline)
        #endif
        precondition(rc == 0 || rc == ETIMEDOUT, "pthread_cond_timedwait failed: \(rc)")
        return rc == ETIMEDOUT
    }

    func signal(_ condition: Int) {
        pthread_cond_signal(self.conditions + condition)
    }

    func broadcast(_ condition: Int) {
        pthread_cond_broadcast(self.conditions + condition)
    }
}

/// Which pool (or executor) the current thread works for: set by each worker when it starts.
enum ThreadOwnerMarker {
    /// One process-wide key; its value on a worker thread is the unretained address of the
    /// worker's pool core.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    static func mark(_ owner: AnyObject) {
        pthread_setspecific(key, Unmanaged.passUnretained(owner).toOpaque())
    }

    static func isMarked(_ owner: AnyObject) -> Bool {
        let marker: UnsafeMutableRawPointer? = pthread_getspecific(key)
        return marker == Unmanaged.passUnretained(owner).toOpaque()
    }
}

/// The threads ``startDetachedThread(name:_:)`` started that have not ended yet, by name. The test
/// suite's run-end check reads it: a pool, loop or executor nobody shut down shows up by name.
package enum LiveThreads {
    private static let names = LockedBox<[String: Int]>([:])

    /// Live threads by their (shortened) name.
    package static var byName: [String: Int] { names.withLock { $0 } }

    static func started(_ name: String) { names.withLock { $0[name, default: 0] += 1 } }

    static func ended(_ name: String) {
        names.withLock { names in
            let left = names[name, default: 1] - 1
            names[name] = left > 0 ? left : nil
        }
    }
}

/// What a new thread runs, handed to it retained.
private final class ThreadEntry {
    let name: String
    let body: () -> Void
    init(name: String, body: @escaping () -> Void) {
        self.name = name
        self.body = body
    }
}

#if canImport(Darwin)
private func threadMain(_ argument: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
    let entry = Unmanaged<ThreadEntry>.fromOpaque(argument).takeRetainedValue()
    entry.name.withCString { _ = pthread_setname_np($0) }
    entry.body()
    LiveThreads.ended(entry.name)
    return nil
}
#else
/// glibc's `pthread_setname_np` is a GNU extension the Glibc module does not import: look it up once.
private let setThreadName: (@convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32)? = {
    guard let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "pthread_setname_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32).self)
}()

private func threadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let entry = Unmanaged<ThreadEntry>.fromOpaque(argument).takeRetainedValue()
    if let setThreadName { entry.name.withCString { _ = setThreadName(pthread_self(), $0) } }
    entry.body()
    LiveThreads.ended(entry.name)
    return nil
}
#endif

/// Starts a detached pthread named `name` (cut to the 15 bytes the platform keeps) that runs
/// `body` and ends. Returns the error code of `pthread_create`, 0 on success.
/// `package`: the simulator hands work to a thread of its own with it, without Dispatch.
package func startDetachedThread(name: String, _ body: @escaping () -> Void) -> Int32 {
    var shortName = ""
    for character in name {
        if shortName.utf8.count + String(character).utf8.count > 15 { break }
        shortName.append(character)
    }
    let entry = Unmanaged.passRetained(ThreadEntry(name: shortName, body: body))
    LiveThreads.started(shortName)
    #if canImport(Darwin)
    var thread: pthread_t? = nil
    #else
    var thread = pthread_t()
    #endif
    let rc = pthread_create(&thread, nil, threadMain, entry.toOpaque())
    guard rc == 0 else {
        entry.release()
        LiveThreads.ended(shortName)
        return rc
    }
    #if canImport(Darwin)
    if let thread { pthread_detach(thread) }
    #else
    pthread_detach(thread)
    #endif
    return 0
}
