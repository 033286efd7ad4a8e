import CLegacySDK
import TestSupport
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("SimulatedBehavior mirrors lsdk_behavior_t", .onOwnThread)
struct SDKBehaviorTests {
    @Test("Swift enum cases carry the SDK's constants")
    func enumConstants() {
        #expect(
            SimulatedBehavior.Delivery.allCases.map(\.rawValue) == [
                Int32(LSDK_DELIVERY_SYNC), Int32(LSDK_DELIVERY_WORKER), Int32(LSDK_DELIVERY_FRESH_THREAD),
                Int32(LSDK_DELIVERY_MIXED), Int32(LSDK_DELIVERY_LOOP),
            ])
        #expect(
            SimulatedBehavior.Outcome.allCases.map(\.rawValue) == [
                Int32(LSDK_OUTCOME_SUCCESS), Int32(LSDK_OUTCOME_ERROR),
            ])
        #expect(
            SimulatedBehavior.CancelMode.allCases.map(\.rawValue) == [
                Int32(LSDK_CANCEL_CALLBACK_SYNC), Int32(LSDK_CANCEL_CALLBACK_ASYNC), Int32(LSDK_CANCEL_SILENT),
                Int32(LSDK_CANCEL_IGNORED), Int32(LSDK_CANCEL_WAITS),
            ])
        #expect(
            SimulatedBehavior.StreamEnd.allCases.map(\.rawValue) == [
                Int32(LSDK_STREAM_END_SUCCESS), Int32(LSDK_STREAM_END_ERROR), Int32(LSDK_STREAM_END_NONE),
            ])
        #expect(
            SimulatedBehavior.PauseMode.allCases.map(\.rawValue) == [
                Int32(LSDK_PAUSE_STOPS), Int32(LSDK_PAUSE_DROPS),
            ])
    }

    @Test("The default behaviour is the SDK's, field by field")
    func defaultsMatchC() {
        var c = lsdk_behavior_t()
        lsdk_behavior_init(&c)
        let swift = SimulatedBehavior.wellBehaved
        #expect(swift.delivery.rawValue == c.delivery)
        #expect(swift.delayMicroseconds == c.delay_us && swift.jitterMicroseconds == c.jitter_us)
        #expect(swift.outcomes == [.success])
        #expect(swift.cancelMode.rawValue == c.cancel_mode)
        #expect(swift.lateCallbackAfterCancel == c.late_callback_after_cancel)
        #expect(swift.chunkSize == c.chunk_size && swift.progressEvery == c.progress_every)
        #expect(swift.intervalMicroseconds == c.interval_us)
        #expect(swift.streamConcurrency == c.stream_concurrency)
        #expect(swift.streamEnd.rawValue == c.stream_end)
        #expect(swift.duplicateTerminal == c.duplicate_terminal)
        #expect(swift.eventsAfterTerminal == c.events_after_terminal)
        #expect(swift.pauseMode.rawValue == c.pause_mode)
        #expect(swift.errorStatus == .remote && swift.errorMessage == nil && swift.seed == 0)
        #expect(swift.firstSequence == c.first_sequence && swift.sequenceBits == c.sequence_bits)
        #expect(swift.sequenceJumpAt == c.sequence_jump_at && swift.sequenceJump == c.sequence_jump)
        #expect(swift.sequenceCorruptAt == c.sequence_corrupt_at)
        #expect(swift.sequenceCorruptValue == c.sequence_corrupt_value)
        #expect(c.sequence_bits == 64 && c.first_sequence == 0)
    }

    static let presets: [(String, SimulatedBehavior)] = [
        ("wellBehaved", .wellBehaved), ("synchronous", .synchronous), ("freshThread", .freshThread),
        ("mixedDelivery", .mixedDelivery(seed: 5)), ("repeats", .repeats([.success, .failure, .success])),
        ("neverCompletes", .neverCompletes), ("cancelCallsBackSynchronously", .cancelCallsBackSynchronously),
        ("cancelSilently", .cancelSilently), ("cancelIgnored", .cancelIgnored),
        ("lateCallbackAfterCancel", .lateCallbackAfterCancel),
        ("concurrentOutOfOrderStream", .concurrentOutOfOrderStream), ("liveStream", .liveStream),
        ("failing", .failing(.resources, message: "no disk")), ("chaos", .chaos(seed: 77)),
        (
            "everything changed",
            SimulatedBehavior().with {
                $0.delivery = .mixed
                $0.delayMicroseconds = 11
                $0.jitterMicroseconds = 12
                $0.outcomes = [.failure, .success, .failure, .failure, .success, .success, .failure, .success]
                $0.cancelMode = .ignored
                $0.lateCallbackAfterCancel = true
                $0.chunkSize = 13
                $0.progressEvery = 14
                $0.intervalMicroseconds = 15
                $0.streamConcurrency = 7
                $0.streamEnd = .none
                $0.duplicateTerminal = true
                $0.eventsAfterTerminal = 16
                $0.pauseMode = .drops
                $0.errorStatus = LegacySDKError(rawValue: 99)
                $0.errorMessage = "message"
                $0.seed = 17
                $0.firstSequence = 200
                $0.sequenceBits = 8
                $0.sequenceJumpAt = 18
                $0.sequenceJump = 19
                $0.sequenceCorruptAt = 20
                $0.sequenceCorruptValue = .max
            }
        ),
    ]

    @Test("Every preset round-trips through lsdk_behavior_t unchanged", arguments: presets.map(\.0))
    func presetRoundTrip(name: String) throws {
        let preset = try #require(Self.presets.first { $0.0 == name }?.1)
        let back = SDK.withCBehavior(preset) { SimulatedBehavior($0.pointee) }
        #expect(back == preset)
        #expect(back.errorStatus.rawValue == preset.errorStatus.rawValue)
        // And the SDK accepts it.
        let valid = SDK.withCBehavior(preset) { sdkTestValidate($0) }
        #expect(valid == .ok)
    }

    @Test("Presets set the knob their name promises")
    func presetKnobs() {
        #expect(SimulatedBehavior.synchronous.delivery == .synchronous)
        #expect(SimulatedBehavior.freshThread.delivery == .freshThread)
        #expect(SimulatedBehavior.mixedDelivery().delivery == .mixed)
        #expect(SimulatedBehavior.repeats([.success, .failure]).outcomes == [.success, .failure])
        #expect(SimulatedBehavior.neverCompletes.outcomes.isEmpty)
        #expect(SimulatedBehavior.neverCompletes.streamEnd == .none)
        #expect(SimulatedBehavior.cancelCallsBackSynchronously.cancelMode == .callbackSynchronously)
        #expect(SimulatedBehavior.cancelSilently.cancelMode == .silent)
        #expect(SimulatedBehavior.cancelIgnored.cancelMode == .ignored)
        #expect(SimulatedBehavior.lateCallbackAfterCancel.lateCallbackAfterCancel)
        #expect(SimulatedBehavior.concurrentOutOfOrderStream.streamConcurrency > 1)
        #expect(SimulatedBehavior.liveStream.pauseMode == .drops)
        let failing = SimulatedBehavior.failing(.busy, message: "m")
        #expect(failing.outcomes == [.failure] && failing.streamEnd == .failure)
        #expect(failing.errorStatus == .busy && failing.errorMessage == "m")
    }

    @Test("Chaos is the SDK's own draw, reproducible from the seed")
    func chaosReadsBackC() {
        for seed in UInt64(0)..<200 {
            var c = lsdk_behavior_t()
            lsdk_behavior_init_chaos(&c, seed)
            #expect(SimulatedBehavior.chaos(seed: seed) == SimulatedBehavior(c))
            #expect(SimulatedBehavior.chaos(seed: seed) == SimulatedBehavior.chaos(seed: seed))
        }
        let distinct = Set((UInt64(0)..<50).map { SimulatedBehavior.chaos(seed: $0) })
        #expect(distinct.count > 40)
    }
}

/// The SDK's verdict on a behaviour, through a request start that is cancelled at once.
private func sdkTestValidate(_ behavior: UnsafePointer<lsdk_behavior_t>) -> SDKTestVerdict {
    var copy = behavior.pointee
    copy.completion_count = 0
    copy.cancel_mode = Int32(LSDK_CANCEL_SILENT)
    var config = lsdk_client_config_t()
    lsdk_client_config_init(&config)
    config.worker_threads = 1
    var client: OpaquePointer?
    guard lsdk_client_create(&config, &client) == 0 else { return .failed(-1) }
    defer { _ = lsdk_client_destroy(client) }
    var handle: lsdk_handle_t = 0
    let status = lsdk_request_start(client, nil, &copy, sdkTestIgnoreCompletion, nil, nil, &handle)
    if status == 0 { _ = lsdk_handle_release(handle) }
    return status == 0 ? .ok : .failed(status)
}

private enum SDKTestVerdict: Equatable {
    case ok
    case failed(Int32)
}

private func sdkTestIgnoreCompletion(
    _ context: UnsafeMutableRawPointer?, _ status: lsdk_status_t, _ response: UnsafePointer<lsdk_response_t>?
) {}
