import CLegacySDK
import TestSupport
import Foundation
import Testing

/// Keeps the handle of the latest start, given by the client's handle probe at the moment it
/// becomes valid (before any callback, so a synchronous callback can use it).
private final class HandleHolder: @unchecked Sendable {
    private let lock = NSLock()
    private var _handle: lsdk_handle_t = 0
    var handle: lsdk_handle_t {
        get { lock.withLock { _handle } }
        set { lock.withLock { _handle = newValue } }
    }
}

private func handleHolderProbe(_ context: UnsafeMutableRawPointer?, _ handle: lsdk_handle_t) {
    Unmanaged<HandleHolder>.fromOpaque(context!).takeUnretainedValue().handle = handle
}

private func withHeldHandles(_ holder: HandleHolder, _ body: (OpaquePointer) -> Void) {
    var config = lsdk_client_config_t()
    lsdk_client_config_init(&config)
    config.handle_probe = handleHolderProbe
    config.probe_context = Unmanaged.passUnretained(holder).toOpaque()
    var client: OpaquePointer?
    #expect(lsdk_client_create(&config, &client) == Status.ok)
    body(client!)
    #expect(lsdk_client_destroy(client) == Status.ok)
    withExtendedLifetime(holder) {}
}

/// An endless listener that produces an event every millisecond.
private func pacedEndless() -> lsdk_behavior_t {
    var behavior = lsdk_behavior_t.defaults()
    behavior.interval_us = 1_000
    behavior.chunk_size = 16
    return behavior
}

