import Testing
@testable import LegacyBridge

/// An element that owns something: counts how many instances are alive.
private final class StreamRingTracked: @unchecked Sendable {
    // @unchecked: `alive` is only touched by the single test thread.
    nonisolated(unsafe) static var alive = 0
    let value: Int
    init(_ value: Int) {
        self.value = value
        Self.alive += 1
    }
    deinit { Self.alive -= 1 }
}

@Suite("Stream: ring buffer", .serialized)
struct StreamRingTests {
    /// Random appends (single and bulk), removals (one at a time and, for trivial elements, by
    /// runs as the iterator does) and clears against an array, across wrap-around and growth.
    func checkAgainstModel<Element>(
        _ make: (Int) -> Element, _ value: (Element) -> Int, seed: UInt64
    ) -> [String] {
        var random = StreamSplitMix(seed: seed)
        var problems: [String] = []
        for round in 0..<300 where problems.isEmpty {
            var ring = StreamRing<Element>()
            var model: [Int] = []
            var next = 0
            for step in 0..<200 where problems.isEmpty {
                switch random.next() % 8 {
                case 0, 1:
                    ring.append(make(next))
                    model.append(next)
                    next += 1
                case 2:
                    let elements = (0..<Int(random.next() % 40)).map { make(next + $0) }
                    model += (0..<elements.count).map { next + $0 }
                    next += elements.count
                    elements.withUnsafeBufferPointer { ring.append(contentsOf: $0) }
                case 3, 4:
                    let popped = ring.popFirst().map(value)
                    let expected = model.isEmpty ? nil : model.removeFirst()
                    if popped != expected {
                        problems.append(
                            "round \(round) step \(step): popped \(String(describing: popped)), expected \(String(describing: expected))"
                        )
                    }
                case 5, 6:
                    guard StreamRing<Element>.isPlain, !ring.isEmpty else { continue }
                    let end = ring.plainRunEnd(limit: 1 + Int(random.next() % 70))
                    let run = (ring.head..<end).map { value(ring.plain[$0]) }
                    let expected = Array(model.prefix(run.count))
                    if run.isEmpty || run != expected {
                        problems.append("round \(round) step \(step): run \(run), expected \(expected)")
                    }
                    ring.removeFirst(plain: run.count)
                    model.removeFirst(run.count)
                default:
                    if random.next() % 4 == 0 {
                        ring.removeAll()
                        model.removeAll()
                    }
                }
                if ring.count != model.count {
                    problems.append("round \(round) step \(step): count \(ring.count) vs \(model.count)")
                }
            }
            var rest: [Int] = []
            while let element = ring.popFirst() { rest.append(value(element)) }
            if rest != model { problems.append("round \(round): left \(rest), expected \(model)") }
        }
        return problems
    }

    @Test("a ring of trivial elements (stored unwrapped) keeps FIFO order across wrap-around, growth, runs and clears")
    func plainMatchesModel() {
        #expect(StreamRing<Int>.isPlain)
        let problems = checkAgainstModel({ $0 }, { $0 }, seed: 0x5EED_0001)
        #expect(problems.isEmpty, "\(problems.prefix(3))")
    }

    @Test(
        "a ring of objects (stored as optionals) keeps FIFO order across wrap-around, growth and clears, and frees all")
    func objectsMatchModel() {
        #expect(!StreamRing<StreamRingTracked>.isPlain)
        let before = StreamRingTracked.alive
        let problems = checkAgainstModel({ StreamRingTracked($0) }, { $0.value }, seed: 0x5EED_0002)
        #expect(problems.isEmpty, "\(problems.prefix(3))")
        #expect(StreamRingTracked.alive == before)
    }

    @Test("a ring lets go of an object as soon as it leaves, and of every object on removeAll")
    func objectsLeavePromptly() {
        let before = StreamRingTracked.alive
        var ring = StreamRing<StreamRingTracked>()
        for value in 0..<40 { ring.append(StreamRingTracked(value)) }  // grows twice
        #expect(StreamRingTracked.alive == before + 40)
        for expected in 0..<10 { #expect(ring.popFirst()?.value == expected) }
        #expect(StreamRingTracked.alive == before + 30)
        ring.removeAll()
        #expect(StreamRingTracked.alive == before)
        #expect(ring.isEmpty)
    }
}
