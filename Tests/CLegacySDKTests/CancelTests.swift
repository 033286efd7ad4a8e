import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

@Suite("Cancel modes and late callbacks", .onOwnThread)
struct CancelTests {
    private func neverCompleting(_ mode: Int, late: Bool = false) -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.completion_count = 0
        behavior.set(cancelMode: mode)
        behavior.late_callback_after_cancel = late
        return behavior
    }

    @Test("CALLBACK_SYNC delivers the cancellation inside lsdk_cancel, on the cancelling thread")
    func callbackSync() {
        withClient { client in
            let recorder = Recorder()
            let (status, handle) = startRequest(client, neverCompleting(LSDK_CANCEL_CALLBACK_SYNC), recorder: recorder)
            #expect(status == Status.ok)
            let caller = pthread_self()
            #expect(lsdk_cancel(handle) == Status.ok)
            // Already there when cancel returned.
            let entries = recorder.entries
            #expect(entries.count == 1)
            #expect(entries.first?.status == Status.cancelled)
            #expect(entries.first.map { isSameThread($0.thread, caller) } == true)
            #expect(recorder.waitReleased())
            let counted = counters(client)
            #expect(counted.callbacks_reentrant_cancel == 1)
            #expect(counted.cancels == 1)
            #expect(counted.callbacks_after_cancel == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("CALLBACK_SYNC from inside a callback of the same request re-enters: the cancellation is nested in it")
    func reentrantCancelRequest() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 3
            behavior.set(cancelMode: LSDK_CANCEL_CALLBACK_SYNC)
            let cancelReturned = LockedList<lsdk_status_t>()
            let recorder = Recorder { recorder, entry in
                guard entry.attempt == 1 else { return }
                // The handle is published once start returned.
                #expect(spinUntil { recorder.handle != 0 })
                cancelReturned.append(lsdk_cancel(recorder.handle))
            }
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.status) == [Status.ok, Status.cancelled])
            #expect(entries.map(\.attempt) == [1, 2])
            #expect(entries.map(\.depth) == [1, 2])
            #expect(entries.count == 2 && isSameThread(entries[0].thread, entries[1].thread))
            #expect(cancelReturned.values == [Status.ok])
            let counted = counters(client)
            #expect(counted.callbacks_reentrant_cancel == 1)
            #expect(counted.callbacks_worker == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("CALLBACK_SYNC from inside a stream event re-enters with the END, and no event follows")
    func reentrantCancelStream() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.chunk_size = 10
            behavior.progress_every = 0
            behavior.set(cancelMode: LSDK_CANCEL_CALLBACK_SYNC)
            let recorder = Recorder { recorder, entry in
                guard entry.kind == .data && entry.sequence == 3 else { return }
                #expect(spinUntil { recorder.handle != 0 })
                #expect(lsdk_cancel(recorder.handle) == Status.ok)
            }
            let (status, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 100_000)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.count == 5)
            #expect(entries.map(\.sequence) == [0, 1, 2, 3, 4])
            #expect(entries.last?.kind == .end)
            #expect(entries.last?.status == Status.cancelled)
            #expect(entries.last?.depth == 2)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("CALLBACK_ASYNC delivers the cancellation later, from a worker, after lsdk_cancel returned")
    func callbackAsync() {
        withClient(workers: 1) { client in
            // Occupy the only worker until the test says so.
            let gate = Gate()
            let blocker = Recorder { _, _ in gate.wait() }
            let (_, blockerHandle) = startRequest(client, .defaults(), recorder: blocker)
            #expect(blocker.waitEntries(1))

            let recorder = Recorder()
            let (_, handle) = startRequest(client, neverCompleting(LSDK_CANCEL_CALLBACK_ASYNC), recorder: recorder)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.entries.isEmpty)  // the worker is still busy
            #expect(!recorder.isReleased)
            gate.open()
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.status) == [Status.cancelled])
            #expect(entries.first.map { !isSameThread($0.thread, pthread_self()) } == true)
            #expect(isSameThread(entries[0].thread, blocker.entries[0].thread))
            #expect(counters(client).callbacks_reentrant_cancel == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(blockerHandle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("SILENT stops the operation and delivers nothing; the context is still released")
    func silent() {
        withClient { client in
            let recorder = Recorder()
            let (_, handle) = startRequest(client, neverCompleting(LSDK_CANCEL_SILENT), recorder: recorder)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.isEmpty)
            #expect(counters(client).cancels == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("IGNORED lets the operation complete normally; its callbacks count as after-cancel")
    func ignored() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 2
            behavior.set(cancelMode: LSDK_CANCEL_IGNORED)
            let gate = Gate()
            let recorder = Recorder { _, entry in if entry.attempt == 1 { gate.wait() } }
            let (_, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(recorder.waitEntries(1))
            #expect(lsdk_cancel(handle) == Status.ok)
            gate.open()
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.status) == [Status.ok, Status.ok])
            let counted = counters(client)
            #expect(counted.cancels == 1)
            #expect(counted.callbacks_after_cancel == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("Cancel is idempotent and harmless after the operation finished")
    func idempotentAndHarmless() {
        withClient { client in
            let recorder = Recorder()
            let (_, handle) = startRequest(client, neverCompleting(LSDK_CANCEL_CALLBACK_SYNC), recorder: recorder)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.count == 1)
            #expect(counters(client).cancels == 1)

            let finished = Recorder()
            let (_, finishedHandle) = startRequest(client, .defaults(), recorder: finished)
            #expect(finished.waitReleased())
            #expect(lsdk_cancel(finishedHandle) == Status.ok)
            #expect(finished.entries.map(\.status) == [Status.ok])
            #expect(counters(client).cancels == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(finishedHandle) == Status.ok)
            expectContractKept(recorder)
            expectContractKept(finished)
        }
    }

    @Test(
        "A late callback arrives after the cancellation, from a worker, and before the release",
        arguments: [
            LSDK_CANCEL_CALLBACK_SYNC, LSDK_CANCEL_CALLBACK_ASYNC, LSDK_CANCEL_SILENT,
        ])
    func lateCallbackRequest(mode: Int) {
        withClient { client in
            let recorder = Recorder()
            let (_, handle) = startRequest(client, neverCompleting(mode, late: true), recorder: recorder)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            if mode == LSDK_CANCEL_SILENT {
                #expect(entries.map(\.status) == [Status.ok])
                #expect(entries.map(\.attempt) == [1])
            } else {
                #expect(entries.map(\.status) == [Status.cancelled, Status.ok])
                #expect(entries.map(\.attempt) == [1, 2])
            }
            #expect(entries.last.map { !isSameThread($0.thread, pthread_self()) } == true)
            let counted = counters(client)
            #expect(counted.callbacks_after_cancel == 1)
            #expect(counted.callbacks_worker >= 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("A silent stream ends with the cancellation END, then a late data event")
    func lateCallbackStream() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.stream_end = Int32(LSDK_STREAM_END_NONE)
            behavior.late_callback_after_cancel = true
            behavior.progress_every = 0
            behavior.chunk_size = 100
            let recorder = Recorder()
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 300)
            #expect(recorder.waitEntries(3))
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.kind) == [.data, .data, .data, .end, .data])
            #expect(entries.map(\.sequence) == [0, 1, 2, 3, 4])
            #expect(entries[3].status == Status.cancelled)
            #expect(entries.allSatisfy { $0.bytesValid })
            let counted = counters(client)
            #expect(counted.callbacks_after_cancel == 1)
            #expect(counted.stream_events_after_terminal == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("Cancel from several threads at once takes effect once")
    func concurrentCancel() {
        withClient { client in
            let recorder = Recorder()
            let (_, handle) = startRequest(client, neverCompleting(LSDK_CANCEL_CALLBACK_ASYNC), recorder: recorder)
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                #expect(lsdk_cancel(handle) == Status.ok)
            }
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.status) == [Status.cancelled])
            #expect(counters(client).cancels == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }
}
