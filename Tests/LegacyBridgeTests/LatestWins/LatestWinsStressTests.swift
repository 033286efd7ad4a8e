// Many runs racing on a few LatestWins, bounded in count: several tasks start runs on the same
// instance at once; the SDK answers inside start, later from Dispatch threads, twice, with a
// failure or never; runs time out and are cancelled at random. Checks that every run ended once,
// that every success value was returned by exactly one caller or discarded exactly once, that
// each cancel handle ran at most once, that the counters add up and that nothing is held.

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

@Suite("LatestWins: under concurrent stress", .timeLimit(.minutes(10)))
struct LatestWinsStressTests {
    @Test(
        "4 instances x 4 tasks x 150 runs with every kind of answer, timeouts and cancels end exactly once and hold nothing"
    )
    func stress() async {
        let instances = 4
        let tasksPerInstance = 4
        let runsPerTask = 150
        let sent = OneShotRecorder<Int>()
        let discarded = OneShotRecorder<Int>()
        let overCalledHandles = OneShotCounter()
        let sdkPending = OneShotCounter()
        let sdkDone = OneShotCounter()
        let values = CallsSequence()
        let latests = (0..<instances).map { _ in LatestWins<Int>(onDiscard: { discarded.append($0) }) }

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

        let outcomes = await withTaskGroup(of: [CallsOutcome].self) { group in
            for instance in 0..<instances {
                for _ in 0..<tasksPerInstance {
                    group.addTask {
                        var outcomes: [CallsOutcome] = []
                        for run in 0..<runsPerTask {
                            let kind = run % 5
                            let call = OneShotCall {
                                try await latests[instance].run(timeout: kind == 4 ? .milliseconds(2) : nil) {
                                    completion in
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
                                    let calls = CallsSequence()
                                    return CancelHandle {
                                        if calls.next() > 1 { overCalledHandles.increment() }
                                    }
                                }
                            }
                            if Int.random(in: 0..<6) == 0 { call.cancel() }
                            outcomes.append(await call.callsOutcome())
                        }
                        return outcomes
                    }
                }
            }
            var all: [CallsOutcome] = []
            for await outcomes in group { all += outcomes }
            return all
        }
        #expect(await eventually { sdkDone.value == sdkPending.value }, "SDK callbacks did not all run")

        let total = instances * tasksPerInstance * runsPerTask
        #expect(outcomes.count == total)
        let hung = outcomes.filter { if case .other = $0 { true } else { false } }
        #expect(hung.isEmpty, "\(hung.count) runs ended unexpectedly, first: \(hung.prefix(3))")
        let returned = outcomes.compactMap { if case .value(let value) = $0 { value } else { nil } }
        #expect((returned + discarded.values).sorted() == sent.values.sorted())
        #expect(overCalledHandles.value == 0)

        let runs = latests.map(\.statistics.runs).reduce(0, +)
        let superseded = latests.map(\.statistics.superseded).reduce(0, +)
        #expect(runs == total)
        #expect(superseded == outcomes.filter { $0 == .superseded }.count)
        #expect(superseded > 0)
        for latest in latests { #expect(!latest.storage.machine.holdsEntry && !latest.storage.machine.hasNewestRun) }
    }
}
