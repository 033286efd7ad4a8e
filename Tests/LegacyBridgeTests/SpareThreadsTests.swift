import Dispatch
import Testing

@testable import LegacyBridge

@Suite("SpareThreads: the library's own threads for calls that may block")
struct SpareThreadsTests {
    @Test("jobs that block until all of them have started all run at once: a slow job never waits for another")
    func blockedJobsDoNotQueueBehindEachOther() {
        // Each job waits until every job has started. If a job ever waited for a thread another
        // job holds, the count would stop short and the jobs would give up at the hang bound.
        let count = 12
        let started = LockedBox(0)
        let allStarted = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let sawAll = LockedBox(0)
        for _ in 0..<count {
            SpareThreads.run {
                let now = started.withLock { value -> Int in
                    value += 1
                    return value
                }
                if now == count {
                    for _ in 0..<count { allStarted.signal() }
                }
                if allStarted.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success {
                    sawAll.withLock { $0 += 1 }
                }
                finished.signal()
            }
        }
        for _ in 0..<count { finished.wait() }
        #expect(sawAll.withLock { $0 } == count)
    }

    @Test("jobs posted one after another, after earlier ones finished, all run (parked threads are woken)")
    func parkedThreadsAreReused() {
        let done = DispatchSemaphore(value: 0)
        let ran = LockedBox(0)
        for _ in 0..<200 {
            SpareThreads.run {
                ran.withLock { $0 += 1 }
                done.signal()
            }
            #expect(done.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success)
        }
        #expect(ran.withLock { $0 } == 200)
    }
}
