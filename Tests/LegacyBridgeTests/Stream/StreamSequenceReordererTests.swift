import Testing
import TestSupport
@testable import LegacyBridge

@Suite("Stream: SequenceReorderer")
struct StreamSequenceReordererTests {
    private func feed(
        _ reorderer: inout SequenceReorderer<Int>, _ sequences: [UInt64]
    ) -> (released: [Int], placements: [SequenceReorderer<Int>.Placement]) {
        var released: [Int] = []
        var placements: [SequenceReorderer<Int>.Placement] = []
        for sequence in sequences {
            placements.append(
                reorderer.insert(Int(truncatingIfNeeded: sequence), sequence: sequence) { released.append($0) })
        }
        return (released, placements)
    }

    @Test("in-window shuffles are released in sequence order")
    func restoresOrderWithinWindow() {
        var generator = SplitMix64(seed: 7)
        for window in [2, 3, 8, 64] {
            // Shuffle within consecutive blocks of `window` numbers: never more than window - 1 ahead.
            var sequences: [UInt64] = []
            for block in 0..<20 {
                var part = (0..<UInt64(window)).map { UInt64(block * window) + $0 }
                part.shuffle(using: &generator)
                sequences += part
            }
            var reorderer = SequenceReorderer<Int>(window: window)
            let (released, _) = feed(&reorderer, sequences)
            #expect(released == Array(0..<(20 * window)), "window \(window)")
            #expect(reorderer.heldCount == 0)
            #expect(reorderer.droppedStale == 0)
            #expect(reorderer.skippedSequences == 0)
            #expect(reorderer.nextSequence == UInt64(20 * window))
        }
    }

    @Test("a held element is released together with the run it completes")
    func releasesRuns() {
        var reorderer = SequenceReorderer<Int>(window: 4, firstSequence: 10)
        let (released, placements) = feed(&reorderer, [12, 13, 11, 10])
        #expect(placements == [.held, .held, .held, .released])
        #expect(released == [10, 11, 12, 13])
    }

    @Test("stale elements (duplicates, numbers below the next expected) are dropped and counted, never delivered")
    func dropsStale() {
        var reorderer = SequenceReorderer<Int>(window: 4)
        let (released, placements) = feed(&reorderer, [0, 0, 2, 2, 1, 1, 3])
        #expect(released == [0, 1, 2, 3])
        #expect(placements == [.released, .stale, .held, .stale, .released, .stale, .released])
        #expect(reorderer.droppedStale == 3)
        #expect(reorderer.nextSequence == 4)
    }

    @Test("window overflow under .skip gives up just enough missing numbers, counts them, and progress never goes back")
    func overflowSkipsGap() {
        var reorderer = SequenceReorderer<Int>(window: 4)
        // 0 never arrives; 1, 2, 3 are held; 4 does not fit [0, 4) so 0 is skipped.
        var (released, placements) = feed(&reorderer, [1, 2, 3, 4])
        #expect(placements == [.held, .held, .held, .released])
        #expect(released == [1, 2, 3, 4])
        #expect(reorderer.skippedSequences == 1)
        // The late 0 is now older than the skipped gap: stale.
        (released, placements) = feed(&reorderer, [0, 5])
        #expect(placements == [.stale, .released])
        #expect(released == [5])
        #expect(reorderer.droppedStale == 1)
        // A jump beyond the window but within jumpLimit skips the whole gap at once (no
        // per-number loop) and keeps the window's tail.
        (released, placements) = feed(&reorderer, [60_000])
        #expect(placements == [.held])
        #expect(released.isEmpty)
        #expect(reorderer.nextSequence == 60_000 - 3)
        #expect(reorderer.skippedSequences == 1 + (60_000 - 3 - 6))
    }

    @Test("window overflow under .fail rejects the element and changes nothing")
    func overflowFails() {
        var reorderer = SequenceReorderer<Int>(window: 2, gapPolicy: .fail)
        var (released, placements) = feed(&reorderer, [1, 2])
        #expect(placements == [.held, .rejected])
        #expect(released.isEmpty)
        #expect(reorderer.nextSequence == 0)
        #expect(reorderer.heldCount == 1)
        (released, placements) = feed(&reorderer, [0])
        #expect(released == [0, 1])
    }

