// The watermarks of `StreamBuffering.backpressure(low:high:)` as a value of their own, so that when
// to pause, when to resume and what counts as overshoot are decided in one place and tested alone.

/// When a backpressure stream wants its producer paused, and when running again.
///
/// Rules:
/// - Held means waiting in the stream plus the consumer's current batch, which counts until the
///   consumer comes back for more. The caller passes the held count in.
/// - A pause is due when an acceptance brings the held count to `high` or beyond while none is wanted.
/// - A resume is due when the consumer comes back with at most `low` held while a pause is wanted.
/// - An element accepted while a pause is wanted, or beyond `high` in the acceptance that made
///   the pause due, counts as accepted while paused. A batch counts as its elements one by one.
@usableFromInline
struct StreamBackpressure: Hashable, Sendable {
    @usableFromInline let low: Int
    @usableFromInline let high: Int
    /// Whether the stream wants the producer paused.
    @usableFromInline var wantsPause: Bool

    /// What an acceptance asks for.
    @usableFromInline
    enum AcceptAction: Hashable, Sendable {
        /// Below `high`, no pause wanted: go on.
        case keepGoing
        /// This acceptance brought the held count to `high`: pause. `overshoot` of its elements
        /// came after the one that reached `high`.
        case pause(overshoot: Int)
        /// A pause was already wanted: every element accepted is overshoot.
        case overshoot(Int)
    }

    /// What the consumer's return asks for.
    @usableFromInline
    enum ReturnAction: Hashable, Sendable {
        /// Nothing changes.
        case unchanged
        /// At most `low` held while a pause was wanted: resume.
        case resume
    }

    @inlinable
    init(low: Int, high: Int) {
        precondition(low >= 0 && low < high, "StreamBackpressure: validate the watermarks first")
        self.low = low
        self.high = high
        self.wantsPause = false
    }

    /// Whether `count` more elements, with `held` held before them, need no decision: the fast path.
    @inlinable
    func acceptsQuietly(_ count: Int, held: Int) -> Bool {
        !wantsPause && held &+ count < high
    }

    /// `count` elements were accepted and `held` are held now, them included.
    @inlinable
    mutating func accepted(_ count: Int, held: Int) -> AcceptAction {
        precondition(count >= 1 && held >= count, "StreamBackpressure: accepted \(count) with \(held) held")
        if wantsPause { return .overshoot(count) }
        guard held >= high else { return .keepGoing }
        wantsPause = true
        return .pause(overshoot: Swift.min(count &- 1, held &- high))
    }

    /// The consumer came back for more, with `held` held: the elements still waiting.
    @inlinable
    mutating func consumerReturned(held: Int) -> ReturnAction {
        guard wantsPause && held <= low else { return .unchanged }
        wantsPause = false
        return .resume
    }
}
