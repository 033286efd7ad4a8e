// Value types shared by `CallbackStream`, `EventSink` and the
// `AsyncThrowingStream` bridge: buffering and ordering configuration, the
// producer's control handle and where its calls run, yield outcomes and
// statistics.

/// How a stream stores elements that the producer yields faster than the
/// consumer takes them.
///
/// Bounds count the elements waiting in the stream. A `CallbackStream`
/// consumer takes everything that is waiting in one batch; for the two
/// dropping policies a batch already handed to the consumer no longer counts,
/// so up to `n` further elements can be in the consumer's hands. For
/// ``backpressure(low:high:)`` the batch does count until the consumer has
/// finished it, so batching never raises the bound.
public struct StreamBuffering: Sendable, Hashable {
    @usableFromInline
    enum Kind: Sendable, Hashable {
        case unbounded
        case bufferingOldest(Int)
        case bufferingNewest(Int)
        case backpressure(low: Int, high: Int)
    }

    @usableFromInline let kind: Kind

    /// Keep every element. Memory grows while the consumer is slower than the
    /// producer.
    public static var unbounded: StreamBuffering { StreamBuffering(kind: .unbounded) }

    /// Keep the first `n` waiting elements and drop newer ones while the
    /// buffer is full.
    ///
    /// - Parameter n: How many elements may wait; at least 1.
    /// - Returns: The policy.
    public static func bufferingOldest(_ n: Int) -> StreamBuffering { StreamBuffering(kind: .bufferingOldest(n)) }

    /// Keep the last `n` waiting elements, dropping the oldest one to make
    /// room.
    ///
    /// - Parameter n: How many elements may wait; at least 1.
    /// - Returns: The policy.
    public static func bufferingNewest(_ n: Int) -> StreamBuffering { StreamBuffering(kind: .bufferingNewest(n)) }

    /// Drop nothing; ask the producer to stop when `high` elements are held
    /// and to go on once at most `low` are held.
    ///
    /// The producer is told in two ways, and may use either: every yield
    /// made while the stream wants it stopped returns
    /// ``YieldOutcome/stopProducing``, and ``StreamControl``'s `pause` is
    /// called once; `resume` is called once when the held count falls to
    /// `low`. If `start` returns no ``StreamControl`` with a `resume`, the
    /// stream could never restart a stopped producer, so from then on yields
    /// do not say `stopProducing` and the buffer grows as with ``unbounded``.
    /// Yields made while `start` is still running may already say
    /// `stopProducing`: a producer that obeys it must supply a `resume`.
    ///
    /// - Parameters:
    ///   - low: Resume once at most this many are held; 0 resumes only when
    ///     everything was consumed.
    ///   - high: Pause once this many are held; more than `low`.
    /// - Returns: The policy.
    public static func backpressure(low: Int, high: Int) -> StreamBuffering {
        StreamBuffering(kind: .backpressure(low: low, high: high))
    }

    /// Stops the program with a message that says how to fix the arguments.
    func validate() {
        switch kind {
        case .unbounded:
            break
        case .bufferingOldest(let n):
            precondition(
                n >= 1,
                "StreamBuffering.bufferingOldest(\(n)): n must be at least 1 (use .unbounded to keep everything)")
        case .bufferingNewest(let n):
            precondition(
                n >= 1,
                "StreamBuffering.bufferingNewest(\(n)): n must be at least 1 (use .unbounded to keep everything)")
        case .backpressure(let low, let high):
            precondition(
                low >= 0 && low < high,
                "StreamBuffering.backpressure(low: \(low), high: \(high)): need 0 <= low < high; the producer is asked to stop when high elements are held and to go on once at most low are held"
            )
        }
    }
}

