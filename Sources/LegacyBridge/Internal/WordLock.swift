// The lock of a one-shot gate.
//
// Every `withCallback` makes a gate and takes its lock at least twice, from one thread, with
// nobody else interested in the common case. A glibc mutex costs two library calls per round trip
// and keeps owner bookkeeping, a large share of a synchronous call's cost. On Linux the gate therefore uses a word lock: one 32-bit atomic in the
// gate's own allocation, taken with one compare-and-swap and released with one exchange, both
// inlined. ThreadSanitizer sees those atomics (unlike `Synchronization.Mutex`, see STYLE.md).
//
// A thread that finds the word taken (two events of one call racing: a completion, a
// cancellation, a timer) parks on one of a fixed set of pthread mutex + condition pairs, chosen
// by the word's address, and is woken by the unlock. Nothing spins.
//
// A call decided inside `start` needs no lock at all once `start` has returned, if the SDK kept
// no copy of the completion: the caller's reference is then the gate's only one, so no other
// thread can reach it (`isAlone`, `withLockAlone`). Uniqueness is asked of the runtime through
// `isKnownUniquelyReferenced`; nothing here reads an object's memory behind the runtime's back.
//
// On Darwin the gate keeps `os_unfair_lock`, which is already inline-cheap, and takes it every
// time.

#if canImport(Darwin)
/// A value protected by the platform lock (`os_unfair_lock`), in one allocation: the Darwin face
/// of the word-locked box below, with the same API.
///
/// `@unchecked Sendable`, as the Linux box: `State` is only ever read or written inside
/// `withLock`, which holds the lock for the whole access. A gate's state holds the caller's
/// continuation, which is not `Sendable`, so `LockedBox`'s conditional conformance is not enough.
@usableFromInline
package struct GateLockedBox<State>: @unchecked Sendable {
    @usableFromInline
    let box: LockedBox<State>

    /// Builds the state in place.
    @inlinable
    package init(makingStateWith make: () -> State) {
        self.box = LockedBox(makingStateWith: make)
    }

    @inlinable
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try box.withLock(body)
    }

    // Darwin keeps it simple: never alone, every access takes the (inline-cheap) lock.
    @inlinable
    package mutating func isAlone() -> Bool { false }

    @inlinable
    package func withLockAlone<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try box.withLock(body)
    }
}
#else
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// A value protected by a word lock, in one allocation (see the top of this file).
///
/// `@unchecked Sendable`: `State` is only ever read or written inside `withLock`, which holds
/// the lock for the whole access, or by the holder of the storage's only reference
/// (`withLockAlone`), which no other thread can reach.
@usableFromInline
package struct GateLockedBox<State>: @unchecked Sendable {
    // `var` only so that `isAlone()` can ask whether the reference is unique; never reassigned.
    @usableFromInline
    var storage: WordLockStorage<State>

    /// Builds the state in place (a generic state is then neither copied nor destroyed).
    @inlinable
    package init(makingStateWith make: () -> State) {
        self.storage = Self.makeStorage(make)
    }

    @inlinable
    static func makeStorage(_ make: () -> State) -> WordLockStorage<State> {
        let buffer = WordLockStorage<State>.create(minimumCapacity: 1) { buffer in
            buffer.withUnsafeMutablePointerToElements { $0.initialize(to: WordLock()) }
            return make()
        }
        // `create` returns an instance of the class it is called on.
        return unsafeDowncast(buffer, to: WordLockStorage<State>.self)
    }

    @inlinable
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, lock in
            let address = UInt(bitPattern: lock)
            lock.pointee.lock(address)
            defer { lock.pointee.unlock(address) }
            return try body(&state.pointee)
        }
    }

    /// Whether this box holds the only reference to the state: then no other thread can reach
    /// it (any other holder, running or stored, would be a second reference), and
    /// `withLockAlone` may skip the lock.
    @inlinable
    package mutating func isAlone() -> Bool {
        isKnownUniquelyReferenced(&storage)
    }

    /// `body` on the state of a box that `isAlone()` just answered true for, without taking
    /// the lock. Every other thread that held a reference has let go of it, after its last
    /// critical section: the fence orders their release of the reference (which the
    /// uniqueness check read) before `body`, and the acquiring load of the lock word, which
    /// their last unlock wrote, does the same in a way ThreadSanitizer sees (it ignores fences).
    /// Both are plain instructions on x86.
    @inlinable
    package func withLockAlone<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        atomicMemoryFence(ordering: .acquiring)
        return try storage.withUnsafeMutablePointers { state, lock in
            let word = lock.pointee.word.load(ordering: .acquiring)
            precondition(word == 0, "a gate's lock is held while a single reference to it remains")
            return try body(&state.pointee)
        }
    }
}

