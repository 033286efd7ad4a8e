import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

@Suite("Pull-style streams: the callback answers CONTINUE or PAUSE", .onOwnThread)
struct PullStreamTests {
    private static let pause = Int32(LSDK_PULL_PAUSE)
    private static let proceed = Int32(LSDK_PULL_CONTINUE)

    private func stream(_ delivery: Int = LSDK_DELIVERY_SYNC, concurrency: UInt32 = 1) -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.set(delivery: delivery)
        behavior.chunk_size = 10
        behavior.progress_every = 0
        behavior.stream_concurrency = concurrency
        behavior.seed = 31
        return behavior
    }

    /// Refuses each listed sequence number the first time it arrives.
    private final class RefuseOnce: @unchecked Sendable {
        private let lock = NSLock()
        private var left: Set<UInt64>
        init(_ sequences: Set<UInt64>) { left = sequences }
        func answer(_ entry: Entry) -> Int32 {
            lock.withLock { left.remove(entry.sequence) != nil } ? PullStreamTests.pause : PullStreamTests.proceed
        }
    }

    @Test("PAUSE refuses the event: the stream stops right there, and the same event comes first after resume")
    func refusedEventComesAgain() {
        withClient { client in
            let refuse = RefuseOnce([3])
            let recorder = Recorder(answer: { _, entry in refuse.answer(entry) })
            // Synchronous delivery: everything up to the refusal happens inside start.
            let (status, handle) = startPullDownload(client, stream(), recorder: recorder, totalBytes: 100)
            #expect(status == Status.ok)
            #expect(recorder.entries.map(\.sequence) == [0, 1, 2, 3])
            var counted = counters(client)
            #expect(counted.stream_pauses_by_callback == 1)
            #expect(counted.stream_pauses == 0)
            #expect(!recorder.isReleased)

            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.sequence) == [0, 1, 2, 3] + Array(3...10))
            // The same event: same offset, same bytes.
            #expect(entries[3].bytesDone == entries[4].bytesDone && entries[3].length == entries[4].length)
            #expect(entries.allSatisfy { $0.bytesValid })
            #expect(entries.last?.kind == .end && entries.last?.status == Status.ok)
            counted = counters(client)
            #expect(counted.stream_events == 12)
            #expect(counted.stream_resumes == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("Refusals on a worker-delivered stream: every refused event is redelivered after each resume, in order")
    func refusalsOnWorkers() {
        withClient { client in
            let refuse = RefuseOnce([0, 5, 9])
            let ref = ClientRef(client)
            let resumes = LockedList<lsdk_status_t>()
            let recorder = Recorder(answer: { recorder, entry in
                let answer = refuse.answer(entry)
                if answer == PullStreamTests.pause {
                    // Resume from another thread once the stream stopped (the handle is known by then).
                    let pausesBefore = counters(ref.raw).stream_pauses_by_callback
                    Thread {
                        _ = spinUntil {
                            recorder.handle != 0 && counters(ref.raw).stream_pauses_by_callback > pausesBefore
                        }
                        resumes.append(lsdk_resume(recorder.handle))
                    }.start()
                }
                return answer
            })
            let (status, handle) = startPullDownload(
                client, stream(LSDK_DELIVERY_WORKER), recorder: recorder, totalBytes: 100)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let sequences = recorder.entries.map(\.sequence)
            #expect(sequences == [0, 0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10])
            #expect(counters(client).stream_pauses_by_callback == 3)
            #expect(spinUntil { resumes.values.count == 3 })
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("The END's answer is ignored; any other value is CONTINUE and a bad call")
    func endAndBadAnswers() {
        withClient { client in
            let recorder = Recorder(answer: { _, entry in entry.kind == .end ? PullStreamTests.pause : 7 })
            let (status, handle) = startPullDownload(
                client, stream(LSDK_DELIVERY_WORKER), recorder: recorder, totalBytes: 30)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.sequence) == [0, 1, 2, 3])
            let counted = counters(client)
            #expect(counted.stream_pauses_by_callback == 0)
            #expect(counted.bad_calls == 3)  // the three data events answered 7
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("lsdk_pause and lsdk_resume keep working on a pull stream")
    func pauseResumeStillWork() {
        withClient { client in
            let recorder = Recorder(hook: { recorder, entry in
                guard entry.sequence == 2 else { return }
                #expect(spinUntil { recorder.handle != 0 })
                #expect(lsdk_pause(recorder.handle) == Status.ok)
            })
            // Worker delivery: event 2 waits until start returned and published the handle.
            let (status, handle) = startPullDownload(
                client, stream(LSDK_DELIVERY_WORKER), recorder: recorder, totalBytes: 100)
            #expect(status == Status.ok)
            #expect(spinUntil { counters(client).stream_pauses == 1 })
            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.sequence) == Array(0...10))
            #expect(counters(client).stream_pauses_by_callback == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("With stream_concurrency 4, every refused event of a batch comes again in the first batch after resume")
    func refusalsInABatch() {
        withClient { client in
            let refuse = RefuseOnce([5, 6])
            let recorder = Recorder(answer: { _, entry in refuse.answer(entry) })
            let (status, handle) = startPullDownload(
                client, stream(concurrency: 4), recorder: recorder, totalBytes: 160)
            #expect(status == Status.ok)
            let beforeResume = recorder.entries.map(\.sequence)
            // The batch [4...7] was delivered whole (inline); nothing after it.
            #expect(beforeResume.sorted() == Array(0...7))
            #expect(counters(client).stream_pauses_by_callback == 2)
            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitReleased())
            let after = Array(recorder.entries.map(\.sequence).dropFirst(beforeResume.count))
            #expect(Set(after.prefix(4)).isSuperset(of: [5, 6]))
            #expect(after.sorted() == [5, 6] + Array(8...16))
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("A silent stream (END NONE) that refused its last data event while going idle delivers it after resume")
    func refusalOnSilentStream() {
        withClient { client in
            var behavior = stream(concurrency: 2)
            behavior.stream_end = Int32(LSDK_STREAM_END_NONE)
            behavior.set(cancelMode: LSDK_CANCEL_SILENT)
            let refuse = RefuseOnce([2])
            let recorder = Recorder(answer: { _, entry in refuse.answer(entry) })
            // Three chunks in batches [0, 1] and [2 + idle]: the producer goes idle in the batch of the refusal.
            let (status, handle) = startPullDownload(client, behavior, recorder: recorder, totalBytes: 30)
            #expect(status == Status.ok)
            #expect(recorder.entries.map(\.sequence).sorted() == [0, 1, 2])
            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitEntries(4))
            #expect(recorder.entries.last?.sequence == 2)
            #expect(!recorder.isReleased)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("A cancel discards a refused event; destroy ends a stream that waits with one")
    func cancelAndDestroyWithRefusedEvent() {
        let destroyed = Recorder(answer: { _, entry in
            entry.sequence == 1 ? PullStreamTests.pause : PullStreamTests.proceed
        })
        var destroyedHandle: lsdk_handle_t = 0
        withClient { client in
            var behavior = stream()
            behavior.set(cancelMode: LSDK_CANCEL_SILENT)
            let cancelled = Recorder(answer: { _, entry in
                entry.sequence == 1 ? PullStreamTests.pause : PullStreamTests.proceed
            })
            let (status, handle) = startPullDownload(client, behavior, recorder: cancelled, totalBytes: 100)
            #expect(status == Status.ok)
            #expect(cancelled.entries.count == 2)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(cancelled.waitReleased())
            #expect(cancelled.entries.count == 2)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(cancelled)

            let (destroyedStatus, handle2) = startPullDownload(client, stream(), recorder: destroyed, totalBytes: 100)
            #expect(destroyedStatus == Status.ok)
            destroyedHandle = handle2
        }
        // Destroy cancelled it (CALLBACK_ASYNC: a cancellation END), and released the context.
        #expect(destroyed.isReleased)
        #expect(destroyed.entries.map(\.sequence) == [0, 1, 2])
        #expect(destroyed.entries.last?.status == Status.cancelled)
        #expect(lsdk_handle_release(destroyedHandle) == Status.ok)
        expectContractKept(destroyed)
    }

    @Test("A NULL pull callback is NULL_ARGUMENT, with no callback and the context still the caller's")
    func nullPullCallback() {
        withClient { client in
            var request = lsdk_download_request_t(path: nil, total_bytes: 10)
            var handle: lsdk_handle_t = 0
            #expect(lsdk_download_start_pull(client, &request, nil, nil, nil, nil, &handle) == Status.nullArgument)
            #expect(handle == 0)
            let counted = counters(client)
            #expect(counted.bad_calls == 1 && counted.contexts_created == 0)
        }
    }
}