/// The order in which a stream delivers elements.
///
/// ``arrival`` delivers elements in the order the stream received them.
/// ``sequenced(window:firstSequence:gaps:gapTimeout:)`` restores the order of
/// numbered elements that arrive out of order (for example from several SDK
/// threads), within a bounded window; its rules for stale, wrapped, jumping
/// and garbage numbers are documented there.
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

    /// Elements are delivered in the order the stream received them. The
    /// producer calls ``EventSink/yield(_:)`` and ``EventSink/yield(contentsOf:)``.
    public static var arrival: StreamOrdering { StreamOrdering(kind: .arrival) }

    /// Every element carries a sequence number and the stream restores their
    /// order, holding at most `window - 1` elements ahead of the next expected
    /// one. The producer calls ``EventSink/yield(_:sequence:)`` only, from any thread.
    ///
    /// Numbers come straight from C and are never trusted. They compare in
    /// wrapping arithmetic: `UInt64.max` is followed by 0 and nothing traps.
    /// The rules, for the next expected number `n`:
    /// - The element numbered `n` is delivered at once, with every held
    ///   element that now continues the run.
    /// - An element less than `window` numbers ahead of `n` is held until its
    ///   predecessors arrive. Storage grows with the distances actually held.
    /// - Progress never goes backwards: an element up to 65,536 numbers (or
    ///   `window`, if larger) behind
    ///   `n` (a duplicate, one older than a skipped gap, a `(uint64_t)-1`
    ///   sentinel) and a second copy of a held number are dropped and counted
    ///   in ``StreamStatistics/droppedStale``.
    /// - An element `window` to 65,536 numbers (or `window`) ahead overflows the window:
    ///   `gaps` decides.
    /// - An element further away, ahead or behind, is a far jump: garbage, or
    ///   a real discontinuity such as a 32-bit counter that wrapped or an SDK
    ///   that restarted its numbering. It is held on probation, and the next
    ///   element decides: within `window` of it, the jump is real and the
    ///   stream follows it; otherwise it was garbage and is dropped. A single
    ///   garbage number never discards the rest of the stream.
    ///
    /// - Parameters:
    ///   - window: How many consecutive numbers, from the next expected one,
    ///     the stream can place; at least 1 (1 means no reordering). Storage
    ///     grows with the distances actually seen, not with the window.
    ///   - firstSequence: The number of the first element.
    ///   - gaps: What to do when a missing number cannot be waited for any
    ///     longer: it is too far behind the newest element (window overflow),
    ///     the producer finished, or `gapTimeout` passed.
    ///   - gapTimeout: How long elements may wait behind a missing number
    ///     without progress before the gap is given up (then `gaps` applies);
    ///     `nil` (the default) waits until the window overflows or the producer
    ///     finishes. Zero or less gives gaps up as soon as they open; 100 years
    ///     or more means no limit.
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
        if case .sequenced = kind { return true }
        return false
    }

    /// The gap timeout to arm, if any (`nil`: none; huge values mean none).
    var effectiveGapTimeout: Duration? {
        guard case .sequenced(_, _, _, let timeout?) = kind else { return nil }
        return TimeoutPlan(timeout).isNever ? nil : max(timeout, .zero)
    }

    /// Stops the program with a message that says how to fix the arguments.
    func validate() {
        if case .sequenced(let window, _, _, _) = kind {
            precondition(window >= 1, "StreamOrdering.sequenced(window: \(window)): the window must be at least 1")
        }
    }

    /// A reorderer for a sequenced ordering, `nil` for arrival order.
    func makeReorderer<Element>(of _: Element.Type = Element.self) -> SequenceReorderer<Element>? {
        guard case .sequenced(let window, let first, let gaps, _) = kind else { return nil }
        return SequenceReorderer(window: window, firstSequence: first, gapPolicy: gaps)
    }
}

extension StreamOrdering {
    /// What a sequenced stream does when it has to give up waiting for a
    /// missing sequence number: when an element arrives too far ahead to fit
    /// in the window, when the producer finishes while elements still wait
    /// behind a gap, or when a gap timeout passes.
    public struct GapPolicy: Sendable, Hashable {
        @usableFromInline
        enum Kind: Sendable, Hashable {
            case skip
            case fail
        }

        @usableFromInline let kind: Kind

        /// Give up on the missing numbers, count them in
        /// ``StreamStatistics/skippedSequences``, and go on with the elements
        /// after the gap, in order.
        public static var skip: GapPolicy { GapPolicy(kind: .skip) }

        /// Treat a gap as an error: the element that does not fit is
        /// rejected, and the stream ends with ``SequenceGapError`` after the
        /// elements before the gap (and cancels its producer if it is still running).
        public static var fail: GapPolicy { GapPolicy(kind: .fail) }
    }
}

