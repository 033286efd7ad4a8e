/// What happened to the elements passed to a yield, and whether the stream wants the producer to
/// go on.
///
/// A yield never blocks and never waits for the consumer: this answer is how the stream tells the
/// producer what it wants, synchronously.
public enum YieldOutcome: Sendable, Hashable {
    /// Accepted: buffered, handed to a waiting consumer, or held by a sequenced stream until its
    /// predecessors arrive. Go on producing.
    case enqueued
    /// Accepted, but the stream holds `high` elements or more under
    /// ``StreamBuffering/backpressure(low:high:)``: stop producing until the stream calls
    /// ``StreamControl``'s `resume`.
    ///
    /// A pull-style producer, like a libcurl write callback that can answer "pause", can rely on
    /// this answer alone and leave `pause` nil. It must supply `resume`, and should run its
    /// callbacks and the stream's `resume` on one thread through an ``SDKScheduler``, so that a
    /// resume never overtakes the stop it answers.
    case stopProducing
    /// The buffering policy dropped an element, an older one for `bufferingNewest`, or a sequenced
    /// element was stale or garbage. Counted in ``StreamStatistics``.
    case dropped
    /// The stream had already terminated: finished, failed or cancelled by the consumer. Nothing was
    /// stored. Counted in ``StreamStatistics/yieldedAfterTermination``. Stop producing.
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
