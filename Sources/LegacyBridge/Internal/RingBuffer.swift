// The library's one first-in, first-out queue: a stream's buffer and its consumer's batch, an offload
// pool's waiting jobs. Storage is kept between uses, so a stream in steady state does not allocate,
// and a slot is cleared when its element leaves, so the queue never keeps an object alive.

/// A growable FIFO ring: O(1) append, O(1) removal at the front, O(n) removal from the middle.
///
/// Two representations, chosen by the element type (a constant once the code is specialised):
/// - a trivial element (an `Int`, a struct of them: it owns nothing) lives in `plain`, unwrapped,
///   so a consumer reading what a producer's thread just wrote moves half the cache lines of an
///   optional. Slots outside the live range hold stale copies, which own nothing.
/// - any other element lives in `slots` as an optional, set to `nil` when its element leaves.
@usableFromInline
struct RingBuffer<Element> {
    /// Storage of a non-trivial element type (empty otherwise).
    @usableFromInline var slots: ContiguousArray<Element?>
    /// Storage of a trivial element type (empty otherwise).
    @usableFromInline var plain: ContiguousArray<Element>
    @usableFromInline var head: Int
    @usableFromInline var count: Int

    /// Whether elements live unwrapped in `plain`.
    @inlinable
    static var isPlain: Bool { _isPOD(Element.self) }

    /// Capacity above which an emptied ring gives its storage back instead of keeping it: 1 MiB of
    /// slots, so that a burst does not pin memory and a fast producer does not regrow every batch.
    @usableFromInline static var retainedCapacity: Int {
        let stride = isPlain ? MemoryLayout<Element>.stride : MemoryLayout<Element?>.stride
        return Swift.max(4096, (1 << 20) / Swift.max(1, stride))
    }

    @inlinable
    init() {
        self.slots = []
        self.plain = []
        self.head = 0
        self.count = 0
    }

    @inlinable
    var isEmpty: Bool { count == 0 }

    /// How many elements the storage holds without growing.
    @inlinable
    var capacity: Int { Self.isPlain ? plain.count : slots.count }

    /// The elements in order (tests, debugging and small queues).
    var elements: [Element] {
        (0..<count).map { element(at: $0) }
    }

    @inlinable
    mutating func append(_ element: Element) {
        if count == capacity { grow(filler: element) }
        var index = head &+ count
        if Self.isPlain {
            if index >= plain.count { index &-= plain.count }
            plain[index] = element
        } else {
            if index >= slots.count { index &-= slots.count }
            slots[index] = element
        }
        count &+= 1
    }

    /// Appends `elements` in order, growing at most once.
    @inlinable
    mutating func append(contentsOf elements: UnsafeBufferPointer<Element>) {
        guard let source = elements.baseAddress, !elements.isEmpty else { return }
        let needed = count &+ elements.count
        if needed > capacity { grow(toAtLeast: needed, filler: source.pointee) }
        var index = head &+ count
        if Self.isPlain {
            if index >= plain.count { index &-= plain.count }
            plain.withUnsafeMutableBufferPointer { storage in
                guard let target = storage.baseAddress else { return }
                // Two bulk copies: up to the end of the storage, then from its start.
                let first = Swift.min(elements.count, storage.count &- index)
                (target + index).update(from: source, count: first)
                if first < elements.count { target.update(from: source + first, count: elements.count &- first) }
            }
        } else {
            if index >= slots.count { index &-= slots.count }
            slots.withUnsafeMutableBufferPointer { slots in
                for element in elements {
                    slots[index] = element
                    index &+= 1
                    if index == slots.count { index = 0 }
                }
            }
        }
        count = needed
    }

