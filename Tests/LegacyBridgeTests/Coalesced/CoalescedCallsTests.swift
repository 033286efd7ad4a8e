// Contract tests of CoalescedCalls on real threads. Each forces the order it names: the leader's
// call held open (its completion kept by the test) until every other caller has joined or left,
// a scheduler whose jobs the test runs by hand. No sleeps.

import Testing
import TestSupport
@testable import LegacyBridge

@Suite("Coalesced: CoalescedCalls contract", .timeLimit(.minutes(5)))
struct CoalescedCallsTests {
    /// A caller for `key` whose start, if it leads, keeps the call's completion in `slot`.
    private func caller(
        _ calls: CoalescedCalls<Int, Int>, key: Int = 1, slot: OneShotSlot<Completion<Int>>,
        starts: OneShotCounter, handleCalls: OneShotCounter, timeout: Duration? = nil
    ) -> OneShotCall<Int> {
        OneShotCall {
            try await calls.value(for: key, timeout: timeout) { completion in
                starts.increment()
                slot.store(completion)
                return CancelHandle { handleCalls.increment() }
            }
        }
    }

    @Test("callers with the same key share one SDK call; its value reaches every one of them")
    func shareOneCall() async {
        let calls = CoalescedCalls<Int, Int>()
        let slot = OneShotSlot<Completion<Int>>()
        let starts = OneShotCounter()
        let handle = OneShotCounter()
        let leader = caller(calls, slot: slot, starts: starts, handleCalls: handle)
        #expect(await eventually { slot.value != nil })
        let others = (0..<3).map { _ in caller(calls, slot: slot, starts: starts, handleCalls: handle) }
        #expect(await eventually { calls.statistics.joined == 3 })
        #expect(slot.value?.succeed(5) == true)
        #expect(await leader.callsOutcome() == .value(5))
        for other in others { #expect(await other.callsOutcome() == .value(5)) }
        #expect(starts.value == 1 && handle.value == 0)
        #expect(await eventually { calls.statistics.inFlight == 0 })
        #expect(calls.statistics.calls == 1)
        slot.clear()
    }

    @Test(
        "the SDK's completion hands the result to every waiting caller before it returns: no task on the cooperative pool relays it"
    )
    func resultHandedOnInsideCompletion() async {
        let calls = CoalescedCalls<Int, Int>()
        let slot = OneShotSlot<Completion<Int>>()
        let starts = OneShotCounter()
        let leader = caller(calls, slot: slot, starts: starts, handleCalls: OneShotCounter())
        #expect(await eventually { slot.value != nil })
        let other = caller(calls, slot: slot, starts: starts, handleCalls: OneShotCounter())
        #expect(await eventually { calls.statistics.joined == 1 })
        let completion = slot.value!
        // From a thread of the test's own, as an SDK's callback thread would.
        let inFlightAfter = await onOwnThread { () -> Int in
            _ = completion.succeed(9)
            return calls.statistics.inFlight
        }
        #expect(inFlightAfter == 0, "the call was still in flight once the SDK's completion returned")
        #expect(await leader.callsOutcome() == .value(9))
        #expect(await other.callsOutcome() == .value(9))
        slot.clear()
    }

    @Test("the call's error reaches every caller waiting for it")
    func errorReachesAll() async {
        let calls = CoalescedCalls<Int, Int>()
        let slot = OneShotSlot<Completion<Int>>()
        let starts = OneShotCounter()
        let leader = caller(calls, slot: slot, starts: starts, handleCalls: OneShotCounter())
        #expect(await eventually { slot.value != nil })
        let other = caller(calls, slot: slot, starts: starts, handleCalls: OneShotCounter())
        #expect(await eventually { calls.statistics.joined == 1 })
        slot.value?.fail(OneShotTestError(code: 4))
        #expect(await leader.callsOutcome() == .failure(4))
        #expect(await other.callsOutcome() == .failure(4))
        slot.clear()
    }

    @Test("one caller's cancellation removes that caller alone; the call goes on for the others")
    func oneCallerLeaves() async {
        let calls = CoalescedCalls<Int, Int>()
        let slot = OneShotSlot<Completion<Int>>()
        let starts = OneShotCounter()
        let handle = OneShotCounter()
        let leader = caller(calls, slot: slot, starts: starts, handleCalls: handle)
        #expect(await eventually { slot.value != nil })
        let other = caller(calls, slot: slot, starts: starts, handleCalls: handle)
        #expect(await eventually { calls.statistics.joined == 1 })
        leader.cancel()  // the leader leaves: the call it started stays for the other caller
        #expect(await leader.callsOutcome() == .cancelled)
        #expect(await eventually { calls.storage.machine.waiterCount == 1 })
        #expect(handle.value == 0)
        #expect(slot.value?.succeed(6) == true)
        #expect(await other.callsOutcome() == .value(6))
        #expect(handle.value == 0 && calls.statistics.abandoned == 0)
        slot.clear()
    }

    @Test("when the last caller leaves, the call is cancelled once on the scheduler, and a late value is discarded")
    func lastCallerLeaves() async {
        let loop = CallsManualScheduler()
        let discarded = OneShotRecorder<Int>()
        let calls = CoalescedCalls<Int, Int>(scheduler: loop.scheduler, onDiscard: { discarded.append($0) })
        let slot = OneShotSlot<Completion<Int>>()
        let starts = OneShotCounter()
        let handle = OneShotCounter()
        let first = caller(calls, slot: slot, starts: starts, handleCalls: handle)
        #expect(await eventually { slot.value != nil })
        let second = caller(calls, slot: slot, starts: starts, handleCalls: handle, timeout: .milliseconds(1))
        #expect(await second.callsOutcome() == .timedOut)
        #expect(loop.pending == 0, "one caller is still waiting: the call is not cancelled")
        first.cancel()
        #expect(await first.callsOutcome() == .cancelled)
        #expect(await eventually { loop.pending == 1 })
        #expect(handle.value == 0, "the SDK's cancel runs on its loop only")
        loop.runAll()
        #expect(handle.value == 1)
        #expect(slot.value?.succeed(7) == false)
        #expect(discarded.values == [7])
        #expect(await eventually { calls.statistics.inFlight == 0 })
        #expect(calls.statistics.abandoned == 1)
        slot.clear()
    }

    @Test("a caller arriving after the result was handed out starts a new call")
    func arrivalAfterResult() async {
        let calls = CoalescedCalls<Int, Int>()
        let starts = OneShotCounter()
        for expected in 1...3 {
            let call = OneShotCall {
                try await calls.value(for: 1) { completion in
                    starts.increment()
                    completion.succeed(expected)  // inside start: handed out at once, no relay
                    return nil
                }
            }
            #expect(await call.callsOutcome() == .value(expected))
        }
        #expect(starts.value == 3)
        #expect(calls.statistics.inFlight == 0)
    }

    @Test("different keys never share a call")
    func differentKeys() async {
        let calls = CoalescedCalls<Int, Int>()
        let slots = [OneShotSlot<Completion<Int>>(), OneShotSlot<Completion<Int>>()]
        let starts = OneShotCounter()
        let a = caller(calls, key: 1, slot: slots[0], starts: starts, handleCalls: OneShotCounter())
        #expect(await eventually { slots[0].value != nil })
        let b = caller(calls, key: 2, slot: slots[1], starts: starts, handleCalls: OneShotCounter())
        #expect(await eventually { slots[1].value != nil })
        slots[0].value?.succeed(10)
        slots[1].value?.succeed(20)
        #expect(await a.callsOutcome() == .value(10))
        #expect(await b.callsOutcome() == .value(20))
        #expect(starts.value == 2)
        for slot in slots { slot.clear() }
    }

    @Test("a start that throws: its caller gets that error, and the key is free again")
    func startThrows() async {
        let calls = CoalescedCalls<Int, Int>()
        let failing = OneShotCall {
            try await calls.value(for: 1) { _ in throw OneShotTestError(code: 5) }
        }
        #expect(await failing.callsOutcome() == .failure(5))
        let next = OneShotCall {
            try await calls.value(for: 1) { completion in
                completion.succeed(1); return nil
            }
        }
        #expect(await next.callsOutcome() == .value(1))
    }
}
