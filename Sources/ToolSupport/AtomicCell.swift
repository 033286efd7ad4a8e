import LegacyBridge
import Synchronization

// `Synchronization.Atomic` needs macOS 15, iOS 18, tvOS 18, watchOS 11 and visionOS 2. The tools
// and the tests are built for the package's floors (macOS 13, iOS 16, ...), like the library, so
// an unguarded `Atomic` in them would stop `swift run legacy-bridge` and `swift test` on a Mac.
// `AtomicCell` has Atomic's operations and names, and is an `Atomic<Int>` wherever one exists at
// run time (always on Linux, so nothing changes there: the benchmarks' producers keep their
// atomics); below those versions it is an Int behind a lock. This file is the only place that
// decides.

/// The ordering of an `AtomicCell` operation, named as `Synchronization`'s orderings are.
///
/// An atomic cell makes `.relaxed` operations relaxed and every other one sequentially consistent:
/// stronger than asked, never weaker (`Atomic` takes its orderings as constants, so a cell picks
/// between two). The lock fallback is stronger than any of them.
package enum AtomicCellOrdering: Sendable {
    case relaxed, acquiring, releasing, acquiringAndReleasing, sequentiallyConsistent

    @usableFromInline var isRelaxed: Bool { self == .relaxed }
}

/// What an `AtomicCell` can hold: a value that round-trips through an `Int`.
package protocol AtomicCellValue: Sendable, Equatable {
    init(cellBits: Int)
    var cellBits: Int { get }
}

extension Int: AtomicCellValue {
    @inlinable package init(cellBits: Int) { self = cellBits }
    @inlinable package var cellBits: Int { self }
}

extension Bool: AtomicCellValue {
    @inlinable package init(cellBits: Int) { self = cellBits != 0 }
    @inlinable package var cellBits: Int { self ? 1 : 0 }
}

/// A value shared between threads, with `Synchronization.Atomic`'s operations, at every
/// platform floor of the package (see the file comment).
package final class AtomicCell<Value: AtomicCellValue>: Sendable {
    /// An `AtomicStorage` where `Atomic` exists at run time, a `LockedStorage` below. Set once.
    @usableFromInline let storage: any AnyObject & Sendable

    /// Creates a cell holding `value`.
    package init(_ value: Value) {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            storage = AtomicStorage(value.cellBits)
        } else {
            storage = LockedStorage(value.cellBits)
        }
    }

    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
    @usableFromInline @inline(__always)
    var atomic: AtomicStorage { unsafeDowncast(storage, to: AtomicStorage.self) }

    @usableFromInline @inline(__always)
    var locked: LockedValue<Int> { unsafeDowncast(storage, to: LockedStorage.self).value }

    /// The value.
    @inlinable
    package func load(ordering: AtomicCellOrdering) -> Value {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let bits =
                ordering.isRelaxed
                ? atomic.value.load(ordering: .relaxed) : atomic.value.load(ordering: .sequentiallyConsistent)
            return Value(cellBits: bits)
        }
        return Value(cellBits: locked.withLock { $0 })
    }

    /// Replaces the value.
    @inlinable
    package func store(_ desired: Value, ordering: AtomicCellOrdering) {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            if ordering.isRelaxed {
                atomic.value.store(desired.cellBits, ordering: .relaxed)
            } else {
                atomic.value.store(desired.cellBits, ordering: .sequentiallyConsistent)
            }
            return
        }
        locked.withLock { $0 = desired.cellBits }
    }

    /// Replaces the value; returns the one before.
    @inlinable @discardableResult
    package func exchange(_ desired: Value, ordering: AtomicCellOrdering) -> Value {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let bits =
                ordering.isRelaxed
                ? atomic.value.exchange(desired.cellBits, ordering: .relaxed)
                : atomic.value.exchange(desired.cellBits, ordering: .sequentiallyConsistent)
            return Value(cellBits: bits)
        }
        return Value(
            cellBits: locked.withLock { bits in
                defer { bits = desired.cellBits }
                return bits
            })
    }

    /// Stores `desired` if the value is `expected`; returns whether it did and the value before.
    @inlinable
    package func compareExchange(
        expected: Value, desired: Value, ordering: AtomicCellOrdering
    ) -> (exchanged: Bool, original: Value) {
        let (exchanged, original) = update(ordering) { $0 == expected.cellBits ? desired.cellBits : nil }
        return (exchanged, Value(cellBits: original))
    }

    /// Replaces the value with `next(value)` unless that is nil, atomically; returns whether it
    /// did, and the value before.
    @inlinable
    func update(_ ordering: AtomicCellOrdering, _ next: (Int) -> Int?) -> (changed: Bool, original: Int) {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            var seen = atomic.value.load(ordering: .relaxed)
            while true {
                guard let wanted = next(seen) else { return (false, seen) }
                let (exchanged, original) =
                    ordering.isRelaxed
                    ? atomic.value.compareExchange(expected: seen, desired: wanted, ordering: .relaxed)
                    : atomic.value.compareExchange(expected: seen, desired: wanted, ordering: .sequentiallyConsistent)
                if exchanged { return (true, seen) }
                seen = original
            }
        }
        return locked.withLock { bits in
            guard let wanted = next(bits) else { return (false, bits) }
            defer { bits = wanted }
            return (true, bits)
        }
    }
}

extension AtomicCell where Value == Int {
    /// Adds `operand` (trapping on overflow); returns the values before and after.
    @inlinable @discardableResult
    package func add(_ operand: Int, ordering: AtomicCellOrdering) -> (oldValue: Int, newValue: Int) {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return ordering.isRelaxed
                ? atomic.value.add(operand, ordering: .relaxed)
                : atomic.value.add(operand, ordering: .sequentiallyConsistent)
        }
        let old = update(ordering) { $0 + operand }.original
        return (old, old + operand)
    }

    /// Adds `operand`, wrapping around on overflow; returns the values before and after.
    @inlinable @discardableResult
    package func wrappingAdd(_ operand: Int, ordering: AtomicCellOrdering) -> (oldValue: Int, newValue: Int) {
        let old = update(ordering) { $0 &+ operand }.original
        return (old, old &+ operand)
    }

    /// Subtracts `operand` (trapping on overflow); returns the values before and after.
    @inlinable @discardableResult
    package func subtract(_ operand: Int, ordering: AtomicCellOrdering) -> (oldValue: Int, newValue: Int) {
        add(-operand, ordering: ordering)
    }

    /// Keeps the larger of the value and `operand`; returns the values before and after.
    @inlinable @discardableResult
    package func max(_ operand: Int, ordering: AtomicCellOrdering) -> (oldValue: Int, newValue: Int) {
        let old = update(ordering) { $0 < operand ? operand : nil }.original
        return (old, Swift.max(old, operand))
    }
}

/// An `Atomic<Int>`, boxed so that a cell holds it or the lock fallback in one stored property.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
@usableFromInline
final class AtomicStorage: Sendable {
    @usableFromInline let value: Atomic<Int>
    init(_ value: Int) { self.value = Atomic(value) }
}

/// The Int behind a lock, where `Atomic` does not exist.
@usableFromInline
final class LockedStorage: Sendable {
    @usableFromInline let value: LockedValue<Int>
    init(_ value: Int) { self.value = LockedValue(value) }
}
