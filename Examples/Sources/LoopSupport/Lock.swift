// The one lock type of the examples: a value behind a pthread mutex.
//
// Built on pthread_mutex_t rather than Synchronization.Mutex for the reason the core gives in
// Sources/LegacyBridge/Internal/Lock.swift: ThreadSanitizer cannot see Mutex under contention, and
// these examples run under TSan in CI. The core's LockedBox is `package` to its own package, so the
// examples carry their own. Critical sections stay tiny: never call C or user code inside one.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Storage of a ``LockedBox``: the value is the buffer's header, the mutex its one element.
package final class LockedBoxStorage<State>: ManagedBuffer<State, pthread_mutex_t> {
    deinit {
        _ = self.withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
    }
}

/// A value protected by a pthread mutex, in one allocation. Copies share the storage.
///
/// `@unchecked Sendable`: `State` is only read or written inside ``withLock(_:)``, which holds the
/// mutex for the whole access.
package struct LockedBox<State>: @unchecked Sendable {
    private let storage: LockedBoxStorage<State>

    /// Creates a box holding `initial`.
    ///
    /// - Parameter initial: The first value.
    package init(_ initial: State) {
        let buffer = LockedBoxStorage<State>.create(minimumCapacity: 1) { buffer in
            buffer.withUnsafeMutablePointerToElements { mutex in
                mutex.initialize(to: pthread_mutex_t())
                let rc = pthread_mutex_init(mutex, nil)
                precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
            }
            return initial
        }
        self.storage = unsafeDowncast(buffer, to: LockedBoxStorage<State>.self)
    }

    /// Runs `body` with exclusive access to the value.
    ///
    /// - Parameter body: Reads or changes the value; must not block, call C or call user code.
    /// - Returns: What `body` returns.
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, mutex in
            let rc = pthread_mutex_lock(mutex)
            precondition(rc == 0, "pthread_mutex_lock failed: \(rc)")
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }
}
