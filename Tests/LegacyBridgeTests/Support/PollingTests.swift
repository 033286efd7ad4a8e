// The tests' own polling (TestSupport's `eventually` and `pollPause`) must pause in a cancelled
// task too. `Task.sleep` throws at once there, without suspending: a poller that relied on it held
// its cooperative thread, looking at its condition millions of times, until its hang bound (600 s
// under ThreadSanitizer). Two of them on a two-core pool stalled a whole TSan run for ten minutes.

import LegacyBridge
import Testing
import TestSupport

@Suite("Support: the tests' polling")
struct PollingTests {
    @Test("eventually in a cancelled task pauses between looks instead of spinning its thread")
    func cancelledPollerPauses() async {
        let looks = LockedValue(0)
        let poller = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await eventually(within: 0.5) {
                looks.withLock { $0 += 1 }
                return false
            }
        }
        #expect(await poller.value == false, "the condition never holds: the bound ends the wait")
        // Half a second of pauses of 1 to 16 ms: about a hundred looks. A spinning poller makes
        // hundreds of thousands; a loaded machine only makes fewer.
        let count = looks.withLock { $0 }
        #expect(count < 2_000, "\(count) looks in half a second: the poller spins instead of pausing")
    }

    @Test("eventually in a cancelled task still sees its condition become true")
    func cancelledPollerStillSees() async {
        let flag = LockedValue(false)
        let poller = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await eventually(within: Double(testHangBoundSeconds)) { flag.withLock { $0 } }
        }
        flag.withLock { $0 = true }
        #expect(await poller.value)
    }
}
