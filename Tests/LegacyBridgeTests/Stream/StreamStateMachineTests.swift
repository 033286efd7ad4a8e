import Testing
@testable import LegacyBridge
import TestSupport

private typealias Machine = CallbackStreamStateMachine<Int>
private typealias Operation = ProducerControlStateMachine.Operation

private let streamTestControl = StreamControl(cancel: CancelHandle {}, pause: {}, resume: {})

/// Drives a stream machine like the storage does: every control call it hands out is "made"
/// (recorded) and reported back at once.
private struct Harness {
    var machine: Machine
    var calls: [Operation] = []

    init(_ buffering: StreamBuffering = .unbounded, ordering: StreamOrdering = .arrival) {
        machine = Machine(buffering: buffering, ordering: ordering)
    }

    mutating func run(_ action: ProducerControlStateMachine.Action) {
        var next = action
        while case .make(let call) = next {
            calls.append(call.operation)
            next = machine.callReturned(call.operation)
        }
    }

    mutating func perform(_ action: Machine.EffectsAction) {
        switch action {
        case .none: break
        case .perform(let effects): run(effects.producer)
        }
    }

    mutating func arrive(_ handle: StreamControl? = streamTestControl) {
        run(machine.handleArrived(handle))
    }

    mutating func answer(_ action: Machine.YieldAction) -> YieldOutcome {
        switch action {
        case .answer(let outcome):
            return outcome
        case .evicted:
            return .dropped
        case .perform(let effects, let outcome):
            run(effects.producer)
            return outcome
        }
    }

    @discardableResult
    mutating func yield(_ element: Int) -> YieldOutcome {
        answer(machine.yield(element))
    }

    @discardableResult
    mutating func yield(contentsOf elements: [Int]) -> YieldOutcome {
        let action = elements.withUnsafeBufferPointer { machine.yield(contentsOf: $0) }
        return answer(action)
    }

    @discardableResult
    mutating func yield(_ element: Int, sequence: UInt64) -> YieldOutcome {
        answer(machine.yield(element, sequence: sequence))
    }

    mutating func finish(_ error: (any Error)? = nil) { perform(machine.finish(error)) }

    /// `start` threw: no handle, and its error becomes the terminal.
    mutating func startFailed(_ error: any Error) {
        arrive(nil)
        finish(error)
    }

    mutating func cancel() -> Int {
        switch machine.consumerTerminated(cancelled: true) {
        case .none:
            return 0
        case .perform(let effects):
            run(effects.producer)
            return effects.discarded.count
        }
    }

    enum Taken: Equatable {
        case elements([Int])
        case suspend
        case end
        case failed(String)
    }

    /// The consumer comes back for a batch, having used up the previous one.
    mutating func take() -> Taken {
        var batch = RingBuffer<Int>()
        switch machine.next(into: &batch) {
        case .batch(let resume):
            if let resume { run(.make(resume)) }
            var elements: [Int] = []
            while let element = batch.popFirst() { elements.append(element) }
            return .elements(elements)
        case .suspend(let resume):
            if let resume { run(.make(resume)) }
            return .suspend
        case .end: return .end
        case .fail(let error): return .failed(String(describing: error))
        case .cancelled: return .failed(String(describing: CancellationError()))
        }
    }
}

