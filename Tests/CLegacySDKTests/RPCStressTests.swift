import CLegacySDK
import Dispatch
import Foundation
import TestSupport
import Testing

/// splitmix64, for reproducible plans.
private struct StressRandom {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var x = state
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return x ^ (x >> 31)
    }
    mutating func below(_ bound: UInt64) -> UInt64 { next() % bound }
}

@Suite("Connections and listeners under load", .serialized, .onOwnThread)
struct RPCStressTests {
    @Test(
        "Four threads send 2,000 chaos requests with cancels, disconnects, unknown ids and listeners: every counter returns to zero",
        arguments: [LSDK_DISCONNECT_REPORT_SYNC, LSDK_DISCONNECT_REPORT_ASYNC, LSDK_DISCONNECT_SILENT])
    func burst(report: Int) {
        let recorder = ReplyRecorder()
        let listeners = LockedList<Recorder>()
        var config = lsdk_rpc_config_t.defaults()
        config.id_bits = 12  // ids are reused quickly: late replies and duplicates hit new requests
        config.disconnect_report = Int32(report)
        config.unknown_reply_per_mille = 50
        config.disconnect_per_mille = 5
        config.seed = 0x5EED
        var client: OpaquePointer?
        #expect(lsdk_client_create(nil, &client) == Status.ok)
        var rpc: OpaquePointer?
        var callbacks = recorder.callbacks()
        #expect(lsdk_rpc_create(client, &config, &callbacks, &rpc) == Status.ok)
        let shared = ClientRef(client!)
        let connection = ClientRef(rpc!)
        let accepted = LockedList<lsdk_status_t>()
        let listenerHandles = LockedList<lsdk_handle_t>()

        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var random = StressRandom(state: UInt64(thread + 1) * 0x1234_5678)
            var mine: [UInt64] = []
            for index in 0..<500 {
                var behavior = lsdk_behavior_t.chaos(UInt64(thread * 1000 + index + 1))
                behavior.seed = 0  // derived from the client's seed and the request's number
                let callerChosen = random.below(2) == 0
                let sent = send(
                    connection.raw, id: callerChosen ? 1 + random.below(4095) : 0, behavior: behavior,
                    responseSize: UInt32(random.below(64)))
                accepted.append(sent.status)
                if sent.status == Status.ok { mine.append(sent.id) }
                switch random.below(20) {
                case 0..<4:
                    if let id = mine.randomElement() { _ = lsdk_rpc_cancel(connection.raw, id) }
                case 4:
                    _ = lsdk_rpc_disconnect(connection.raw)
                default:
                    break
                }
                if index % 50 == 0 {
                    // An endless listener on this thread's topic, cancelled at once (an IGNORED
                    // cancel keeps it, and its topic, until the client is destroyed).
                    var listen = lsdk_behavior_t.chaos(UInt64(thread * 1000 + index + 7))
                    listen.seed = 0
                    listen.set(delivery: LSDK_DELIVERY_WORKER)  // inline, an endless listener never returns
                    listen.interval_us = 100
                    let listener = Recorder()
                    let started = startListener(shared.raw, listen, recorder: listener, topic: UInt64(thread), count: 0)
                    #expect(started.status == Status.ok || started.status == Status.alreadyListening)
                    if started.status == Status.ok {
                        listeners.append(listener)
                        _ = lsdk_cancel(started.handle)
                        listenerHandles.append(started.handle)
                    }
                }
            }
        }

        #expect(lsdk_rpc_destroy(rpc) == Status.ok)
        #expect(lsdk_client_destroy(client) == Status.ok)
        for handle in listenerHandles.values { #expect(lsdk_handle_release(handle) == Status.ok) }

        // Every status was one the header allows for these arguments.
        let allowed: Set<lsdk_status_t> = [Status.ok, Status.duplicateID, Status.resources]
        #expect(accepted.values.allSatisfy { allowed.contains($0) })
        let counted = counters(client!)
        #expect(counted.rpc_requests_sent > 1_000)
        #expect(counted.rpc_requests_pending == 0 && counted.rpc_requests_live == 0)
        #expect(counted.rpc_connections_finished == 1)
        #expect(counted.contexts_released == counted.contexts_created)
        #expect(counted.operations_finished == counted.operations_started)
        #expect(counted.listener_live == 0)
        #expect(counted.handles_outstanding == 0)
        #expect(counted.rpc_replies == UInt64(recorder.replies.count))
        #expect(counted.rpc_replies_unknown_id > 0 && counted.rpc_replies_duplicate > 0)
        #expect(counted.rpc_disconnects > counted.rpc_disconnects_spontaneous)
        #expect(counted.rpc_disconnects_spontaneous > 0)
        #expect(counted.listener_starts == UInt64(listeners.values.count))
        let events = listeners.values.reduce(0) { $0 + $1.entries.count }
        let callbackCount =
            counted.callbacks_sync + counted.callbacks_worker + counted.callbacks_fresh_thread + counted.callbacks_loop
            + counted.callbacks_reentrant_cancel
        #expect(callbackCount == counted.rpc_replies + UInt64(recorder.disconnects.count) + UInt64(events))
        #expect(recorder.releases == 1 && recorder.violations.isEmpty)
        for listener in listeners.values { expectContractKept(listener) }
    }
}
