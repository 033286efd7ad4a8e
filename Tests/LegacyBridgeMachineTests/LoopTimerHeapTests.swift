// The descriptor loop's timer heap as a pure value: deadline order, ties in arming order, lazy
// cancellation, and a size bounded by the live timers however many were cancelled.

import Testing
@testable import LegacyBridge
import TestSupport

@Suite(
    "ThreadAffine: the descriptor loop's timer heap",
    .disabled(if: testsUnderSanitizer, "a pure value on one thread: nothing for a sanitizer to see")
)
struct LoopTimerHeapTests {
    private static let origin = ContinuousClock.now

    @Test("10,000 timers with random deadlines leave in deadline order, ties in arming order; cancelled ones never")
    func order() {
        var generator = SplitMix64(seed: 47)
        var heap = LoopTimerHeap()
        var live: [UInt64: ContinuousClock.Instant] = [:]
        for id in UInt64(1)...10_000 {
            let deadline = Self.origin + .milliseconds(Int.random(in: 0..<500, using: &generator))
            heap.push(.init(deadline: deadline, id: id))
            live[id] = deadline
        }
        for id in live.keys where id.isMultiple(of: 3) { live[id] = nil }
        var popped: [LoopTimerHeap.Entry] = []
        var now = Self.origin
        while popped.count < live.count {
            now += .milliseconds(50)
            popped += heap.popDue(at: now) { live[$0.id] == $0.deadline }
        }
        #expect(popped.count == live.count)
        #expect(popped.allSatisfy { live[$0.id] == $0.deadline }, "a cancelled timer left the heap")
        #expect(zip(popped, popped.dropFirst()).allSatisfy { $0 < $1 }, "out of deadline order")
        let left = heap.top { live[$0.id] == $0.deadline }
        #expect(left == nil)
    }

    @Test("arming and cancelling a timeout per request keeps the heap near the number of live timers")
    func compaction() {
        var heap = LoopTimerHeap()
        var live: [UInt64: ContinuousClock.Instant] = [:]
        for id in UInt64(1)...10_000 {
            let deadline = Self.origin + .seconds(30)
            heap.push(.init(deadline: deadline, id: id))
            live[id] = deadline
            // The request before this one got its answer: its timeout is cancelled.
            if id > 1 {
                live[id - 1] = nil
                heap.compact(isLive: { live[$0.id] == $0.deadline }, liveCount: live.count)
            }
            #expect(heap.count <= max(64, 2 * live.count) + 1)
        }
        let next = heap.top { live[$0.id] == $0.deadline }
        #expect(next?.id == 10_000)
    }
}