/// A sequenced stream lost an element: `missingSequence` never arrived
/// before the window overflowed, the gap timed out, or the producer finished.
public struct SequenceGapError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The first sequence number that never arrived.
    public let missingSequence: UInt64

    /// Creates the error for a missing sequence number.
    ///
    /// - Parameter missingSequence: The first sequence number that never arrived.
    public init(missingSequence: UInt64) {
        self.missingSequence = missingSequence
    }

    /// A readable explanation naming the missing sequence number.
    public var description: String {
        "sequence \(missingSequence) never arrived (gap in a sequenced stream)"
    }
}

/// What happened to the element(s) passed to a yield, and whether the
/// stream wants the producer to go on.
///
/// A yield never blocks and never waits for the consumer; this answer is how
/// the stream tells the producer, synchronously, what it wants.
public enum YieldOutcome: Sendable, Hashable {
    /// Accepted (buffered, handed to a waiting consumer, or, for sequenced
    /// streams, held until its predecessors arrive). Go on producing.
    case enqueued
    /// Accepted, but the stream holds `high` elements or more
    /// (``StreamBuffering/backpressure(low:high:)``): stop producing until
    /// the stream calls ``StreamControl``'s `resume`. A pull-style producer
    /// (like a libcurl write callback that can answer "pause") can rely on
    /// this answer alone and leave `pause` nil; it must supply `resume`, and
    /// should run its callbacks and the stream's `resume` on one thread (a
    /// ``SDKScheduler`` posting to its loop), so that a resume can never
    /// overtake the stop it answers.
    case stopProducing
    /// The buffering policy dropped an element (for `bufferingNewest`, an
    /// older one to make room), or a sequenced element was stale or garbage.
    /// Counted in ``StreamStatistics``.
    case dropped
    /// The stream had already terminated (finished, failed or cancelled by the
    /// consumer); nothing was stored. Counted in
    /// ``StreamStatistics/yieldedAfterTermination``. Stop producing.
    case terminated

    /// Whether the producer should stop: ``stopProducing`` or ``terminated``.
    @inlinable
    public var shouldStop: Bool {
        switch self {
        case .stopProducing, .terminated: return true
        case .enqueued, .dropped: return false
        }
    }
}

/// The producer's handle, returned by a stream's `start` closure: how the
/// stream cancels, pauses and resumes the underlying operation, and where it
/// makes those calls.
///
/// ## Threading contract
/// The stream makes these calls one at a time (never two of them
/// concurrently, never two in flight), in the order it decided them,
/// coalesced (a pause wanted and unwanted again before it was made is not
/// made), and nothing after `cancel`. It never holds a lock while making
/// them, so they may call back into the ``EventSink`` synchronously.
///
/// - With a `scheduler`, **every** call runs as a job posted through it, so
///   it lands on the SDK's own thread; the stream never calls the producer
///   from any other thread. Use this for single-threaded SDKs. A call whose
///   job the scheduler refuses (its `post` throws: the loop is gone) is not
///   made.
/// - Without one, `cancel` runs on a thread of the library's own: never inside a
///   yield or finish (an SDK whose cancel waits for its running callbacks to
///   return would deadlock), never inside the task runtime's cancellation
///   handler, never on the cooperative pool (a cancel that takes seconds
///   delays nobody). `pause` and `resume` run on the thread whose event made
///   them due: `pause` on a producer thread inside the yield that reached
///   `high`, `resume` on the consumer when it comes back for more. If another
///   thread is making a call at that moment, the call is made by that thread
///   right after its own; nobody waits.
///
/// ## How a producer uses it
/// - `cancel`: stop the operation and release its resources; the producer
///   need not call `finish` afterwards (the consumer is gone), and anything
///   it still yields returns ``YieldOutcome/terminated``.
/// - `pause`: stop delivering soon. Events already in flight may still be
///   yielded; they are kept. Optional: a producer that stops when a yield
///   returns ``YieldOutcome/stopProducing`` can leave it nil.
/// - `resume`: deliver again. Pause and resume alternate, starting with pause.
public struct StreamControl: Sendable {
    let scheduler: SDKScheduler?
    let cancel: CancelHandle
    let pause: (@Sendable () -> Void)?
    let resume: (@Sendable () -> Void)?

