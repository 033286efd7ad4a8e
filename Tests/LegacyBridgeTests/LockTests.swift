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
