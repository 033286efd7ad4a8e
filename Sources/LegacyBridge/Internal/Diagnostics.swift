import Synchronization

/// Process-wide counters that let the stress runner prove the gates behaved: every continuation
/// a gate suspended on was resumed exactly once, and every gate was freed.
///
/// Off by default, and then free: the hot path reads one relaxed atomic flag. The stress runner
/// turns it on before starting work.
@usableFromInline
package enum BridgeDiagnostics {
    @usableFromInline static let enabledFlag = Atomic<Bool>(false)
    @usableFromInline static let counters = DiagnosticCounters()

    /// Whether counting is on.
    @inlinable
    package static var isEnabled: Bool { enabledFlag.load(ordering: .relaxed) }

    /// Turns counting on (it stays on for the life of the process).
    package static func enable() { enabledFlag.store(true, ordering: .relaxed) }

    /// A snapshot of the counters.
    package static var snapshot: Snapshot {
        Snapshot(
            gatesCreated: counters.gatesCreated.load(ordering: .relaxed),
            gatesFreed: counters.gatesFreed.load(ordering: .relaxed),
            suspensions: counters.suspensions.load(ordering: .relaxed),
            resumes: counters.resumes.load(ordering: .relaxed))
    }

    package struct Snapshot: Sendable, Hashable {
        /// Gates created while counting was on.
        package var gatesCreated: Int
        /// Of those, gates freed.
        package var gatesFreed: Int
        /// Continuations a gate installed (the caller had to wait).
        package var suspensions: Int
        /// Continuations a gate resumed.
        package var resumes: Int

        /// Resumes beyond one per suspension: must be 0.
        package var doubleResumes: Int { max(0, resumes - suspensions) }
        /// Gates not (yet) freed.
        package var liveGates: Int { gatesCreated - gatesFreed }
    }

    @usableFromInline
    static func noteSuspension() { counters.suspensions.add(1, ordering: .relaxed) }
    @usableFromInline
    static func noteResume() { counters.resumes.add(1, ordering: .relaxed) }

    /// Made by a gate created while counting is on; counts the gate freed when it goes away.
    @usableFromInline
    static func makeGateToken() -> GateToken {
        counters.gatesCreated.add(1, ordering: .relaxed)
        return GateToken()
    }

    @usableFromInline
    final class GateToken: Sendable {
        deinit { BridgeDiagnostics.counters.gatesFreed.add(1, ordering: .relaxed) }
    }
}

@usableFromInline
final class DiagnosticCounters: Sendable {
    let gatesCreated = Atomic<Int>(0)
    let gatesFreed = Atomic<Int>(0)
    let suspensions = Atomic<Int>(0)
    let resumes = Atomic<Int>(0)
}
