/// Restores the order of numbered events that arrive out of order (for
/// example from several SDK threads), within a bounded window.
///
/// A plain value with no locking: keep it behind your own lock if several
/// threads insert. `CallbackStream` uses one under its own lock when created
/// with ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)``.
///
/// Sequence numbers come from C and are untrusted. They are compared in
/// wrapping (serial-number) arithmetic: the *distance* of a number `s` is
/// `s &- nextSequence`, so `UInt64.max` is followed by 0 and nothing traps.
/// A distance below 2^63 is *ahead*, anything else is *behind*. The rules:
/// - The element numbered ``nextSequence`` is released at once, followed by
///   every held element that now continues the run.
/// - An element less than `window` numbers ahead is held until its
///   predecessors arrive (at most `window - 1` are held at once). Storage
///   grows with the distances actually held, not with the window.
/// - Progress never goes backwards: an element up to ``jumpLimit`` numbers
///   behind (a duplicate, one older than a skipped gap, the usual
///   `(uint64_t)-1` sentinel at the start of a stream) and a second copy of a
///   held number are dropped and counted in ``droppedStale``.
/// - An element `window` to ``jumpLimit`` numbers ahead overflows the window.
///   With ``StreamOrdering/GapPolicy/skip`` the reorderer gives up on just enough
///   missing numbers to make it fit (releasing held elements in order,
///   counting the missing numbers in ``skippedSequences``); with
///   ``StreamOrdering/GapPolicy/fail`` it returns ``Placement/rejected`` and changes nothing.
/// - An element more than ``jumpLimit`` numbers away, ahead or behind, is a
///   *far jump*: garbage, or a real discontinuity (a counter that wrapped at
///   32 bits, an SDK that restarted its numbering, a live source that dropped
///   a long run). It is held on probation and the next insert decides: if
///   that element is within `window` of it, the jump is real and the
///   reorderer follows it (held elements of the old run are released first;
///   a jump ahead counts the numbers it skips, and is a gap under
///   ``StreamOrdering/GapPolicy/fail``; "within" includes the very next number, so
///   a window of 1 works); otherwise it was garbage and is dropped
///   (counted in ``droppedStale``). A far jump still on probation when the
///   stream is flushed, or when a gap is given up, is taken as real.
@usableFromInline
struct SequenceReorderer<Element> {
    /// Where an inserted element went.
    enum Placement: Sendable, Hashable {
        /// Released to the caller (possibly after held predecessors, and after
        /// skipping a gap under ``StreamOrdering/GapPolicy/skip``).
        case released
        /// Held until its predecessors arrive, or on probation as a far jump.
        case held
        /// Behind ``SequenceReorderer/nextSequence`` or a duplicate: dropped.
        case stale
        /// Too far ahead for the window under ``StreamOrdering/GapPolicy/fail``: not stored.
        case rejected
    }

    /// How many consecutive sequence numbers, starting at ``nextSequence``, the reorderer can place.
    let window: Int
    /// What happens when an element does not fit in the window.
    let gapPolicy: StreamOrdering.GapPolicy
    /// The number of the next element to release. Moves forward, except when
    /// a confirmed far jump follows a counter that went back.
    private(set) var nextSequence: UInt64
    /// How many elements are held, waiting for a predecessor or on probation.
    private(set) var heldCount: Int = 0
    /// Elements dropped as stale, duplicate, or unconfirmed far jumps.
    private(set) var droppedStale: Int = 0
    /// Sequence numbers given up as missing.
    private(set) var skippedSequences: UInt64 = 0

    /// Changes whenever the gap the reorderer waits behind changes (progress
    /// was made, or a new gap opened), so a timer armed for a gap can tell
    /// whether that gap is still the one open.
    @usableFromInline var gapGeneration: UInt64 = 0

    /// The counters a stream reports, taken before and after an insert to see what it changed.
    struct Counters {
        let skippedSequences: UInt64
        let droppedStale: Int
        let heldCount: Int
        let gapGeneration: UInt64
    }

