/// A growable FIFO ring of elements: O(1) append, O(1) removal at the front,
/// storage kept between uses so a stream in steady state does not allocate.
///
/// The stream's buffer and the consumer's current batch are both rings; the
/// consumer takes a batch by swapping its (empty) ring with the stream's.
@usableFromInline
struct StreamRing<Element> {
    @usableFromInline var slots: ContiguousArray<Element?>
    @usableFromInline var head: Int
    @usableFromInline var count: Int

    /// Capacity above which an emptied ring gives its storage back instead of
    /// keeping it for reuse: 1 MiB of slots (a burst must not pin memory
    /// forever, but a fast producer must not regrow its buffer for every batch).
    @usableFromInline static var retainedCapacity: Int {
        Swift.max(4096, (1 << 20) / MemoryLayout<Element?>.stride)
    }

    @inlinable
    init() {
        self.slots = []
        self.head = 0
        self.count = 0
    }

    @inlinable
    var isEmpty: Bool { count == 0 }

    @inlinable
    mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        var index = head &+ count
        if index >= slots.count { index &-= slots.count }
        slots[index] = element
        count &+= 1
    }

    /// Appends `elements` in order, growing at most once.
    @inlinable
    mutating func append(contentsOf elements: UnsafeBufferPointer<Element>) {
        let needed = count &+ elements.count
        if needed > slots.count { grow(toAtLeast: needed) }
        var index = head &+ count
        if index >= slots.count { index &-= slots.count }
        slots.withUnsafeMutableBufferPointer { slots in
            for element in elements {
                slots[index] = element
                index &+= 1
                if index == slots.count { index = 0 }
            }
        }
        count = needed
    }

    @inlinable
    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head]
        // A trivial element (an Int, a struct of them) owns nothing: leaving its bits in the slot
        // saves a write and a uniqueness check per element. Anything else is cleared so that the
        // ring never keeps an object alive.
        if !_isPOD(Element.self) { slots[head] = nil }
        head &+= 1
        if head == slots.count { head = 0 }
        count &-= 1
        return element
    }

    /// Empties the ring, keeping its storage unless it grew beyond
    /// `retainedCapacity`.
    @inlinable
    mutating func removeAll() {
        if slots.count > Self.retainedCapacity {
            self = StreamRing()
            return
        }
        while count > 0 { _ = popFirst() }
        head = 0
    }

    /// Moves the elements into new storage of at least `minimum` (and at least double) slots,
    /// in two bulk copies (the ring's two segments), the rest filled with `nil`.
    @inlinable
    mutating func grow(toAtLeast minimum: Int = 0) {
        var newCapacity = Swift.max(16, slots.count &* 2)
        while newCapacity < minimum { newCapacity &*= 2 }
        let count = self.count
        let head = self.head
        let newSlots = slots.withUnsafeBufferPointer { old in
            ContiguousArray<Element?>(unsafeUninitializedCapacity: newCapacity) { fresh, initialized in
                guard let target = fresh.baseAddress else {
                    initialized = 0
                    return
                }
                let first = Swift.min(count, old.count &- head)
                if first > 0, let source = old.baseAddress {
                    (target).initialize(from: source + head, count: first)
                    if count > first { (target + first).initialize(from: source, count: count &- first) }
                }
                (target + count).initialize(repeating: nil, count: newCapacity &- count)
                initialized = newCapacity
            }
        }
        slots = newSlots
        self.head = 0
    }
}
