// The library's timeouts: `withCallback(timeout:)`, `CompletionGate.value(timeout:)`,
// `OffloadPool.run(timeout:)` and a sequenced stream's gap timeout.
//
// One library-owned thread keeps every pending deadline in a heap and sleeps until the earliest.
// Not a task sleeping on the cooperative pool, and not Dispatch (on Linux the pool *is* Dispatch's
// default global queue): a timeout exists to end waits that something else keeps from ending, so
// it must fire when every cooperative thread is busy or blocked, and when it fires it must not need
// one. It must not need a job thread either: a one-shot timeout's action decides the gate and
// resumes the waiter right here (short, no user code), and only the SDK's cancel goes to the job
// threads, so a timeout resumes its caller on time while every job thread is stuck in a cancel.
// Actions that may block run on the job threads. Expired timers are taken in batches.
//
// The thread sleeps on the clock of its deadlines. `ContinuousClock` counts the time the machine
// sleeps (`CLOCK_BOOTTIME` on Linux), which a condition variable cannot wait on, so on Linux the
// thread sleeps in a `CLOCK_BOOTTIME` timerfd: a deadline that passes while the machine sleeps
// fires when it wakes.

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One pending deadline. ``cancel()`` takes it out of the heap, so whatever its action captured is
/// released at once, not when the deadline would have come.
///
/// `@unchecked Sendable`: `action` and `index` are only read or written with the timers' lock
/// held; the other properties never change.
@usableFromInline
final class DeadlineTimer: @unchecked Sendable {
    let deadline: ContinuousClock.Instant
    /// Ties between equal deadlines go to the earlier scheduled.
    let order: UInt64
    /// The action is short, never blocks and calls no user code: it runs on the timer thread.
    let runsOnTimerThread: Bool
    fileprivate var action: (@Sendable () -> Void)?
    /// Position in the heap; -1 once fired, cancelled, or never scheduled.
    fileprivate var index: Int

    /// A timer; ``DeadlineTimers/schedule(at:onTimerThread:_:)`` makes the scheduled ones. One
    /// made here and never put in a heap (state-machine and heap tests) does nothing when cancelled.
    init(
        deadline: ContinuousClock.Instant, order: UInt64 = 0, runsOnTimerThread: Bool = false,
        action: (@Sendable () -> Void)? = nil
    ) {
        self.deadline = deadline
        self.order = order
        self.runsOnTimerThread = runsOnTimerThread
        self.action = action
        self.index = -1
    }

    /// Its position in the heap holding it, -1 when none does (for tests). Read under the timer
    /// lock: inserting any other timer into the shared heap may move this one.
    var heapIndex: Int { DeadlineTimers.position(of: self) }

    /// Makes sure the action does not run (unless it already began). Harmless when called again,
    /// after the deadline, or from the action itself.
    @usableFromInline
    func cancel() {
        DeadlineTimers.cancel(self)
    }

    func fires(before other: DeadlineTimer) -> Bool {
        deadline < other.deadline || (deadline == other.deadline && order < other.order)
    }
}

/// The process-wide timer thread and its heap of deadlines.
enum DeadlineTimers {
    private struct State {
        var heap = DeadlineHeap()
        var scheduled: UInt64 = 0
        var threadStarted = false
        /// The deadline the alarm is set for; nil when it is not set.
        var armed: ContinuousClock.Instant?
        /// Timer-thread actions run so far (for tests).
        var firedOnTimerThread = 0
    }

    /// Expired timers taken per turn of the lock: the lock is never held for long, however
    /// many deadlines pass at once.
    static let batch = 256

    // nonisolated(unsafe): `state` is only read or written with `lock` held.
    nonisolated(unsafe) private static var state = State()
    /// How the timer thread is started (tests, in a process of their own, pass one that refuses).
    // nonisolated(unsafe): only read or written with `lock` held.
    nonisolated(unsafe) private static var threadStarter: BridgeThreadPool.ThreadStarter = {
        startDetachedThread(name: $0, $1)
    }

    /// Replaces how the timer thread is started (tests only, before the first timer).
    static func setThreadStarter(_ starter: @escaping BridgeThreadPool.ThreadStarter) {
        lock.lock()
        threadStarter = starter
        lock.unlock()
    }
    private static let lock = ThreadParking(conditionCount: 0)