@Suite(
    "Stream: state machine",
    .disabled(
        if: testsUnderSanitizer,
        "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
)
struct StreamStateMachineTests {
    @Test(
        "terminal comes after the elements buffered before it, exactly once; later yields are .terminated and counted")
    func terminalAfterElements() {
        var h = Harness()
        h.arrive()
        h.yield(1)
        h.yield(2)
        h.finish(StreamTestError(code: 7))
        h.finish()
        #expect(h.yield(3) == .terminated)
        #expect(h.take() == .elements([1, 2]))
        #expect(h.take() == .failed(String(describing: StreamTestError(code: 7))))
        #expect(h.take() == .end)
        #expect(h.machine.statistics.yieldedAfterTermination == 1)
        #expect(h.calls.isEmpty)
    }

    @Test(
        "no buffering policy drops the terminal",
        arguments: [
            StreamBuffering.unbounded, .bufferingOldest(1), .bufferingNewest(1), .backpressure(low: 0, high: 1),
        ])
    func terminalNeverDropped(buffering: StreamBuffering) {
        var h = Harness(buffering)
        h.arrive()
        for element in 0..<5 { h.yield(element) }
        h.finish(StreamTestError(code: 1))
        var taken: [Harness.Taken] = []
        for _ in 0..<3 { taken.append(h.take()) }
        #expect(taken.contains(.failed(String(describing: StreamTestError(code: 1)))))
    }

    @Test("bufferingOldest keeps the first n, bufferingNewest the last n; drops are counted")
    func droppingPolicies() {
        var oldest = Harness(.bufferingOldest(2))
        oldest.arrive()
        #expect((0..<5).map { oldest.yield($0) } == [.enqueued, .enqueued, .dropped, .dropped, .dropped])
        #expect(oldest.take() == .elements([0, 1]))
        #expect(oldest.machine.statistics.droppedByBuffering == 3)

        var newest = Harness(.bufferingNewest(2))
        newest.arrive()
        #expect((0..<5).map { newest.yield($0) } == [.enqueued, .enqueued, .dropped, .dropped, .dropped])
        #expect(newest.take() == .elements([3, 4]))
        #expect(newest.machine.statistics.droppedByBuffering == 3)
        // A batch already taken no longer counts against n.
        newest.yield(5)
        newest.yield(6)
        #expect(newest.take() == .elements([5, 6]))
    }

    @Test(
        "backpressure pauses once at high, counts the consumer's batch as buffered, resumes once below low, drops nothing"
    )
    func backpressureWatermarks() {
        var h = Harness(.backpressure(low: 2, high: 4))
        h.arrive()
        for element in 0..<3 { h.yield(element) }
        #expect(h.calls.isEmpty)
        h.yield(3)
        #expect(h.calls == [.pause])
        h.yield(4)  // in flight after the pause: kept
        #expect(h.calls == [.pause])
        #expect(h.machine.statistics.acceptedWhilePaused == 1)
        #expect(h.take() == .elements([0, 1, 2, 3, 4]))
        // The batch is still held by the consumer: no resume yet.
        #expect(h.calls == [.pause])
        h.yield(5)
        #expect(h.machine.statistics.peakBuffered == 6)
        // Consumer finished the batch and comes back: 1 held < low 2 → resume.
        #expect(h.take() == .elements([5]))
        #expect(h.calls == [.pause, .resume])
        // The batch of one counts: reaching high again needs 3 more.
        h.yield(6)
        h.yield(7)
        #expect(h.calls == [.pause, .resume])
        h.yield(8)
        #expect(h.calls == [.pause, .resume, .pause])
        #expect(h.machine.statistics.droppedByBuffering == 0)
        #expect(h.machine.statistics.pauses == 2)
        #expect(h.machine.statistics.resumes == 1)
    }

    @Test("a pause that became due before start returned its control is made when the control arrives")
    func pauseBeforeControl() {
        var h = Harness(.backpressure(low: 0, high: 2))
        h.yield(0)
        h.yield(1)
        #expect(h.calls.isEmpty)
        h.arrive()
        #expect(h.calls == [.pause])
    }

    @Test("consumer termination drops buffered elements and cancels the running producer once")
    func consumerTermination() {
        var h = Harness()
        h.arrive()
        h.yield(1)
        h.yield(2)
        #expect(h.cancel() == 2)
        #expect(h.cancel() == 0)
        #expect(h.calls == [.cancel])
        #expect(h.yield(3) == .terminated)
        #expect(h.take() == .failed(String(describing: CancellationError())))
        #expect(h.machine.statistics.discardedAtTermination == 2)
    }

    @Test("every order of {control arrives, consumer cancels, producer finishes, pause due} gives the right calls")
    func exhaustiveOrders() {
        enum Event: CaseIterable { case arrive, cancel, finish, pauseDue }
        var checked = 0
        for order in permutations(Event.allCases) {
            var h = Harness(.backpressure(low: 0, high: 1))
            for event in order {
                switch event {
                case .arrive: h.arrive()
                case .cancel: _ = h.cancel()
                case .finish: h.finish()
                case .pauseDue: h.yield(1)
                }
            }
            func position(_ event: Event) -> Int { order.firstIndex(of: event)! }
            let (a, c, f, p) = (position(.arrive), position(.cancel), position(.finish), position(.pauseDue))
            var expected: [Operation] = []
            // The pause is due only while the producer runs; it is made only if
            // the handle arrives before the stream stops needing it.
            if p < min(c, f) && a < min(c, f) { expected.append(.pause) }
            // Cancel: only if the consumer stopped before the producer finished; once, last.
            if c < f { expected.append(.cancel) }
            #expect(h.calls == expected, "\(order)")
            checked += 1
        }
        #expect(checked == 24)
    }

    @Test("sequenced yields are reordered under the stream's lock; stale ones are dropped and counted")
    func sequencedYields() {
        var h = Harness(ordering: .sequenced(window: 4))
        h.arrive()
        #expect(h.yield(102, sequence: 2) == .enqueued)
        #expect(h.yield(101, sequence: 1) == .enqueued)
        #expect(h.take() == .suspend)
        #expect(h.yield(100, sequence: 0) == .enqueued)
        #expect(h.yield(100, sequence: 0) == .dropped)
        #expect(h.take() == .elements([100, 101, 102]))
        #expect(h.machine.statistics.droppedStale == 1)
    }

    @Test("a sequenced stream that finishes with a gap flushes held elements under .skip and fails under .fail")
    func gapAtFinish() {
        var skip = Harness(ordering: .sequenced(window: 8, gaps: .skip))
        skip.arrive()
        skip.yield(0, sequence: 0)
        skip.yield(3, sequence: 3)
        skip.finish()
        #expect(skip.take() == .elements([0, 3]))
        #expect(skip.take() == .end)
        #expect(skip.machine.statistics.skippedSequences == 2)

        var fail = Harness(ordering: .sequenced(window: 8, gaps: .fail))
        fail.arrive()
        fail.yield(0, sequence: 0)
        fail.yield(3, sequence: 3)
        fail.finish()
        #expect(fail.take() == .elements([0]))
        #expect(fail.take() == .failed(String(describing: SequenceGapError(missingSequence: 1))))
        #expect(fail.calls.isEmpty)
    }

    @Test("window overflow under .fail fails the stream after the in-order prefix and cancels the producer")
    func gapOverflowFails() {
        var h = Harness(ordering: .sequenced(window: 2, gaps: .fail))
        h.arrive()
        h.yield(0, sequence: 0)
        h.yield(2, sequence: 2)
        #expect(h.yield(3, sequence: 3) == .dropped)
        #expect(h.calls == [.cancel])
        #expect(h.yield(1, sequence: 1) == .terminated)
        #expect(h.take() == .elements([0]))
        #expect(h.take() == .failed(String(describing: SequenceGapError(missingSequence: 1))))
    }

    @Test("start that throws ends the stream with its error after what it yielded")
    func startFailure() {
        var h = Harness()
        h.yield(1)
        h.startFailed(StreamTestError(code: 3))
        #expect(h.take() == .elements([1]))
        #expect(h.take() == .failed(String(describing: StreamTestError(code: 3))))
    }
}

private func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    var result: [[T]] = []
    for index in items.indices {
        var rest = items
        let first = rest.remove(at: index)
        for tail in permutations(rest) { result.append([first] + tail) }
    }
    return result
}
