import CLegacySDK
import TestSupport
import Foundation
import Testing

@Suite("RPC connections: one reply callback, requests matched by id", .onOwnThread)
struct RPCTests {
    @Test("A caller-chosen id is answered once with its id, a valid body, and nothing stays live")
    func callerChosenID() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                let sent = send(rpc, id: 42, responseSize: 32, path: "/answer")
                #expect(sent.status == Status.ok)
                #expect(sent.id == 42)
                #expect(recorder.waitReplies(1))
                #expect(spinUntil { counters(client).rpc_requests_live == 0 })
                let reply = recorder.replies[0]
                #expect(reply.id == 42 && reply.status == Status.ok && reply.attempt == 1)
                #expect(reply.length == 32 && reply.bytesValid && reply.message == "/answer")
                let counted = counters(client)
                #expect(counted.rpc_requests_sent == 1 && counted.rpc_requests_settled == 1)
                #expect(counted.rpc_requests_pending == 0 && counted.rpc_replies == 1)
                #expect(counted.rpc_replies_duplicate == 0 && counted.rpc_replies_unknown_id == 0)
            }
            #expect(recorder.waitReleased())
            let counted = counters(client)
            #expect(counted.contexts_created == 1 && counted.contexts_released == 1)
            #expect(counted.rpc_connections_finished == 1)
            #expect(counted.bad_calls == 0)
        }
        #expect(recorder.releases == 1)
        #expect(recorder.violations.isEmpty)
    }

    @Test("SDK-assigned ids count up, and a synchronous reply comes inside send before the id is written")
    func assignedIDsAndSynchronousReply() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                var behavior = lsdk_behavior_t.defaults()
                behavior.set(delivery: LSDK_DELIVERY_SYNC)
                for expected in 1...3 {
                    let before = recorder.replies.count
                    let sent = send(rpc, behavior: behavior)
                    #expect(sent.status == Status.ok)
                    #expect(sent.id == UInt64(expected))
                    // Already answered when send returned: on this thread, inside the call.
                    #expect(recorder.replies.count == before + 1)
                    #expect(recorder.replies.last?.id == UInt64(expected))
                    #expect(recorder.replies.last?.onCallerThread == true)
                }
                #expect(counters(client).callbacks_sync == 3)
            }
        }
        #expect(recorder.violations.isEmpty)
    }

    @Test("A reply that comes while an older request is still pending is counted out of order")
    func outOfOrder() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                #expect(send(rpc, id: 1, behavior: .neverReplies()).status == Status.ok)
                #expect(send(rpc, id: 2).status == Status.ok)
                #expect(recorder.waitReplies(1))
                #expect(recorder.replies[0].id == 2)
                #expect(counters(client).rpc_replies_out_of_order == 1)
                #expect(counters(client).rpc_requests_pending == 1)
                // In order: the pending one is the oldest, so its answer is not counted.
                #expect(send(rpc, id: 3).status == Status.ok)
                #expect(recorder.waitReplies(2))
                #expect(counters(client).rpc_replies_out_of_order == 2)
            }
        }
    }

    @Test("A first reply of the oldest pending request is in order")
    func inOrder() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                for id in 1...5 {
                    #expect(send(rpc, id: UInt64(id)).status == Status.ok)
                    #expect(recorder.waitReplies(id))
                }
                #expect(counters(client).rpc_replies_out_of_order == 0)
            }
        }
    }

    @Test("completion_count 3 answers one id three times: two duplicates, attempts 1, 2, 3")
    func duplicates() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                var behavior = lsdk_behavior_t.defaults()
                behavior.completion_count = 3
                #expect(send(rpc, id: 9, behavior: behavior).status == Status.ok)
                #expect(recorder.waitReplies(3))
                #expect(spinUntil { counters(client).rpc_requests_live == 0 })
                #expect(recorder.replies.map(\.id) == [9, 9, 9])
                #expect(recorder.replies.map(\.attempt) == [1, 2, 3])
                #expect(counters(client).rpc_replies_duplicate == 2)
                // The id was free again after the first reply.
                #expect(counters(client).rpc_requests_settled == 1)
            }
        }
    }

    @Test("With unknown_reply_per_mille 1000 every reply is followed by one for an id that is not pending")
    func unknownIDs() {
        let recorder = ReplyRecorder()
        var config = lsdk_rpc_config_t.defaults()
        config.unknown_reply_per_mille = 1000
        withClient { client in
            withRPC(client, config: config, recorder: recorder) { rpc in
                for id in 1...4 { #expect(send(rpc, id: UInt64(id)).status == Status.ok) }
                #expect(recorder.waitReplies(8))
                let unknown = recorder.replies.filter { $0.requestID == 0 }
                #expect(unknown.count == 4)
                #expect(
                    unknown.allSatisfy { $0.id != 0 && $0.status == Status.ok && $0.message == "unsolicited reply" })
                #expect(counters(client).rpc_replies_unknown_id == 4)
                #expect(counters(client).rpc_replies == 8)
            }
        }
    }

    @Test("A request that is never answered stays pending until a disconnect reports it, inside the call")
    func disconnectReportsSynchronously() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                for id in [5, 3, 8] as [UInt64] {
                    #expect(send(rpc, id: id, behavior: .neverReplies()).status == Status.ok)
                }
                #expect(counters(client).rpc_requests_pending == 3)
                #expect(lsdk_rpc_disconnect(rpc) == Status.ok)
                // Reported on this thread, in send order, then on_disconnect.
                #expect(recorder.replies.map(\.id) == [5, 3, 8])
                #expect(recorder.replies.allSatisfy { $0.status == Status.disconnected && $0.onCallerThread })
                #expect(recorder.disconnects.count == 1)
                #expect(recorder.disconnects.first?.dropped == 3)
                #expect(recorder.disconnects.first?.spontaneous == false)
                let counted = counters(client)
                #expect(counted.rpc_disconnects == 1 && counted.rpc_dropped_at_disconnect == 3)
                #expect(counted.callbacks_reentrant_cancel == 4)
                #expect(counted.rpc_requests_pending == 0 && counted.rpc_requests_live == 0)
                // The connection works again at once, and the ids are free.
                #expect(send(rpc, id: 5).status == Status.ok)
                #expect(recorder.waitReplies(4))
            }
        }
    }

    @Test("ASYNC disconnect reports come later from a worker; SILENT ones never come")
    func disconnectReportModes() {
        for mode in [LSDK_DISCONNECT_REPORT_ASYNC, LSDK_DISCONNECT_SILENT] {
            let recorder = ReplyRecorder()
            var config = lsdk_rpc_config_t.defaults()
            config.disconnect_report = Int32(mode)
            withClient { client in
                withRPC(client, config: config, recorder: recorder) { rpc in
                    #expect(send(rpc, id: 1, behavior: .neverReplies()).status == Status.ok)
                    #expect(send(rpc, id: 2, behavior: .neverReplies()).status == Status.ok)
                    #expect(lsdk_rpc_disconnect(rpc) == Status.ok)
                    #expect(recorder.disconnects.count == 1)
                    #expect(spinUntil { counters(client).rpc_requests_live == 0 })
                    if mode == LSDK_DISCONNECT_REPORT_ASYNC {
                        #expect(Set(recorder.replies.map(\.id)) == [1, 2])
                        #expect(recorder.replies.allSatisfy { $0.status == Status.disconnected && !$0.onCallerThread })
                        #expect(counters(client).callbacks_worker == 2)
                    } else {
                        #expect(recorder.replies.isEmpty)
                    }
                    #expect(counters(client).rpc_dropped_at_disconnect == 2)
                }
            }
            #expect(recorder.violations.isEmpty)
        }
    }

    @Test("A spontaneous disconnect drops the pending requests and says it was spontaneous")
    func spontaneousDisconnect() {
        let recorder = ReplyRecorder()
        var config = lsdk_rpc_config_t.defaults()
        config.disconnect_per_mille = 1000
        withClient { client in
            withRPC(client, config: config, recorder: recorder) { rpc in
                #expect(send(rpc, id: 1, behavior: .neverReplies()).status == Status.ok)
                #expect(spinUntil { counters(client).rpc_disconnects_spontaneous == 1 })
                #expect(spinUntil { counters(client).rpc_requests_live == 0 })
                #expect(recorder.replies.map(\.status) == [Status.disconnected])
                #expect(recorder.disconnects.map(\.spontaneous) == [true])
            }
        }
    }

    @Test("A late reply after a disconnect names an id that was sent again meanwhile")
    func lateReplyAfterDisconnectHitsReusedID() {
        // The one worker is held inside the reply to request 1, so the late reply waits behind it
        // until id 5 was sent again.
        let entered = Gate()
        let proceed = Gate()
        let recorder = ReplyRecorder { _, reply in
            guard reply.id == 1 else { return }
            entered.open()
            proceed.wait()
        }
        var config = lsdk_rpc_config_t.defaults()
        config.disconnect_report = Int32(LSDK_DISCONNECT_SILENT)
        withClient(workers: 1) { client in
            withRPC(client, config: config, recorder: recorder) { rpc in
                #expect(send(rpc, id: 1).status == Status.ok)
                #expect(entered.wait())
                var late = lsdk_behavior_t.neverReplies()
                late.late_callback_after_cancel = true
                #expect(send(rpc, id: 5, behavior: late).status == Status.ok)
                #expect(lsdk_rpc_disconnect(rpc) == Status.ok)
                #expect(send(rpc, id: 5, behavior: .neverReplies()).status == Status.ok)
                #expect(counters(client).rpc_replies_after_disconnect == 0)
                proceed.open()
                #expect(recorder.waitReplies(2))
                let lateReply = recorder.replies[1]
                #expect(lateReply.id == 5 && lateReply.status == Status.ok && lateReply.attempt == 1)
                #expect(lateReply.requestID != 0)
                #expect(counters(client).rpc_replies_after_disconnect == 1)
                // The id is pending again, for the new request: the late reply was not for it.
                #expect(counters(client).rpc_requests_pending == 1)
            }
        }
    }

    @Test("Cancel by id: SYNC reports inside the call, ASYNC later, SILENT never; the id is free at once")
    func cancelModes() {
        let modes = [LSDK_CANCEL_CALLBACK_SYNC, LSDK_CANCEL_CALLBACK_ASYNC, LSDK_CANCEL_SILENT]
        for mode in modes {
            let recorder = ReplyRecorder()
            withClient { client in
                withRPC(client, recorder: recorder) { rpc in
                    var behavior = lsdk_behavior_t.neverReplies()
                    behavior.set(cancelMode: mode)
                    #expect(send(rpc, id: 7, behavior: behavior).status == Status.ok)
                    #expect(lsdk_rpc_cancel(rpc, 7) == Status.ok)
                    #expect(counters(client).rpc_requests_pending == 0)
                    #expect(lsdk_rpc_cancel(rpc, 7) == Status.unknownID)
                    switch mode {
                    case LSDK_CANCEL_CALLBACK_SYNC:
                        #expect(recorder.replies.map(\.status) == [Status.cancelled])
                        #expect(recorder.replies.first?.onCallerThread == true)
                        #expect(counters(client).callbacks_reentrant_cancel == 1)
                    case LSDK_CANCEL_CALLBACK_ASYNC:
                        #expect(recorder.waitReplies(1))
                        #expect(recorder.replies.map(\.status) == [Status.cancelled])
                        #expect(recorder.replies.first?.onCallerThread == false)
                    default:
                        #expect(spinUntil { counters(client).rpc_requests_live == 0 })
                        #expect(recorder.replies.isEmpty)
                    }
                    #expect(spinUntil { counters(client).rpc_requests_live == 0 })
                    #expect(counters(client).rpc_cancels == 1)
                    #expect(counters(client).bad_calls == 0)
                }
            }
        }
    }

    @Test("An IGNORED cancel leaves the request pending; its reply still comes and is counted after cancel")
    func ignoredCancel() {
        // The one worker is held inside the reply to request 1, so request 3's reply waits behind
        // it until the cancel was made.
        let entered = Gate()
        let proceed = Gate()
        let recorder = ReplyRecorder { _, reply in
            guard reply.id == 1 else { return }
            entered.open()
            proceed.wait()
        }
        withClient(workers: 1) { client in
            withRPC(client, recorder: recorder) { rpc in
                #expect(send(rpc, id: 1).status == Status.ok)
                #expect(entered.wait())
                var behavior = lsdk_behavior_t.defaults()
                behavior.set(cancelMode: LSDK_CANCEL_IGNORED)
                #expect(send(rpc, id: 3, behavior: behavior).status == Status.ok)
                #expect(lsdk_rpc_cancel(rpc, 3) == Status.ok)
                #expect(counters(client).rpc_requests_pending == 1)
                proceed.open()
                #expect(recorder.waitReplies(2))
                #expect(recorder.replies[1].id == 3 && recorder.replies[1].status == Status.ok)
                #expect(counters(client).rpc_replies_after_cancel == 1)
                #expect(counters(client).rpc_cancels == 1)
            }
        }
    }

    @Test("A late reply after a cancel comes after the cancellation report")
    func lateReplyAfterCancel() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                var behavior = lsdk_behavior_t.neverReplies()
                behavior.late_callback_after_cancel = true
                #expect(send(rpc, id: 4, behavior: behavior).status == Status.ok)
                #expect(lsdk_rpc_cancel(rpc, 4) == Status.ok)
                #expect(recorder.waitReplies(2))
                #expect(recorder.replies.map(\.status) == [Status.cancelled, Status.ok])
                #expect(recorder.replies.map(\.attempt) == [1, 2])
                #expect(counters(client).rpc_replies_after_cancel == 1)
            }
        }
    }

    @Test("Assigned ids wrap within id_bits and skip pending ones; when every id is pending, send fails")
    func idWrap() {
        var config = lsdk_rpc_config_t.defaults()
        config.id_bits = 8
        withClient { client in
            withRPC(client, config: config, recorder: ReplyRecorder()) { rpc in
                #expect(send(rpc, id: 2, behavior: .neverReplies()).status == Status.ok)
                var ids: [UInt64] = []
                for _ in 0..<254 {
                    let sent = send(rpc, behavior: .neverReplies())
                    #expect(sent.status == Status.ok)
                    ids.append(sent.id)
                }
                #expect(ids.first == 1 && ids.dropFirst().first == 3 && ids.last == 255)
                #expect(!ids.contains(2))
                #expect(send(rpc, behavior: .neverReplies()).status == Status.resources)
                #expect(send(rpc, id: 256).status == Status.outOfRange)
                #expect(lsdk_rpc_cancel(rpc, 1) == Status.ok)
                // Counting on from 255 wraps to 1, the only free id.
                #expect(send(rpc, behavior: .neverReplies()).id == 1)
            }
        }
    }

    @Test("A caller-chosen id that is pending is refused with no callback")
    func duplicateID() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: recorder) { rpc in
                #expect(send(rpc, id: 11, behavior: .neverReplies()).status == Status.ok)
                #expect(send(rpc, id: 11).status == Status.duplicateID)
                #expect(counters(client).bad_calls == 1)
                #expect(counters(client).rpc_requests_sent == 1)
                #expect(recorder.replies.isEmpty)
            }
        }
    }

    @Test("Replies with no callback set are discarded and counted; a set installed later gets the next ones")
    func setCallbacksLater() {
        let recorder = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: nil) { rpc in
                #expect(send(rpc, id: 1).status == Status.ok)
                #expect(spinUntil { counters(client).rpc_replies_discarded == 1 })
                var callbacks = recorder.callbacks()
                #expect(lsdk_rpc_set_callbacks(rpc, &callbacks) == Status.ok)
                #expect(send(rpc, id: 1).status == Status.ok)
                #expect(recorder.waitReplies(1))
                #expect(counters(client).rpc_replies == 1)
            }
            #expect(recorder.waitReleased())
        }
        #expect(recorder.violations.isEmpty)
    }

    @Test("A replaced set is released once its running callback returned, never while it runs")
    func replaceWhileRunning() {
        let entered = Gate()
        let proceed = Gate()
        let first = ReplyRecorder { _, _ in
            entered.open()
            proceed.wait()
        }
        let second = ReplyRecorder()
        withClient { client in
            withRPC(client, recorder: first) { rpc in
                #expect(send(rpc, id: 1).status == Status.ok)
                #expect(entered.wait())
                var callbacks = second.callbacks()
                #expect(lsdk_rpc_set_callbacks(rpc, &callbacks) == Status.ok)
                #expect(first.releases == 0)
                proceed.open()
                #expect(first.waitReleased())
                #expect(counters(client).contexts_created == 2)
                #expect(counters(client).contexts_released == 1)
            }
            #expect(second.waitReleased())
        }
        #expect(first.violations.isEmpty && second.violations.isEmpty)
        #expect(first.releases == 1 && second.releases == 1)
    }

    @Test(
        "Destroy reports the pending requests, refuses every later call, and late replies still come before the release"
    )
    func destroyConnection() {
        let recorder = ReplyRecorder()
        withClient { client in
            var config = lsdk_rpc_config_t.defaults()
            var callbacks = recorder.callbacks()
            var rpc: OpaquePointer?
            #expect(lsdk_rpc_create(client, &config, &callbacks, &rpc) == Status.ok)
            var late = lsdk_behavior_t.neverReplies()
            late.late_callback_after_cancel = true
            late.delay_us = 10_000
            #expect(send(rpc, id: 1, behavior: late).status == Status.ok)
            #expect(send(rpc, id: 2, behavior: .neverReplies()).status == Status.ok)
            #expect(lsdk_rpc_destroy(rpc) == Status.ok)
            // The late reply may already be running; the reports came first, inside destroy.
            #expect(recorder.replies.prefix(2).map(\.status) == [Status.disconnected, Status.disconnected])
            #expect(recorder.disconnects.count == 1)
            let badBefore = counters(client).bad_calls
            #expect(send(rpc, id: 3).status == Status.clientDestroyed)
            #expect(lsdk_rpc_cancel(rpc, 1) == Status.clientDestroyed)
            #expect(lsdk_rpc_disconnect(rpc) == Status.clientDestroyed)
            #expect(lsdk_rpc_set_callbacks(rpc, nil) == Status.clientDestroyed)
            #expect(lsdk_rpc_destroy(rpc) == Status.clientDestroyed)
            #expect(counters(client).bad_calls == badBefore + 5)
            #expect(recorder.waitReleased())
            #expect(recorder.replies.count == 3)
            #expect(recorder.replies.last?.status == Status.ok)
            #expect(counters(client).rpc_connections_finished == 1)
        }
        #expect(recorder.violations.isEmpty)
    }

    @Test("A connection may be destroyed from inside its own reply callback")
    func destroyInsideCallback() {
        final class Slot: @unchecked Sendable {
            var rpc: OpaquePointer?
            var status: lsdk_status_t = -1
        }
        let slot = Slot()
        let recorder = ReplyRecorder { _, _ in slot.status = lsdk_rpc_destroy(slot.rpc) }
        withClient { client in
            var config = lsdk_rpc_config_t.defaults()
            var callbacks = recorder.callbacks()
            #expect(lsdk_rpc_create(client, &config, &callbacks, &slot.rpc) == Status.ok)
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_SYNC)
            #expect(send(slot.rpc, id: 1, behavior: behavior).status == Status.ok)
            #expect(slot.status == Status.ok)
            #expect(recorder.waitReleased())
        }
        #expect(recorder.violations.isEmpty)
    }

    @Test("Destroying the client destroys its open connections on the destroying thread and waits for them")
    func clientDestroyClosesConnections() {
        let recorder = ReplyRecorder()
        var rpcHandle: OpaquePointer?
        var client: OpaquePointer?
        #expect(lsdk_client_create(nil, &client) == Status.ok)
        var config = lsdk_rpc_config_t.defaults()
        var callbacks = recorder.callbacks()
        #expect(lsdk_rpc_create(client, &config, &callbacks, &rpcHandle) == Status.ok)
        var late = lsdk_behavior_t.neverReplies()
        late.late_callback_after_cancel = true
        late.delay_us = 5_000_000  // skipped: destroy flushes every delay
        #expect(send(rpcHandle, id: 1, behavior: late).status == Status.ok)
        #expect(lsdk_client_destroy(client) == Status.ok)
        // Everything happened before destroy returned.
        #expect(recorder.releases == 1)
        #expect(recorder.replies.map(\.status) == [Status.disconnected, Status.ok])
        #expect(recorder.replies.first?.onCallerThread == true)
        let counted = counters(client!)
        #expect(counted.rpc_connections_created == 1 && counted.rpc_connections_finished == 1)
        #expect(counted.rpc_requests_live == 0 && counted.contexts_released == counted.contexts_created)
        #expect(lsdk_rpc_destroy(rpcHandle) == Status.clientDestroyed)
        #expect(send(rpcHandle, id: 2).status == Status.clientDestroyed)
        #expect(recorder.violations.isEmpty)
    }
}