    /// `timer`'s position in the heap holding it, read under the lock (for tests).
    static func position(of timer: DeadlineTimer) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return timer.index
    }
    static let alarm = TimerAlarm()

    /// Runs `action` once `deadline` has passed, unless the returned timer is cancelled first.
    /// Never runs it inline and never blocks.
    ///
    /// - Parameters:
    ///   - deadline: When the action is due.
    ///   - onTimerThread: true only for an action that is short, never blocks and calls no user
    ///     or SDK code: it runs on the timer thread itself and so needs no other thread.
    ///     Otherwise the action runs on a job thread (`BridgeThreadPool.shared`).
    ///   - action: What to do at the deadline.
    /// - Returns: The timer, to cancel.
    static func schedule(
        at deadline: ContinuousClock.Instant, onTimerThread: Bool = false,
        _ action: @escaping @Sendable () -> Void
    ) -> DeadlineTimer {
        lock.lock()
        state.scheduled &+= 1
        let timer = DeadlineTimer(
            deadline: deadline, order: state.scheduled, runsOnTimerThread: onTimerThread, action: action)
        state.heap.insert(timer)
        let startThread = !state.threadStarted
        state.threadStarted = true
        let starter = threadStarter
        // The thread sleeps until the earliest deadline: wake it sooner when that changed. The
        // alarm is set under the lock, so that two schedulers cannot leave the later of their
        // deadlines set.
        if timer.index == 0, state.armed.map({ deadline < $0 }) ?? true {
            state.armed = deadline
            alarm.arm(at: deadline)
        }
        lock.unlock()
        if startThread {
            let rc = starter("lbridge-timer") { run() }
            if rc != 0 {
                // The deadline stays in the heap; the next schedule tries the thread again.
                lock.lock()
                state.threadStarted = false
                lock.unlock()
            }
        }
        return timer
    }

    static func cancel(_ timer: DeadlineTimer) {
        lock.lock()
        let action = timer.action
        timer.action = nil
        if timer.index >= 0 { state.heap.remove(at: timer.index) }
        lock.unlock()
        _ = action  // released here, outside the lock
    }

    /// Timer-thread actions run so far (for tests).
    static var firedOnTimerThread: Int {
        lock.lock()
        defer { lock.unlock() }
        return state.firedOnTimerThread
    }

    /// Whether the calling code runs on the timer thread.
    static var isCurrentThread: Bool { ThreadOwnerMarker.isMarked(alarm) }

    // nonisolated(unsafe): only the timer thread reads or writes it (`gather`, `run`).
    nonisolated(unsafe) private static var gathered: [@Sendable () -> Void] = []

    /// Keeps a job that an action on the timer thread handed to the job threads, to hand it over
    /// with the rest of the batch. Only on the timer thread.
    static func gather(_ job: @escaping @Sendable () -> Void) {
        gathered.append(job)
    }

    private static func run() {
        ThreadOwnerMarker.mark(alarm)
        var onThread: [@Sendable () -> Void] = []
        var onJobThreads: [@Sendable () -> Void] = []
        lock.lock()
        while true {
            let now = ContinuousClock.now
            while onThread.count + onJobThreads.count < batch, let first = state.heap.timers.first,
                first.deadline <= now
            {
                state.heap.remove(at: 0)
                if let action = first.action {
                    if first.runsOnTimerThread { onThread.append(action) } else { onJobThreads.append(action) }
                }
                first.action = nil
            }
            let moreDue = onThread.count + onJobThreads.count == batch
            if !moreDue {
                // Set for the next deadline, or unset when none is left.
                let next = state.heap.timers.first?.deadline
                if next != state.armed {
                    state.armed = next
                    if let next { alarm.arm(at: next) } else { alarm.disarm() }
                }
            }
            state.firedOnTimerThread += onThread.count
            lock.unlock()
            for action in onThread { action() }
            // What the batch hands to the job threads goes over at once.
            onJobThreads.append(contentsOf: gathered)
            gathered.removeAll(keepingCapacity: true)
            BridgeThreadPool.shared.run(contentsOf: onJobThreads)
            onThread.removeAll(keepingCapacity: true)
            onJobThreads.removeAll(keepingCapacity: true)
            if !moreDue {
                alarm.wait()
            }
            lock.lock()
            // After a wake-up the alarm counts as unset: the loop sets it again for what is next.
            if !moreDue { state.armed = nil }
        }
    }
}

/// Wakes the timer thread at a `ContinuousClock` deadline, measured on that clock.
///
/// `arm` and `disarm` are serialised by the timers' lock; `wait` is called by the timer thread
/// alone, without that lock. An alarm set while nobody waits is kept: the next `wait` returns at
/// once if its deadline has passed.
final class TimerAlarm: @unchecked Sendable {
    // @unchecked Sendable: on Linux the state is the kernel's timerfd; elsewhere `deadline` is
    // only read or written with `parking`'s mutex held.

    #if os(Linux)
    /// The clock of `ContinuousClock` on Linux.
    static let clock = CLOCK_BOOTTIME
    private let descriptor: Int32?
    #endif
    private let parking = ThreadParking(conditionCount: 1)
    private var deadline: ContinuousClock.Instant?
    /// A thread is inside the fallback's `wait` (for tests).
    private var waiting = false

