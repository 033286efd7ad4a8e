import CLegacySDK
import Foundation
import TestSupport
import Testing

@Suite("Hostile sequence numbers: start, width, jumps and garbage", .onOwnThread)
struct SequenceTests {
    private func stream(progress: UInt32 = 0) -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.set(delivery: LSDK_DELIVERY_SYNC)
        behavior.chunk_size = 10
        behavior.progress_every = progress
        return behavior
    }

    /// Runs a synchronous download to its end; returns the entries (every byte checked by the recorder).
    private func run(_ behavior: lsdk_behavior_t, totalBytes: UInt64) -> [Entry] {
        withClient { client in
            let recorder = Recorder()
            let (status, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: totalBytes)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
            let entries = recorder.entries
            #expect(entries.allSatisfy { $0.bytesValid })
            // Offsets stay truthful whatever the numbering.
            let offsets = entries.filter { $0.kind == .data }.map(\.bytesDone)
            #expect(offsets == (0..<UInt64(offsets.count)).map { $0 * 10 })
            return entries
        }
    }

    @Test("Defaults number 0, 1, 2, ...")
    func defaults() {
        let behavior = lsdk_behavior_t.defaults()
        #expect(behavior.first_sequence == 0 && behavior.sequence_bits == 64)
        #expect(behavior.sequence_jump_at == 0 && behavior.sequence_jump == 0)
        #expect(behavior.sequence_corrupt_at == 0 && behavior.sequence_corrupt_value == 0)
        #expect(run(stream(), totalBytes: 40).map(\.sequence) == [0, 1, 2, 3, 4])
    }

    @Test("A 64-bit counter starting near the top wraps through UINT64_MAX to 0")
    func wraps64() {
        var behavior = stream()
        behavior.first_sequence = UInt64.max - 2
        #expect(run(behavior, totalBytes: 50).map(\.sequence) == [.max - 2, .max - 1, .max, 0, 1, 2])
    }

    @Test("A 32-bit counter carried in the 64-bit field wraps to 0 after 2^32 - 1")
    func wraps32() {
        var behavior = stream()
        behavior.sequence_bits = 32
        behavior.first_sequence = (1 << 32) - 2
        #expect(run(behavior, totalBytes: 40).map(\.sequence) == [(1 << 32) - 2, (1 << 32) - 1, 0, 1, 2])
    }

    @Test("An 8-bit counter wraps every 256 events")
    func wraps8() {
        var behavior = stream()
        behavior.sequence_bits = 8
        let sequences = run(behavior, totalBytes: 3000).map(\.sequence)
        #expect(sequences.count == 301)
        #expect(sequences == (0..<301).map { UInt64($0 % 256) })
    }

    @Test("After the event with index jump_at, numbering jumps ahead and goes on from there")
    func jump() {
        var behavior = stream()
        behavior.sequence_jump_at = 3
        behavior.sequence_jump = 1000
        #expect(run(behavior, totalBytes: 50).map(\.sequence) == [0, 1, 2, 1003, 1004, 1005])
    }

    @Test("A jump past the top wraps, like any other number")
    func jumpWraps() {
        var behavior = stream()
        behavior.first_sequence = UInt64.max - 1
        behavior.sequence_jump_at = 1
        behavior.sequence_jump = 5
        #expect(run(behavior, totalBytes: 30).map(\.sequence) == [.max - 1, 4, 5, 6])
    }

    @Test("One corrupted data event carries the garbage; its neighbours and the rest are numbered normally")
    func corrupt() {
        var behavior = stream(progress: 1)
        behavior.sequence_corrupt_at = 2
        behavior.sequence_corrupt_value = UInt64.max
        let entries = run(behavior, totalBytes: 40)
        #expect(entries.map(\.kind) == [.data, .progress, .data, .progress, .data, .progress, .data, .progress, .end])
        #expect(entries.map(\.sequence) == [0, 1, .max, 3, 4, 5, 6, 7, 8])
        #expect(entries[2].bytesDone == 10)  // the second chunk, truthfully placed
    }

    @Test("A corrupt index beyond the content, or 0, changes nothing")
    func corruptOutside() {
        var behavior = stream()
        behavior.sequence_corrupt_at = 99
        behavior.sequence_corrupt_value = 7
        #expect(run(behavior, totalBytes: 30).map(\.sequence) == [0, 1, 2, 3])
    }

    @Test("The cancellation END is numbered by the same rule")
    func cancellationEndNumbered() {
        withClient { client in
            var behavior = stream()
            behavior.first_sequence = UInt64.max - 1
            behavior.set(cancelMode: LSDK_CANCEL_CALLBACK_SYNC)
            behavior.stream_end = Int32(LSDK_STREAM_END_NONE)
            let recorder = Recorder()
            let (status, handle) = startDownload(client, behavior, recorder: recorder, totalBytes: 20)
            #expect(status == Status.ok)
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.sequence) == [.max - 1, .max, 0])
            #expect(recorder.entries.last?.status == Status.cancelled)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("A refused pull event keeps its corrupted number when it comes again")
    func refusedCorruptKeepsNumber() {
        withClient { client in
            var behavior = stream()
            behavior.sequence_corrupt_at = 2
            behavior.sequence_corrupt_value = 1 << 60
            let refused = LockedList<Bool>()
            let recorder = Recorder(answer: { _, entry in
                guard entry.sequence == 1 << 60, refused.values.isEmpty else { return Int32(LSDK_PULL_CONTINUE) }
                refused.append(true)
                return Int32(LSDK_PULL_PAUSE)
            })
            let (status, handle) = startPullDownload(client, behavior, recorder: recorder, totalBytes: 30)
            #expect(status == Status.ok)
            #expect(lsdk_resume(handle) == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.sequence) == [0, 1 << 60, 1 << 60, 2, 3])
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }
}