    @Test("window 1 releases only the next number; anything ahead is a gap")
    func windowOfOne() {
        var reorderer = SequenceReorderer<Int>(window: 1)
        let (released, placements) = feed(&reorderer, [0, 2, 1, 3])
        #expect(placements == [.released, .released, .stale, .released])
        #expect(released == [0, 2, 3])
        #expect(reorderer.skippedSequences == 1)
    }

    @Test("flush releases held elements in order across gaps; removeAll discards them")
    func flushAndRemoveAll() {
        var reorderer = SequenceReorderer<Int>(window: 8)
        _ = feed(&reorderer, [2, 5, 3])
        var flushed: [Int] = []
        reorderer.flush { flushed.append($0) }
        #expect(flushed == [2, 3, 5])
        #expect(reorderer.skippedSequences == 3)  // 0, 1, 4
        #expect(reorderer.nextSequence == 6)

        _ = feed(&reorderer, [9, 7])
        #expect(reorderer.removeAll() == [7, 9])
        #expect(reorderer.heldCount == 0)
        #expect(reorderer.nextSequence == 6)
        let (released, _) = feed(&reorderer, [6, 7])
        #expect(released == [6, 7])
    }

    @Test("the convenience insert returns the released run")
    func convenienceInsert() {
        var reorderer = SequenceReorderer<String>(window: 3)
        #expect(reorderer.insert("b", sequence: 1).released.isEmpty)
        let result = reorderer.insert("a", sequence: 0)
        #expect(result.placement == .released)
        #expect(result.released == ["a", "b"])
    }

    // MARK: Untrusted numbers

