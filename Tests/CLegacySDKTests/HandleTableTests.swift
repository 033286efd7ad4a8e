import CLegacySDK
import Foundation
import TestSupport
import Testing

@Suite("The handle table: a stale handle never names a live operation", .onOwnThread)
struct HandleTableTests {
    private func neverEnding() -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.completion_count = 0
        behavior.set(cancelMode: LSDK_CANCEL_SILENT)
        return behavior
    }

    @Test("A slot whose last generation was used is retired, not wrapped: its first handle stays invalid for good")
    func lastGenerationRetiresTheSlot() {
        withClient { client in
            let first = Recorder()
            let (status, handle) = startRequest(client, neverEnding(), recorder: first)
            #expect(status == Status.ok)
            // White-box: as if this slot had been reused 2^32 - 2 times already.
            var lastGeneration: lsdk_handle_t = 0
            #expect(lsdk_test_handle_set_generation(handle, 0xFFFF_FFFF, &lastGeneration) == Status.ok)
            #expect(lastGeneration == (0xFFFF_FFFF << 32) | (handle & 0xFFFF_FFFF))
            #expect(lsdk_pause(handle) == Status.invalidHandle)  // the old value is stale now
            // What the slot's first-generation handle looks like: a stale handle from 2^32 - 1 reuses ago.
            let wrappedValue: lsdk_handle_t = (1 << 32) | (handle & 0xFFFF_FFFF)
            let retiredBefore = lsdk_test_handle_slots_retired()
            #expect(lsdk_cancel(lastGeneration) == Status.ok)
            #expect(lsdk_handle_release(lastGeneration) == Status.ok)
            #expect(lsdk_test_handle_slots_retired() == retiredBefore + 1)

            // The next operations must not get that value back (the free list is last-in, first-out).
            var later: [(Recorder, lsdk_handle_t)] = []
            for _ in 0..<4 {
                let recorder = Recorder()
                let (laterStatus, laterHandle) = startRequest(client, neverEnding(), recorder: recorder)
                #expect(laterStatus == Status.ok)
                #expect(laterHandle != wrappedValue)
                #expect(laterHandle & 0xFFFF_FFFF != handle & 0xFFFF_FFFF)  // the slot is gone
                later.append((recorder, laterHandle))
            }
            // So the stale value names nothing: cancel, pause, resume and release reject it.
            #expect(lsdk_cancel(wrappedValue) == Status.invalidHandle)
            #expect(lsdk_pause(wrappedValue) == Status.invalidHandle)
            #expect(lsdk_resume(wrappedValue) == Status.invalidHandle)
            #expect(lsdk_handle_release(wrappedValue) == Status.invalidHandle)
            #expect(lsdk_cancel(lastGeneration) == Status.invalidHandle)
            for (recorder, laterHandle) in later {
                #expect(recorder.entries.isEmpty)  // none was cancelled through the stale value
                #expect(lsdk_cancel(laterHandle) == Status.ok)
                #expect(recorder.waitReleased())
                #expect(lsdk_handle_release(laterHandle) == Status.ok)
            }
            #expect(first.waitReleased())
            #expect(counters(client).handles_outstanding == 0)
        }
    }

    @Test("The generation test hook rejects bad input")
    func hookBadInput() {
        var out: lsdk_handle_t = 0
        #expect(lsdk_test_handle_set_generation(0, 5, &out) == Status.invalidHandle)
        #expect(lsdk_test_handle_set_generation((7 << 32) | 1, 0, &out) == Status.outOfRange)
        #expect(lsdk_test_handle_set_generation((7 << 32) | 1, 5, nil) == Status.nullArgument)
        #expect(lsdk_test_handle_set_generation(UInt64.max, 5, &out) == Status.invalidHandle)
    }
}
