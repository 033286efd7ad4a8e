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
    struct Entry: Equatable, BinaryHeapElement {
        var deadline: ContinuousClock.Instant
        var id: UInt64

        static func < (lhs: Entry, rhs: Entry) -> Bool {
            (lhs.deadline, lhs.id) < (rhs.deadline, rhs.id)
        }

        func precedes(_ other: Entry) -> Bool { self < other }
    }

    private var heap = BinaryHeap<Entry>()

    /// The entries, dead ones included, in heap order.
    var entries: [Entry] { heap.elements }

    /// Entries held, dead ones included.
    var count: Int { heap.elements.count }

    /// Adds an entry: O(log n).
    mutating func push(_ entry: Entry) {
        heap.insert(entry)
    }

    /// The live entry with the nearest deadline, dropping the dead ones above it.
    mutating func top(isLive: (Entry) -> Bool) -> Entry? {
        while let first = heap.elements.first {
            if isLive(first) { return first }
            heap.remove(at: 0)
        }
        return nil
    }

    /// Removes and returns the live entries due at `now`, in deadline order.
    mutating func popDue(at now: ContinuousClock.Instant, isLive: (Entry) -> Bool) -> [Entry] {
        var due: [Entry] = []
        while let first = top(isLive: isLive), first.deadline <= now {
            due.append(first)
            heap.remove(at: 0)
        }
        return due
    }

    /// Rebuilds the heap from its live entries when the dead ones are more than the live ones (and
    /// more than a few): amortised O(1) per cancelled timer.
    mutating func compact(isLive: (Entry) -> Bool, liveCount: Int) {
        guard heap.elements.count > 64, heap.elements.count > 2 * liveCount else { return }
        heap.filter(isLive)
    }

    /// Empties the heap.
    mutating func removeAll() {
        heap.removeAll()
    }
}