    /// Creates a control handle.
    ///
    /// - Parameters:
    ///   - scheduler: Where to run every call (see the threading contract
    ///     above), or `nil` for the default.
    ///   - cancel: Called exactly once if the consumer stops (task cancelled,
    ///     loop left, iterator dropped, ``CallbackStream/stop()``) or a gap
    ///     fails a sequenced stream, before the producer finished. If that
    ///     happens while `start` is still running, it is called once `start`
    ///     has returned this handle.
    ///   - pause: Called when a ``StreamBuffering/backpressure(low:high:)``
    ///     stream reaches its high watermark. Elements yielded after it are
    ///     still kept.
    ///   - resume: Called when such a stream has drained to its low watermark.
    public init(
        scheduler: SDKScheduler? = nil,
        cancel: CancelHandle,
        pause: (@Sendable () -> Void)? = nil,
        resume: (@Sendable () -> Void)? = nil
    ) {
        self.scheduler = scheduler
        self.cancel = cancel
        self.pause = pause
        self.resume = resume
    }
}

/// Counters of one stream subscription, read through
/// ``EventSink/statistics``, ``CallbackStream/AsyncIterator/statistics`` or
/// ``CallbackStream/statistics``.
public struct StreamStatistics: Sendable, Hashable {
    /// Elements accepted (buffered, handed to the consumer, or released by the reorderer).
    public var enqueued: Int = 0
    /// Elements dropped by `bufferingOldest` / `bufferingNewest`.
    public var droppedByBuffering: Int = 0
    /// Sequenced elements dropped because their number was below the next
    /// expected one, a duplicate, or a far jump that nothing confirmed
    /// (garbage; see ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)``).
    public var droppedStale: Int = 0
    /// Sequence numbers given up as missing (``StreamOrdering/GapPolicy/skip``).
    public var skippedSequences: UInt64 = 0
    /// Sequenced elements held right now behind a missing number (waiting for
    /// a predecessor, or for a far jump to be confirmed).
    public var heldBehindGap: Int = 0
    /// Gaps given up because `gapTimeout` passed without progress.
    public var gapsTimedOut: Int = 0
    /// Yields (counting each element) after the stream terminated; each returned ``YieldOutcome/terminated``.
    public var yieldedAfterTermination: Int = 0
    /// Elements that were buffered or waiting for reordering when the stream
    /// terminated early (consumer stopped, or a gap failed the stream); never delivered.
    public var discardedAtTermination: Int = 0
    /// The most elements held at once: waiting in the stream plus those in the
    /// consumer's current batch.
    public var peakBuffered: Int = 0
    /// Elements accepted while the stream wanted the producer stopped (each
    /// such yield returned ``YieldOutcome/stopProducing``): the producer's
    /// in-flight overshoot beyond `high`.
    public var acceptedWhilePaused: Int = 0
    /// Calls made to ``StreamControl``'s `pause` (counted also when `pause` is
    /// nil and the producer was told by the yields' answer alone).
    public var pauses: Int = 0
    /// Calls made to ``StreamControl``'s `resume`.
    public var resumes: Int = 0

    /// Creates all-zero statistics.
    public init() {}

    /// Every element dropped without being delivered:
    /// ``droppedByBuffering`` + ``droppedStale``.
    public var dropped: Int { droppedByBuffering + droppedStale }
}

/// How a timeout argument is read, everywhere in the library: zero or less
/// times out at once, 100 years or more means no timeout (so that huge values
/// such as `.seconds(Int64.max)` never overflow a clock), anything between is
/// a deadline.
@usableFromInline
enum TimeoutPlan: Sendable {
    case never
    case immediately
    case after(Duration)

    /// 100 years: the longest timeout the library arms.
    @usableFromInline static let longest = Duration.seconds(100 * 365 * 24 * 3600)

    @inlinable
    init(_ timeout: Duration?) {
        guard let timeout else {
            self = .never
            return
        }
        if timeout <= .zero {
            self = .immediately
        } else if timeout >= Self.longest {
            self = .never
        } else {
            self = .after(timeout)
        }
    }

    @usableFromInline
    var isNever: Bool {
        if case .never = self { return true }
        return false
    }
}
