// Thousands of callers on a few keys of one CoalescedCalls, bounded in count: the SDK answers
// inside start, later from Dispatch threads, twice, with a failure, or never (the callers then
// time out or are cancelled, and the call is cancelled when the last leaves; its cancel answers
// once more, late). Checks that every caller ended once, that every success value reached at
// least one caller or was discarded exactly once (never both), that each call was cancelled at
// most once and only when abandoned, and that nothing is left in flight.

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

@Suite("Coalesced: CoalescedCalls under concurrent stress", .timeLimit(.minutes(10)))
struct CoalescedCallsStressTests {
    @Test(
        "3,000 callers on 8 keys with every kind of answer, timeouts and cancels end exactly once and leave nothing in flight"
    )
    func stress() async {
        let total = 3_000
        let batchSize = 500
        let sent = OneShotRecorder<Int>()
        let discarded = OneShotRecorder<Int>()
        let starts = OneShotCounter()
        let handleCalls = OneShotCounter()
        let overCalledHandles = OneShotCounter()
        let sdkPending = OneShotCounter()
        let sdkDone = OneShotCounter()
        let values = CallsSequence()
        let calls = CoalescedCalls<Int, Int>(onDiscard: { discarded.append($0) })

        @Sendable func answer(_ completion: Completion<Int>, success: Bool) {
            let value = values.next()
            if success {
                sent.append(value)
                completion.succeed(value)
            } else {
                completion.fail(OneShotTestError(code: value))
            }
        }
        @Sendable func later(_ work: @escaping @Sendable () -> Void) {
            sdkPending.increment()
            DispatchQueue.global().async {
                work()
                sdkDone.increment()
            }
        }

        var outcomes: [CallsOutcome] = []
        for batchStart in stride(from: 0, to: total, by: batchSize) {
            var callers: [OneShotCall<Int>] = []
            for index in batchStart..<(batchStart + batchSize) {
                let key = index % 8
                let kind = Int.random(in: 0..<5)
                // Every caller has a timeout: a call that never answers ends by them (or by a cancel).
                let timeout = Duration.milliseconds(Int.random(in: 1...30))
                callers.append(
                    OneShotCall {
                        try await calls.value(for: key, timeout: timeout) { completion in
                            starts.increment()
                            switch kind {
                            case 0: answer(completion, success: true)
                            case 1: later { answer(completion, success: true) }
                            case 2:
                                later {
                                    answer(completion, success: true)
                                    answer(completion, success: true)
                                }
                            case 3: later { answer(completion, success: false) }
                            default: break
                            }
                            let called = CallsSequence()
                            return CancelHandle {
                                handleCalls.increment()
                                if called.next() > 1 { overCalledHandles.increment() }
                                answer(completion, success: true)  // the SDK answers from inside its cancel
                            }
                        }
                    })
            }
            let toCancel = callers.filter { _ in Int.random(in: 0..<4) == 0 }
            later {
                for caller in toCancel.shuffled() { caller.cancel() }
            }
            for caller in callers { outcomes.append(await caller.callsOutcome()) }
        }
        #expect(await eventually { sdkDone.value == sdkPending.value }, "SDK callbacks did not all run")
        #expect(await eventually { calls.statistics.inFlight == 0 }, "calls left in flight")

        #expect(outcomes.count == total)
        let hung = outcomes.filter { if case .other = $0 { true } else { false } }
        #expect(hung.isEmpty, "\(hung.count) callers ended unexpectedly, first: \(hung.prefix(3))")

        // Every success value reached at least one caller, or was discarded exactly once; never both.
        let returned = Set(outcomes.compactMap { if case .value(let value) = $0 { value } else { nil } })
        let discardedValues = discarded.values
        #expect(Set(discardedValues).count == discardedValues.count, "a value was discarded twice")
        #expect(returned.isDisjoint(with: discardedValues), "a returned value was also discarded")
        #expect(returned.union(discardedValues) == Set(sent.values))

        let statistics = calls.statistics
        #expect(statistics.calls == starts.value)
        #expect(statistics.calls + statistics.joined == total)
        #expect(statistics.joined > 0 && statistics.abandoned > 0)
        #expect(overCalledHandles.value == 0)
        #expect(handleCalls.value <= statistics.abandoned, "a call was cancelled although a caller still waited")
        #expect(calls.storage.machine.waiterCount == 0)
    }
}