    var counters: Counters {
        Counters(
            skippedSequences: skippedSequences, droppedStale: droppedStale, heldCount: heldCount,
            gapGeneration: gapGeneration)
    }

    /// Held elements of a window up to `ringLimit`, at `sequence & (capacity - 1)`
    /// (a power-of-two capacity keeps slots consistent across the 2^64 wrap).
    /// Allocated on the first hold.
    @usableFromInline var ring: ContiguousArray<Element?> = []
    /// Held elements of a larger window.
    @usableFromInline var map: [UInt64: Element] = [:]
    /// Elements held inside the window (the probation element not included).
    @usableFromInline var windowHeld: Int = 0
    /// A far jump on probation.
    @usableFromInline var candidate: (sequence: UInt64, element: Element)?

    /// Windows up to this size keep held elements in a ring, larger ones in a dictionary.
    @usableFromInline static var ringLimit: Int { 1024 }
    /// Distances at or above this are behind.
    @usableFromInline static var half: UInt64 { 1 << 63 }

    /// How far (ahead or behind) a number may be from ``nextSequence`` before
    /// it counts as a far jump: the larger of the window and 65,536.
    var jumpLimit: UInt64 { Swift.max(UInt64(window), 65_536) }

    /// Creates an empty reorderer.
    ///
    /// - Parameters:
    ///   - window: How many consecutive numbers from ``nextSequence`` can be
    ///     placed; at least 1 (1 means no reordering: anything ahead is a gap).
    ///   - firstSequence: The number of the first element.
    ///   - gapPolicy: What to do with an element that does not fit in the window.
    init(window: Int, firstSequence: UInt64 = 0, gapPolicy: StreamOrdering.GapPolicy = .skip) {
        precondition(window >= 1, "SequenceReorderer(window: \(window)): the window must be at least 1")
        self.window = window
        self.gapPolicy = gapPolicy
        self.nextSequence = firstSequence
    }

    // MARK: - Inserting

    /// Places one element and passes every element that is now in order to `release`, in order.
    ///
    /// - Parameters:
    ///   - element: The element.
    ///   - sequence: Its sequence number.
    ///   - release: Receives the released elements, lowest number first.
    /// - Returns: Where `element` went.
    @discardableResult
    mutating func insert(_ element: Element, sequence: UInt64, release: (Element) -> Void) -> Placement {
        insert(element, sequence: sequence, release: release, discard: { _ in })
    }

    /// Places one element and returns the elements now in order.
    ///
    /// - Parameters:
    ///   - element: The element.
    ///   - sequence: Its sequence number.
    /// - Returns: Where `element` went, and the released elements in order.
    mutating func insert(_ element: Element, sequence: UInt64) -> (placement: Placement, released: [Element]) {
        var released: [Element] = []
        let placement = insert(element, sequence: sequence) { released.append($0) }
        return (placement, released)
    }

    /// Places one element; `discard` receives a far jump that this insert
    /// proved to be garbage (so the caller can release it where it wants).
    mutating func insert(
        _ element: Element, sequence: UInt64, release: (Element) -> Void, discard: (Element) -> Void
    ) -> Placement {
        if let candidate {
            let forward = sequence &- candidate.sequence
            // The next arrival after a real jump lies within the window of it (in order, the
            // very next number, which is `window` ahead when the window is 1).
            if forward <= UInt64(window) || (0 &- forward) < UInt64(window) {
                if forward == 0 {
                    droppedStale += 1
                    return .stale
                }
                return confirmJump(then: element, sequence: sequence, release: release)
            }
            self.candidate = nil
            heldCount -= 1
            droppedStale += 1
            if heldCount == 0 { gapGeneration &+= 1 }
            discard(candidate.element)
        }
        let distance = sequence &- nextSequence
        if distance >= Self.half {
            if 0 &- distance <= jumpLimit {
                droppedStale += 1
                return .stale
            }
            return hold(asCandidate: element, sequence: sequence)
        }
        if distance >= UInt64(window) {
            if distance > jumpLimit { return hold(asCandidate: element, sequence: sequence) }
            switch gapPolicy.kind {
            case .fail:
                return .rejected
            case .skip:
                advance(by: distance - UInt64(window) + 1, release: release)
            }
        }
        return place(element, sequence: sequence, release: release)
    }

