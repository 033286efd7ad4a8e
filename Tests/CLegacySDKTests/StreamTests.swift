import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

@Suite("Streams: events, ends, flow control and concurrency", .onOwnThread)
struct StreamTests {
    private func stream(chunk: UInt32, progressEvery: UInt32 = 0) -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.chunk_size = chunk
        behavior.progress_every = progressEvery
        return behavior
    }

    @Test("A download delivers numbered data and progress events with the content, then one END")
    func wellBehavedStream() {
        withClient { client in
            let recorder = Recorder()
            let (status, handle) = startDownload(
                client, stream(chunk: 1000, progressEvery: 2), recorder: recorder, totalBytes: 10_500)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            // 11 data events (the last one 500 bytes), a progress after every 2nd, one END.
            #expect(entries.filter { $0.kind == .data }.count == 11)
            #expect(entries.filter { $0.kind == .progress }.count == 5)
            #expect(entries.filter { $0.kind == .end }.count == 1)
            #expect(entries.last?.kind == .end && entries.last?.status == Status.ok)
            #expect(entries.map(\.sequence) == Array(0..<UInt64(entries.count)))
            let data = entries.filter { $0.kind == .data }
            #expect(data.map(\.bytesDone) == (0..<11).map { UInt64($0) * 1000 })
            #expect(data.last?.length == 500)
            #expect(data.allSatisfy { $0.bytesValid })
            #expect(entries.allSatisfy { $0.bytesTotal == 10_500 })
            let progress = entries.filter { $0.kind == .progress }
            #expect(progress.map(\.bytesDone) == [2000, 4000, 6000, 8000, 10_000])
            let counted = counters(client)
            #expect(counted.stream_events == UInt64(entries.count))
            #expect(counted.stream_events_after_terminal == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("An error end carries the injected status and message")
    func errorEnd() {
        withClient { client in
            var behavior = stream(chunk: 64)
            behavior.stream_end = Int32(LSDK_STREAM_END_ERROR)
            behavior.error_status = Status.resources
            let recorder = Recorder()
            let (_, handle) = startDownload(
                client, behavior, recorder: recorder, totalBytes: 256, errorMessage: "disk on fire")
            #expect(recorder.waitReleased())
            let end = recorder.entries.last
            #expect(end?.kind == .end)
            #expect(end?.status == Status.resources)
            #expect(end?.message == "disk on fire")
            #expect(recorder.entries.filter { $0.kind == .data }.count == 4)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("STREAM_END_NONE delivers the data then goes silent, keeping the operation in flight until cancelled")
    func silentEnd() {
        withClient(workers: 1) { client in
            var behavior = stream(chunk: 100)
            behavior.stream_end = Int32(LSDK_STREAM_END_NONE)
            behavior.duplicate_terminal = true  // does not apply without a terminal
            let recorder = Recorder()
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 500)
            #expect(recorder.waitEntries(5))
            // The producer has had its turn on the only worker once a later operation completed.
            let later = Recorder()
            let (_, laterHandle) = startRequest(client, .defaults(), recorder: later)
            #expect(later.waitReleased())
            #expect(recorder.entries.count == 5)
            #expect(recorder.entries.allSatisfy { $0.kind == .data })
            #expect(!recorder.isReleased)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.last?.kind == .end)
            #expect(recorder.entries.last?.status == Status.cancelled)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(laterHandle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("duplicate_terminal and events_after_terminal deliver more after the END, counted")
    func afterTerminal() {
        withClient { client in
            var behavior = stream(chunk: 100)
            behavior.duplicate_terminal = true
            behavior.events_after_terminal = 3
            let recorder = Recorder()
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 200)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.kind) == [.data, .data, .end, .end, .data, .data, .data])
            #expect(entries.map(\.sequence) == Array(0..<7))
            #expect(entries.suffix(3).map(\.bytesDone) == [200, 300, 400])
            #expect(entries.allSatisfy { $0.bytesValid })
            #expect(counters(client).stream_events_after_terminal == 4)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("PAUSE_STOPS: no event is produced while paused; resume goes on where it stopped")
    func pauseStops() {
        withClient(workers: 1) { client in
            let recorder = Recorder { recorder, entry in
                guard entry.sequence == 10 else { return }
                #expect(spinUntil { recorder.handle != 0 })
                #expect(lsdk_pause(recorder.handle) == Status.ok)
            }
            let (_, handle) = startDownload(client, stream(chunk: 1), recorder: recorder, totalBytes: 5000)
            #expect(recorder.waitEntries(11))
            // Without the pause the producer would deliver thousands more events in this turn before
            // the only worker could run the later operation.
            let later = Recorder()
            let (_, laterHandle) = startRequest(client, .defaults(), recorder: later)
            #expect(later.waitReleased())
            #expect(recorder.entries.count == 11)
            #expect(counters(client).stream_events == 11)
            #expect(counters(client).stream_pauses == 1)
            #expect(lsdk_pause(handle) == Status.ok)  // idempotent
            #expect(counters(client).stream_pauses == 1)

            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.count == 5001)
            #expect(entries.map(\.sequence) == Array(0..<5001))
            #expect(entries.last?.kind == .end)
            #expect(counters(client).stream_resumes == 1)
            #expect(counters(client).stream_events_dropped_paused == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(laterHandle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test(
        "PAUSE_DROPS: a paused live stream keeps producing and drops (and counts) what it produces",
        arguments: [UInt32(1), 3])
    func pauseDrops(concurrency: UInt32) {
        withClient { client in
            var behavior = stream(chunk: 1)
            behavior.pause_mode = Int32(LSDK_PAUSE_DROPS)
            behavior.stream_concurrency = concurrency
            let recorder = Recorder { recorder, entry in
                guard entry.sequence == 10 else { return }
                #expect(spinUntil { recorder.handle != 0 })
                #expect(lsdk_pause(recorder.handle) == Status.ok)
            }
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 2000)
            // The terminal event is never dropped, so the stream ends while still paused.
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            let data = entries.filter { $0.kind == .data }
            #expect(entries.filter { $0.kind == .end }.map(\.sequence) == [2000])
            // At most the batch being delivered when the pause came arrives after event 10.
            #expect(data.count >= 11 && data.count <= 10 + Int(concurrency))
            let dropped = counters(client).stream_events_dropped_paused
            #expect(dropped == UInt64(2000 - data.count))
            #expect(lsdk_resume(handle) == Status.ok)  // finished: a harmless no-op
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("A synchronous stream is delivered entirely inside start, on the caller's thread")
    func synchronousStream() {
        withClient { client in
            var behavior = stream(chunk: 10, progressEvery: 1)
            behavior.set(delivery: LSDK_DELIVERY_SYNC)
            behavior.interval_us = 1_000_000  // ignored by synchronous delivery
            let recorder = Recorder()
            let caller = pthread_self()
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 100)
            #expect(recorder.isReleased)
            #expect(recorder.entries.count == 21)
            #expect(recorder.entries.allSatisfy { isSameThread($0.thread, caller) })
            #expect(counters(client).callbacks_sync == 21)
            #expect(lsdk_pause(handle) == Status.ok)  // finished: harmless
            #expect(counters(client).stream_pauses == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    /// Checks the window promise: when sequence s arrives, every sequence <= s - width arrived.
    private func checkWindow(_ sequences: [UInt64], width: UInt64, total: UInt64) -> (inversions: Int, windowKept: Bool)
    {
        var seen = Set<UInt64>()
        var lowestMissing: UInt64 = 0
        var inversions = 0
        var kept = true
        var highest: UInt64 = 0
        for (index, sequence) in sequences.enumerated() {
            if index > 0 && sequence < highest { inversions += 1 }
            highest = max(highest, sequence)
            if sequence >= width && lowestMissing <= sequence - width { kept = false }
            seen.insert(sequence)
            while seen.contains(lowestMissing) { lowestMissing += 1 }
        }
        return (inversions, kept && seen.count == sequences.count && lowestMissing == total)
    }

    @Test(
        "Concurrent streams arrive out of order, never beyond their window",
        arguments: [
            LSDK_DELIVERY_WORKER, LSDK_DELIVERY_FRESH_THREAD, LSDK_DELIVERY_SYNC, LSDK_DELIVERY_MIXED,
        ])
    func concurrentStream(delivery: Int) {
        withClient(seed: 99) { client in
            var behavior = stream(chunk: 1)
            behavior.set(delivery: delivery)
            behavior.stream_concurrency = 4
            behavior.seed = 1234
            let recorder = Recorder()
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 300)
            #expect(recorder.waitReleased())
            let sequences = recorder.entries.map(\.sequence)
            #expect(sequences.count == 301)
            let (inversions, kept) = checkWindow(sequences, width: 4, total: 301)
            #expect(inversions > 0)
            #expect(kept)
            #expect(recorder.entries.allSatisfy { $0.bytesValid })
            #expect(recorder.maxConcurrent <= 4)
            // The END is a batch of its own: it arrives after every data event.
            #expect(recorder.entries.last?.kind == .end)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test(
        "In a concurrent stream the END never overtakes earlier events, nor is overtaken by later ones",
        arguments: [
            LSDK_DELIVERY_WORKER, LSDK_DELIVERY_FRESH_THREAD, LSDK_DELIVERY_MIXED,
        ])
    func concurrentEndIsABarrier(delivery: Int) {
        withClient(seed: 7) { client in
            for seed in UInt64(1)...20 {
                var behavior = stream(chunk: 1)
                behavior.set(delivery: delivery)
                behavior.stream_concurrency = 4
                behavior.duplicate_terminal = true
                behavior.events_after_terminal = 3
                behavior.seed = seed
                let recorder = Recorder()
                let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 37)
                #expect(recorder.waitReleased())
                let entries = recorder.entries
                let ends = entries.indices.filter { entries[$0].kind == .end }
                #expect(ends.count == 2)
                guard let first = ends.first, let last = ends.last else { continue }
                let endSequence = entries[first].sequence
                // Everything before the first END in arrival order is numbered below it, and
                // everything numbered below it arrived before it.
                #expect(entries[..<first].allSatisfy { $0.sequence < endSequence })
                #expect(entries[first...].allSatisfy { $0.sequence >= endSequence })
                #expect(last == first + 1)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
        }
    }

    @Test("A stream with concurrency 1 arrives strictly in order")
    func serialStreamInOrder() {
        withClient { client in
            var behavior = stream(chunk: 1, progressEvery: 3)
            behavior.set(delivery: LSDK_DELIVERY_MIXED)
            let recorder = Recorder()
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 200)
            #expect(recorder.waitReleased())
            let sequences = recorder.entries.map(\.sequence)
            #expect(sequences == Array(0..<UInt64(sequences.count)))
            #expect(recorder.maxConcurrent == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("Events of a concurrent stream are delivered from several threads at once")
    func deliveredAtOnce() {
        withClient { client in
            var behavior = stream(chunk: 1)
            behavior.stream_concurrency = 4
            // The first callback waits until a second one of the same stream runs beside it.
            let recorder = Recorder { recorder, entry in
                if entry.concurrent == 1 && recorder.entries.count == 1 {
                    #expect(spinUntil { recorder.maxConcurrent >= 2 })
                }
            }
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 64)
            #expect(recorder.waitReleased())
            #expect(recorder.maxConcurrent >= 2)
            #expect(recorder.maxConcurrent <= 4)
            #expect(Set(recorder.entries.map(\.thread)).count >= 2)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("Pause stops a concurrent stream after the batch being delivered; resume restarts it")
    func pauseConcurrentStream() {
        withClient(workers: 1) { client in
            var behavior = stream(chunk: 1)
            behavior.stream_concurrency = 3
            let recorder = Recorder { recorder, entry in
                guard recorder.entries.count == 1 else { return }
                #expect(spinUntil { recorder.handle != 0 })
                #expect(lsdk_pause(recorder.handle) == Status.ok)
            }
            let (_, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 600)
            // The batch of 3 (all queued on the only worker before the first ran) is delivered.
            #expect(recorder.waitEntries(3))
            // First later operation: runs after the batch's last event task has finished.
            let first = Recorder()
            let (_, firstHandle) = startRequest(client, .defaults(), recorder: first)
            #expect(first.waitReleased())
            // Second: queued after a restarted producer, if the pause had not parked it.
            let second = Recorder()
            let (_, secondHandle) = startRequest(client, .defaults(), recorder: second)
            #expect(second.waitReleased())
            #expect(recorder.entries.count == 3)
            #expect(!recorder.isReleased)

            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.count == 601)
            for handle in [handle, firstHandle, secondHandle] { #expect(lsdk_handle_release(handle) == Status.ok) }
            expectContractKept(recorder)
        }
    }

    @Test("A worker-delivered stream pushes many events per scheduling turn")
    func manySmallEvents() {
        withClient { client in
            let counter = EventCounter()
            let context = Unmanaged.passRetained(counter).toOpaque()
            var behavior = stream(chunk: 1)
            behavior.set(delivery: LSDK_DELIVERY_WORKER)
            var request = lsdk_download_request_t(path: nil, total_bytes: 200_000)
            var handle: lsdk_handle_t = 0
            #expect(
                lsdk_download_start(client, &request, &behavior, countingEvent, context, countingRelease, &handle)
                    == Status.ok)
            #expect(counter.released.wait(timeout: .now() + 60) == .success)
            #expect(counter.count == 200_001)
            #expect(counters(client).callbacks_worker == 200_001)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }
}

/// A cheap event sink for the volume test.
final class EventCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var events = 0
    let released = DispatchSemaphore(value: 0)
    func add() { lock.withLock { events += 1 } }
    var count: Int { lock.withLock { events } }
}

func countingEvent(_ context: UnsafeMutableRawPointer?, _ event: UnsafePointer<lsdk_event_t>?) {
    Unmanaged<EventCounter>.fromOpaque(context!).takeUnretainedValue().add()
}

func countingRelease(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<EventCounter>.fromOpaque(context!).takeRetainedValue().released.signal()
}
