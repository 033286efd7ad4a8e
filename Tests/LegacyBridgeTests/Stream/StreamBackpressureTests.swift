import Testing
import TestSupport
@testable import LegacyBridge

/// What the watermarks must do, written element by element: the reference a batch is checked against.
private struct WatermarkModel {
    let low: Int
    let high: Int
    var wantsPause = false
    var acceptedWhilePaused = 0
    var pauses = 0
    var resumes = 0

    /// Elements arrive one at a time; `held` counts them as they come.
    mutating func accept(_ count: Int, heldBefore: Int) {
        var held = heldBefore
        for _ in 0..<count {
            held += 1
            if wantsPause {
                acceptedWhilePaused += 1
            } else if held >= high {
                wantsPause = true
                pauses += 1
            }
        }
    }

    mutating func consumerReturned(held: Int) {
        if wantsPause && held <= low {
            wantsPause = false
            resumes += 1
        }
    }
}

/// One step of a consumer and producer around the watermarks.
private enum WatermarkStep: CaseIterable, CustomStringConvertible {
    case accept1, accept2, accept5, returnAndTake

    var description: String {
        switch self {
        case .accept1: "accept(1)"
        case .accept2: "accept(2)"
        case .accept5: "accept(5)"
        case .returnAndTake: "return"
        }
    }
}

/// Runs `steps` on a `StreamBackpressure` and on the element-by-element model; the first difference.
private func checkWatermarks(_ steps: [WatermarkStep], low: Int, high: Int) -> String? {
    var watermarks = StreamBackpressure(low: low, high: high)
    var model = WatermarkModel(low: low, high: high)
    var waiting = 0
    var inBatch = 0
    var accepted = 0
    var pauses = 0
    var resumes = 0
    var peak = 0
    for (index, step) in steps.enumerated() {
        let what = "low \(low) high \(high), step \(index) of \(steps)"
        switch step {
        case .accept1, .accept2, .accept5:
            let count = step == .accept1 ? 1 : step == .accept2 ? 2 : 5
            let quiet = watermarks.acceptsQuietly(count, held: waiting + inBatch)
            if quiet != (!model.wantsPause && waiting + inBatch + count < high) {
                return "\(what): acceptsQuietly said \(quiet)"
            }
            model.accept(count, heldBefore: waiting + inBatch)
            waiting += count
            peak = max(peak, waiting + inBatch)
            switch watermarks.accepted(count, held: waiting + inBatch) {
            case .keepGoing:
                break
            case .pause(let overshoot):
                pauses += 1
                accepted += overshoot
                if quiet { return "\(what): a quiet acceptance made a pause due" }
            case .overshoot(let extra):
                accepted += extra
                if quiet { return "\(what): a quiet acceptance counted overshoot" }
            }
        case .returnAndTake:
            inBatch = 0
            model.consumerReturned(held: waiting)
            switch watermarks.consumerReturned(held: waiting) {
            case .unchanged: break
            case .resume: resumes += 1
            }
            inBatch = waiting
            waiting = 0
        }
        if watermarks.wantsPause != model.wantsPause { return "\(what): wants pause \(watermarks.wantsPause)" }
        if accepted != model.acceptedWhilePaused {
            return "\(what): \(accepted) accepted while paused, one by one gives \(model.acceptedWhilePaused)"
        }
        if pauses != model.pauses || resumes != model.resumes {
            return
                "\(what): \(pauses) pauses and \(resumes) resumes, one by one gives \(model.pauses) and \(model.resumes)"
        }
        if peak > high + accepted { return "\(what): peak \(peak) beyond high plus the overshoot \(accepted)" }
    }
    return nil
}