    /// Places an element known to be less than `window` ahead.
    mutating func place(_ element: Element, sequence: UInt64, release: (Element) -> Void) -> Placement {
        let distance = sequence &- nextSequence
        if distance == 0 {
            release(element)
            nextSequence &+= 1
            releaseRun(release)
            gapGeneration &+= 1
            return .released
        }
        guard store(element, at: sequence) else {
            droppedStale += 1
            return .stale
        }
        windowHeld += 1
        heldCount += 1
        if heldCount == 1 { gapGeneration &+= 1 }
        return .held
    }

    mutating func hold(asCandidate element: Element, sequence: UInt64) -> Placement {
        candidate = (sequence, element)
        heldCount += 1
        if heldCount == 1 { gapGeneration &+= 1 }
        return .held
    }

    /// The element after a far jump lies near it: the jump is real. Releases
    /// the old run, moves to the earlier of the two, and places both.
    mutating func confirmJump(then element: Element, sequence: UInt64, release: (Element) -> Void) -> Placement {
        guard let candidate else { preconditionFailure("confirmJump without a far jump on probation") }
        let base = (sequence &- candidate.sequence) < Self.half ? candidate.sequence : sequence
        let forward = base &- nextSequence < Self.half
        if gapPolicy == .fail && (forward || windowHeld > 0) {
            return .rejected
        }
        self.candidate = nil
        heldCount -= 1
        releaseAllHeld(release)
        if forward { skippedSequences &+= base &- nextSequence }
        nextSequence = base
        gapGeneration &+= 1
        _ = place(candidate.element, sequence: candidate.sequence, release: release)
        return place(element, sequence: sequence, release: release)
    }

    // MARK: - Giving up gaps

    /// Releases every held element in order, giving up on the gaps between
    /// them (counted in ``skippedSequences``); a far jump still on probation is
    /// taken as real and released last. Afterwards ``nextSequence`` is one
    /// past the last released element.
    ///
    /// - Parameter release: Receives the released elements, lowest number first.
    mutating func flush(_ release: (Element) -> Void) {
        releaseAllHeld(release)
        if let candidate {
            self.candidate = nil
            heldCount -= 1
            if candidate.sequence &- nextSequence < Self.half {
                skippedSequences &+= candidate.sequence &- nextSequence
            }
            release(candidate.element)
            nextSequence = candidate.sequence &+ 1
        }
        gapGeneration &+= 1
    }

    /// Gives up the gap that currently holds elements back (a gap timeout):
    /// under ``StreamOrdering/GapPolicy/skip`` skips to the lowest held number (or
    /// takes a far jump on probation as real) and releases what continues
    /// from there. Under ``StreamOrdering/GapPolicy/fail`` changes nothing and
    /// returns `false`: the caller fails.
    ///
    /// - Parameter release: Receives the released elements, lowest number first.
    /// - Returns: `false` if the gap policy is ``StreamOrdering/GapPolicy/fail`` and a gap was open.
    mutating func giveUpGap(_ release: (Element) -> Void) -> Bool {
        guard heldCount > 0 else { return true }
        guard gapPolicy == .skip else { return false }
        if windowHeld > 0 {
            let lowest = lowestHeldDistance()
            skippedSequences &+= lowest
            nextSequence &+= lowest
            releaseRun(release)
            gapGeneration &+= 1
            return true
        }
        flush(release)
        return true
    }

    /// Discards every held element without releasing it (``nextSequence`` is unchanged).
    ///
    /// - Returns: The discarded elements, lowest number first.
    mutating func removeAll() -> [Element] {
        var removed: [Element] = []
        removed.reserveCapacity(heldCount)
        for (_, element) in takeHeld(belowDistance: UInt64.max) { removed.append(element) }
        if let candidate {
            self.candidate = nil
            removed.append(candidate.element)
        }
        heldCount = 0
        windowHeld = 0
        gapGeneration &+= 1
        return removed
    }

