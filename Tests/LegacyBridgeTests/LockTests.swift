import TestSupport
import Testing
@testable import LegacyBridge

@Suite struct LockTests {
    @Test("LockedBox serialises increments from many tasks")
    func lockedBoxCounts() async {
        let box = LockedBox<Int>(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { for _ in 0..<10_000 { box.withLock { $0 += 1 } } }
            }
        }
        #expect(box.withLock { $0 } == 40_000)
    }
}

#if !canImport(Darwin)
import Foundation

/// The gate's word lock (Linux): mutual exclusion under contention, and the parking path.
@Suite struct WordLockTests {
    @Test("GateLockedBox serialises increments from four threads hammering one word")
    func wordLockCounts() async {
        let box = GateLockedBox<Int> { 0 }
        let done = DispatchGroup()
        for _ in 0..<4 {
            done.enter()
            Thread {
                for _ in 0..<50_000 { box.withLock { $0 += 1 } }
                done.leave()
            }.start()
        }
        let finished = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: done.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success)
            }
        }
        #expect(finished)
        #expect(box.withLock { $0 } == 200_000)
    }

    @Test("a freed box destroys its state")
    func wordLockBoxDestroysState() {
        final class Tracked {
            let freed: UnsafeMutablePointer<Bool>
            init(_ freed: UnsafeMutablePointer<Bool>) { self.freed = freed }
            deinit { freed.pointee = true }
        }
        let freed = UnsafeMutablePointer<Bool>.allocate(capacity: 1)
        defer { freed.deallocate() }
        freed.initialize(to: false)
        do {
            let box = GateLockedBox<Tracked?> { Tracked(freed) }
            box.withLock { _ in }
        }
        #expect(freed.pointee, "the box's state was not destroyed when the box was freed")
    }

    @Test("a thread that finds the word taken parks, and the holder's unlock wakes it to take the lock next")
    func wordLockParksAndWakes() async {
        let box = GateLockedBox<[String]> { [] }
        let holderInside = DispatchSemaphore(value: 0)
        let bothDone = DispatchGroup()
        bothDone.enter()
        Thread {
            box.withLock { log in
                log.append("holder in")
                holderInside.signal()
                // Hold the lock until the other thread has marked the word and parked.
                let deadline = Date().addingTimeInterval(Double(testHangBoundSeconds))
                while !box.hasParkedWaiter && Date() < deadline { usleep(1_000) }
                log.append(box.hasParkedWaiter ? "holder saw a parked waiter" : "no waiter parked")
            }
            bothDone.leave()
        }.start()
        holderInside.wait()
        bothDone.enter()
        Thread {
            box.withLock { $0.append("waiter in") }  // the word is taken: parks
            bothDone.leave()
        }.start()
        let finished = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    returning: bothDone.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success)
            }
        }
        #expect(finished, "the parked thread was not woken")
        #expect(box.withLock { $0 } == ["holder in", "holder saw a parked waiter", "waiter in"])
    }
}
#endif