@Suite("Stream: backpressure watermarks")
struct StreamBackpressureTests {
    @Test(
        "every sequence of up to 7 acceptances and consumer returns, for every low < high <= 5, decides as the same elements one by one would",
        .disabled(
            if: testsUnderSanitizer,
            "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
    )
    func exhaustive() async {
        // Seconds of CPU: on a thread of its own, so the cooperative pool stays free for the
        // tests that wait with a bound.
        await onOwnThread {
            var checked = 0
            var problems: [String] = []
            for high in 1...5 {
                for low in 0..<high {
                    var steps: [WatermarkStep] = []
                    func extend() {
                        if !steps.isEmpty {
                            checked += 1
                            if let problem = checkWatermarks(steps, low: low, high: high) {
                                if problems.count < 5 { problems.append(problem) }
                                return
                            }
                        }
                        guard steps.count < 7 else { return }
                        for step in WatermarkStep.allCases {
                            steps.append(step)
                            extend()
                            steps.removeLast()
                        }
                    }
                    extend()
                }
            }
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
            // 15 watermark pairs, 4^1 + … + 4^7 sequences each.
            #expect(checked == 15 * (1...7).reduce(0) { $0 + (0..<$1).reduce(1) { product, _ in product * 4 } })
        }
    }

    @Test("the pause is due at high, the resume at low, and nothing is due twice")
    func decisions() {
        var watermarks = StreamBackpressure(low: 1, high: 3)
        #expect(watermarks.acceptsQuietly(1, held: 1))
        #expect(!watermarks.acceptsQuietly(1, held: 2), "the element that reaches high needs a decision")
        #expect(!watermarks.acceptsQuietly(2, held: 1), "so does a batch that reaches high")
        #expect(watermarks.accepted(2, held: 2) == .keepGoing)
        #expect(watermarks.accepted(1, held: 3) == .pause(overshoot: 0))
        #expect(watermarks.accepted(2, held: 5) == .overshoot(2))
        #expect(!watermarks.acceptsQuietly(1, held: 0), "nothing is quiet while a pause is wanted")
        #expect(watermarks.consumerReturned(held: 2) == .unchanged, "above low")
        #expect(watermarks.consumerReturned(held: 1) == .resume)
        #expect(watermarks.consumerReturned(held: 0) == .unchanged, "the resume is due once")
        #expect(watermarks.accepted(4, held: 4) == .pause(overshoot: 1))
    }

    @Test(
        "one yield(contentsOf: 1...15) into an empty .backpressure(low: 5, high: 10) stream counts the 5 it put beyond high, as the same 15 yielded one by one do"
    )
    func batchCountsItsOvershoot() async throws {
        for batched in [true, false] {
            let sinkBox = StreamShared<EventSink<Int>?>(nil)
            let outcome = StreamShared<YieldOutcome?>(nil)
            let stream = CallbackStream(of: Int.self, buffering: .backpressure(low: 5, high: 10)) { sink in
                sinkBox.value = sink
                if batched {
                    outcome.value = sink.yield(contentsOf: 1...15)
                } else {
                    outcome.value = (1...15).map { sink.yield($0) }.last
                }
                // The pause due at high is made when this handle arrives, the resume once drained.
                return StreamControl(cancel: CancelHandle {}, pause: {}, resume: { sink.finish() })
            }
            var received: [Int] = []
            for try await element in stream { received.append(element) }
            #expect(received == Array(1...15))
            let statistics = try #require(sinkBox.value).statistics
            #expect(statistics.acceptedWhilePaused == 5, "batched: \(batched)")
            #expect(statistics.peakBuffered == 15, "batched: \(batched)")
            #expect(statistics.pauses == 1 && statistics.resumes == 1, "batched: \(batched)")
            #expect(outcome.value == .stopProducing, "batched: \(batched)")
        }
    }

    @Test("a batch that ends exactly at high overshoots nothing; the next element counts")
    func batchEndingAtHigh() {
        var machine = CallbackStreamStateMachine<Int>(buffering: .backpressure(low: 5, high: 10), ordering: .arrival)
        switch Array(1...10).withUnsafeBufferPointer({ machine.yield(contentsOf: $0) }) {
        case .answer(.stopProducing): break
        case .answer, .evicted, .perform: Issue.record("reaching high before the handle arrived answers stopProducing")
        }
        #expect(machine.statistics.acceptedWhilePaused == 0)
        _ = machine.yield(11)
        #expect(machine.statistics.acceptedWhilePaused == 1)
        #expect(machine.statistics.peakBuffered == 11)
    }

    @Test("yielding in batches of any split counts what one-by-one yields count (seeded)")
    func anySplit() {
        var random = SplitMix64(seed: 0xBA7C)
        for round in 0..<2000 {
            let high = 1 + Int(random.next() % 12)
            let low = Int(random.next() % UInt64(high))
            var batched = CallbackStreamStateMachine<Int>(
                buffering: .backpressure(low: low, high: high), ordering: .arrival)
            var single = CallbackStreamStateMachine<Int>(
                buffering: .backpressure(low: low, high: high), ordering: .arrival)
            let handle = StreamControl(cancel: CancelHandle {}, pause: {}, resume: {})
            settle(&batched, batched.handleArrived(handle))
            settle(&single, single.handleArrived(handle))
            var next = 0
            for _ in 0..<(1 + Int(random.next() % 12)) {
                if random.next() % 3 == 0 {
                    var batch = RingBuffer<Int>()
                    settle(&batched, batched.next(into: &batch))
                    batch.removeAll()
                    settle(&single, single.next(into: &batch))
                    continue
                }
                let elements = Array(next..<(next + Int(random.next() % 20)))
                next += elements.count
                settle(&batched, elements.withUnsafeBufferPointer { batched.yield(contentsOf: $0) })
                for element in elements { settle(&single, single.yield(element)) }
            }
            #expect(batched.statistics == single.statistics, "round \(round), low \(low), high \(high)")
        }
    }
}

private typealias IntMachine = CallbackStreamStateMachine<Int>

/// Makes every call the machine hands out, at once.
private func settle(_ machine: inout IntMachine, _ action: ProducerControlStateMachine.Action) {
    var next = action
    while case .make(let call) = next { next = machine.callReturned(call.operation) }
}

private func settle(_ machine: inout IntMachine, _ action: IntMachine.YieldAction) {
    if case .perform(let effects, _) = action { settle(&machine, effects.producer) }
}

private func settle(_ machine: inout IntMachine, _ action: IntMachine.NextAction) {
    switch action {
    case .batch(let resume?), .suspend(let resume?): settle(&machine, .make(resume))
    case .batch(nil), .suspend(nil), .end, .fail, .cancelled: break
    }
}
