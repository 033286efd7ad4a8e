/// How a stream stores elements that the producer yields faster than the consumer takes them.
///
/// Bounds count the elements waiting in the stream. A `CallbackStream` consumer takes everything
/// that waits in one batch:
/// - for the two dropping policies, a batch handed to the consumer no longer counts, so up to `n`
///   more elements can be in the consumer's hands;
/// - for ``backpressure(low:high:)``, the batch counts until the consumer comes back for more, so
///   batching never raises the bound.
public struct StreamBuffering: Sendable, Hashable {
    @usableFromInline
    enum Kind: Sendable, Hashable {
        case unbounded
        case bufferingOldest(Int)
        case bufferingNewest(Int)
        case backpressure(low: Int, high: Int)
    }

    @usableFromInline let kind: Kind

    /// Keep every element. Memory grows while the consumer is slower than the producer.
    public static var unbounded: StreamBuffering { StreamBuffering(kind: .unbounded) }

    /// Keep the first `n` waiting elements and drop newer ones while the buffer is full.
    ///
    /// - Parameter n: How many elements may wait; at least 1.
    /// - Returns: The policy.
    public static func bufferingOldest(_ n: Int) -> StreamBuffering { StreamBuffering(kind: .bufferingOldest(n)) }

    /// Keep the last `n` waiting elements, dropping the oldest one to make room.
    ///
    /// - Parameter n: How many elements may wait; at least 1.
    /// - Returns: The policy.
    public static func bufferingNewest(_ n: Int) -> StreamBuffering { StreamBuffering(kind: .bufferingNewest(n)) }

    /// Drop nothing; ask the producer to stop when `high` elements are held and to go on once at
    /// most `low` are held.
    ///
    /// The producer is told in two ways and may use either:
    /// - every yield made while the stream wants it stopped returns ``YieldOutcome/stopProducing``;
    /// - ``StreamControl``'s `pause` is called once, and `resume` once when the held count falls
    ///   to `low`.
    ///
    /// If `start` returns no ``StreamControl`` with a `resume`, the stream could never restart a
    /// stopped producer: from then on yields do not say `stopProducing`, and the buffer grows as
    /// with ``unbounded``. Yields made while `start` still runs may already say `stopProducing`,
    /// so a producer that obeys it must supply a `resume`.
    ///
    /// - Parameters:
    ///   - low: Resume once at most this many are held; 0 resumes only when everything was consumed.
    ///   - high: Pause once this many are held; more than `low`.
    /// - Returns: The policy.
    public static func backpressure(low: Int, high: Int) -> StreamBuffering {
        StreamBuffering(kind: .backpressure(low: low, high: high))
    }

    /// The watermarks of a backpressure policy, `nil` for the others.
    var watermarks: StreamBackpressure? {
        switch kind {
        case .backpressure(let low, let high): return StreamBackpressure(low: low, high: high)
        case .unbounded, .bufferingOldest, .bufferingNewest: return nil
        }
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