@Suite("Listeners: one live subscription per topic", .onOwnThread)
struct ListenerTests {
    @Test("A listener delivers event_count data events of chunk_size bytes, then its end, and is counted")
    func eventsThenEnd() {
        let recorder = Recorder()
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.chunk_size = 100
            let (status, handle) = startListener(client, behavior, recorder: recorder, topic: 7, count: 5)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.kind) == [.data, .data, .data, .data, .data, .end])
            #expect(entries.prefix(5).map(\.bytesDone) == [0, 100, 200, 300, 400])
            #expect(entries.allSatisfy { $0.bytesValid && $0.bytesTotal == 500 })
            #expect(entries.last?.status == Status.ok)
            #expect(entries.map(\.sequence) == Array(0..<6))
            let counted = counters(client)
            #expect(counted.listener_starts == 1 && counted.listener_finished == 1 && counted.listener_live == 0)
            #expect(counted.listener_ends == 1 && counted.listener_stops == 0)
            #expect(counted.listener_events == 6 && counted.stream_events == 6)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
        expectContractKept(recorder)
    }

    @Test("A second listener on a taken topic is refused with no callback; another topic is free")
    func oneListenerPerTopic() {
        let first = Recorder()
        let refused = Recorder()
        let other = Recorder()
        withClient { client in
            let (status, handle) = startListener(client, pacedEndless(), recorder: first, topic: 1, count: 0)
            #expect(status == Status.ok)
            #expect(
                startListener(client, pacedEndless(), recorder: refused, topic: 1, count: 0).status
                    == Status.alreadyListening)
            let (otherStatus, otherHandle) = startListener(client, pacedEndless(), recorder: other, topic: 2, count: 0)
            #expect(otherStatus == Status.ok)
            let counted = counters(client)
            #expect(counted.listener_busy == 1 && counted.bad_calls == 1 && counted.listener_starts == 2)
            #expect(counted.listener_live == 2)
            for handle in [handle, otherHandle] {
                #expect(lsdk_cancel(handle) == Status.ok)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
            #expect(first.waitReleased() && other.waitReleased())
            #expect(counters(client).listener_stops == 2)
        }
        #expect(refused.entries.isEmpty && refused.releases == 0)
        expectContractKept(first)
    }

    @Test("The topic is free as soon as the cancel took effect, before the cancellation end is delivered")
    func topicFreeAfterCancel() {
        // The one worker is held inside the first event, so the cancellation end waits behind it.
        let entered = Gate()
        let proceed = Gate()
        let first = Recorder { _, entry in
            guard entry.kind == .data, entry.sequence == 0 else { return }
            entered.open()
            proceed.wait()
        }
        let second = Recorder()
        withClient(workers: 1) { client in
            var behavior = pacedEndless()
            behavior.set(cancelMode: LSDK_CANCEL_CALLBACK_ASYNC)
            let (_, handle) = startListener(client, behavior, recorder: first, topic: 3, count: 0)
            #expect(entered.wait())
            #expect(lsdk_cancel(handle) == Status.ok)
            let (status, secondHandle) = startListener(client, pacedEndless(), recorder: second, topic: 3, count: 0)
            #expect(status == Status.ok)
            #expect(first.entries.count == 1)
            proceed.open()
            #expect(first.waitReleased())
            #expect(first.entries.last?.status == Status.cancelled)
            #expect(lsdk_cancel(secondHandle) == Status.ok)
            #expect(second.waitReleased())
            for handle in [handle, secondHandle] { #expect(lsdk_handle_release(handle) == Status.ok) }
        }
    }

    @Test("The topic is free once the listener's terminal was produced, while it is still being delivered")
    func topicFreeAfterTerminal() {
        let entered = Gate()
        let proceed = Gate()
        let first = Recorder { _, entry in
            guard entry.kind == .end else { return }
            entered.open()
            proceed.wait()
        }
        let second = Recorder()
        withClient { client in
            #expect(
                startListener(client, .defaults(), recorder: first, topic: 4, count: 2, keepHandle: false).status
                    == Status.ok)
            #expect(entered.wait())
            #expect(first.releases == 0)
            #expect(
                startListener(client, .defaults(), recorder: second, topic: 4, count: 1, keepHandle: false).status
                    == Status.ok)
            proceed.open()
            #expect(first.waitReleased() && second.waitReleased())
            #expect(counters(client).listener_ends == 2)
        }
    }

    @Test("An IGNORED cancel keeps the listener and its topic; destroy ends it without counting a stop")
    func ignoredCancelKeepsTopic() {
        let recorder = Recorder()
        withClient { client in
            var behavior = pacedEndless()
            behavior.set(cancelMode: LSDK_CANCEL_IGNORED)
            let (_, handle) = startListener(client, behavior, recorder: recorder, topic: 5, count: 0)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(
                startListener(client, .defaults(), recorder: Recorder(), topic: 5, count: 1).status
                    == Status.alreadyListening)
            #expect(counters(client).listener_stops == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
        #expect(recorder.releases == 1)
        // One terminal, the cancellation destroy made. A data event the producer took before the
        // cancel may still be delivered after it ("in flight", as the header says), so the terminal
        // need not be the last entry.
        #expect(recorder.entries.filter { $0.kind == .end }.map(\.status) == [Status.cancelled])
    }

    @Test("Pause is honoured after the events in flight: the rest of a batch still arrives while paused")
    func pauseAfterInFlight() {
        let holder = HandleHolder()
        let once = Once()
        let pauses = Recorder { _, entry in
            // Inside the first event of the first batch (delivered inline, shuffled).
            if entry.kind == .data { _ = once.run { lsdk_pause(holder.handle) } }
        }
        withHeldHandles(holder) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_SYNC)
            behavior.stream_concurrency = 4
            let (status, handle) = startListener(client, behavior, recorder: pauses, topic: 6, count: 8)
            #expect(status == Status.ok)
            // The batch of four came inside start; the producer parked after it.
            #expect(pauses.entries.count == 4)
            var counted = counters(client)
            #expect(counted.listener_pauses == 1)
            #expect(counted.listener_events_while_paused == 3)
            #expect(lsdk_resume(handle) == Status.ok)
            #expect(pauses.waitReleased())
            counted = counters(client)
            #expect(counted.listener_resumes == 1 && counted.listener_events == 9)
            #expect(counted.listener_events_while_paused == 3)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
        expectContractKept(pauses)
    }

    @Test("A live listener paused with PAUSE_DROPS keeps producing and drops its events")
    func pauseDrops() {
        let recorder = Recorder()
        withClient { client in
            var behavior = pacedEndless()
            behavior.pause_mode = Int32(LSDK_PAUSE_DROPS)
            let (_, handle) = startListener(client, behavior, recorder: recorder, topic: 8, count: 0)
            #expect(recorder.waitEntries(1))
            #expect(lsdk_pause(handle) == Status.ok)
            #expect(spinUntil { counters(client).stream_events_dropped_paused >= 3 })
            #expect(lsdk_resume(handle) == Status.ok)
            let delivered = recorder.entries.count
            #expect(recorder.waitEntries(delivered + 1))
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
        expectContractKept(recorder)
    }

    @Test("A listener that fails ends with its error and frees its topic")
    func failingListener() {
        let recorder = Recorder()
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.stream_end = Int32(LSDK_STREAM_END_ERROR)
            #expect(
                startListener(client, behavior, recorder: recorder, topic: 9, count: 2, keepHandle: false).status
                    == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.last?.status == Status.remote)
            #expect(counters(client).listener_ends == 1)
            #expect(
                startListener(client, .defaults(), recorder: Recorder(), topic: 9, count: 1, keepHandle: false).status
                    == Status.ok)
        }
    }

    @Test("Destroying the client ends every listener and releases every context")
    func destroyEndsListeners() {
        let recorders = (0..<3).map { _ in Recorder() }
        var handles: [lsdk_handle_t] = []
        var client: OpaquePointer?
        #expect(lsdk_client_create(nil, &client) == Status.ok)
        for (topic, recorder) in recorders.enumerated() {
            handles.append(
                startListener(client, pacedEndless(), recorder: recorder, topic: UInt64(topic), count: 0).handle)
        }
        #expect(lsdk_client_destroy(client) == Status.ok)
        #expect(recorders.allSatisfy { $0.releases == 1 })
        let counted = counters(client!)
        #expect(counted.listener_live == 0 && counted.listener_stops == 0 && counted.listener_starts == 3)
        for handle in handles { #expect(lsdk_handle_release(handle) == Status.ok) }
    }
}

/// Runs a body the first time only.
private final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    func run(_ body: () -> lsdk_status_t) -> lsdk_status_t? {
        let first = lock.withLock { () -> Bool in
            defer { done = true }
            return !done
        }
        return first ? body() : nil
    }
}
