import Synchronization

/// Process-wide counters that let the stress runner prove the gates behaved: every continuation
/// a gate suspended on was resumed exactly once, and every gate was freed.
///
/// Off by default, and then free: the hot path reads one relaxed atomic flag. The stress runner
/// turns it on before starting work.
///
/// `Synchronization.Atomic` needs macOS 15, iOS 18, tvOS 18, watchOS 11 and visionOS 2. Below
/// those, the flag and the counters live behind one lock instead (`DiagnosticCells`, the only
/// platform split of this file).
@usableFromInline
package enum BridgeDiagnostics {
    @usableFromInline static let cells = DiagnosticCells()

    /// Whether counting is on.
    @inlinable
    package static var isEnabled: Bool { cells.isEnabled }

    /// Turns counting on (it stays on for the life of the process).
    package static func enable() { cells.enable() }

    /// A snapshot of the counters.
    package static var snapshot: Snapshot { cells.snapshot }

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

    /// The four counters.
    @usableFromInline
    enum Counter: Sendable {
        case gatesCreated, gatesFreed, suspensions, resumes
    }

    @usableFromInline
    static func noteSuspension() { cells.add(.suspensions) }
    @usableFromInline
    static func noteResume() { cells.add(.resumes) }

    /// Made by a gate created while counting is on; counts the gate freed when it goes away.
    @usableFromInline
    static func makeGateToken() -> GateToken {
        cells.add(.gatesCreated)
        return GateToken()
    }

    @usableFromInline
    final class GateToken: Sendable {
        deinit { BridgeDiagnostics.cells.add(.gatesFreed) }
    }
}

/// The flag and the counters as relaxed atomics.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
@usableFromInline
final class DiagnosticAtomics: Sendable {
    @usableFromInline let enabled = Atomic<Bool>(false)
    let gatesCreated = Atomic<Int>(0)
    let gatesFreed = Atomic<Int>(0)
    let suspensions = Atomic<Int>(0)
    let resumes = Atomic<Int>(0)

    @usableFromInline
    init() {}

    @usableFromInline
    func add(_ counter: BridgeDiagnostics.Counter) {
        switch counter {
        case .gatesCreated: gatesCreated.add(1, ordering: .relaxed)
        case .gatesFreed: gatesFreed.add(1, ordering: .relaxed)
        case .suspensions: suspensions.add(1, ordering: .relaxed)
        case .resumes: resumes.add(1, ordering: .relaxed)
        }
    }

    @inlinable
    var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    func enable() { enabled.store(true, ordering: .relaxed) }

    var snapshot: BridgeDiagnostics.Snapshot {
        BridgeDiagnostics.Snapshot(
            gatesCreated: gatesCreated.load(ordering: .relaxed),
            gatesFreed: gatesFreed.load(ordering: .relaxed),
            suspensions: suspensions.load(ordering: .relaxed),
            resumes: resumes.load(ordering: .relaxed))
    }
}

#if canImport(Darwin)
/// Apple platforms: the atomics where the OS has them, the same values behind a lock below.
@usableFromInline
final class DiagnosticCells: Sendable {
    /// `DiagnosticAtomics` on macOS 15, iOS 18 and later; unused below.
    @usableFromInline let atomics: (any AnyObject & Sendable)?
    /// Used only where `atomics` is nil.
    @usableFromInline let locked = LockedBox(LockedValues())

    @usableFromInline
    struct LockedValues: Sendable {
        @usableFromInline var enabled = false
        var snapshot = BridgeDiagnostics.Snapshot(gatesCreated: 0, gatesFreed: 0, suspensions: 0, resumes: 0)
        @usableFromInline init() {}
    }

    init() {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            self.atomics = DiagnosticAtomics()
        } else {
            self.atomics = nil
        }
    }

    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
    @inlinable
    var current: DiagnosticAtomics? {
        // Set in `init` on exactly these versions.
        atomics.map { unsafeDowncast($0, to: DiagnosticAtomics.self) }
    }

    @inlinable
    var isEnabled: Bool {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *), let atomics = current {
            return atomics.isEnabled
        }
        return locked.withLock { $0.enabled }
    }

    func enable() {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *), let atomics = current {
            atomics.enable()
            return
        }
        locked.withLock { $0.enabled = true }
    }

    @usableFromInline
    func add(_ counter: BridgeDiagnostics.Counter) {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *), let atomics = current {
            atomics.add(counter)
            return
        }
        locked.withLock { state in
            switch counter {
            case .gatesCreated: state.snapshot.gatesCreated += 1
            case .gatesFreed: state.snapshot.gatesFreed += 1
            case .suspensions: state.snapshot.suspensions += 1
            case .resumes: state.snapshot.resumes += 1
            }
        }
    }

    var snapshot: BridgeDiagnostics.Snapshot {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *), let atomics = current {
            return atomics.snapshot
        }
        return locked.withLock { $0.snapshot }
    }
}
#else
/// Elsewhere the atomics exist on every version: the cells are the atomics, with no indirection.
@usableFromInline
typealias DiagnosticCells = DiagnosticAtomics
#endif
