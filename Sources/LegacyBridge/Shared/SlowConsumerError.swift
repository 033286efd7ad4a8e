/// A consumer of a ``SharedSubscription`` fell too far behind and was ended on its own.
///
/// A stream from ``SharedSubscription/subscribe(failingAbove:)`` throws it once more than `limit`
/// elements wait for its consumer. The other consumers and the producer go on.
public struct SlowConsumerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// How many elements could wait for the consumer.
    public let limit: Int

    /// Creates the error for a consumer that had more than `limit` elements waiting.
    ///
    /// - Parameter limit: How many elements could wait for the consumer.
    public init(limit: Int) {
        self.limit = limit
    }

    /// A readable explanation naming the limit.
    public var description: String {
        "slow consumer: more than \(limit) elements waited for it, so it was ended (the shared subscription goes on)"
    }
}
