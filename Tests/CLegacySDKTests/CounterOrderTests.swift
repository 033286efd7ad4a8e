import CLegacySDK
import Foundation
import TestSupport
import Testing

/// What the handle probe does with each new handle, and what it saw.
private final class HandleProbe: @unchecked Sendable {
    enum Action { case release, cancel }
    let action: Action
    private let lock = NSLock()
    private var client: OpaquePointer?
    private var _seen: [(created: UInt64, released: UInt64, outstanding: UInt64)] = []
    private var _statuses: [lsdk_status_t] = []

    init(_ action: Action) { self.action = action }

    func arm(_ client: OpaquePointer) { lock.withLock { self.client = client } }
    var seen: [(created: UInt64, released: UInt64, outstanding: UInt64)] { lock.withLock { _seen } }
    var statuses: [lsdk_status_t] { lock.withLock { _statuses } }

    func probe(_ handle: lsdk_handle_t) {
        guard let client = lock.withLock({ self.client }) else { return }
        // What another thread holding the value could do at this very moment.
        let status = action == .release ? lsdk_handle_release(handle) : lsdk_cancel(handle)
        var out = lsdk_counters_t()
        _ = lsdk_client_counters(client, &out)
        lock.withLock {
            _statuses.append(status)
            _seen.append((out.handles_created, out.handles_released, out.handles_outstanding))
        }
    }
}

private func handleProbeTrampoline(_ context: UnsafeMutableRawPointer?, _ handle: lsdk_handle_t) {
    Unmanaged<HandleProbe>.fromOpaque(context!).takeUnretainedValue().probe(handle)
}

private func withProbedClient(_ probe: HandleProbe, _ body: (OpaquePointer) -> Void) {
    var config = lsdk_client_config_t()
    lsdk_client_config_init(&config)
    #expect(config.handle_probe == nil)
    config.handle_probe = handleProbeTrampoline
    config.probe_context = Unmanaged.passUnretained(probe).toOpaque()
    var client: OpaquePointer?
    #expect(lsdk_client_create(&config, &client) == Status.ok)
    probe.arm(client!)
    body(client!)
    #expect(lsdk_client_destroy(client) == Status.ok)
    withExtendedLifetime(probe) {}
}

@Suite("Counter orderings: a cause is counted before its effect can happen", .onOwnThread)
struct CounterOrderTests {
    @Test("A handle released the moment it becomes valid was already counted: outstanding never underflows")
    func handleCountedBeforePublished() {
        let probe = HandleProbe(.release)
        withProbedClient(probe) { client in
            let kept = Recorder()
            let (status, handle) = startRequest(client, .defaults(), recorder: kept)
            #expect(status == Status.ok)
            // The value start returns was released under it (as a forger could): now stale.
            #expect(lsdk_handle_release(handle) == Status.invalidHandle)

            // With out_handle NULL, start releases the handle itself; it must not trip over a
            // handle someone else released first (nor count it twice).
            let unkept = Recorder()
            #expect(startRequest(client, .defaults(), recorder: unkept, keepHandle: false).status == Status.ok)
            #expect(kept.waitReleased() && unkept.waitReleased())

            #expect(probe.statuses == [Status.ok, Status.ok])
            for seen in probe.seen {
                #expect(seen.released <= seen.created)
                #expect(seen.outstanding < 1 << 32)  // not an underflow
            }
            #expect(probe.seen.map(\.created) == [1, 2])
            let counted = counters(client)
            #expect(counted.handles_created == 2 && counted.handles_released == 2)
            #expect(counted.handles_outstanding == 0)
            expectContractKept(kept)
            expectContractKept(unkept)
        }
    }

    @Test("A cancel the moment the handle becomes valid finds the operation fully set up: the context contract holds")
    func cancelAtPublication() {
        let probe = HandleProbe(.cancel)
        withProbedClient(probe) { client in
            var recorders: [(Recorder, lsdk_handle_t)] = []
            for mode in [LSDK_CANCEL_CALLBACK_SYNC, LSDK_CANCEL_CALLBACK_ASYNC, LSDK_CANCEL_SILENT, LSDK_CANCEL_WAITS] {
                for delivery in [LSDK_DELIVERY_SYNC, LSDK_DELIVERY_WORKER] {
                    var behavior = lsdk_behavior_t.defaults()
                    behavior.set(cancelMode: mode)
                    behavior.set(delivery: delivery)
                    behavior.late_callback_after_cancel = true
                    let request = Recorder()
                    let started = startRequest(client, behavior, recorder: request)
                    #expect(started.status == Status.ok)
                    recorders.append((request, started.handle))
                    let stream = Recorder()
                    let download = startDownload(client, behavior, recorder: stream, totalBytes: 50_000)
                    #expect(download.status == Status.ok)
                    recorders.append((stream, download.handle))
                }
            }
            for (recorder, handle) in recorders {
                #expect(recorder.waitReleased())
                expectContractKept(recorder)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
            #expect(probe.statuses.allSatisfy { $0 == Status.ok })
            let counted = counters(client)
            // Every cancel took effect (the operation still had all its work ahead of it).
            #expect(counted.cancels == UInt64(recorders.count))
            #expect(counted.contexts_released == counted.contexts_created)
            #expect(counted.handles_outstanding == 0)
        }
    }
}