    @inlinable
    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element: Element
        if Self.isPlain {
            // The element owns nothing: its bits stay in the slot, no write needed.
            element = plain[head]
            head &+= 1
            if head == plain.count { head = 0 }
        } else {
            guard let taken = slots[head].take() else {
                preconditionFailure("RingBuffer: empty slot in the live range")
            }
            element = taken
            head &+= 1
            if head == slots.count { head = 0 }
        }
        count &-= 1
        return element
    }

    /// Plain rings: the end (an index into `plain`) of the run of live elements that starts at
    /// `head` and does not wrap, at most `limit` long. The ring must not be empty.
    @inlinable
    func plainRunEnd(limit: Int) -> Int {
        head &+ Swift.min(count, plain.count &- head, limit)
    }

    /// Plain rings: removes the first `n` elements (handed out by index from a run).
    @inlinable
    mutating func removeFirst(plain n: Int) {
        precondition(n > 0 && n <= count && head &+ n <= plain.count, "RingBuffer: run beyond the live range")
        head &+= n
        if head == plain.count { head = 0 }
        count &-= n
    }

    /// Empties the ring, keeping its storage unless it grew beyond `retainedCapacity`.
    @inlinable
    mutating func removeAll() {
        if capacity > Self.retainedCapacity {
            self = RingBuffer()
            return
        }
        if !Self.isPlain {
            while count > 0 { _ = popFirst() }
        }
        count = 0
        head = 0
    }

    /// Removes and returns every element, in order.
    mutating func popAll() -> [Element] {
        var elements: [Element] = []
        elements.reserveCapacity(count)
        while let element = popFirst() { elements.append(element) }
        return elements
    }

    /// Removes and returns the first element that matches, keeping the others in order.
    mutating func remove(firstWhere matches: (Element) -> Bool) -> Element? {
        guard let offset = (0..<count).first(where: { matches(element(at: $0)) }) else { return nil }
        let removed = element(at: offset)
        // Close the gap by moving the later elements one slot towards the front.
        for later in offset..<(count - 1) {
            setElement(element(at: later + 1), at: later)
        }
        if !Self.isPlain { slots[storageIndex(count - 1)] = nil }
        count -= 1
        return removed
    }

    /// The element `offset` places after the first; `offset` must be in the live range.
    func element(at offset: Int) -> Element {
        if Self.isPlain { return plain[storageIndex(offset)] }
        guard let element = slots[storageIndex(offset)] else {
            preconditionFailure("RingBuffer: empty slot in the live range")
        }
        return element
    }

    mutating func setElement(_ element: Element, at offset: Int) {
        if Self.isPlain {
            plain[storageIndex(offset)] = element
        } else {
            slots[storageIndex(offset)] = element
        }
    }

    func storageIndex(_ offset: Int) -> Int {
        let index = head + offset
        return index >= capacity ? index - capacity : index
    }

    /// Moves the elements into new storage of at least `minimum` (and at least double) slots,
    /// in two bulk copies (the ring's two segments). The rest is filled with `nil`, or for a
    /// trivial element with copies of `filler`, so that every slot holds a value.
    @inlinable
    mutating func grow(toAtLeast minimum: Int = 0, filler: Element) {
        var newCapacity = Swift.max(16, capacity &* 2)
        while newCapacity < minimum { newCapacity &*= 2 }
        if Self.isPlain {
            plain = Self.regrow(plain, head: head, count: count, capacity: newCapacity, filler: filler)
        } else {
            slots = Self.regrow(slots, head: head, count: count, capacity: newCapacity, filler: nil)
        }
        head = 0
    }

    /// New storage of `capacity` slots: the `count` live slots of `old` from `head` (wrapping)
    /// first, then copies of `filler`.
    @inlinable
    static func regrow<Slot>(
        _ old: ContiguousArray<Slot>, head: Int, count: Int, capacity: Int, filler: Slot
    ) -> ContiguousArray<Slot> {
        old.withUnsafeBufferPointer { old in
            ContiguousArray<Slot>(unsafeUninitializedCapacity: capacity) { fresh, initialized in
                guard let target = fresh.baseAddress else {
                    initialized = 0
                    return
                }
                let first = Swift.min(count, old.count &- head)
                if first > 0, let source = old.baseAddress {
                    target.initialize(from: source + head, count: first)
                    if count > first { (target + first).initialize(from: source, count: count &- first) }
                }
                (target + count).initialize(repeating: filler, count: capacity &- count)
                initialized = capacity
            }
        }
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
