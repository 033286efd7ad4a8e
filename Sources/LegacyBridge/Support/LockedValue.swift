/// A value behind a lock that ThreadSanitizer sees, for adapter code: counters, tables of pending
/// requests, an SDK object's state shared with its callbacks.
///
/// On Linux, `Synchronization.Mutex` is invisible to ThreadSanitizer under contention: a correct
/// adapter that counts its callbacks under it can be reported as racing. `LockedValue` uses the
/// same pthread mutex as the library itself (`os_unfair_lock` on Darwin), which the sanitizer
/// understands.
///
/// ```swift
/// let pending = LockedValue([UInt16: Completion<Reply>]())
/// pending.withLock { $0[id] = completion }
/// ```
///
/// Contract:
/// - Copies share one value and one lock.
/// - `body` runs with the lock held: keep it short, never `await`, never call the SDK or code
///   that may take this lock again (a re-entrant `withLock` stops the process in debug builds).
/// - Sendable when `Value` is.
public struct LockedValue<Value> {
    @usableFromInline let box: LockedBox<Value>

    /// Creates a locked value.
    ///
    /// - Parameter value: The initial value.
    public init(_ value: Value) {
        self.box = LockedBox(value)
    }

    /// Runs `body` with exclusive access to the value.
    ///
    /// - Parameter body: Reads or changes the value.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws; the lock is released either way.
    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try box.withLock(body)
    }
}

extension LockedValue: @unchecked Sendable where Value: Sendable {}
