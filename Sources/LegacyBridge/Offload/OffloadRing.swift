/// A first-in, first-out queue in one growable circular buffer: O(1) append and removal at the
/// front, O(n) removal from the middle (a cancelled job that was still waiting).
struct OffloadRing<Element> {
    private var slots: [Element?] = []
    private var head = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[(head + count) % slots.count] = element
        count += 1
    }

    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head]
        slots[head] = nil
        head = (head + 1) % slots.count
        count -= 1
        return element
    }

    /// Removes and returns the first element that matches, keeping the others in order.
    mutating func remove(firstWhere matches: (Element) -> Bool) -> Element? {
        for offset in 0..<count {
            let index = (head + offset) % slots.count
            guard let element = slots[index], matches(element) else { continue }
            // Close the gap by moving the later elements one slot towards the front.
            for later in offset..<(count - 1) {
                slots[(head + later) % slots.count] = slots[(head + later + 1) % slots.count]
            }
            slots[(head + count - 1) % slots.count] = nil
            count -= 1
            return element
        }
        return nil
    }

    /// Removes every element, in order.
    mutating func removeAll() -> [Element] {
        var elements: [Element] = []
        elements.reserveCapacity(count)
        while let element = popFirst() { elements.append(element) }
        return elements
    }

    /// The elements in order (tests and debugging).
    var elements: [Element] {
        (0..<count).compactMap { slots[(head + $0) % slots.count] }
    }

    private mutating func grow() {
        let old = elements
        slots = Array(repeating: nil, count: max(16, slots.count * 2))
        for (index, element) in old.enumerated() { slots[index] = element }
        head = 0
    }
}