    // MARK: - Storage

    /// Stores an element less than `window` ahead; false if its slot is taken (a duplicate).
    mutating func store(_ element: Element, at sequence: UInt64) -> Bool {
        if window <= Self.ringLimit {
            if ring.isEmpty {
                var capacity = 1
                while capacity < window { capacity <<= 1 }
                ring = ContiguousArray(repeating: nil, count: capacity)
            }
            let index = slot(sequence)
            if ring[index] != nil { return false }
            ring[index] = element
            return true
        }
        if map[sequence] != nil { return false }
        map[sequence] = element
        return true
    }

    @inlinable
    func slot(_ sequence: UInt64) -> Int {
        Int(truncatingIfNeeded: sequence) & (ring.count &- 1)
    }

    /// Removes and returns the held element numbered `sequence`, if any.
    mutating func take(_ sequence: UInt64) -> Element? {
        if window <= Self.ringLimit {
            guard !ring.isEmpty else { return nil }
            let index = slot(sequence)
            guard let element = ring[index] else { return nil }
            ring[index] = nil
            return element
        }
        return map.removeValue(forKey: sequence)
    }

    /// Releases the held elements that continue the run at ``nextSequence``.
    mutating func releaseRun(_ release: (Element) -> Void) {
        while windowHeld > 0, let element = take(nextSequence) {
            windowHeld -= 1
            heldCount -= 1
            release(element)
            nextSequence &+= 1
        }
    }

    /// Moves ``nextSequence`` ahead by `steps`, releasing held elements it
    /// passes in order and counting the missing numbers as skipped, then the
    /// run that continues from there.
    mutating func advance(by steps: UInt64, release: (Element) -> Void) {
        let target = nextSequence &+ steps
        for (sequence, element) in takeHeld(belowDistance: steps) {
            skippedSequences &+= sequence &- nextSequence
            release(element)
            nextSequence = sequence &+ 1
        }
        skippedSequences &+= target &- nextSequence
        nextSequence = target
        releaseRun(release)
        gapGeneration &+= 1
    }

    /// Releases every element held in the window, in order, counting the gaps between them.
    mutating func releaseAllHeld(_ release: (Element) -> Void) {
        for (sequence, element) in takeHeld(belowDistance: UInt64.max) {
            skippedSequences &+= sequence &- nextSequence
            release(element)
            nextSequence = sequence &+ 1
        }
    }

    /// Removes the window's held elements less than `limit` ahead, lowest first.
    mutating func takeHeld(belowDistance limit: UInt64) -> [(UInt64, Element)] {
        guard windowHeld > 0 else { return [] }
        var taken: [(UInt64, Element)] = []
        if window <= Self.ringLimit {
            var distance: UInt64 = 1
            while windowHeld > 0 && distance < UInt64(window) && distance < limit {
                let sequence = nextSequence &+ distance
                if let element = take(sequence) {
                    taken.append((sequence, element))
                    windowHeld -= 1
                    heldCount -= 1
                }
                distance += 1
            }
            return taken
        }
        let base = nextSequence
        let keys = map.keys.filter { $0 &- base < limit }.sorted { $0 &- base < $1 &- base }
        for key in keys {
            taken.append((key, map.removeValue(forKey: key)!))
            windowHeld -= 1
            heldCount -= 1
        }
        return taken
    }

    /// The distance of the nearest element held in the window (`windowHeld > 0`).
    func lowestHeldDistance() -> UInt64 {
        if window <= Self.ringLimit {
            var distance: UInt64 = 1
            while distance < UInt64(window) {
                if ring[slot(nextSequence &+ distance)] != nil { return distance }
                distance += 1
            }
            preconditionFailure("lowestHeldDistance() with nothing held")
        }
        let base = nextSequence
        return map.keys.map { $0 &- base }.min() ?? 0
    }
}

extension SequenceReorderer: Sendable where Element: Sendable {}
