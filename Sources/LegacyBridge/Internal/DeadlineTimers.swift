// The library's timeouts: `withCallback(timeout:)`, `CompletionGate.value(timeout:)`,
// `OffloadPool.run(timeout:)` and a sequenced stream's gap timeout.
//
// One library-owned thread keeps every pending deadline in a heap and sleeps until the earliest.
// Not a task sleeping on the cooperative pool, and not Dispatch (on Linux the pool *is* Dispatch's
// default global queue): a timeout exists to end waits that something else keeps from ending, so
// it must fire when every cooperative thread is busy or blocked, and when it fires it must not need
// one. What a deadline does when it comes (decide the gate, call the SDK's cancel, resume the
// waiter) runs on a spare thread, never on this one, so a slow cancel delays no other deadline.

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
/// `@unchecked Sendable`: `action` and `index` are only read or written with the timer thread's
/// mutex held; `deadline` and `order` never change.
@usableFromInline
final class DeadlineTimer: @unchecked Sendable {
    let deadline: ContinuousClock.Instant
    /// Ties between equal deadlines go to the earlier scheduled.
    let order: UInt64
    fileprivate var action: (@Sendable () -> Void)?
    /// Position in the heap; -1 once fired, cancelled, or never scheduled.
    fileprivate var index: Int

    /// A timer; ``DeadlineTimers/schedule(at:_:)`` makes the scheduled ones. One made here and
    /// never put in a heap (state-machine and heap tests) does nothing when cancelled.
    init(deadline: ContinuousClock.Instant, order: UInt64 = 0, action: (@Sendable () -> Void)? = nil) {
        self.deadline = deadline
        self.order = order
        self.action = action
        self.index = -1
    }

    /// Its position in the heap holding it, -1 when none does (for tests).
    var heapIndex: Int { index }

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
    }

    // nonisolated(unsafe): `state` is only read or written with `parking` locked.
    nonisolated(unsafe) private static var state = State()
    private static let parking = ThreadParking(conditionCount: 1)

    /// Runs `action` on a library-owned thread once `deadline` has passed, unless the returned
    /// timer is cancelled first. Never runs it inline and never blocks.
    static func schedule(
        at deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void
    ) -> DeadlineTimer {
        parking.lock()
        state.scheduled &+= 1
        let timer = DeadlineTimer(deadline: deadline, order: state.scheduled, action: action)
        state.heap.insert(timer)
        let startThread = !state.threadStarted
        state.threadStarted = true
        // The thread sleeps until the earliest deadline: wake it when that changed.
        if timer.index == 0 { parking.signal(0) }
        parking.unlock()
        if startThread {
            let rc = startDetachedThread(name: "legacy-bridge-timer") { run() }
            precondition(rc == 0, "LegacyBridge could not start its timer thread (pthread_create: \(rc))")
        }
        return timer
    }

    static func cancel(_ timer: DeadlineTimer) {
        parking.lock()
        let action = timer.action
        timer.action = nil
        if timer.index >= 0 { state.heap.remove(at: timer.index) }
        parking.unlock()
        _ = action  // released here, outside the lock
    }

    private static func run() {
        parking.lock()
        while true {
            guard let first = state.heap.timers.first else {
                parking.wait(0)
                continue
            }
            let now = ContinuousClock.now
            if first.deadline <= now {
                state.heap.remove(at: 0)
                let action = first.action
                first.action = nil
                parking.unlock()
                if let action { SpareThreads.run(action) }
                parking.lock()
                continue
            }
            // At most a minute at a time: the loop looks at the clock again anyway.
            let remaining = min(now.duration(to: first.deadline), .seconds(60))
            let (seconds, attoseconds) = remaining.components
            parking.wait(0, nanoseconds: seconds * 1_000_000_000 + attoseconds / 1_000_000_000 + 1)
        }
    }
}

/// A binary min-heap of timers by deadline (ties: the earlier scheduled first); each timer knows
/// its position, so cancelling one is O(log n).
struct DeadlineHeap {
    private(set) var timers: [DeadlineTimer] = []

    mutating func insert(_ timer: DeadlineTimer) {
        timer.index = timers.count
        timers.append(timer)
        siftUp(timers.count - 1)
    }

    /// Removes the timer at `index` and returns it.
    @discardableResult
    mutating func remove(at index: Int) -> DeadlineTimer {
        let removed = timers[index]
        let last = timers.count - 1
        if index != last {
            timers.swapAt(index, last)
            timers[index].index = index
        }
        timers.removeLast()
        removed.index = -1
        if index < timers.count {
            siftDown(index)
            siftUp(index)
        }
        return removed
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard timers[child].fires(before: timers[parent]) else { return }
            timers.swapAt(child, parent)
            timers[child].index = child
            timers[parent].index = parent
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < timers.count else { return }
            var first = left
            if left + 1 < timers.count && timers[left + 1].fires(before: timers[left]) { first = left + 1 }
            guard timers[first].fires(before: timers[parent]) else { return }
            timers.swapAt(first, parent)
            timers[first].index = first
            timers[parent].index = parent
            parent = first
        }
    }
}
