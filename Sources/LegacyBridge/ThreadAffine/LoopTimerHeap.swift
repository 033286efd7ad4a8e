// The deadlines of a descriptor loop's timers: a binary min-heap with lazy cancellation, so that
// arming, cancelling and finding the nearest deadline cost the same with ten timers or ten
// thousand. A pure value: `DescriptorPoller` keeps it in its registry, behind the registry's lock.

/// A min-heap of `(deadline, id)` entries in which a cancelled timer's entry is left in place and
/// skipped when it reaches the top.
///
/// Rules:
/// - Entries leave in deadline order, ties in id order (the order the timers were armed).
/// - The heap does not know which timers live: every query takes an `isLive` test, and an entry
///   that fails it is dropped when it reaches the top, never returned.
/// - `compact(isLive:liveCount:)` rebuilds the heap from its live entries once dead ones outnumber
///   them, so a client that arms and cancels a timeout per request does not grow it without bound.
struct LoopTimerHeap {
    struct Entry: Equatable {
        var deadline: ContinuousClock.Instant
        var id: UInt64

        static func < (lhs: Entry, rhs: Entry) -> Bool {
            (lhs.deadline, lhs.id) < (rhs.deadline, rhs.id)
        }
    }

    private(set) var entries: [Entry] = []

    /// Entries held, dead ones included.
    var count: Int { entries.count }

    /// Adds an entry: O(log n).
    mutating func push(_ entry: Entry) {
        entries.append(entry)
        siftUp(entries.count - 1)
    }

    /// The live entry with the nearest deadline, dropping the dead ones above it.
    mutating func top(isLive: (Entry) -> Bool) -> Entry? {
        while let first = entries.first {
            if isLive(first) { return first }
            removeTop()
        }
        return nil
    }

    /// Removes and returns the live entries due at `now`, in deadline order.
    mutating func popDue(at now: ContinuousClock.Instant, isLive: (Entry) -> Bool) -> [Entry] {
        var due: [Entry] = []
        while let first = top(isLive: isLive), first.deadline <= now {
            due.append(first)
            removeTop()
        }
        return due
    }

    /// Rebuilds the heap from its live entries when the dead ones are more than the live ones (and
    /// more than a few): amortised O(1) per cancelled timer.
    mutating func compact(isLive: (Entry) -> Bool, liveCount: Int) {
        guard entries.count > 64, entries.count > 2 * liveCount else { return }
        entries.removeAll { !isLive($0) }
        guard entries.count > 1 else { return }
        for index in stride(from: entries.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    /// Empties the heap.
    mutating func removeAll() {
        entries = []
    }

    private mutating func removeTop() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child] < entries[parent] else { return }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < entries.count else { return }
            let right = left + 1
            let smaller = right < entries.count && entries[right] < entries[left] ? right : left
            guard entries[smaller] < entries[parent] else { return }
            entries.swapAt(smaller, parent)
            parent = smaller
        }
    }
}
