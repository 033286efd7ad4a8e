import CLegacySDK
import Foundation
import TestSupport
import Testing

@Suite("Bad input to connections and listeners: documented status, no callback, counted", .onOwnThread)
struct RPCBadInputTests {
    @Test(
        "An invalid behaviour field is refused by lsdk_rpc_send and lsdk_listen_start",
        arguments: BadInputTests.behaviourCases)
    func invalidBehaviour(_ testCase: BadInputTests.Case) {
        let replies = ReplyRecorder()
        let events = Recorder()
        withClient { client in
            withRPC(client, recorder: replies) { rpc in
                var behavior = lsdk_behavior_t.defaults()
                testCase.change(&behavior)
                #expect(send(rpc, id: 1, behavior: behavior).status == testCase.expected)
                #expect(send(rpc, behavior: behavior).status == testCase.expected)
                #expect(
                    startListener(client, behavior, recorder: events, topic: 1, count: 1).status == testCase.expected)
                let counted = counters(client)
                #expect(counted.bad_calls == 3)
                #expect(counted.rpc_requests_sent == 0 && counted.listener_starts == 0)
                #expect(counted.rpc_requests_pending == 0)
            }
            #expect(replies.replies.isEmpty && events.entries.isEmpty && events.releases == 0)
        }
    }

    @Test("lsdk_rpc_send refuses every bad argument in the documented order, with no callback")
    func sendArguments() {
        let recorder = ReplyRecorder()
        var config = lsdk_rpc_config_t.defaults()
        config.id_bits = 16
        withClient { client in
            withRPC(client, config: config, recorder: recorder) { rpc in
                var waits = lsdk_behavior_t.defaults()
                waits.set(cancelMode: LSDK_CANCEL_WAITS)
                #expect(send(nil, id: 1).status == Status.nullArgument)
                #expect(send(rpc, id: 1, behavior: waits).status == Status.outOfRange)
                #expect(send(rpc, id: 1, responseSize: LSDK_MAX_CHUNK_SIZE + 1).status == Status.outOfRange)
                #expect(send(rpc, id: 0, wantID: false).status == Status.nullArgument)
                #expect(send(rpc, id: 1 << 16).status == Status.outOfRange)
                #expect(send(rpc, id: UInt64.max).status == Status.outOfRange)
                // Order: an invalid behaviour wins over a bad id.
                #expect(send(rpc, id: 0, behavior: waits, wantID: false).status == Status.outOfRange)
                #expect(send(rpc, id: (1 << 16) - 1, behavior: .neverReplies()).status == Status.ok)
                #expect(send(rpc, id: (1 << 16) - 1).status == Status.duplicateID)
                // NULL request and behaviour are the defaults.
                var out: UInt64 = 0
                #expect(lsdk_rpc_send(rpc, nil, nil, 0, &out) == Status.ok)
                #expect(out == 1)
                #expect(recorder.waitReplies(1))
                let counted = counters(client)
                #expect(counted.bad_calls == 7)  // the NULL connection counts process-wide only
                #expect(counted.rpc_requests_sent == 2)
            }
        }
        #expect(recorder.replies.map(\.id) == [1, (1 << 16) - 1])
        #expect(recorder.replies.last?.status == Status.disconnected)
    }

    @Test("lsdk_rpc_create refuses a bad configuration before anything is installed")
    func createArguments() {
        struct Case {
            let expected: lsdk_status_t
            let change: (inout lsdk_rpc_config_t) -> Void
        }
        let cases: [Case] = [
            Case(expected: Status.outOfRange) { $0.id_bits = 7 },
            Case(expected: Status.outOfRange) { $0.id_bits = 65 },
            Case(expected: Status.outOfRange) { $0.id_bits = 0 },
            Case(expected: Status.unknownEnum) { $0.disconnect_report = 3 },
            Case(expected: Status.unknownEnum) { $0.disconnect_report = -1 },
            Case(expected: Status.outOfRange) { $0.unknown_reply_per_mille = 1001 },
            Case(expected: Status.outOfRange) { $0.disconnect_per_mille = 1001 },
            // Order: id_bits before disconnect_report before the per-milles.
            Case(expected: Status.outOfRange) {
                $0.id_bits = 7
                $0.disconnect_report = 9
            },
            Case(expected: Status.unknownEnum) {
                $0.disconnect_report = 9
                $0.disconnect_per_mille = 5000
            },
        ]
        let recorder = ReplyRecorder()
        withClient { client in
            for testCase in cases {
                var config = lsdk_rpc_config_t.defaults()
                testCase.change(&config)
                var callbacks = recorder.callbacks()
                var rpc: OpaquePointer?
                #expect(lsdk_rpc_create(client, &config, &callbacks, &rpc) == testCase.expected)
                #expect(rpc == nil)
                ReplyRecorder.dropRefused(callbacks)
            }
            var config = lsdk_rpc_config_t.defaults()
            var callbacks = recorder.callbacks()
            #expect(lsdk_rpc_create(nil, &config, &callbacks, nil) == Status.nullArgument)
            #expect(lsdk_rpc_create(client, &config, &callbacks, nil) == Status.nullArgument)
            ReplyRecorder.dropRefused(callbacks)
            let counted = counters(client)
            #expect(counted.bad_calls == UInt64(cases.count) + 1)
            #expect(counted.rpc_connections_created == 0 && counted.contexts_created == 0)
        }
        #expect(recorder.releases == 0 && recorder.replies.isEmpty && recorder.disconnects.isEmpty)
    }

    @Test("Calls on a NULL or foreign pointer return NULL_ARGUMENT; an unknown id is not a bad call")
    func otherCalls() {
        withClient { client in
            let before = globalCounters().bad_calls
            #expect(lsdk_rpc_cancel(nil, 1) == Status.nullArgument)
            #expect(lsdk_rpc_disconnect(nil) == Status.nullArgument)
            #expect(lsdk_rpc_destroy(nil) == Status.nullArgument)
            #expect(lsdk_rpc_set_callbacks(nil, nil) == Status.nullArgument)
            // A client is not a connection: its magic differs.
            #expect(lsdk_rpc_disconnect(client) == Status.nullArgument)
            #expect(globalCounters().bad_calls >= before + 5)
            withRPC(client, recorder: ReplyRecorder()) { rpc in
                #expect(lsdk_rpc_cancel(rpc, 0) == Status.unknownID)
                #expect(lsdk_rpc_cancel(rpc, 12345) == Status.unknownID)
                #expect(counters(client).bad_calls == 0)
            }
        }
    }

    @Test("lsdk_listen_start refuses a NULL client and a NULL callback, with no callback")
    func listenArguments() {
        let recorder = Recorder()
        withClient { client in
            #expect(
                startListener(nil, .defaults(), recorder: recorder, topic: 1, count: 1).status == Status.nullArgument)
            var request = lsdk_listen_request_t(topic: 1, event_count: 1)
            var behavior = lsdk_behavior_t.defaults()
            var handle: lsdk_handle_t = 0
            #expect(lsdk_listen_start(client, &request, &behavior, nil, nil, nil, &handle) == Status.nullArgument)
            #expect(handle == 0)
            #expect(counters(client).bad_calls == 1)
            #expect(counters(client).listener_starts == 0)
        }
        #expect(recorder.entries.isEmpty && recorder.releases == 0)
    }

    @Test("Calls on a destroyed client's connection and listener topics answer CLIENT_DESTROYED")
    func afterClientDestroy() {
        var client: OpaquePointer?
        #expect(lsdk_client_create(nil, &client) == Status.ok)
        var rpc: OpaquePointer?
        var config = lsdk_rpc_config_t.defaults()
        #expect(lsdk_rpc_create(client, &config, nil, &rpc) == Status.ok)
        #expect(lsdk_client_destroy(client) == Status.ok)
        #expect(send(rpc, id: 1).status == Status.clientDestroyed)
        #expect(lsdk_rpc_cancel(rpc, 1) == Status.clientDestroyed)
        #expect(lsdk_rpc_set_callbacks(rpc, nil) == Status.clientDestroyed)
        #expect(lsdk_rpc_destroy(rpc) == Status.clientDestroyed)
        var out: OpaquePointer?
        #expect(lsdk_rpc_create(client, &config, nil, &out) == Status.clientDestroyed)
        let recorder = Recorder()
        #expect(
            startListener(client, .defaults(), recorder: recorder, topic: 1, count: 1).status == Status.clientDestroyed)
        #expect(recorder.entries.isEmpty)
        #expect(counters(client!).bad_calls == 6)
    }
}
