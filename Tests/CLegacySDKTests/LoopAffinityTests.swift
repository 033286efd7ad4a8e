import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

@Suite("Loop thread, posted jobs and thread affinity", .onOwnThread)
struct LoopAffinityTests {
    // MARK: Configuration

    @Test("An unknown affinity is UNKNOWN_ENUM, LOOP affinity without a loop thread OUT_OF_RANGE; no client is made")
    func invalidConfiguration() {
        let before = globalCounters().bad_calls
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        #expect(config.loop_thread == false)
        #expect(config.affinity == Int32(LSDK_AFFINITY_ANY))
        var client: OpaquePointer?
        config.affinity = 3
        #expect(lsdk_client_create(&config, &client) == Status.unknownEnum)
        config.affinity = -1
        #expect(lsdk_client_create(&config, &client) == Status.unknownEnum)
        config.affinity = Int32(LSDK_AFFINITY_LOOP)
        #expect(lsdk_client_create(&config, &client) == Status.outOfRange)
        #expect(client == nil)
        #expect(globalCounters().bad_calls >= before + 3)
    }

    @Test("lsdk_client_is_loop_thread: false for NULL, for a client without a loop thread, and off the loop")
    func isLoopThreadOutside() {
        #expect(!lsdk_client_is_loop_thread(nil))
        withClient { client in #expect(!lsdk_client_is_loop_thread(client)) }
        withClient(loopThread: true) { client in #expect(!lsdk_client_is_loop_thread(client)) }
    }

    // MARK: Posted jobs

    @Test("Posted jobs run once each, on the loop thread, in FIFO order, and their boxes are released")
    func postFIFO() {
        let lifetime = JobLifetime()
        withClient(loopThread: true) { client in
            let order = LockedList<Int>()
            var jobs: [PostedJob] = []
            for index in 0..<200 {
                let job = PostedJob(client: client, lifetime: lifetime) { order.append(index) }
                #expect(job.post() == Status.ok)
                jobs.append(job)
            }
            #expect(spinUntil { order.values.count == 200 })
            #expect(order.values == Array(0..<200))
            #expect(jobs.allSatisfy { $0.runs == 1 && $0.ranOnLoop == [true] })
            #expect(counters(client).loop_jobs == 200)
        }
        #expect(lifetime.counts == (200, 200))
    }

    @Test("A job posted from the loop thread runs after the posting job returned, never inside lsdk_client_post")
    func postFromLoopIsAsynchronous() {
        withClient(loopThread: true) { client in
            let ref = ClientRef(client)
            let innerRan = LockedList<Bool>()
            let observed = LockedList<Bool>()
            let inner = PostedJob(client: client) { innerRan.append(true) }
            let outer = PostedJob(client: client) {
                #expect(inner.post(to: ref.raw) == Status.ok)
                // Still inside the outer job: the inner one must not have run yet.
                observed.append(!innerRan.values.isEmpty)
            }
            #expect(outer.post() == Status.ok)
            #expect(spinUntil { inner.runs == 1 })
            #expect(observed.values == [false])
            #expect(inner.ranOnLoop == [true])
        }
    }

    @Test("lsdk_client_post rejects NULL, a client without a loop thread and a destroyed client; the job never runs")
    func postErrors() {
        let lifetime = JobLifetime()
        let job = PostedJob(client: OpaquePointer(bitPattern: 1)!, lifetime: lifetime)
        let globalBefore = globalCounters().bad_calls
        #expect(lsdk_client_post(nil, postedJobTrampoline, nil) == Status.nullArgument)
        #expect(globalCounters().bad_calls >= globalBefore + 1)
        withClient(loopThread: true) { client in
            #expect(lsdk_client_post(client, nil, nil) == Status.nullArgument)
            #expect(counters(client).bad_calls == 1)
        }
        withClient { client in
            #expect(job.post(to: client) == Status.noLoopThread)
            let counted = counters(client)
            #expect(counted.bad_calls == 1)
            #expect(counted.loop_jobs == 0)
        }
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        config.loop_thread = true
        var destroyed: OpaquePointer?
        #expect(lsdk_client_create(&config, &destroyed) == Status.ok)
        #expect(lsdk_client_destroy(destroyed) == Status.ok)
        #expect(job.post(to: destroyed) == Status.clientDestroyed)
        #expect(counters(destroyed!).bad_calls == 1)
        #expect(job.runs == 0)
    }

    @Test("Jobs still queued when destroy begins run before it returns; a job posted while they drain is refused")
    func destroyDrainsQueuedJobs() {
        let lifetime = JobLifetime()
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        config.loop_thread = true
        var created: OpaquePointer?
        #expect(lsdk_client_create(&config, &created) == Status.ok)
        let client = ClientRef(created!)

        // The first job holds the loop until the test opens the gate; the others queue behind it.
        let gate = Gate()
        let blocker = PostedJob(client: client.raw, lifetime: lifetime) { gate.wait() }
        #expect(blocker.post() == Status.ok)
        let lateStatuses = LockedList<lsdk_status_t>()
        var queued: [PostedJob] = []
        for index in 0..<10 {
            let job = PostedJob(client: client.raw, lifetime: lifetime) {
                // The last queued job tries to post once more while destroy drains the queue.
                if index == 9 { lateStatuses.append(PostedJob(client: client.raw, lifetime: lifetime).post()) }
            }
            #expect(job.post() == Status.ok)
            queued.append(job)
        }

        let destroyReturned = DispatchSemaphore(value: 0)
        let destroyStatus = LockedList<lsdk_status_t>()
        Thread {
            destroyStatus.append(lsdk_client_destroy(client.raw))
            destroyReturned.signal()
        }.start()
        // Destroy has closed the queue once a post is refused (every operation finished: none).
        let probe = PostedJob(client: client.raw, lifetime: lifetime)
        var accepted = 0
        #expect(
            spinUntil {
                let status = probe.post()
                if status == Status.ok { accepted += 1 }
                return status == Status.clientDestroyed
            })
        #expect(queued.allSatisfy { $0.runs == 0 })  // still held behind the blocker
        gate.open()
        #expect(destroyReturned.wait(timeout: .now() + Double(testHangBoundSeconds)) == .success)
        #expect(destroyStatus.values == [Status.ok])
        // Everything accepted ran exactly once before destroy returned.
        #expect(blocker.runs == 1)
        #expect(queued.allSatisfy { $0.runs == 1 })
        #expect(probe.runs == accepted)
        #expect(lateStatuses.values == [Status.clientDestroyed])
        #expect(counters(client.raw).loop_jobs == UInt64(11 + accepted))
        queued.removeAll()
        #expect(lifetime.counts.created == lifetime.counts.released + 2)  // blocker and probe still held here
    }

    // MARK: LOOP delivery

    @Test("LOOP delivery: every callback of a request runs on the loop thread, repeats and the cancellation included")
    func loopDeliveryRequest() {
        withClient(loopThread: true) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_LOOP)
            behavior.completion_count = 3
            let ref = ClientRef(client)
            let onLoop = LockedList<Bool>()
            let recorder = Recorder { _, _ in onLoop.append(lsdk_client_is_loop_thread(ref.raw)) }
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.attempt) == [1, 2, 3])
            #expect(onLoop.values == [true, true, true])

            // An asynchronous cancellation and a late callback also come on the loop thread.
            var never = behavior
            never.completion_count = 0
            never.set(cancelMode: LSDK_CANCEL_CALLBACK_ASYNC)
            never.late_callback_after_cancel = true
            let cancelled = Recorder { _, _ in onLoop.append(lsdk_client_is_loop_thread(ref.raw)) }
            let (cancelledStatus, cancelledHandle) = startRequest(client, never, recorder: cancelled)
            #expect(cancelledStatus == Status.ok)
            #expect(lsdk_cancel(cancelledHandle) == Status.ok)
            #expect(cancelled.waitReleased())
            #expect(cancelled.entries.map(\.status) == [Status.cancelled, Status.ok])
            #expect(onLoop.values == [true, true, true, true, true])

            let counted = counters(client)
            #expect(counted.callbacks_loop == 5)
            #expect(counted.callbacks_worker + counted.callbacks_sync + counted.callbacks_fresh_thread == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(cancelledHandle) == Status.ok)
            expectContractKept(recorder)
            expectContractKept(cancelled)
        }
    }

    @Test("LOOP delivery never calls back inside start, even when start is called on the loop thread")
    func loopDeliveryNeverInsideStart() {
        withClient(loopThread: true) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_LOOP)
            let recorder = Recorder()
            let seenInsideStart = LockedList<Int>()
            let handles = LockedList<lsdk_handle_t>()
            let ref = ClientRef(client)
            let frozen = SendableBehavior(behavior)
            let job = PostedJob(client: client) {
                let (status, handle) = startRequest(ref.raw, frozen.value, recorder: recorder)
                #expect(status == Status.ok)
                seenInsideStart.append(recorder.entries.count)
                handles.append(handle)
            }
            #expect(job.post() == Status.ok)
            #expect(recorder.waitReleased())
            #expect(seenInsideStart.values == [0])
            #expect(recorder.entries.count == 1)
            #expect(counters(client).callbacks_sync == 0)
            for handle in handles.values { #expect(lsdk_handle_release(handle) == Status.ok) }
        }
    }

    @Test(
        "A LOOP stream goes back to the loop's queue after every event: a job posted from event k runs before event k+1"
    )
    func loopStreamInterleavesJobs() {
        withClient(loopThread: true) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_LOOP)
            behavior.chunk_size = 10
            behavior.progress_every = 0
            let ref = ClientRef(client)
            let log = LockedList<String>()
            let recorder = Recorder { _, entry in
                log.append("event \(entry.sequence)")
                if entry.sequence == 3 {
                    let job = PostedJob(client: ref.raw) { log.append("job") }
                    #expect(job.post() == Status.ok)
                }
            }
            let (status, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 100)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let lines = log.values
            let jobIndex = lines.firstIndex(of: "job")
            #expect(jobIndex != nil)
            #expect(jobIndex.map { lines[$0 - 1] } == "event 3")
            #expect(jobIndex.map { lines[$0 + 1] } == "event 4")
            #expect(recorder.entries.count == 11)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("A paused live LOOP stream drops one event per turn of the loop, so posted jobs still run between drops")
    func loopLiveStreamYieldsWhileDropping() {
        withClient(loopThread: true) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_LOOP)
            behavior.pause_mode = Int32(LSDK_PAUSE_DROPS)
            behavior.chunk_size = 1
            behavior.progress_every = 0
            let ref = ClientRef(client)
            let droppedWhenSecondJobRan = LockedList<UInt64>()
            let recorder = Recorder { recorder, entry in
                guard entry.sequence == 0 else { return }
                // Queue now: [first job]; the producer goes behind it when this callback returns.
                #expect(lsdk_pause(recorder.handle) == Status.ok)
                let first = PostedJob(client: ref.raw) {
                    // Queue now: [producer]; the second job goes behind it.
                    let second = PostedJob(client: ref.raw) {
                        droppedWhenSecondJobRan.append(counters(ref.raw).stream_events_dropped_paused)
                        #expect(lsdk_resume(recorder.handle) == Status.ok)
                    }
                    #expect(second.post() == Status.ok)
                }
                #expect(first.post() == Status.ok)
            }
            // The handle must be known inside the first callback: start from a job, publish, then go.
            let gate = Gate()
            let handles = LockedList<lsdk_handle_t>()
            let frozen = SendableBehavior(behavior)
            let starter = PostedJob(client: client) {
                let (status, handle) = startDownload(ref.raw, frozen.value, recorder: recorder, totalBytes: 1000)
                #expect(status == Status.ok)
                handles.append(handle)
                gate.open()
            }
            #expect(starter.post() == Status.ok)
            #expect(gate.wait())
            #expect(recorder.waitReleased())
            // Exactly one drop happened between the two jobs: the producer gave the loop back.
            #expect(droppedWhenSecondJobRan.values == [1])
            for handle in handles.values { #expect(lsdk_handle_release(handle) == Status.ok) }
            expectContractKept(recorder)
        }
    }

    @Test("A LOOP stream with stream_concurrency 4 arrives shuffled within its batches, but one event at a time")
    func loopConcurrentStreamIsSerial() {
        withClient(loopThread: true) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_LOOP)
            behavior.stream_concurrency = 4
            behavior.chunk_size = 16
            behavior.progress_every = 0
            behavior.seed = 77
            let ref = ClientRef(client)
            let onLoop = LockedList<Bool>()
            let recorder = Recorder { _, _ in onLoop.append(lsdk_client_is_loop_thread(ref.raw)) }
            let (status, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 16 * 64)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let sequences = recorder.entries.map(\.sequence)
            #expect(sequences.count == 65)
            #expect(sequences.sorted() == Array(0..<65))
            #expect(sequences != Array(0..<65))  // shuffled (seed 77)
            #expect(recorder.maxConcurrent == 1)
            #expect(onLoop.values.allSatisfy { $0 })
            #expect(counters(client).callbacks_loop == 65)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    // MARK: Affinity

    @Test(
        "CREATOR affinity: every covered call from another thread is counted and still performed; the creator's are not"
    )
    func creatorAffinity() {
        withClient(affinity: LSDK_AFFINITY_CREATOR) { client in
            let ref = ClientRef(client)
            // From the creator (this thread): no violation.
            var stream = lsdk_behavior_t.defaults()
            stream.stream_end = Int32(LSDK_STREAM_END_NONE)
            stream.set(cancelMode: LSDK_CANCEL_SILENT)
            let mine = Recorder()
            let (status, handle) = startDownload(client, stream, recorder: mine, totalBytes: 0)
            #expect(status == Status.ok)
            #expect(lsdk_pause(handle) == Status.ok)
            #expect(lsdk_resume(handle) == Status.ok)
            #expect(lsdk_client_set_session_token(client, "mine") == Status.ok)
            var buffer = [CChar](repeating: 0, count: 16)
            #expect(lsdk_client_get_session_token(client, &buffer, 16) == Status.ok)
            #expect(counters(client).affinity_violations == 0)

            // From another thread: each covered call counts one, and each still works.
            let foreign = Recorder()
            let frozen = SendableBehavior(stream)
            let results = onOtherThread { () -> [lsdk_status_t] in
                var statuses: [lsdk_status_t] = []
                let started = startDownload(ref.raw, frozen.value, recorder: foreign, totalBytes: 0)
                statuses.append(started.status)  // 1
                statuses.append(lsdk_pause(started.handle))  // 2
                statuses.append(lsdk_resume(started.handle))  // 3
                statuses.append(lsdk_client_set_session_token(ref.raw, "theirs"))  // 4
                var buffer = [CChar](repeating: 0, count: 16)
                statuses.append(lsdk_client_get_session_token(ref.raw, &buffer, 16))  // 5
                statuses.append(lsdk_cancel(started.handle))  // 6
                statuses.append(lsdk_cancel(handle))  // 7
                // Not covered: release, counters, is_loop_thread.
                statuses.append(lsdk_handle_release(started.handle))
                var out = lsdk_counters_t()
                statuses.append(lsdk_client_counters(ref.raw, &out))
                _ = lsdk_client_is_loop_thread(ref.raw)
                return statuses
            }
            #expect(results == Array(repeating: Status.ok, count: 9))
            #expect(foreign.waitReleased())
            #expect(mine.waitReleased())
            let counted = counters(client)
            #expect(counted.affinity_violations == 7)
            #expect(counted.stream_pauses == 2 && counted.stream_resumes == 2 && counted.cancels == 2)
            var token = [CChar](repeating: 0, count: 16)
            #expect(lsdk_client_get_session_token(client, &token, 16) == Status.ok)
            #expect(cString(token) == "theirs")
            #expect(counters(client).affinity_violations == 7)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(globalCounters().affinity_violations >= 7)
        }
    }

    @Test("CREATOR affinity: a cancel from inside a worker callback is a violation (the worker is not the creator)")
    func creatorAffinityInsideCallback() {
        withClient(affinity: LSDK_AFFINITY_CREATOR) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 2
            let recorder = Recorder { recorder, entry in
                guard entry.attempt == 1 else { return }
                #expect(spinUntil { recorder.handle != 0 })
                #expect(lsdk_cancel(recorder.handle) == Status.ok)
            }
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(counters(client).affinity_violations == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test(
        "LOOP affinity: calls from posted jobs and LOOP callbacks are fine; the same calls from the test thread are counted"
    )
    func loopAffinity() {
        withClient(loopThread: true, affinity: LSDK_AFFINITY_LOOP) { client in
            let ref = ClientRef(client)
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_LOOP)
            behavior.completion_count = 3
            behavior.set(cancelMode: LSDK_CANCEL_CALLBACK_SYNC)
            let handles = LockedList<lsdk_handle_t>()
            // Started in a job, cancelled from inside its first callback (both on the loop).
            let recorder = Recorder { recorder, entry in
                guard entry.attempt == 1 else { return }
                #expect(lsdk_cancel(recorder.handle) == Status.ok)
            }
            let frozen = SendableBehavior(behavior)
            let job = PostedJob(client: client) {
                let (status, handle) = startRequest(ref.raw, frozen.value, recorder: recorder)
                #expect(status == Status.ok)
                handles.append(handle)
                #expect(lsdk_client_set_session_token(ref.raw, "loop") == Status.ok)
            }
            #expect(job.post() == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.status) == [Status.ok, Status.cancelled])
            #expect(counters(client).affinity_violations == 0)

            // The test thread is not the loop thread.
            let foreign = Recorder()
            let (status, handle) = startRequest(client, behavior, recorder: foreign)
            #expect(status == Status.ok)
            #expect(lsdk_cancel(handle) == Status.ok)
            var buffer = [CChar](repeating: 0, count: 8)
            #expect(lsdk_client_get_session_token(client, &buffer, 8) == Status.ok)
            #expect(foreign.waitReleased())
            #expect(counters(client).affinity_violations == 3)
            for handle in handles.values + [handle] { #expect(lsdk_handle_release(handle) == Status.ok) }
        }
    }
}
