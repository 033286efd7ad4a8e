// Value types shared by `CallbackStream`, `EventSink` and the
// `AsyncThrowingStream` bridge: buffering and ordering configuration, the
// producer's control handle, yield outcomes and statistics.

/// How a stream stores elements that the producer yields faster than the
/// consumer takes them.
///
/// Bounds count the elements waiting in the stream. A `CallbackStream`
/// consumer takes everything that is waiting in one batch; for the two
/// dropping policies a batch already handed to the consumer no longer counts,
/// so up to `n` further elements can be in the consumer's hands. For
/// ``backpressure(low:high:)`` the batch does count until the consumer has
/// finished it, so batching never raises the bound.
public enum StreamBuffering: Sendable, Hashable {
    /// Keep every element. Memory grows while the consumer is slower than the
    /// producer.
    case unbounded
    /// Keep the first `n` waiting elements and drop newer ones while the
    /// buffer is full. `n` must be at least 1.
    case bufferingOldest(Int)
    /// Keep the last `n` waiting elements, dropping the oldest one to make
    /// room. `n` must be at least 1.
    case bufferingNewest(Int)
    /// Drop nothing; pause the producer (``StreamControl``'s `pause`) when
    /// `high` elements are buffered and resume it once fewer than `low`
    /// remain. Requires `0 <= low < high`.
    ///
    /// Only ``CallbackStream`` supports this policy. If `start` returns no
    /// ``StreamControl`` (or one without `pause`/`resume`), nothing can be
    /// paused and the buffer grows as with ``unbounded``.
    case backpressure(low: Int, high: Int)

    /// Stops the program with a message that says how to fix the arguments.
    func validate() {
        switch self {
        case .unbounded:
            break
        case .bufferingOldest(let n):
            precondition(n >= 1, "StreamBuffering.bufferingOldest(\(n)): n must be at least 1 (use .unbounded to keep everything)")
        case .bufferingNewest(let n):
            precondition(n >= 1, "StreamBuffering.bufferingNewest(\(n)): n must be at least 1 (use .unbounded to keep everything)")
        case .backpressure(let low, let high):
            precondition(
                low >= 0 && low < high,
                "StreamBuffering.backpressure(low: \(low), high: \(high)): need 0 <= low < high; the producer is paused when high elements are buffered and resumed once fewer than low remain"
            )
        }
    }
}

/// The order in which a stream delivers elements.
public enum StreamOrdering: Sendable, Hashable {
    /// Elements are delivered in the order the stream received them. The
    /// producer calls ``EventSink/yield(_:)`` and ``EventSink/yield(contentsOf:)``.
    case arrival
    /// Every element carries a sequence number and the stream restores their
    /// order with a ``SequenceReorderer`` that holds at most `window` elements
    /// ahead of the next expected one. The producer calls
    /// ``EventSink/yield(_:sequence:)`` only.
    ///
    /// Stale elements (a number below the next expected one, or a duplicate)
    /// are dropped and counted in ``StreamStatistics/droppedStale``. A number
    /// that does not fit in the window, and numbers still missing when the
    /// producer finishes, are handled by `gaps` (see ``SequenceGapPolicy``).
    ///
    /// - Parameters:
    ///   - window: How many elements may wait for a missing predecessor; at least 1.
    ///   - firstSequence: The number of the first element.
    ///   - gaps: What to do when a missing number cannot be waited for any longer.
    case sequenced(window: Int, firstSequence: UInt64 = 0, gaps: SequenceGapPolicy = .skip)

    func validate() {
        if case .sequenced(let window, _, _) = self {
            precondition(window >= 1, "StreamOrdering.sequenced(window: \(window)): the window must be at least 1")
        }
    }
}

/// What a ``SequenceReorderer`` (or a sequenced stream) does when it has to
/// give up waiting for a missing sequence number: when an element arrives
/// too far ahead to fit in the window, or when the producer finishes while
/// elements still wait behind a gap.
public enum SequenceGapPolicy: Sendable, Hashable {
    /// Give up on the missing numbers, count them in `skippedSequences`, and
    /// go on with the elements after the gap, in order.
    case skip
    /// Treat a gap as an error: the reorderer rejects the element that does
    /// not fit; a stream ends with ``SequenceGapError`` after the elements
    /// before the gap (and cancels its producer if it is still running).
    case fail
}

