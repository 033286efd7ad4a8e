import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

@Suite("Cancel inside callbacks, and the cancel that waits (LSDK_CANCEL_WAITS)", .onOwnThread)
struct CancelWaitsTests {
    private func waitsStream(concurrency: UInt32 = 1) -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.set(cancelMode: LSDK_CANCEL_WAITS)
        behavior.chunk_size = 10
        behavior.progress_every = 0
        behavior.stream_concurrency = concurrency
        behavior.seed = 5
        return behavior
    }

    @Test("cancels_inside_callback counts every cancel made inside a callback of the same operation, in any mode")
    func insideCallbackCounted() {
        withClient { client in
            for mode in [
                LSDK_CANCEL_CALLBACK_SYNC, LSDK_CANCEL_CALLBACK_ASYNC, LSDK_CANCEL_SILENT, LSDK_CANCEL_IGNORED,
            ] {
                var behavior = lsdk_behavior_t.defaults()
                behavior.completion_count = 2
                behavior.set(cancelMode: mode)
                let before = counters(client).cancels_inside_callback
                let recorder = Recorder { recorder, entry in
                    guard entry.attempt == 1 else { return }
                    #expect(spinUntil { recorder.handle != 0 })
                    #expect(lsdk_cancel(recorder.handle) == Status.ok)
                    #expect(lsdk_cancel(recorder.handle) == Status.ok)  // repeated: counted too
                }
                let (status, handle) = startRequest(client, behavior, recorder: recorder)
                #expect(status == Status.ok)
                #expect(recorder.waitReleased())
                #expect(counters(client).cancels_inside_callback == before + 2, "mode \(mode)")
                // From outside any callback: not counted.
                #expect(lsdk_cancel(handle) == Status.ok)
                #expect(counters(client).cancels_inside_callback == before + 2)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
        }
    }

    @Test("A cancel inside a callback of another operation is not counted as inside its own")
    func insideOtherOperationNotCounted() {
        withClient { client in
            var never = lsdk_behavior_t.defaults()
            never.completion_count = 0
            never.set(cancelMode: LSDK_CANCEL_SILENT)
            let target = Recorder()
            let (_, targetHandle) = startRequest(client, never, recorder: target)
            let other = Recorder { _, _ in #expect(lsdk_cancel(targetHandle) == Status.ok) }
            let (_, otherHandle) = startRequest(client, .defaults(), recorder: other)
            #expect(other.waitReleased())
            #expect(target.waitReleased())
            #expect(counters(client).cancels_inside_callback == 0)
            #expect(lsdk_handle_release(targetHandle) == Status.ok)
            #expect(lsdk_handle_release(otherHandle) == Status.ok)
        }
    }

    @Test("WAITS from another thread returns only after the running callback returned; nothing is delivered after it")
    func waitsForRunningCallback() {
        withClient { client in
            let gate = Gate()
            let cancelReturned = LockedList<Bool>()
            let sawCancelReturnedAtEnd = LockedList<Bool>()
            let recorder = Recorder { _, entry in
                guard entry.sequence == 2 else { return }
                gate.wait()
                sawCancelReturnedAtEnd.append(!cancelReturned.values.isEmpty)
            }
            let (status, handle) = startDownload(client, waitsStream(), recorder: recorder, totalBytes: 10_000)
            #expect(status == Status.ok)
            #expect(recorder.waitEntries(3))  // event 2 is held open by the gate

            let runningAtReturn = LockedList<Int>()
            let entriesAtReturn = LockedList<Int>()
            let canceller = Thread {
                #expect(lsdk_cancel(handle) == Status.ok)
                runningAtReturn.append(recorder.runningNow)
                entriesAtReturn.append(recorder.entries.count)
                cancelReturned.append(true)
            }
            canceller.start()
            // The cancel took effect (counted before it starts waiting); it must still be waiting.
            #expect(spinUntil { counters(client).cancels == 1 })
            #expect(cancelReturned.values.isEmpty)
            gate.open()
            #expect(recorder.waitReleased())
            #expect(spinUntil { !cancelReturned.values.isEmpty })
            #expect(sawCancelReturnedAtEnd.values == [false])
            #expect(runningAtReturn.values == [0])
            // Nothing after the cancel: no END, no later event.
            #expect(entriesAtReturn.values == [3])
            #expect(recorder.entries.map(\.sequence) == [0, 1, 2])
            let counted = counters(client)
            #expect(counted.callbacks_after_cancel == 0)
            #expect(counted.cancels_inside_callback == 0 && counted.cancel_deadlocks == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("WAITS on a concurrent stream: when cancel returns, no callback runs on any thread, and none starts later")
    func waitsConcurrentStream() {
        withClient(workers: 4) { client in
            let gate = Gate()
            let recorder = Recorder { _, entry in
                if entry.sequence == 9 { gate.wait() }
            }
            let (status, handle) = startDownload(
                client, waitsStream(concurrency: 4), recorder: recorder, totalBytes: 100_000)
            #expect(status == Status.ok)
            #expect(spinUntil { recorder.entries.contains { $0.sequence == 9 } })
            let atReturn = LockedList<(running: Int, entries: Int)>()
            let canceller = Thread {
                #expect(lsdk_cancel(handle) == Status.ok)
                atReturn.append((recorder.runningNow, recorder.entries.count))
            }
            canceller.start()
            #expect(spinUntil { counters(client).cancels == 1 })
            #expect(atReturn.values.isEmpty)
            gate.open()
            #expect(recorder.waitReleased())
            #expect(spinUntil { atReturn.values.count == 1 })
            #expect(atReturn.values.first?.running == 0)
            #expect(atReturn.values.first?.entries == recorder.entries.count)
            #expect(!recorder.entries.contains { $0.kind == .end })
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("WAITS with nothing running returns at once and calls back no more; a second cancel also returns")
    func waitsIdle() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 0
            behavior.set(cancelMode: LSDK_CANCEL_WAITS)
            behavior.late_callback_after_cancel = true  // does not apply to WAITS
            let recorder = Recorder()
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.isEmpty)
            let counted = counters(client)
            #expect(counted.cancels == 1 && counted.cancel_deadlocks == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("WAITS from inside its own callback deadlocks, is counted, and ends only when destroy begins")
    func waitsDeadlockEndsAtDestroy() {
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        var created: OpaquePointer?
        #expect(lsdk_client_create(&config, &created) == Status.ok)
        let client = ClientRef(created!)
        let destroyBegan = LockedList<Bool>()
        let cancelStatus = LockedList<(status: lsdk_status_t, afterDestroyBegan: Bool)>()
        let recorder = Recorder { recorder, entry in
            guard entry.sequence == 1 else { return }
            #expect(spinUntil { recorder.handle != 0 })
            let status = lsdk_cancel(recorder.handle)
            cancelStatus.append((status, !destroyBegan.values.isEmpty))
        }
        let (status, handle) = startDownload(client.raw, waitsStream(), recorder: recorder, totalBytes: 10_000)
        #expect(status == Status.ok)
        // Counted before it blocks.
        #expect(spinUntil { counters(client.raw).cancel_deadlocks == 1 })
        #expect(cancelStatus.values.isEmpty)
        #expect(counters(client.raw).cancels_inside_callback == 1)
        #expect(!recorder.isReleased)
        destroyBegan.append(true)
        #expect(lsdk_client_destroy(client.raw) == Status.ok)
        #expect(cancelStatus.values.map(\.status) == [Status.ok])
        #expect(cancelStatus.values.map(\.afterDestroyBegan) == [true])
        #expect(recorder.isReleased)
        #expect(recorder.entries.map(\.sequence) == [0, 1])
        #expect(lsdk_handle_release(handle) == Status.ok)
        expectContractKept(recorder)
    }
}
