/// Restores the order of numbered events that arrive out of order (for
/// example from several SDK threads), within a bounded window.
///
/// A plain value with no locking: keep it behind your own lock if several
/// threads insert. `CallbackStream` uses one under its own lock when created
/// with ``StreamOrdering/sequenced(window:firstSequence:gaps:)``.
///
/// Rules:
/// - The element numbered ``nextSequence`` is released at once, followed by
///   every held element that now continues the run.
/// - An element up to `window - 1` numbers ahead is held until its
///   predecessors arrive (at most `window - 1` are held at once).
/// - Progress never goes backwards: an element numbered below
///   ``nextSequence`` (a duplicate, or one older than a skipped gap) and a
///   second copy of a held number are dropped and counted in ``droppedStale``.
/// - An element `window` or more numbers ahead overflows the window. With
///   ``SequenceGapPolicy/skip`` the reorderer gives up on just enough missing
///   numbers to make it fit (releasing held elements in order, counting the
///   missing numbers in ``skippedSequences``); with ``SequenceGapPolicy/fail``
///   it returns ``Placement/rejected`` and changes nothing.
public struct SequenceReorderer<Element> {
    /// Where an inserted element went.
    public enum Placement: Sendable, Hashable {
        /// Released to the caller (possibly after held predecessors, and after
        /// skipping a gap under ``SequenceGapPolicy/skip``).
        case released
        /// Held until its predecessors arrive.
        case held
        /// Below ``SequenceReorderer/nextSequence`` or a duplicate: dropped.
        case stale
        /// Too far ahead for the window under ``SequenceGapPolicy/fail``: not stored.
        case rejected
    }

    /// How many consecutive sequence numbers, starting at ``nextSequence``, the reorderer can place.
    public let window: Int
    /// What happens when an element does not fit in the window.
    public let gapPolicy: SequenceGapPolicy
    /// The number of the next element to release. Never decreases.
    public private(set) var nextSequence: UInt64
    /// How many elements are held, waiting for a predecessor.
    public private(set) var heldCount: Int = 0
    /// Elements dropped as stale (below ``nextSequence``) or duplicate.
    public private(set) var droppedStale: Int = 0
    /// Sequence numbers given up as missing.
    public private(set) var skippedSequences: UInt64 = 0

    /// Slot `s % window` holds the element numbered `s`, for
    /// `nextSequence <= s < nextSequence + window`.
    @usableFromInline var slots: ContiguousArray<Element?>

    /// Creates an empty reorderer.
    ///
    /// - Parameters:
    ///   - window: How many consecutive numbers from ``nextSequence`` can be
    ///     placed; at least 1 (1 means no reordering: anything ahead is a gap).
    ///   - firstSequence: The number of the first element.
    ///   - gapPolicy: What to do with an element that does not fit in the window.
    public init(window: Int, firstSequence: UInt64 = 0, gapPolicy: SequenceGapPolicy = .skip) {
        precondition(window >= 1, "SequenceReorderer(window: \(window)): the window must be at least 1")
        self.window = window
        self.gapPolicy = gapPolicy
        self.nextSequence = firstSequence
        self.slots = ContiguousArray(repeating: nil, count: window)
    }

    @inlinable
    func slot(_ sequence: UInt64) -> Int {
        Int(sequence % UInt64(slots.count))
    }

    /// Places one element and passes every element that is now in order to `release`, in order.
    ///
    /// - Parameters:
    ///   - element: The element.
    ///   - sequence: Its sequence number.
    ///   - release: Receives the released elements, lowest number first.
    /// - Returns: Where `element` went.
    @discardableResult
    public mutating func insert(_ element: Element, sequence: UInt64, release: (Element) -> Void) -> Placement {
        if sequence < nextSequence {
            droppedStale += 1
            return .stale
        }
        let distance = sequence - nextSequence
        if distance >= UInt64(window) {
            switch gapPolicy {
            case .fail:
                return .rejected
            case .skip:
                advance(to: sequence - UInt64(window) + 1, release: release)
                releaseRun(release)
            }
        }
        if sequence == nextSequence {
            release(element)
            nextSequence += 1
            releaseRun(release)
            return .released
        }
        let index = slot(sequence)
        if slots[index] != nil {
            droppedStale += 1
            return .stale
        }
        slots[index] = element
        heldCount += 1
        return .held
    }

    /// Places one element and returns the elements now in order.
    ///
    /// - Parameters:
    ///   - element: The element.
    ///   - sequence: Its sequence number.
    /// - Returns: Where `element` went, and the released elements in order.
    public mutating func insert(_ element: Element, sequence: UInt64) -> (placement: Placement, released: [Element]) {
        var released: [Element] = []
        let placement = insert(element, sequence: sequence) { released.append($0) }
        return (placement, released)
    }

    /// Releases every held element in order, giving up on the gaps between
    /// them (counted in ``skippedSequences``). Afterwards ``nextSequence`` is
    /// one past the last released element.
    ///
    /// - Parameter release: Receives the released elements, lowest number first.
    public mutating func flush(_ release: (Element) -> Void) {
        while heldCount > 0 {
            let index = slot(nextSequence)
            if let element = slots[index] {
                slots[index] = nil
                heldCount -= 1
                release(element)
            } else {
                skippedSequences += 1
            }
            nextSequence += 1
        }
    }

    /// Discards every held element without releasing it (``nextSequence`` is unchanged).
    ///
    /// - Returns: The discarded elements, lowest number first.
    public mutating func removeAll() -> [Element] {
        var removed: [Element] = []
        removed.reserveCapacity(heldCount)
        var sequence = nextSequence
        while removed.count < heldCount {
            let index = slot(sequence)
            if let element = slots[index] {
                slots[index] = nil
                removed.append(element)
            }
            sequence += 1
        }
        heldCount = 0
        return removed
    }

    /// Moves ``nextSequence`` up to `target`, releasing held elements below it
    /// in order and counting the missing numbers as skipped.
    mutating func advance(to target: UInt64, release: (Element) -> Void) {
        while nextSequence < target && heldCount > 0 {
            let index = slot(nextSequence)
            if let element = slots[index] {
                slots[index] = nil
                heldCount -= 1
                release(element)
            } else {
                skippedSequences += 1
            }
            nextSequence += 1
        }
        if nextSequence < target {
            skippedSequences += target - nextSequence
            nextSequence = target
        }
    }

    /// Releases the held elements that continue the run at ``nextSequence``.
    mutating func releaseRun(_ release: (Element) -> Void) {
        while heldCount > 0 {
            let index = slot(nextSequence)
            guard let element = slots[index] else { return }
            slots[index] = nil
            heldCount -= 1
            release(element)
            nextSequence += 1
        }
    }
}

extension SequenceReorderer: Sendable where Element: Sendable {}
