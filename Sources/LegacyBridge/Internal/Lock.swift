// The lock type of LegacyBridge (the one-shot gate alone uses the word lock of WordLock.swift
// on Linux: it is taken twice per call by one thread, where a library call per lock and unlock
// was a third of the call's cost).
//
// Built on pthread_mutex_t (os_unfair_lock on Darwin) rather than
// Synchronization.Mutex: on this toolchain ThreadSanitizer cannot see Mutex
// under contention, and stress runs under TSan are part of the product.
// `package` so the conformance library and the CLI share this lock type.
// A stream's buffer lock is made "spinning" (glibc's adaptive mutex in release builds): its
// producer and consumer take it millions of times a second from two threads, and a collision
// that sleeps in the kernel costs more than the critical section. Debug builds keep the
// error-checking mutex.
// Critical sections must stay tiny: never await, call C, or call user code
// while holding one of these.

#if canImport(Darwin)
import Darwin

@usableFromInline
package typealias PlatformLock = os_unfair_lock_s

extension UnsafeMutablePointer where Pointee == PlatformLock {
    @inlinable func initializeLock() { self.initialize(to: os_unfair_lock_s()) }
    @inlinable func initializeSpinningLock() { initializeLock() }
    @inlinable func destroyLock() { self.deinitialize(count: 1) }
    @inlinable func lock() { os_unfair_lock_lock(self) }
    @inlinable func unlock() { os_unfair_lock_unlock(self) }
}
#else
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@usableFromInline
package typealias PlatformLock = pthread_mutex_t

extension UnsafeMutablePointer where Pointee == PlatformLock {
    @inlinable func initializeLock() {
        #if DEBUG
        initializeLock(type: Int32(PTHREAD_MUTEX_ERRORCHECK))
        #elseif canImport(Glibc) || canImport(Musl)
        // Release builds on glibc and musl: all-zero bytes are PTHREAD_MUTEX_INITIALIZER, a
        // default mutex, so the zeroed value is ready (a gate makes one per call, and
        // pthread_mutex_init was a measurable part of the synchronous path).
        self.initialize(to: pthread_mutex_t())
        #else
        initializeLock(type: Int32(PTHREAD_MUTEX_DEFAULT))
        #endif
    }
    /// A mutex that spins briefly before it sleeps (glibc's adaptive mutex; elsewhere the
    /// default one): for a lock two threads take at a high rate (a stream's producer and
    /// consumer), where sleeping in the kernel on every collision costs more than the wait.
    @inlinable func initializeSpinningLock() {
        #if canImport(Glibc) && !DEBUG
        initializeLock(type: Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #else
        initializeLock()
        #endif
    }
    /// Initializes a mutex of the given `pthread_mutexattr_settype` type.
    @inlinable func initializeLock(type: Int32) {
        self.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, type)
        let rc = pthread_mutex_init(self, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }
    @inlinable func destroyLock() {
        let rc = pthread_mutex_destroy(self)
        precondition(rc == 0, "pthread_mutex_destroy failed (lock still held?): \(rc)")
        self.deinitialize(count: 1)
    }
    @inlinable func lock() {
        let rc = pthread_mutex_lock(self)
        precondition(rc == 0, "pthread_mutex_lock failed (re-entrant locking?): \(rc)")
    }
    @inlinable func unlock() {
        let rc = pthread_mutex_unlock(self)
        precondition(rc == 0, "pthread_mutex_unlock failed (not the owner?): \(rc)")
    }
}
#endif

/// Storage of a `LockedBox`: the value is the buffer's header, the lock its
/// one tail element, so value and lock share a single allocation.
@usableFromInline
package final class LockStorage<State>: ManagedBuffer<State, PlatformLock> {
    deinit {
        self.withUnsafeMutablePointerToElements { $0.destroyLock() }
    }
}

/// A value protected by a platform lock, in one allocation. Copies share the
/// same storage (it is a reference).
///
/// Sendable when `State` is: `State` is only ever read or written inside
/// `withLock`, which holds the lock for the whole access, so the box adds
/// the exclusion that a `Sendable` state still needs for mutation.
@usableFromInline
package struct LockedBox<State> {
    @usableFromInline
    let storage: LockStorage<State>

    @inlinable
    package init(_ initial: State) {
        self.init(makingStateWith: { initial })
    }

    /// The same, building the state in place: a generic state is then neither copied into the
    /// allocation nor destroyed afterwards (both go through the runtime's generic value code).
    @inlinable
    package init(makingStateWith make: () -> State) {
        self.init(spinning: false, makingStateWith: make)
    }

    /// `spinning`: the lock spins briefly before it sleeps (see `initializeSpinningLock`).
    @inlinable
    package init(spinning: Bool, makingStateWith make: () -> State) {
        let buffer = LockStorage<State>.create(minimumCapacity: 1) { buffer in
            buffer.withUnsafeMutablePointerToElements {
                if spinning { $0.initializeSpinningLock() } else { $0.initializeLock() }
            }
            return make()
        }
        // `create` returns an instance of the class it is called on.
        self.storage = unsafeDowncast(buffer, to: LockStorage<State>.self)
    }

    @inlinable
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, lock in
            lock.lock()
            defer { lock.unlock() }
            if MemoryLayout<State>.size == 0 {
                // A state of no bytes (`Void`, an empty struct: a box used as a plain mutex) has
                // the lock's own address, the buffer's next byte. An inout access there is a write
                // to the lock's memory for ThreadSanitizer, which then reports a race with the
                // next thread's pthread_mutex_lock. A copy has no bytes to lose: the body gets one.
                var copy = state.pointee
                return try body(&copy)
            }
            return try body(&state.pointee)
        }
    }

    /// Identity of the shared storage (for tests and debugging).
    @usableFromInline
    var identity: ObjectIdentifier { ObjectIdentifier(storage) }
}

extension LockedBox: @unchecked Sendable where State: Sendable {}