extension GateLockedBox {
    /// Whether a thread is (or was, since the last uncontended unlock) parked waiting for the
    /// lock (for tests: the word reads 2).
    var hasParkedWaiter: Bool {
        storage.withUnsafeMutablePointerToElements { $0.pointee.word.load(ordering: .acquiring) == 2 }
    }
}

/// Storage of a `GateLockedBox`: the value is the buffer's header, the lock its one tail element.
@usableFromInline
package final class WordLockStorage<State>: ManagedBuffer<State, WordLock> {
    deinit {
        _ = self.withUnsafeMutablePointerToElements { $0.deinitialize(count: 1) }
    }
}

/// The lock word: 0 free, 1 held, 2 held and a thread may be parked waiting for it.
/// Debug builds also record the holder, so that re-entrant locking and unlocking by another
/// thread stop with a message (as the error-checking mutex of `LockedBox` does) instead of
/// hanging or corrupting.
@usableFromInline
package struct WordLock: ~Copyable {
    @usableFromInline let word: Atomic<UInt32>
    #if DEBUG
    @usableFromInline let holder: Atomic<UInt>
    #endif

    @inlinable
    init() {
        self.word = Atomic(0)
        #if DEBUG
        self.holder = Atomic(0)
        #endif
    }

    /// `address`: where this lock lives (chooses the parking slot).
    @inlinable
    func lock(_ address: UInt) {
        #if DEBUG
        precondition(
            holder.load(ordering: .relaxed) != WordLock.currentThread,
            "gate lock taken twice by one thread (re-entrant locking)")
        #endif
        if !word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
            lockContended(address)
        }
        #if DEBUG
        holder.store(WordLock.currentThread, ordering: .relaxed)
        #endif
    }

    @inlinable
    func unlock(_ address: UInt) {
        #if DEBUG
        precondition(
            holder.load(ordering: .relaxed) == WordLock.currentThread,
            "gate lock released by a thread that does not hold it")
        holder.store(0, ordering: .relaxed)
        #endif
        if word.exchange(0, ordering: .releasing) == 2 {
            WordLockParking.wakeAll(for: address)
        }
    }

    /// The word was taken: park until it is free, then take it marked "someone may be waiting"
    /// (2), so that this holder's unlock wakes any other parked thread.
    @usableFromInline
    func lockContended(_ address: UInt) {
        let slot = WordLockParking.slot(for: address)
        slot.mutex.lock()
        // Marking the word 2 and sleeping happen under the slot's mutex, which the unlocker must
        // take to wake anyone: a wake-up cannot fall between the two.
        while word.exchange(2, ordering: .acquiringAndReleasing) != 0 {
            pthread_cond_wait(slot.condition, slot.mutex)
        }
        slot.mutex.unlock()
    }

    #if DEBUG
    @usableFromInline
    static var currentThread: UInt {
        #if canImport(Glibc)
        pthread_self()  // a UInt on glibc
        #else
        unsafeBitCast(pthread_self(), to: UInt.self)
        #endif
    }
    #endif
}

/// Where threads wait for a taken word lock: 64 pthread mutex + condition pairs, made on first
/// contention and kept for the life of the process. Locks that share a slot only cost each other
/// a spurious wake-up (every unlock of a contended word wakes the whole slot).
@usableFromInline
enum WordLockParking {
    @usableFromInline
    struct Slot {
        @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
        @usableFromInline let condition: UnsafeMutablePointer<pthread_cond_t>
    }

    static let slotCount = 64

    /// Allocated once, never freed.
    nonisolated(unsafe) static let slots: UnsafeMutablePointer<Slot> = {
        let slots = UnsafeMutablePointer<Slot>.allocate(capacity: slotCount)
        for index in 0..<slotCount {
            let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            mutex.initializeLock()
            let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            condition.initialize(to: pthread_cond_t())
            precondition(pthread_cond_init(condition, nil) == 0, "pthread_cond_init failed")
            (slots + index).initialize(to: Slot(mutex: mutex, condition: condition))
        }
        return slots
    }()

    @usableFromInline
    static func slot(for address: UInt) -> Slot {
        slots[Int((address >> 4) % UInt(slotCount))]
    }

    /// Wakes every thread parked in the slot of `address` (which is never dereferenced: the
    /// lock may be gone by now).
    @usableFromInline
    static func wakeAll(for address: UInt) {
        let slot = slot(for: address)
        slot.mutex.lock()
        pthread_cond_broadcast(slot.condition)
        slot.mutex.unlock()
    }
}
#endif
