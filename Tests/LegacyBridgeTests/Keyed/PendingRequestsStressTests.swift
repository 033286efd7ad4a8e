// Thousands of keyed requests against one table, bounded in count: caller-assigned ids from a
// small pool (so ids collide and are reused), SDK-assigned ids, replies inside start, from Dispatch threads, twice, for unknown ids and never; short
// timeouts, random cancellations and failAll from another thread. Checks that every caller ended
// once, that every success value was returned by exactly one caller or discarded exactly once,
// that the counters add up, that the SDK's cancel ran once per timed-out or cancelled request,
// and that nothing is left in the table.

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

private enum Behaviour: CaseIterable {
    case replyInsideStart
    case replyLater
    case replyTwice
    case failLater
    case silent
}

@Suite("Keyed: PendingRequests under concurrent stress", .timeLimit(.minutes(10)))
struct PendingRequestsStressTests {
    @Test(
        "3,000 requests with colliding ids, duplicate and unknown replies, timeouts, cancels and failAll end exactly once and leave nothing behind"
    )
    func stress() async {
        let total = 3_000
        let batchSize = 500
        let sent = OneShotRecorder<Int>()
        let discarded = OneShotRecorder<Int>()
        let cancels = OneShotCounter()
        let sdkPending = OneShotCounter()
        let sdkDone = OneShotCounter()
        let values = CallsSequence()
        let sdkIDs = CallsSequence()
        let pending = PendingRequests<Int, Int>(
            cancel: { _ in cancels.increment() }, onDiscard: { discarded.append($0) })

        @Sendable func reply(_ id: Int, success: Bool) {
            let value = values.next()
            if success {
                sent.append(value)
                pending.complete(id, with: .success(value))
            } else {
                pending.complete(id, with: .failure(OneShotTestError(code: value)))
            }
        }
        @Sendable func later(_ work: @escaping @Sendable () -> Void) {
            sdkPending.increment()
            DispatchQueue.global().async {
                work()
                sdkDone.increment()
            }
        }
        @Sendable func behave(_ behaviour: Behaviour, id: Int) {
            switch behaviour {
            case .replyInsideStart: reply(id, success: true)
            case .replyLater: later { reply(id, success: true) }
            case .replyTwice:
                later {
                    reply(id, success: true)
                    reply(id, success: true)
                }
            case .failLater: later { reply(id, success: false) }
            case .silent: break
            }
        }

        var outcomes: [CallsOutcome] = []
        for batchStart in stride(from: 0, to: total, by: batchSize) {
            var calls: [OneShotCall<Int>] = []
            for index in batchStart..<(batchStart + batchSize) {
                let behaviour = Behaviour.allCases[index % Behaviour.allCases.count]
                let timeout: Duration? = behaviour == .silent ? .milliseconds(Int.random(in: 1...3)) : nil
                if index % 2 == 0 {
                    let id = Int.random(in: 0..<64)
                    calls.append(
                        OneShotCall {
                            try await pending.request(id: id, timeout: timeout) { id in behave(behaviour, id: id) }
                        })
                } else {
                    calls.append(
                        OneShotCall {
                            try await pending.request(timeout: timeout) { () -> Int in
                                // Like a real SDK, it never assigns an id still in flight (the contract
                                // tests cover an SDK that does).
                                let id = 1_000 + sdkIDs.next()
                                if behaviour == .replyLater {
                                    later { reply(id, success: true) }  // may arrive before this start returns
                                } else {
                                    behave(behaviour, id: id)
                                }
                                return id
                            }
                        })
                }
            }
            // Racing the calls: cancel a random quarter, send unknown replies, drop the connection once.
            let toCancel = calls.filter { _ in Int.random(in: 0..<4) == 0 }
            later {
                for call in toCancel.shuffled() { call.cancel() }
                for unknown in 0..<20 { reply(5_000 + unknown, success: true) }
                pending.failAll(OneShotTestError(code: -1))
            }
            for call in calls { outcomes.append(await call.callsOutcome()) }
        }
        #expect(await eventually { sdkDone.value == sdkPending.value }, "SDK callbacks did not all run")

        let hung = outcomes.filter { if case .other = $0 { true } else { false } }
        #expect(hung.isEmpty, "\(hung.count) calls ended unexpectedly, first: \(hung.prefix(3))")

        // Every success value reached exactly one place.
        let returned = outcomes.compactMap { if case .value(let value) = $0 { value } else { nil } }
        #expect((returned + discarded.values).sorted() == sent.values.sorted())

        // The counters add up to the outcomes the callers saw.
        let statistics = pending.statistics
        let count = { (match: (CallsOutcome) -> Bool) in outcomes.filter(match).count }
        #expect(statistics.succeeded == returned.count)
        #expect(statistics.refused == count { $0 == .idInUse })
        #expect(statistics.timedOut == count { $0 == .timedOut })
        #expect(statistics.cancelled == count { $0 == .cancelled })
        #expect(
            statistics.failed
                == count {
                    if case .failure = $0 { return true }
                    return $0 == .idReassigned
                })
        #expect(statistics.refused > 0 && statistics.timedOut > 0 && statistics.failed > 0)
        #expect(statistics.unknownReplies >= 20 * (total / batchSize))
        #expect(statistics.duplicateReplies + statistics.lateReplies > 0)
        // The SDK's cancel ran once per request that a timeout or a cancellation decided, unless a
        // newer request had taken its id first (then it was skipped and counted).
        #expect(
            await eventually {
                cancels.value + pending.statistics.skippedCancels == statistics.timedOut + statistics.cancelled
            })

        // Nothing is left behind.
        let machine = pending.storage.machine
        #expect(statistics.pending == 0 && machine.startingCount == 0 && machine.parkedCount == 0)
    }
}
