// How every timeout argument of the library is read, in one place, so that one-shot calls, gates,
// offload jobs and gap timeouts agree on what zero, negative and huge durations mean.

/// How a timeout argument is read: zero or less times out at once, 100 years or more means no
/// timeout (so that huge values such as `.seconds(Int64.max)` never overflow a clock), anything
/// between is a deadline.
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
        switch self {
        case .never: return true
        case .immediately, .after: return false
        }
    }
}
