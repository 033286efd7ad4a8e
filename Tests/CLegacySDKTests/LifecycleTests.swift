import CLegacySDK
import Dispatch
import Foundation
import TestSupport
import Testing

@Suite("Lifecycle: contexts, handles and client destroy", .onOwnThread)
struct LifecycleTests {
    private static let deliveries = [
        LSDK_DELIVERY_SYNC, LSDK_DELIVERY_WORKER, LSDK_DELIVERY_FRESH_THREAD, LSDK_DELIVERY_MIXED,
    ]
    private static let cancelModes = [
        LSDK_CANCEL_CALLBACK_SYNC, LSDK_CANCEL_CALLBACK_ASYNC, LSDK_CANCEL_SILENT, LSDK_CANCEL_IGNORED,
    ]

    @Test(
        "The context is released exactly once, after the last callback, in every delivery and cancel mode",
        arguments: deliveries)
    func contextContractMatrix(delivery: Int) {
        withClient(seed: UInt64(delivery)) { client in
            var recorders: [(Recorder, lsdk_handle_t)] = []
            for mode in Self.cancelModes {
                for late in [false, true] {
                    for count in [UInt32(1), 3] {
                        var behavior = lsdk_behavior_t.defaults()
                        behavior.set(delivery: delivery)
                        behavior.set(cancelMode: mode)
                        behavior.late_callback_after_cancel = late
                        behavior.completion_count = count
                        behavior.jitter_us = 300
                        let request = Recorder()
                        let (status, handle) = startRequest(client, behavior, recorder: request)
                        #expect(status == Status.ok)
                        _ = lsdk_cancel(handle)
                        recorders.append((request, handle))

                        behavior.stream_concurrency = count
                        behavior.interval_us = 50
                        behavior.chunk_size = 512
                        let download = Recorder()
                        let (streamStatus, streamHandle) = startDownload(
                            client, behavior, recorder: download, totalBytes: 4096)
                        #expect(streamStatus == Status.ok)
                        if count == 3 { _ = lsdk_cancel(streamHandle) }
                        recorders.append((download, streamHandle))
                    }
                }
            }
            for (recorder, handle) in recorders {
                #expect(recorder.waitReleased())
                expectContractKept(recorder)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
            let counted = counters(client)
            #expect(counted.contexts_created == UInt64(recorders.count))
            #expect(counted.contexts_released == counted.contexts_created)
            #expect(counted.operations_finished == counted.operations_started)
            #expect(counted.handles_outstanding == 0)
        }
    }

    @Test("A burst of chaos operations, cancelled at random, keeps the context contract")
    func chaosBurst() {
        withClient(seed: 2024) { client in
            var recorders: [(Recorder, lsdk_handle_t)] = []
            var rng = SystemRandomNumberGenerator()
            for index in 0..<400 {
                let behavior = lsdk_behavior_t.chaos(UInt64(index) &* 7919)
                let recorder = Recorder()
                let result =
                    index.isMultiple(of: 2)
                    ? startRequest(client, behavior, recorder: recorder, responseSize: 64)
                    : startDownload(client, behavior, recorder: recorder, totalBytes: 16_384)
                #expect(result.status == Status.ok)
                if Bool.random(using: &rng) { _ = lsdk_cancel(result.handle) }
                recorders.append((recorder, result.handle))
            }
            // Everything that is still running is cancelled (chaos never pairs "never ends" with IGNORED).
            for (_, handle) in recorders { _ = lsdk_cancel(handle) }
            for (recorder, handle) in recorders {
                #expect(recorder.waitReleased())
                expectContractKept(recorder)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
            let counted = counters(client)
            #expect(counted.contexts_released == 400)
            #expect(counted.handles_outstanding == 0)
        }
    }

    @Test(
        "Destroy with operations in flight cancels them, skips delays, makes every prescribed callback and releases every context"
    )
    func destroyInFlight() throws {
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        var maybeClient: OpaquePointer?
        #expect(lsdk_client_create(&config, &maybeClient) == Status.ok)
        let client = try #require(maybeClient)

        var delayed = lsdk_behavior_t.defaults()  // a 10 s completion, with a 10 s late callback
        delayed.delay_us = LSDK_MAX_DELAY_US
        delayed.late_callback_after_cancel = true
        var ignored = lsdk_behavior_t.defaults()  // never completes, ignores cancel
        ignored.completion_count = 0
        ignored.set(cancelMode: LSDK_CANCEL_IGNORED)
        var silentStream = lsdk_behavior_t.defaults()  // silent stream, synchronous cancellation
        silentStream.stream_end = Int32(LSDK_STREAM_END_NONE)
        silentStream.chunk_size = 4
        silentStream.progress_every = 0
        silentStream.set(cancelMode: LSDK_CANCEL_CALLBACK_SYNC)
        var paused = lsdk_behavior_t.defaults()
        paused.chunk_size = 1
        var fresh = lsdk_behavior_t.defaults()
        fresh.set(delivery: LSDK_DELIVERY_FRESH_THREAD)
        fresh.completion_count = 3
        fresh.delay_us = 5_000_000
        var silentCancel = lsdk_behavior_t.defaults()
        silentCancel.completion_count = 0
        silentCancel.set(cancelMode: LSDK_CANCEL_SILENT)

        let delayedRecorder = Recorder()
        let ignoredRecorder = Recorder()
        let streamRecorder = Recorder()
        let pausedRecorder = Recorder()
        let freshRecorder = Recorder()
        let silentRecorder = Recorder()
        let handles = [
            startRequest(client, delayed, recorder: delayedRecorder).handle,
            startRequest(client, ignored, recorder: ignoredRecorder).handle,
            startDownload(client, silentStream, recorder: streamRecorder, totalBytes: 100).handle,
            startDownload(client, paused, recorder: pausedRecorder, totalBytes: 1_000_000).handle,
            startRequest(client, fresh, recorder: freshRecorder).handle,
            startRequest(client, silentCancel, recorder: silentRecorder, keepHandle: false).handle,
        ]
        #expect(lsdk_pause(handles[3]) == Status.ok)
        #expect(lsdk_cancel(handles[1]) == Status.ok)  // ignored
        #expect(streamRecorder.waitEntries(25))  // all data of the silent stream

        let started = DispatchTime.now()
        #expect(lsdk_client_destroy(client) == Status.ok)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        #expect(seconds < 9, "destroy must skip the 10 s delays")

        // Everything was released before destroy returned.
        for recorder in [
            delayedRecorder, ignoredRecorder, streamRecorder, pausedRecorder, freshRecorder, silentRecorder,
        ] {
            expectContractKept(recorder)
        }
        #expect(delayedRecorder.entries.map(\.status) == [Status.cancelled, Status.ok])  // + late
        #expect(ignoredRecorder.entries.map(\.status) == [Status.cancelled])  // IGNORED → ASYNC
        #expect(streamRecorder.entries.last?.kind == .end)
        #expect(streamRecorder.entries.last?.status == Status.cancelled)
        #expect(streamRecorder.entries.last.map { isSameThread($0.thread, pthread_self()) } == true)
        #expect(pausedRecorder.entries.filter { $0.kind == .end }.map(\.status) == [Status.cancelled])
        #expect(freshRecorder.entries.map(\.status) == [Status.cancelled])
        #expect(silentRecorder.entries.isEmpty)

        // The pointer stays safe: every call reports the destroyed client; counters stay readable.
        let afterwards = Recorder()
        #expect(startRequest(client, .defaults(), recorder: afterwards).status == Status.clientDestroyed)
        #expect(
            startDownload(client, .defaults(), recorder: afterwards, totalBytes: 1).status == Status.clientDestroyed)
        #expect(afterwards.entries.isEmpty)
        #expect(lsdk_client_destroy(client) == Status.clientDestroyed)
        #expect(lsdk_client_set_session_token(client, "x") == Status.clientDestroyed)
        var buffer = [CChar](repeating: 0, count: 8)
        #expect(lsdk_client_get_session_token(client, &buffer, buffer.count) == Status.clientDestroyed)
        let counted = counters(client)
        #expect(counted.contexts_created == 6)
        #expect(counted.contexts_released == 6)
        #expect(counted.bad_calls == 5)
        // Handles outlive the client: harmless to use, and still released exactly once.
        for handle in handles.prefix(5) {
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(handle) == Status.invalidHandle)
        }
        #expect(counters(client).handles_outstanding == 0)
    }

