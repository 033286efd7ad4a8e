// Contract tests of LatestWins on real threads. Each forces the order it names: a run observed
// in flight (its start ran) before the next begins, a run whose result is in but whose actor is
// held still until a newer run has begun, a scheduler whose jobs the test runs by hand. No sleeps.

import Testing
import TestSupport
@testable import LegacyBridge

@Suite("LatestWins: contract", .timeLimit(.minutes(5)))
struct LatestWinsTests {
    /// Starts a run that keeps its completion in `slot` and counts its cancel handle's calls.
    private func startKeptRun(
        _ latest: LatestWins<Int>, slot: OneShotSlot<Completion<Int>>, handleCalls: OneShotCounter
    ) async -> OneShotCall<Int> {
        let call = OneShotCall {
            try await latest.run { completion in
                slot.store(completion)
                return CancelHandle { handleCalls.increment() }
            }
        }
        _ = await eventually { slot.value != nil }
        return call
    }

    @Test("a new run supersedes the one in flight: its caller throws SupersededError and its handle is called once")
    func newRunSupersedes() async {
        let latest = LatestWins<Int>()
        let firstSlot = OneShotSlot<Completion<Int>>()
        let firstHandle = OneShotCounter()
        let first = await startKeptRun(latest, slot: firstSlot, handleCalls: firstHandle)
        let secondHandle = OneShotCounter()
        let second = OneShotCall {
            try await latest.run { completion in
                completion.succeed(2)
                return CancelHandle { secondHandle.increment() }
            }
        }
        #expect(await second.callsOutcome() == .value(2))
        #expect(await first.callsOutcome() == .superseded)
        #expect(await eventually { firstHandle.value == 1 })
        #expect(secondHandle.value == 0)
        #expect(latest.statistics == LatestWins<Int>.Statistics(runs: 2, superseded: 1))
        #expect(!latest.storage.machine.holdsEntry)
        firstSlot.clear()
    }

    @Test("a late result of a superseded run is never returned: it goes to onDiscard once")
    func lateResultIsDiscarded() async {
        let discarded = OneShotRecorder<Int>()
        let latest = LatestWins<Int>(onDiscard: { discarded.append($0) })
        let slot = OneShotSlot<Completion<Int>>()
        let first = await startKeptRun(latest, slot: slot, handleCalls: OneShotCounter())
        let second = OneShotCall {
            try await latest.run { completion in
                completion.succeed(2); return nil
            }
        }
        #expect(await second.callsOutcome() == .value(2))
        #expect(await first.callsOutcome() == .superseded)
        #expect(slot.value?.succeed(11) == false)
        #expect(discarded.values == [11])
        slot.clear()
    }

    @Test("a result that came in before a newer run began, whose caller had not resumed yet, is refused at commit")
    func revisionCheckOnResume() async {
        let discarded = OneShotRecorder<Int>()
        let latest = LatestWins<Int>(onDiscard: { discarded.append($0) })
        let host = CallsHeldActor()
        let slot = OneShotSlot<Completion<Int>>()
        let first = OneShotCall { try await host.run(latest) { slot.store($0) } }
        #expect(await eventually { slot.value != nil && latest.storage.machine.holdsEntry })
        // The result is in, but the caller's actor is held still: it cannot come back yet.
        host.executor.hold()
        #expect(slot.value?.succeed(21) == true)
        let second = OneShotCall {
            try await latest.run { completion in
                completion.succeed(22); return nil
            }
        }
        #expect(await second.callsOutcome() == .value(22))
        host.executor.release()
        #expect(await first.callsOutcome() == .superseded)
        #expect(discarded.values == [21])
        slot.clear()
    }

    @Test("cancel() supersedes the current run without starting another")
    func cancelSupersedes() async {
        let latest = LatestWins<Int>()
        let slot = OneShotSlot<Completion<Int>>()
        let handle = OneShotCounter()
        let run = await startKeptRun(latest, slot: slot, handleCalls: handle)
        latest.cancel()
        #expect(await run.callsOutcome() == .superseded)
        #expect(await eventually { handle.value == 1 })
        latest.cancel()  // nothing runs: changes nothing
        #expect(latest.statistics.superseded == 1)
        slot.clear()
    }

    @Test("the newest run keeps its own outcomes: task cancellation, timeout and the SDK's error")
    func newestRunOutcomes() async {
        let latest = LatestWins<Int>()
        let slot = OneShotSlot<Completion<Int>>()
        let handle = OneShotCounter()
        let cancelled = await startKeptRun(latest, slot: slot, handleCalls: handle)
        cancelled.cancel()
        #expect(await cancelled.callsOutcome() == .cancelled)
        #expect(await eventually { handle.value == 1 })
        let timedOut = OneShotCall { try await latest.run(timeout: .zero) { _ in nil } }
        #expect(await timedOut.callsOutcome() == .timedOut)
        let failed = OneShotCall {
            try await latest.run { completion in
                completion.fail(OneShotTestError(code: 3)); return nil
            }
        }
        #expect(await failed.callsOutcome() == .failure(3))
        #expect(latest.statistics.superseded == 0)
        slot.clear()
    }

    @Test("with a scheduler, a superseded run's cancel handle runs as a job on it")
    func handleOnTheScheduler() async {
        let loop = CallsManualScheduler()
        let latest = LatestWins<Int>(scheduler: loop.scheduler)
        let slot = OneShotSlot<Completion<Int>>()
        let handle = OneShotCounter()
        let first = await startKeptRun(latest, slot: slot, handleCalls: handle)
        latest.cancel()
        #expect(await first.callsOutcome() == .superseded)
        #expect(await eventually { loop.pending == 1 })
        #expect(handle.value == 0, "the SDK's cancel runs on its loop only")
        loop.runAll()
        #expect(handle.value == 1)
        slot.clear()
    }

    @Test("of runs begun one after another from many tasks, only the last can commit")
    func manyTasks() async {
        let latest = LatestWins<Int>()
        let slots = (0..<8).map { _ in OneShotSlot<Completion<Int>>() }
        var calls: [OneShotCall<Int>] = []
        for index in 0..<8 {
            calls.append(await startKeptRun(latest, slot: slots[index], handleCalls: OneShotCounter()))
        }
        for (index, slot) in slots.enumerated() { slot.value?.succeed(index) }
        var outcomes: [CallsOutcome] = []
        for call in calls { outcomes.append(await call.callsOutcome()) }
        #expect(outcomes == Array(repeating: .superseded, count: 7) + [.value(7)])
        for slot in slots { slot.clear() }
    }
}
