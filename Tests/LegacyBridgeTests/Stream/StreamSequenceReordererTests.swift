import Testing
@testable import LegacyBridge

@Suite("Stream: SequenceReorderer")
struct StreamSequenceReordererTests {
    private func feed(_ reorderer: inout SequenceReorderer<Int>, _ sequences: [UInt64]) -> (released: [Int], placements: [SequenceReorderer<Int>.Placement]) {
        var released: [Int] = []
        var placements: [SequenceReorderer<Int>.Placement] = []
        for sequence in sequences {
            placements.append(reorderer.insert(Int(sequence), sequence: sequence) { released.append($0) })
        }
        return (released, placements)
    }

    @Test("in-window shuffles are released in sequence order")
    func restoresOrderWithinWindow() {
        var generator = StreamSplitMix(seed: 7)
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

    @Test("a window below 1 stops the program with a message")
    func rejectsBadWindow() async {
        await #expect(processExitsWith: .failure) {
            _ = SequenceReorderer<Int>(window: 0)
        }
    }
}

/// A small deterministic random generator for reproducible shuffles.
struct StreamSplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