    /// Whether a thread waits on the condition-variable fallback right now (for tests; always
    /// false with a timerfd, whose waiter the kernel keeps).
    var hasFallbackWaiter: Bool {
        parking.lock()
        defer { parking.unlock() }
        return waiting
    }

    /// An alarm on the deadlines' clock where the platform has one (`deadlineClock: false`: the
    /// condition-variable fallback, for tests).
    init(deadlineClock: Bool = true) {
        #if os(Linux)
        if deadlineClock, let timerfd = TimerFD.functions {
            let descriptor = timerfd.create(Self.clock, O_CLOEXEC)
            self.descriptor = descriptor >= 0 ? descriptor : nil
        } else {
            self.descriptor = nil
        }
        #endif
    }

    /// Whether the alarm sleeps on the deadlines' own clock (a timerfd on Linux); false when it
    /// falls back to a condition variable on the monotonic clock.
    var usesDeadlineClock: Bool {
        #if os(Linux)
        descriptor != nil
        #else
        false
        #endif
    }

    /// Sets the alarm for `deadline`, replacing any earlier setting.
    func arm(at deadline: ContinuousClock.Instant) {
        #if os(Linux)
        if let descriptor, let timerfd = TimerFD.functions {
            // A relative setting on this clock counts the time the machine sleeps; zero would
            // unset the alarm, so a deadline already passed rings in a nanosecond.
            let remaining = max(ContinuousClock.now.duration(to: deadline), .nanoseconds(1))
            let (seconds, attoseconds) = remaining.components
            var setting = itimerspec()
            setting.it_value.tv_sec = Int(seconds)
            setting.it_value.tv_nsec = Int(attoseconds / 1_000_000_000)
            let rc = timerfd.setTime(descriptor, 0, &setting, nil)
            precondition(rc == 0, "timerfd_settime failed: \(errno)")
            return
        }
        #endif
        parking.lock()
        self.deadline = deadline
        parking.signal(0)
        parking.unlock()
    }

    /// Unsets the alarm.
    func disarm() {
        #if os(Linux)
        if let descriptor, let timerfd = TimerFD.functions {
            var setting = itimerspec()
            let rc = timerfd.setTime(descriptor, 0, &setting, nil)
            precondition(rc == 0, "timerfd_settime failed: \(errno)")
            return
        }
        #endif
        parking.lock()
        self.deadline = nil
        parking.unlock()
    }

    /// Returns once the alarm's deadline has passed (possibly sooner: the caller looks at its
    /// clock and sets the alarm again).
    func wait() {
        #if os(Linux)
        if let descriptor {
            var expirations: UInt64 = 0
            // EINTR and the like only make this return early.
            _ = read(descriptor, &expirations, MemoryLayout<UInt64>.size)
            return
        }
        #endif
        parking.lock()
        defer { parking.unlock() }
        waiting = true
        defer { waiting = false }
        while true {
            guard let deadline else {
                parking.wait(0)
                continue
            }
            let now = ContinuousClock.now
            if deadline <= now { return }
            parking.wait(0, for: now.duration(to: deadline))
        }
    }
}

#if os(Linux)
/// `timerfd_create` and `timerfd_settime`, which the Glibc module does not import: looked up once.
private enum TimerFD {
    typealias Create = @convention(c) (Int32, Int32) -> Int32
    typealias SetTime =
        @convention(c) (Int32, Int32, UnsafePointer<itimerspec>?, UnsafeMutablePointer<itimerspec>?) -> Int32

    static let functions: (create: Create, setTime: SetTime)? = {
        guard let process = dlopen(nil, RTLD_NOW),
            let create = dlsym(process, "timerfd_create"),
            let setTime = dlsym(process, "timerfd_settime")
        else { return nil }
        return (unsafeBitCast(create, to: Create.self), unsafeBitCast(setTime, to: SetTime.self))
    }()
}
#endif

/// The timer thread's deadlines: a ``BinaryHeap`` of timers by deadline (ties: the earlier
/// scheduled first); each timer knows its position, so cancelling one is O(log n).
struct DeadlineHeap {
    private var heap = BinaryHeap<DeadlineTimer>()

    var timers: [DeadlineTimer] { heap.elements }

    mutating func insert(_ timer: DeadlineTimer) {
        heap.insert(timer)
    }

    /// Removes the timer at `index` and returns it.
    @discardableResult
    mutating func remove(at index: Int) -> DeadlineTimer {
        heap.remove(at: index)
    }
}

extension DeadlineTimer: BinaryHeapElement {
    func precedes(_ other: DeadlineTimer) -> Bool { fires(before: other) }
    func heapPositionChanged(to index: Int) { self.index = index }
}
