import TestSupport
import CLegacySDK
import Foundation
import Testing

@Suite("Bad input: documented status, no callback, nothing leaked, counted", .onOwnThread)
struct BadInputTests {
    /// A behaviour change and the status the start functions must answer with.
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let expected: lsdk_status_t
        let change: @Sendable (inout lsdk_behavior_t) -> Void
        var description: String { name }
    }

    static let behaviourCases: [Case] = [
        Case(name: "delivery 5", expected: Status.unknownEnum) { $0.delivery = 5 },
        Case(name: "LOOP delivery without a loop thread", expected: Status.noLoopThread) {
            $0.delivery = Int32(LSDK_DELIVERY_LOOP)
        },
        Case(name: "delivery -1", expected: Status.unknownEnum) { $0.delivery = -1 },
        Case(name: "delay too long", expected: Status.outOfRange) { $0.delay_us = LSDK_MAX_DELAY_US + 1 },
        Case(name: "jitter too long", expected: Status.outOfRange) { $0.jitter_us = LSDK_MAX_DELAY_US + 1 },
        Case(name: "9 completions", expected: Status.outOfRange) { $0.completion_count = 9 },
        Case(name: "unknown outcome", expected: Status.unknownEnum) { $0.outcomeList = [7] },
        Case(name: "cancel mode 5", expected: Status.unknownEnum) { $0.cancel_mode = 5 },
        Case(name: "chunk 0", expected: Status.outOfRange) { $0.chunk_size = 0 },
        Case(name: "chunk too big", expected: Status.outOfRange) { $0.chunk_size = LSDK_MAX_CHUNK_SIZE + 1 },
        Case(name: "interval too long", expected: Status.outOfRange) { $0.interval_us = LSDK_MAX_DELAY_US + 1 },
        Case(name: "concurrency 0", expected: Status.outOfRange) { $0.stream_concurrency = 0 },
        Case(name: "concurrency 9", expected: Status.outOfRange) { $0.stream_concurrency = 9 },
        Case(name: "stream end 3", expected: Status.unknownEnum) { $0.stream_end = 3 },
        Case(name: "17 events after terminal", expected: Status.outOfRange) { $0.events_after_terminal = 17 },
        Case(name: "pause mode 2", expected: Status.unknownEnum) { $0.pause_mode = 2 },
        Case(name: "error status OK", expected: Status.outOfRange) { $0.error_status = Status.ok },
        Case(name: "error status CANCELLED", expected: Status.outOfRange) { $0.error_status = Status.cancelled },
        Case(name: "sequence bits 7", expected: Status.outOfRange) { $0.sequence_bits = 7 },
        Case(name: "sequence bits 65", expected: Status.outOfRange) { $0.sequence_bits = 65 },
        Case(name: "sequence bits 0", expected: Status.outOfRange) { $0.sequence_bits = 0 },
        Case(name: "first sequence 256 with 8 bits", expected: Status.outOfRange) {
            $0.sequence_bits = 8
            $0.first_sequence = 256
        },
        Case(name: "first sequence 2^32 with 32 bits", expected: Status.outOfRange) {
            $0.sequence_bits = 32
            $0.first_sequence = 1 << 32
        },
    ]

    @Test("An invalid behaviour field is rejected by both start functions", arguments: behaviourCases)
    func invalidBehaviour(_ testCase: Case) {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            testCase.change(&behavior)
            let recorder = Recorder()
            #expect(startRequest(client, behavior, recorder: recorder).status == testCase.expected)
            #expect(startDownload(client, behavior, recorder: recorder, totalBytes: 10).status == testCase.expected)
            #expect(recorder.entries.isEmpty)
            #expect(recorder.releases == 0)
            let counted = counters(client)
            #expect(counted.bad_calls == 2)
            #expect(counted.contexts_created == 0)
            #expect(counted.handles_created == 0)
        }
    }

    @Test("Outcomes beyond completion_count are not validated")
    func outcomesBeyondCount() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 1
            behavior.outcomeList = [Int32(LSDK_OUTCOME_SUCCESS), 99]
            let recorder = Recorder()
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("Request and download sizes out of range are rejected")
    func requestRanges() {
        withClient { client in
            let recorder = Recorder()
            #expect(
                startRequest(client, .defaults(), recorder: recorder, responseSize: LSDK_MAX_CHUNK_SIZE + 1).status
                    == Status.outOfRange)
            #expect(
                startDownload(client, .defaults(), recorder: recorder, totalBytes: (1 << 40) + 1).status
                    == Status.outOfRange)
            #expect(recorder.entries.isEmpty)
            #expect(counters(client).bad_calls == 2)
        }
    }

    @Test("NULL client, callback and out parameters are rejected")
    func nullArguments() {
        let recorder = Recorder()
        #expect(startRequest(nil, .defaults(), recorder: recorder).status == Status.nullArgument)
        #expect(startDownload(nil, .defaults(), recorder: recorder, totalBytes: 1).status == Status.nullArgument)
        #expect(lsdk_client_create(nil, nil) == Status.nullArgument)
        #expect(lsdk_client_destroy(nil) == Status.nullArgument)
        #expect(lsdk_client_set_session_token(nil, "x") == Status.nullArgument)
        var buffer = [CChar](repeating: 0, count: 4)
        #expect(lsdk_client_get_session_token(nil, &buffer, 4) == Status.nullArgument)
        var out = lsdk_counters_t()
        #expect(lsdk_client_counters(nil, &out) == Status.nullArgument)
        // NULL is ignored by the init and global functions.
        lsdk_behavior_init(nil)
        lsdk_behavior_init_chaos(nil, 1)
        lsdk_client_config_init(nil)
        lsdk_global_counters(nil)

        withClient { client in
            var request = lsdk_request_t(path: nil, response_size: 1)
            var behavior = lsdk_behavior_t.defaults()
            var handle: lsdk_handle_t = 0
            #expect(lsdk_request_start(client, &request, &behavior, nil, nil, nil, &handle) == Status.nullArgument)
            var download = lsdk_download_request_t(path: nil, total_bytes: 1)
            #expect(lsdk_download_start(client, &download, &behavior, nil, nil, nil, &handle) == Status.nullArgument)
            #expect(handle == 0)
            #expect(lsdk_client_counters(client, nil) == Status.nullArgument)
            #expect(lsdk_client_get_session_token(client, nil, 4) == Status.nullArgument)
            #expect(lsdk_client_get_session_token(client, &buffer, 0) == Status.outOfRange)
            #expect(counters(client).bad_calls == 4)
        }
        #expect(recorder.entries.isEmpty)
    }

    @Test("A client config out of range is rejected; a NULL config means the defaults")
    func clientConfig() {
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        #expect(config.worker_threads == 4)
        var client: OpaquePointer?
        config.worker_threads = 0
        #expect(lsdk_client_create(&config, &client) == Status.outOfRange)
        config.worker_threads = LSDK_MAX_WORKER_THREADS + 1
        #expect(lsdk_client_create(&config, &client) == Status.outOfRange)
        #expect(client == nil)
        #expect(lsdk_client_create(nil, &client) == Status.ok)
        #expect(lsdk_client_destroy(client) == Status.ok)
    }

    @Test("NULL request and behaviour mean the defaults")
    func defaultsForNull() {
        withClient { client in
            let recorder = Recorder()
            let context = recorder.retainedContext()
            var handle: lsdk_handle_t = 0
            #expect(
                lsdk_request_start(client, nil, nil, recorderCompletion, context, recorderRelease, &handle) == Status.ok
            )
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.status) == [Status.ok])
            #expect(recorder.entries.first?.length == 0)
            #expect(recorder.entries.first?.message == "")
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("Pause and resume on a request are NOT_A_STREAM")
    func notAStream() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 0
            behavior.set(cancelMode: LSDK_CANCEL_SILENT)
            let recorder = Recorder()
            let (_, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(lsdk_pause(handle) == Status.notAStream)
            #expect(lsdk_resume(handle) == Status.notAStream)
            #expect(counters(client).bad_calls == 2)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("Every status has a description; unknown ones too")
    func statusStrings() {
        let known = (0...18).map { String(cString: lsdk_status_string(lsdk_status_t($0))) }
        #expect(Set(known).count == 19)
        #expect(known.allSatisfy { !$0.isEmpty && $0 != "unknown status" })
        #expect(String(cString: lsdk_status_string(19)) == "unknown status")
        #expect(String(cString: lsdk_status_string(-1)) == "unknown status")
        #expect(String(cString: lsdk_status_string(Int32.max)) == "unknown status")
    }
}
