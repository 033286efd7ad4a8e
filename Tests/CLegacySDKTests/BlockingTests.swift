import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

@Suite("Blocking calls and interrupts", .onOwnThread)
struct BlockingTests {
    /// The documented result, computed here independently of the SDK.
    private func expectedResult(_ key: UInt64) -> UInt64 {
        var x = key ^ 0x424C_4F43_4B49_4E47
        x ^= x >> 30
        x = x &* 0xBF58_476D_1CE4_E5B9
        x ^= x >> 27
        x = x &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31
        return x
    }

    /// Starts a blocking call on a new thread; the returned list gets (status, result) when it returns.
    private func blockInBackground(
        _ client: ClientRef, key: UInt64, duration: UInt32 = LSDK_MAX_BLOCKING_US
    ) -> LockedList<(status: lsdk_status_t, result: UInt64)> {
        let outcome = LockedList<(status: lsdk_status_t, result: UInt64)>()
        Thread {
            var result: UInt64 = 0xDEAD
            let status = lsdk_blocking_call(client.raw, key, duration, &result)
            outcome.append((status, result))
        }.start()
        return outcome
    }

    @Test("A blocking call returns OK after its duration with the documented result")
    func completes() {
        withClient { client in
            for (key, duration) in [(UInt64(0), UInt32(0)), (42, 1000), (.max, 2000)] {
                var result: UInt64 = 0
                #expect(lsdk_blocking_call(client, key, duration, &result) == Status.ok)
                #expect(result == expectedResult(key))
                #expect(lsdk_blocking_result(key) == expectedResult(key))
            }
            let counted = counters(client)
            #expect(counted.blocking_calls == 3)
            #expect(counted.blocking_calls_interrupted == 0)
            #expect(counted.blocking_in_flight == 0)
            #expect(counted.blocking_in_flight_peak == 1)
        }
    }

    @Test("lsdk_interrupt ends the blocked call with that key at once; other keys are NOT_BLOCKED and change nothing")
    func interruptByKey() {
        withClient { client in
            let ref = ClientRef(client)
            let outcome = blockInBackground(ref, key: 7)
            #expect(spinUntil { counters(client).blocking_in_flight == 1 })
            let badBefore = counters(client).bad_calls
            #expect(lsdk_interrupt(client, 8) == Status.notBlocked)
            #expect(counters(client).bad_calls == badBefore)  // a race outcome, not a bad call
            #expect(outcome.values.isEmpty)
            #expect(counters(client).blocking_in_flight == 1)
            #expect(lsdk_interrupt(client, 7) == Status.ok)
            #expect(spinUntil { !outcome.values.isEmpty })
            #expect(outcome.values.first?.status == Status.interrupted)
            #expect(outcome.values.first?.result == 0xDEAD)  // not written
            let counted = counters(client)
            #expect(counted.blocking_calls == 1 && counted.blocking_calls_interrupted == 1)
            #expect(counted.blocking_in_flight == 0)
            // Not remembered: the key is no longer blocked.
            #expect(lsdk_interrupt(client, 7) == Status.notBlocked)
        }
    }

    @Test("One interrupt ends every call blocked with its key; the peak counts them")
    func sameKeyTwice() {
        withClient { client in
            let ref = ClientRef(client)
            let first = blockInBackground(ref, key: 3)
            let second = blockInBackground(ref, key: 3)
            let other = blockInBackground(ref, key: 4)
            #expect(spinUntil { counters(client).blocking_in_flight == 3 })
            #expect(lsdk_interrupt(client, 3) == Status.ok)
            #expect(spinUntil { first.values.count == 1 && second.values.count == 1 })
            #expect(
                first.values.first?.status == Status.interrupted && second.values.first?.status == Status.interrupted)
            #expect(other.values.isEmpty)
            #expect(lsdk_interrupt(client, 4) == Status.ok)
            #expect(spinUntil { other.values.count == 1 })
            let counted = counters(client)
            #expect(counted.blocking_in_flight_peak == 3)
            #expect(counted.blocking_calls_interrupted == 3)
        }
    }

    @Test("Destroy interrupts every blocked call; afterwards both functions return CLIENT_DESTROYED")
    func destroyInterrupts() {
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        var created: OpaquePointer?
        #expect(lsdk_client_create(&config, &created) == Status.ok)
        let client = ClientRef(created!)
        let outcomes = (0..<3).map { blockInBackground(client, key: UInt64($0)) }
        #expect(spinUntil { counters(client.raw).blocking_in_flight == 3 })
        #expect(lsdk_client_destroy(client.raw) == Status.ok)
        // Destroy waited for them to leave the client; each thread records its status after that.
        #expect(spinUntil { outcomes.allSatisfy { $0.values.count == 1 } })
        #expect(outcomes.allSatisfy { $0.values.map(\.status) == [Status.interrupted] })
        var result: UInt64 = 0
        #expect(lsdk_blocking_call(client.raw, 1, 0, &result) == Status.clientDestroyed)
        #expect(lsdk_interrupt(client.raw, 1) == Status.clientDestroyed)
        let counted = counters(client.raw)
        #expect(counted.blocking_calls == 3 && counted.blocking_calls_interrupted == 3)
        #expect(counted.blocking_in_flight == 0)
    }

    @Test("Bad input: NULL client or out parameter, a duration above the maximum; nothing blocks")
    func badInput() {
        var result: UInt64 = 0
        #expect(lsdk_blocking_call(nil, 1, 0, &result) == Status.nullArgument)
        #expect(lsdk_interrupt(nil, 1) == Status.nullArgument)
        withClient { client in
            #expect(lsdk_blocking_call(client, 1, 0, nil) == Status.nullArgument)
            #expect(lsdk_blocking_call(client, 1, LSDK_MAX_BLOCKING_US + 1, &result) == Status.outOfRange)
            let counted = counters(client)
            #expect(counted.bad_calls == 2)
            #expect(counted.blocking_calls == 0)
        }
    }

    @Test("Affinity covers the blocking call, not the interrupt")
    func affinity() {
        withClient(affinity: LSDK_AFFINITY_CREATOR) { client in
            let ref = ClientRef(client)
            var result: UInt64 = 0
            #expect(lsdk_blocking_call(client, 1, 0, &result) == Status.ok)
            #expect(counters(client).affinity_violations == 0)
            let outcome = blockInBackground(ref, key: 9)  // another thread: a violation
            #expect(spinUntil { counters(client).blocking_in_flight == 1 })
            let interrupted = onOtherThread { lsdk_interrupt(ref.raw, 9) }  // not covered
            #expect(interrupted == Status.ok)
            #expect(spinUntil { outcome.values.count == 1 })
            #expect(counters(client).affinity_violations == 1)
        }
    }
}
