import Testing
import TestSupport
@testable import LegacyBridge

/// An element that owns something: counts how many instances are alive.
private final class RingTracked: @unchecked Sendable {
    // @unchecked: `alive` is only touched by the single test thread.
    nonisolated(unsafe) static var alive = 0
    let value: Int
    init(_ value: Int) {
        self.value = value
        Self.alive += 1
    }
    deinit { Self.alive -= 1 }
}

@Suite("Ring buffer", .serialized)
struct RingBufferTests {
    /// Random appends (single and bulk), removals (at the front one at a time, by runs as the
    /// iterator does for trivial elements, and from the middle as an offload pool does), clears
    /// and full drains against an array, across wrap-around and growth.
    func checkAgainstModel<Element>(
        _ make: (Int) -> Element, _ value: (Element) -> Int, seed: UInt64
    ) -> [String] {
        var random = SplitMix64(seed: seed)
        var problems: [String] = []
        for round in 0..<300 where problems.isEmpty {
            var ring = RingBuffer<Element>()
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
                    guard RingBuffer<Element>.isPlain, !ring.isEmpty else { continue }
                    let end = ring.plainRunEnd(limit: 1 + Int(random.next() % 70))
                    let run = (ring.head..<end).map { value(ring.plain[$0]) }
                    let expected = Array(model.prefix(run.count))
                    if run.isEmpty || run != expected {
                        problems.append("round \(round) step \(step): run \(run), expected \(expected)")
                    }
                    ring.removeFirst(plain: run.count)
                    model.removeFirst(run.count)
                case 7 where random.next() % 2 == 0:
                    // Removal from the middle, as an offload pool does for a cancelled waiting job.
                    let target = model.isEmpty ? -1 : model[Int(random.next() % UInt64(model.count))]
                    let removed = ring.remove(firstWhere: { value($0) == target }).map(value)
                    let expected = model.firstIndex(of: target).map { model.remove(at: $0) }
                    if removed != expected {
                        problems.append(
                            "round \(round) step \(step): removed \(String(describing: removed)), expected \(String(describing: expected))"
                        )
                    }
                default:
                    switch random.next() % 8 {
                    case 0:
                        ring.removeAll()
                        model.removeAll()
                    case 1:
                        let all = ring.popAll().map(value)
                        if all != model {
                            problems.append("round \(round) step \(step): popAll \(all), expected \(model)")
                        }
                        model.removeAll()
                    default:
                        if ring.elements.map(value) != model {
                            problems.append(
                                "round \(round) step \(step): elements \(ring.elements.map(value)), expected \(model)")
                        }
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

    @Test(
        "a ring of trivial elements (stored unwrapped) keeps FIFO order across wrap-around, growth, runs, removals from the middle and clears"
    )
    func plainMatchesModel() {
        #expect(RingBuffer<Int>.isPlain)
        let problems = checkAgainstModel({ $0 }, { $0 }, seed: 0x5EED_0001)
        #expect(problems.isEmpty, "\(problems.prefix(3))")
    }

    @Test(
        "a ring of objects (stored as optionals) keeps FIFO order across wrap-around, growth, removals from the middle and clears, and frees all"
    )
    func objectsMatchModel() {
        #expect(!RingBuffer<RingTracked>.isPlain)
        let before = RingTracked.alive
        let problems = checkAgainstModel({ RingTracked($0) }, { $0.value }, seed: 0x5EED_0002)
        #expect(problems.isEmpty, "\(problems.prefix(3))")
        #expect(RingTracked.alive == before)
    }

    @Test("a ring lets go of an object as soon as it leaves, and of every object on removeAll")
    func objectsLeavePromptly() {
        let before = RingTracked.alive
        var ring = RingBuffer<RingTracked>()
        for value in 0..<40 { ring.append(RingTracked(value)) }  // grows twice
        #expect(RingTracked.alive == before + 40)
        for expected in 0..<10 { #expect(ring.popFirst()?.value == expected) }
        #expect(RingTracked.alive == before + 30)
        ring.removeAll()
        #expect(RingTracked.alive == before)
        #expect(ring.isEmpty)
    }
}

extension RingBufferTests {
    @Test("removing an object from the middle of a wrapped ring keeps the others in order and lets it go")
    func removeFromTheMiddle() {
        let before = RingTracked.alive
        var ring = RingBuffer<RingTracked>()
        for value in 0..<20 { ring.append(RingTracked(value)) }
        for _ in 0..<10 { _ = ring.popFirst() }
        for value in 20..<40 { ring.append(RingTracked(value)) }  // 32 slots: the live range wraps
        #expect(ring.capacity == 32 && ring.head + ring.count > ring.capacity)
        #expect(ring.remove(firstWhere: { $0.value == 25 })?.value == 25)
        #expect(ring.remove(firstWhere: { $0.value == 99 }) == nil)
        #expect(ring.elements.map(\.value) == Array(10..<25) + Array(26..<40))
        #expect(RingTracked.alive == before + 29)
        #expect(ring.popAll().map(\.value) == Array(10..<25) + Array(26..<40))
        #expect(ring.isEmpty)
        #expect(RingTracked.alive == before)
    }
}
