import CLegacySDK
import TestSupport
import Testing

@Suite("Behaviour defaults and chaos", .onOwnThread)
struct BehaviorTests {
    @Test("lsdk_behavior_init fills the documented defaults")
    func defaults() {
        let behavior = lsdk_behavior_t.defaults()
        #expect(behavior.delivery == Int32(LSDK_DELIVERY_WORKER))
        #expect(behavior.delay_us == 0 && behavior.jitter_us == 0)
        #expect(behavior.completion_count == 1)
        #expect(behavior.outcomeList == Array(repeating: Int32(LSDK_OUTCOME_SUCCESS), count: 8))
        #expect(behavior.cancel_mode == Int32(LSDK_CANCEL_CALLBACK_ASYNC))
        #expect(!behavior.late_callback_after_cancel)
        #expect(behavior.chunk_size == 4096)
        #expect(behavior.progress_every == 1)
        #expect(behavior.interval_us == 0)
        #expect(behavior.stream_concurrency == 1)
        #expect(behavior.stream_end == Int32(LSDK_STREAM_END_SUCCESS))
        #expect(!behavior.duplicate_terminal)
        #expect(behavior.events_after_terminal == 0)
        #expect(behavior.pause_mode == Int32(LSDK_PAUSE_STOPS))
        #expect(behavior.error_status == Status.remote)
        #expect(behavior.error_message == nil)
        #expect(behavior.seed == 0)
    }

    @Test("Chaos draws every knob from the seed, reproducibly, within the promised bounds")
    func chaos() {
        var deliveries = Set<Int32>()
        var modes = Set<Int32>()
        var counts = Set<UInt32>()
        var ends = Set<Int32>()
        var concurrencies = Set<UInt32>()
        var lates = Set<Bool>()
        var pauses = Set<Int32>()
        for seed in UInt64(0)..<2000 {
            let behavior = lsdk_behavior_t.chaos(seed)
            let again = lsdk_behavior_t.chaos(seed)
            #expect(withUnsafeBytes(of: behavior) { Array($0) } == withUnsafeBytes(of: again) { Array($0) })
            #expect(behavior.delay_us + behavior.jitter_us <= 2000)
            #expect(behavior.interval_us <= 100)
            #expect(behavior.chunk_size >= 1024 && behavior.chunk_size <= 16_384)
            #expect(behavior.completion_count <= 8)
            #expect(behavior.seed != 0)
            // Numbering stays plain under chaos: a consumer must opt in to hostile numbers.
            #expect(behavior.first_sequence == 0 && behavior.sequence_bits == 64)
            #expect(behavior.sequence_jump_at == 0 && behavior.sequence_corrupt_at == 0)
            if behavior.completion_count == 0 || behavior.stream_end == Int32(LSDK_STREAM_END_NONE) {
                #expect(behavior.cancel_mode != Int32(LSDK_CANCEL_IGNORED))
            }
            deliveries.insert(behavior.delivery)
            modes.insert(behavior.cancel_mode)
            counts.insert(behavior.completion_count)
            ends.insert(behavior.stream_end)
            concurrencies.insert(behavior.stream_concurrency)
            lates.insert(behavior.late_callback_after_cancel)
            pauses.insert(behavior.pause_mode)
        }
        #expect(deliveries.count == 4)
        #expect(!deliveries.contains(Int32(LSDK_DELIVERY_LOOP)))  // valid on clients without a loop thread
        #expect(modes.count == 4)
        #expect(!modes.contains(Int32(LSDK_CANCEL_WAITS)))  // chaos runs must not deadlock by design
        #expect(counts.count >= 5)
        #expect(ends.count == 3)
        #expect(concurrencies.count >= 3)
        #expect(lates.count == 2)
        #expect(pauses.count == 2)
        #expect(lsdk_behavior_t.chaos(1).seed != lsdk_behavior_t.chaos(2).seed)
    }

    @Test("Chaos behaviours are valid input for both start functions")
    func chaosIsValid() {
        withClient { client in
            for seed in UInt64(0)..<200 {
                var behavior = lsdk_behavior_t.chaos(seed)
                behavior.completion_count = 0  // keep this test about validation only
                behavior.set(cancelMode: LSDK_CANCEL_SILENT)
                behavior.stream_end = Int32(LSDK_STREAM_END_NONE)
                let recorder = Recorder()
                let (status, handle) = startRequest(client, behavior, recorder: recorder)
                #expect(status == Status.ok)
                #expect(lsdk_cancel(handle) == Status.ok)
                #expect(lsdk_handle_release(handle) == Status.ok)
            }
        }
    }
}
