// LockedValue: exclusive access under contention from plain threads; under `--sanitize=thread`
// (CI) the same test also proves ThreadSanitizer sees the lock (a race report fails the run).

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

@Suite("Support: LockedValue")
struct LockedValueTests {
    @Test("four threads increment one counter under contention: no update is lost")
    func contention() {
        let counter = LockedValue(0)
        let threads = 4
        let increments = testsUnderThreadSanitizer ? 20_000 : 200_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == threads * increments)
    }

    /// A counter only ever touched inside `LockedValue(())`'s lock.
    final class UnguardedCounter: @unchecked Sendable {
        // @unchecked Sendable: guarded by the test's Void lock, which is what is checked.
        var value = 0
    }

    @Test(
        "a LockedValue of no bytes (Void, an empty struct) is a plain mutex ThreadSanitizer sees, with no report of its own"
    )
    func zeroSizedValueIsAPlainMutex() {
        struct Empty {}
        let threads = 4
        let increments = testsUnderThreadSanitizer ? 5_000 : 50_000
        let voidMutex = LockedValue(())
        let voidCounter = UnguardedCounter()
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments { voidMutex.withLock { _ in voidCounter.value += 1 } }
        }
        #expect(voidCounter.value == threads * increments)
        let emptyMutex = LockedValue(Empty())
        let emptyCounter = UnguardedCounter()
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments { emptyMutex.withLock { _ in emptyCounter.value += 1 } }
        }
        #expect(emptyCounter.value == threads * increments)
    }

    @Test("copies share one value, and an error thrown in the body leaves the lock usable")
    func copiesShareAndThrowsUnlock() {
        struct Failure: Error {}
        let first = LockedValue([Int]())
        let second = first
        second.withLock { $0.append(1) }
        #expect(throws: Failure.self) { try first.withLock { _ in throw Failure() } }
        #expect(first.withLock { $0 } == [1])
    }
}
