/// The order in which a stream delivers elements.
///
/// ``arrival`` delivers elements in the order the stream received them.
/// ``sequenced(window:firstSequence:gaps:gapTimeout:)`` restores the order of numbered elements
/// that arrive out of order, for example from several SDK threads, within a bounded window. Its
/// rules for stale, wrapped, jumping and garbage numbers are documented there.
public struct StreamOrdering: Sendable, Hashable {
    @usableFromInline
    enum Kind: Sendable, Hashable {
        case arrival
        case sequenced(window: Int, firstSequence: UInt64, gaps: StreamOrdering.GapPolicy, gapTimeout: Duration?)
    }

    @usableFromInline let kind: Kind

    init(kind: Kind) {
        self.kind = kind
    }

    /// Elements are delivered in the order the stream received them. The producer calls
    /// ``EventSink/yield(_:)`` and ``EventSink/yield(contentsOf:)``.
    public static var arrival: StreamOrdering { StreamOrdering(kind: .arrival) }

    /// Every element carries a sequence number, and the stream restores their order, holding at
    /// most `window - 1` elements ahead of the next expected one. The producer calls
    /// ``EventSink/yield(_:sequence:)`` only, from any thread.
    ///
    /// Numbers come straight from C and are never trusted. They compare in wrapping arithmetic:
    /// `UInt64.max` is followed by 0, and nothing traps. The rules, for the next expected number `n`:
    /// - The element numbered `n` is delivered at once, with every held element that now continues
    ///   the run.
    /// - An element less than `window` numbers ahead of `n` is held until its predecessors arrive.
    ///   Storage grows with the distances actually held.
    /// - Progress never goes backwards. An element up to 65,536 numbers behind `n`, or `window` if
    ///   larger, is dropped and counted in ``StreamStatistics/droppedStale``: a duplicate, one older
    ///   than a skipped gap, a `(uint64_t)-1` sentinel. So is a second copy of a held number.
    /// - An element from `window` to 65,536 numbers ahead, or `window` if larger, overflows the
    ///   window, and `gaps` decides.
    /// - An element further away, ahead or behind, is a far jump: garbage, or a real
    ///   discontinuity such as a 32-bit counter that wrapped or an SDK that restarted its
    ///   numbering. It is held on probation and the next element decides. Within `window` of it,
    ///   the jump is real and the stream follows it; otherwise it was garbage and is dropped. A
    ///   single garbage number never discards the rest of the stream.
    ///
    /// - Parameters:
    ///   - window: How many consecutive numbers, from the next expected one, the stream can place;
    ///     at least 1, and 1 means no reordering. Storage grows with the distances actually seen,
    ///     not with the window.
    ///   - firstSequence: The number of the first element.
    ///   - gaps: What to do when a missing number cannot be waited for any longer: it is too far
    ///     behind the newest element, the producer finished, or `gapTimeout` passed.
    ///   - gapTimeout: How long elements may wait behind a missing number without progress before
    ///     the gap is given up and `gaps` applies. `nil`, the default, waits until the window
    ///     overflows or the producer finishes. Zero or less gives gaps up as soon as they open;
    ///     100 years or more means no limit.
    /// - Returns: The ordering.
    public static func sequenced(
        window: Int,
        firstSequence: UInt64 = 0,
        gaps: StreamOrdering.GapPolicy = .skip,
        gapTimeout: Duration? = nil
    ) -> StreamOrdering {
        StreamOrdering(
            kind: .sequenced(window: window, firstSequence: firstSequence, gaps: gaps, gapTimeout: gapTimeout))
    }

    /// Whether this is a sequenced ordering.
    var isSequenced: Bool {
        switch kind {
        case .arrival: return false
        case .sequenced: return true
        }
    }

    /// The gap timeout to arm, if any: `nil` for none, and for huge values.
    var effectiveGapTimeout: Duration? {
        switch kind {
        case .arrival, .sequenced(_, _, _, gapTimeout: nil):
            return nil
        case .sequenced(_, _, _, gapTimeout: let timeout?):
            return TimeoutPlan(timeout).isNever ? nil : max(timeout, .zero)
        }
    }

    /// Stops the program with a message that says how to fix the arguments.
    func validate() {
        switch kind {
        case .arrival:
            break
        case .sequenced(let window, _, _, _):
            precondition(window >= 1, "StreamOrdering.sequenced(window: \(window)): the window must be at least 1")
        }
    }

    /// A reorderer for a sequenced ordering, `nil` for arrival order.
    func makeReorderer<Element>(of _: Element.Type = Element.self) -> SequenceReorderer<Element>? {
        switch kind {
        case .arrival:
            return nil
        case .sequenced(let window, let first, let gaps, _):
            return SequenceReorderer(window: window, firstSequence: first, gapPolicy: gaps)
        }
    }
}

extension StreamOrdering {
    /// What a sequenced stream does when it has to give up waiting for a missing sequence number:
    /// an element arrives too far ahead to fit in the window, the producer finishes while elements
    /// still wait behind a gap, or a gap timeout passes.
    public struct GapPolicy: Sendable, Hashable {
        @usableFromInline
        enum Kind: Sendable, Hashable {
            case skip
            case fail
        }

        @usableFromInline let kind: Kind

        /// Give up on the missing numbers, count them in ``StreamStatistics/skippedSequences``, and
        /// go on with the elements after the gap, in order.
        public static var skip: GapPolicy { GapPolicy(kind: .skip) }

        /// Treat a gap as an error: the element that does not fit is rejected, and the stream ends
        /// with ``SequenceGapError`` after the elements before the gap. A producer still running is
        /// cancelled.
        public static var fail: GapPolicy { GapPolicy(kind: .fail) }
    }
}
