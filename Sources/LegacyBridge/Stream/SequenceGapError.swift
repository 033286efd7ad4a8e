/// A sequenced stream lost an element: `missingSequence` never arrived before the window
/// overflowed, the gap timed out, or the producer finished.
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
