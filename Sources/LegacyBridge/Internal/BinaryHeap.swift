// The one binary min-heap of the library: the timer thread's deadlines (DeadlineTimers.swift) and
// a descriptor loop's timers (LoopTimerHeap.swift) both keep their order in it. A pure value;
// each owner keeps it behind its own lock.

/// What a ``BinaryHeap`` holds: an order, and a position it is told of whenever it moves, for an
/// element that must be found again to be removed.
protocol BinaryHeapElement {
    /// Whether `self` leaves the heap before `other`.
    func precedes(_ other: Self) -> Bool
    /// The element now sits at `index` in the heap, or -1 once it left it.
    func heapPositionChanged(to index: Int)
}

extension BinaryHeapElement {
    func heapPositionChanged(to index: Int) {}
}

/// A binary min-heap: insertion, removal at any position and rebuilding after a filter, each
/// keeping the elements' positions told.
struct BinaryHeap<Element: BinaryHeapElement> {
    /// The elements; the first one leaves first.
    private(set) var elements: [Element] = []

    /// Adds an element: O(log n).
    mutating func insert(_ element: Element) {
        elements.append(element)
        element.heapPositionChanged(to: elements.count - 1)
        siftUp(elements.count - 1)
    }

    /// Removes and returns the element at `index`: O(log n).
    @discardableResult
    mutating func remove(at index: Int) -> Element {
        let last = elements.count - 1
        if index != last {
            elements.swapAt(index, last)
            elements[index].heapPositionChanged(to: index)
        }
        let removed = elements.removeLast()
        removed.heapPositionChanged(to: -1)
        if index < elements.count {
            siftDown(index)
            siftUp(index)
        }
        return removed
    }

    /// Keeps only the elements `keep` accepts, then restores the order: O(n).
    mutating func filter(_ keep: (Element) -> Bool) {
        var kept: [Element] = []
        kept.reserveCapacity(elements.count)
        for element in elements {
            if keep(element) { kept.append(element) } else { element.heapPositionChanged(to: -1) }
        }
        elements = kept
        for index in elements.indices { elements[index].heapPositionChanged(to: index) }
        guard elements.count > 1 else { return }
        for index in stride(from: elements.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    /// Empties the heap.
    mutating func removeAll() {
        for element in elements { element.heapPositionChanged(to: -1) }
        elements = []
    }

    private mutating func swapElements(_ first: Int, _ second: Int) {
        elements.swapAt(first, second)
        elements[first].heapPositionChanged(to: first)
        elements[second].heapPositionChanged(to: second)
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard elements[child].precedes(elements[parent]) else { return }
            swapElements(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < elements.count else { return }
            let right = left + 1
            let first = right < elements.count && elements[right].precedes(elements[left]) ? right : left
            guard elements[first].precedes(elements[parent]) else { return }
            swapElements(first, parent)
            parent = first
        }
    }
}

extension BinaryHeap: Sendable where Element: Sendable {}
