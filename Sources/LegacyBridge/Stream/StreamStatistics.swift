/// Counters of one stream subscription, read through ``EventSink/statistics``,
/// ``CallbackStream/AsyncIterator/statistics`` or ``CallbackStream/statistics``.
public struct StreamStatistics: Sendable, Hashable {
    /// Elements accepted: buffered, handed to the consumer, or released by the reorderer.
    public var enqueued: Int = 0
    /// Elements dropped by `bufferingOldest` or `bufferingNewest`.
    public var droppedByBuffering: Int = 0
    /// Sequenced elements dropped because their number was behind the next expected one, a
    /// duplicate, or a far jump that nothing confirmed. See
    /// ``StreamOrdering/sequenced(window:firstSequence:gaps:gapTimeout:)``.
    public var droppedStale: Int = 0
    /// Sequence numbers given up as missing under ``StreamOrdering/GapPolicy/skip``.
    public var skippedSequences: UInt64 = 0
    /// Sequenced elements held right now behind a missing number, or on probation as a far jump.
    public var heldBehindGap: Int = 0
    /// Gaps given up because `gapTimeout` passed without progress.
    public var gapsTimedOut: Int = 0
    /// Elements yielded after the stream terminated. Each such yield returned
    /// ``YieldOutcome/terminated``.
    public var yieldedAfterTermination: Int = 0
    /// Elements buffered or waiting for reordering when the stream terminated early, because the
    /// consumer stopped or a gap failed the stream. They were never delivered.
    public var discardedAtTermination: Int = 0
    /// The most elements held at once: waiting in the stream plus those in the consumer's current
    /// batch.
    public var peakBuffered: Int = 0
    /// Elements accepted beyond `high` under ``StreamBuffering/backpressure(low:high:)``: the
    /// producer's overshoot.
    ///
    /// - An element counts when it is accepted after the one that brought the held count to
    ///   `high`, until the consumer's return decides the resume.
    /// - A ``EventSink/yield(contentsOf:)`` counts as its elements yielded one by one: a batch that
    ///   crosses `high` counts the elements it put beyond `high`.
    /// - So ``peakBuffered`` is at most `high` plus this count.
    public var acceptedWhilePaused: Int = 0
    /// Calls made to ``StreamControl``'s `pause`, counted also when `pause` is nil and the producer
    /// was told by the yields' answers alone.
    public var pauses: Int = 0
    /// Calls made to ``StreamControl``'s `resume`.
    public var resumes: Int = 0

    /// Creates all-zero statistics.
    public init() {}

    /// Every element dropped without being delivered: ``droppedByBuffering`` plus ``droppedStale``.
    public var dropped: Int { droppedByBuffering + droppedStale }
}