    @Test("Destroy from one of the client's own threads returns WRONG_THREAD and does nothing")
    func destroyFromOwnThread() {
        withClient { client in
            let address = UInt(bitPattern: client)
            let statuses = LockedList<lsdk_status_t>()
            let destroyFromCallback: Recorder.Hook = { _, _ in
                statuses.append(lsdk_client_destroy(OpaquePointer(bitPattern: address)))
            }
            var worker = lsdk_behavior_t.defaults()
            worker.set(delivery: LSDK_DELIVERY_WORKER)
            var fresh = lsdk_behavior_t.defaults()
            fresh.set(delivery: LSDK_DELIVERY_FRESH_THREAD)
            var sync = lsdk_behavior_t.defaults()
            sync.set(delivery: LSDK_DELIVERY_SYNC)
            var cancelSync = lsdk_behavior_t.defaults()
            cancelSync.completion_count = 0
            cancelSync.set(cancelMode: LSDK_CANCEL_CALLBACK_SYNC)
            var handles: [lsdk_handle_t] = []
            for behavior in [worker, fresh, sync, cancelSync] {
                let recorder = Recorder(hook: destroyFromCallback)
                let (status, handle) = startRequest(client, behavior, recorder: recorder)
                #expect(status == Status.ok)
                if behavior.completion_count == 0 { #expect(lsdk_cancel(handle) == Status.ok) }
                #expect(recorder.waitReleased())
                handles.append(handle)
            }
            #expect(statuses.values == Array(repeating: Status.wrongThread, count: 4))
            // Still alive.
            let recorder = Recorder()
            let (status, handle) = startRequest(client, .defaults(), recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            for handle in handles + [handle] { #expect(lsdk_handle_release(handle) == Status.ok) }
            #expect(counters(client).bad_calls == 4)
        }
    }

    @Test("A released handle is rejected deterministically, even when its slot is reused")
    func handleRelease() {
        withClient { client in
            let first = Recorder()
            let (_, handle) = startRequest(client, .defaults(), recorder: first)
            #expect(first.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(handle) == Status.invalidHandle)
            #expect(lsdk_cancel(handle) == Status.invalidHandle)
            #expect(lsdk_pause(handle) == Status.invalidHandle)
            #expect(lsdk_resume(handle) == Status.invalidHandle)
            #expect(lsdk_cancel(0) == Status.invalidHandle)
            #expect(lsdk_handle_release(0) == Status.invalidHandle)
            #expect(lsdk_cancel(0xFFFF_FFFF_0000_0001) == Status.invalidHandle)

            // New operations may reuse the slot; the stale handle stays invalid.
            var live: [lsdk_handle_t] = []
            for _ in 0..<4 {
                let recorder = Recorder()
                var behavior = lsdk_behavior_t.defaults()
                behavior.completion_count = 0
                behavior.set(cancelMode: LSDK_CANCEL_SILENT)
                live.append(startRequest(client, behavior, recorder: recorder).handle)
            }
            #expect(!live.contains(handle))
            #expect(lsdk_cancel(handle) == Status.invalidHandle)
            for h in live {
                #expect(lsdk_cancel(h) == Status.ok)
                #expect(lsdk_handle_release(h) == Status.ok)
            }
            let counted = counters(client)
            #expect(counted.handles_created == 5)
            #expect(counted.handles_released == 5)
            #expect(counted.handles_outstanding == 0)
            #expect(globalCounters().bad_calls >= 7)
        }
    }

    @Test("Without an out_handle the SDK drops its handle itself and the operation still runs")
    func noOutHandle() {
        withClient { client in
            let recorder = Recorder()
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 2
            let (status, handle) = startRequest(client, behavior, recorder: recorder, keepHandle: false)
            #expect(status == Status.ok)
            #expect(handle == 0)
            #expect(counters(client).handles_outstanding == 0)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.count == 2)
            expectContractKept(recorder)
        }
    }

    @Test("Process-wide counters include every client's")
    func globalCountersCoverClients() {
        let before = globalCounters()
        let clientCounters = withClient { client in
            let recorder = Recorder()
            let (_, handle) = startRequest(client, .defaults(), recorder: recorder)
            #expect(recorder.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
            return counters(client)
        }
        let after = globalCounters()
        #expect(clientCounters.operations_started == 1)
        #expect(after.operations_started >= before.operations_started + 1)
        #expect(after.contexts_released >= before.contexts_released + 1)
    }
}