/// A sequenced stream lost an element: `missingSequence` never arrived
/// before the window overflowed or the producer finished.
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

/// What happened to the element(s) passed to a yield.
public enum YieldOutcome: Sendable, Hashable {
    /// Accepted: buffered, handed to a waiting consumer, or (sequenced
    /// streams) held until its predecessors arrive.
    case enqueued
    /// The buffering policy dropped an element (for `bufferingNewest`, an
    /// older one to make room), or a sequenced element was stale. Counted in
    /// ``StreamStatistics``.
    case dropped
    /// The stream had already terminated (finished, failed or cancelled by the
    /// consumer); nothing was stored. Counted in
    /// ``StreamStatistics/yieldedAfterTermination``.
    case terminated
}

/// The producer's handle, returned by a stream's `start` closure: how the
/// stream cancels, pauses and resumes the underlying operation.
///
/// The stream calls these closures outside all of its locks, one at a time
/// (never two of them concurrently), in the order it decided them, and never
/// anything after `cancel`. They may call back into the ``EventSink``
/// synchronously. A call may come from any thread: the consumer's (cancel on
/// cancellation, resume after draining) or a producer thread (pause from the
/// yield that reached `high`).
///
/// How a producer uses it:
/// - `cancel`: stop the operation and release its resources; the producer
///   need not call `finish` afterwards (the consumer is gone), and anything
///   it still yields returns ``YieldOutcome/terminated``.
/// - `pause`: stop delivering soon. Events already in flight may still be
///   yielded; they are kept. Do not block waiting for in-flight callbacks
///   inside `pause`.
/// - `resume`: deliver again. Pause and resume alternate, starting with pause.
public struct StreamControl: Sendable {
    let cancel: @Sendable () -> Void
    let pause: (@Sendable () -> Void)?
    let resume: (@Sendable () -> Void)?

    /// Creates a control handle.
    ///
    /// - Parameters:
    ///   - cancel: Called exactly once if the consumer stops (task cancelled,
    ///     loop left, iterator dropped) before the producer finished. If the
    ///     consumer stops while `start` is still running, it is called as soon
    ///     as `start` returns this handle.
    ///   - pause: Called when a ``StreamBuffering/backpressure(low:high:)``
    ///     stream reaches its high watermark. Elements yielded after it are
    ///     still kept.
    ///   - resume: Called when such a stream drains below its low watermark.
    public init(
        cancel: @escaping @Sendable () -> Void,
        pause: (@Sendable () -> Void)? = nil,
        resume: (@Sendable () -> Void)? = nil
    ) {
        self.cancel = cancel
        self.pause = pause
        self.resume = resume
    }
}

/// Counters of one stream subscription, read through
/// ``EventSink/statistics`` or ``CallbackStream/AsyncIterator/statistics``.
public struct StreamStatistics: Sendable, Hashable {
    /// Elements accepted (buffered, handed to the consumer, or released by the reorderer).
    public var enqueued: Int = 0
    /// Elements dropped by `bufferingOldest` / `bufferingNewest`.
    public var droppedByBuffering: Int = 0
    /// Sequenced elements dropped because their number was below the next
    /// expected one, or a duplicate.
    public var droppedStale: Int = 0
    /// Sequence numbers given up as missing (``SequenceGapPolicy/skip``).
    public var skippedSequences: UInt64 = 0
    /// Yields (counting each element) after the stream terminated; each returned ``YieldOutcome/terminated``.
    public var yieldedAfterTermination: Int = 0
    /// Elements that were buffered or waiting for reordering when the stream
    /// terminated early (consumer stopped, or a gap failed the stream); never delivered.
    public var discardedAtTermination: Int = 0
    /// The most elements held at once: waiting in the stream plus those in the
    /// consumer's current batch.
    public var peakBuffered: Int = 0
    /// Elements accepted while a backpressure pause was in force (decided and
    /// not yet lifted): the producer's in-flight overshoot beyond `high`.
    public var acceptedWhilePaused: Int = 0
    /// Calls made to ``StreamControl``'s `pause`.
    public var pauses: Int = 0
    /// Calls made to ``StreamControl``'s `resume`.
    public var resumes: Int = 0

    /// Creates all-zero statistics.
    public init() {}

    /// Every element dropped without being delivered:
    /// ``droppedByBuffering`` + ``droppedStale``.
    public var dropped: Int { droppedByBuffering + droppedStale }
}