    @Test("numbers wrap through UInt64.max to 0 without a trap, in and out of order")
    func wrapsThroughMax() {
        var reorderer = SequenceReorderer<Int>(window: 4, firstSequence: UInt64.max - 2)
        let (released, placements) = feed(&reorderer, [UInt64.max - 1, UInt64.max - 2, 0, UInt64.max, 2, 1])
        #expect(placements == [.held, .released, .held, .released, .held, .released])
        #expect(
            released.map { UInt64(bitPattern: Int64($0)) } == [UInt64.max - 2, UInt64.max - 1, UInt64.max, 0, 1, 2])
        #expect(reorderer.nextSequence == 3)
        #expect(reorderer.droppedStale == 0 && reorderer.skippedSequences == 0)
    }

    @Test("the (uint64_t)-1 sentinel and other numbers just behind are stale: dropped, counted, never delivered")
    func sentinelIsStale() {
        var reorderer = SequenceReorderer<Int>(window: 4)
        let (released, placements) = feed(&reorderer, [0, UInt64.max, 1, UInt64.max, 2])
        #expect(placements == [.released, .stale, .released, .stale, .released])
        #expect(released == [0, 1, 2])
        #expect(reorderer.droppedStale == 2)
    }

    @Test("one garbage far-ahead number does not discard the rest of the stream: the next arrival proves it garbage")
    func garbageFarJumpIsDropped() {
        var reorderer = SequenceReorderer<Int>(window: 4)
        var (released, placements) = feed(&reorderer, [0, 1, 1 << 40, 2, 3])
        #expect(placements == [.released, .released, .held, .released, .released])
        #expect(released == [0, 1, 2, 3])
        #expect(reorderer.droppedStale == 1)
        #expect(reorderer.heldCount == 0)
        // Also when the garbage arrives while elements wait behind a gap.
        (released, placements) = feed(&reorderer, [5, 1 << 50, 4])
        #expect(placements == [.held, .held, .released])
        #expect(released == [4, 5])
        #expect(reorderer.droppedStale == 2)
        #expect(reorderer.skippedSequences == 0)
    }

    @Test(
        "a real far jump (a discontinuity) is followed once the next arrival confirms it; the skipped numbers are counted"
    )
    func realFarJumpIsFollowed() {
        var reorderer = SequenceReorderer<Int>(window: 4)
        let base: UInt64 = 1 << 40
        let (released, placements) = feed(&reorderer, [0, 2, base + 1, base, base + 2])
        // 2 is held behind the missing 1; base + 1 is on probation; base confirms it: the old run
        // is released (1 skipped), then the new run from base.
        #expect(placements == [.released, .held, .held, .released, .released])
        #expect(released == [0, 2, Int(base), Int(base + 1), Int(base + 2)])
        #expect(reorderer.skippedSequences == 1 + (base - 3))
        #expect(reorderer.nextSequence == base + 3)
    }

    @Test("a 32-bit counter that wraps to 0 (a far jump backwards) is followed: nothing lost")
    func narrowCounterWrapIsFollowed() {
        var reorderer = SequenceReorderer<Int>(window: 2, firstSequence: (1 << 32) - 3)
        let sequences: [UInt64] = [(1 << 32) - 3, (1 << 32) - 2, (1 << 32) - 1, 0, 1, 2, 3, 4, 5, 6]
        let (released, _) = feed(&reorderer, sequences)
        #expect(released.map(UInt64.init) == sequences, "all 10 elements, in order")
        #expect(reorderer.droppedStale == 0)
        #expect(reorderer.nextSequence == 7)
    }

    @Test("a far jump still on probation is taken as real by flush and by giving up a gap")
    func probationResolvedByFlushAndGiveUp() {
        var reorderer = SequenceReorderer<Int>(window: 4)
        _ = feed(&reorderer, [0, 1 << 30])
        var flushed: [Int] = []
        reorderer.flush { flushed.append($0) }
        #expect(flushed == [1 << 30])
        #expect(reorderer.nextSequence == (1 << 30) + 1)

        var timed = SequenceReorderer<Int>(window: 4)
        _ = feed(&timed, [0, 2, 3])
        var released: [Int] = []
        #expect(timed.giveUpGap { released.append($0) })
        #expect(released == [2, 3])
        #expect(timed.skippedSequences == 1)
        #expect(timed.heldCount == 0)

        var failing = SequenceReorderer<Int>(window: 4, gapPolicy: .fail)
        _ = feed(&failing, [0, 2])
        #expect(!failing.giveUpGap { _ in }, "under .fail a gap cannot be given up")
        #expect(failing.heldCount == 1)
    }

    @Test("a huge window allocates nothing up front and holds far-apart elements sparsely")
    func hugeWindowIsLazy() {
        var reorderer = SequenceReorderer<Int>(window: Int.max)
        #expect(reorderer.ring.isEmpty && reorderer.map.isEmpty)
        let (released, placements) = feed(&reorderer, [1 << 40, 1 << 20, 0])
        #expect(placements == [.held, .held, .released])
        #expect(released == [0])
        #expect(reorderer.heldCount == 2)
        var flushed: [Int] = []
        reorderer.flush { flushed.append($0) }
        #expect(flushed == [1 << 20, 1 << 40])
        #expect(reorderer.skippedSequences == (1 << 40) - 2)

        var small = SequenceReorderer<Int>(window: 1_000)
        #expect(small.ring.isEmpty)
        _ = feed(&small, [3])
        #expect(small.ring.count == 1_024, "a power of two at least the window, allocated on the first hold")
    }

    @Test("random hostile numbers never trap and keep the accounting exact", arguments: [1, 2, 7, 1_500])
    func hostileNumbersKeepAccounting(window: Int) {
        var generator = SplitMix64(seed: UInt64(window))
        for policy in [StreamOrdering.GapPolicy.skip, .fail] {
            var reorderer = SequenceReorderer<Int>(window: window, firstSequence: generator.next(), gapPolicy: policy)
            var released = 0
            var discarded = 0
            var inserted = 0
            var rejected = 0
            for _ in 0..<20_000 {
                let base = reorderer.nextSequence
                let sequence: UInt64
                switch generator.next() % 6 {
                case 0: sequence = generator.next()
                case 1: sequence = UInt64.max
                case 2: sequence = base &- (generator.next() % 8)
                default: sequence = base &+ (generator.next() % UInt64(window &+ 3))
                }
                inserted += 1
                let placement = reorderer.insert(
                    0, sequence: sequence, release: { _ in released += 1 }, discard: { _ in discarded += 1 })
                if placement == .rejected { rejected += 1 }
            }
            #expect(
                inserted == released + reorderer.heldCount + reorderer.droppedStale + rejected,
                "every element is released, held, dropped as stale/garbage or rejected: \(policy)")
            #expect(discarded <= reorderer.droppedStale)
        }
    }

    @Test(
        "a window below 1 stops the program with a message",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func rejectsBadWindow() async {
        await #expect(processExitsWith: .failure) {
            _ = SequenceReorderer<Int>(window: 0)
        }
    }
}
