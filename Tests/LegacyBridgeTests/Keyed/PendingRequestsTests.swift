// Contract tests of PendingRequests on real threads. Each forces the order it names: a reply made
// inside start, a start held open until another thread's reply has returned, a request observed
// pending before its task is cancelled, a scheduler whose jobs the test runs by hand. No sleeps.

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

@Suite("Keyed: PendingRequests contract", .timeLimit(.minutes(5)))
struct PendingRequestsTests {
    @Test("a reply the SDK gives inside start finds its caller-assigned request")
    func synchronousReply() async {
        let pending = PendingRequests<Int, Int>()
        let call = OneShotCall {
            try await pending.request(id: 1) { id in
                #expect(pending.complete(id, with: .success(10)))
            }
        }
        #expect(await call.callsOutcome() == .value(10))
        #expect(pending.statistics.pending == 0)
        #expect(pending.statistics.succeeded == 1)
    }

    @Test("a reply from another thread before an SDK-assigned start returned is kept for the request that gets its id")
    func replyBeforeStartReturned() async {
        let pending = PendingRequests<Int, Int>()
        let call = OneShotCall {
            try await pending.request { () -> Int in
                // The SDK answered on its own thread before its publish call returned the id.
                let replied = DispatchSemaphore(value: 0)
                oneShotOnForeignThread {
                    #expect(!pending.complete(42, with: .success(7)), "parked, not yet delivered")
                    replied.signal()
                }
                replied.wait()
                return 42
            }
        }
        #expect(await call.callsOutcome() == .value(7))
        let statistics = pending.statistics
        #expect(statistics.pending == 0 && statistics.unknownReplies == 0 && statistics.succeeded == 1)
        #expect(pending.storage.machine.parkedCount == 0)
    }

    @Test("a reply parked for an id no start returned is counted as unknown and discarded once the start returns")
    func unclaimedParkedReply() async {
        let discarded = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(onDiscard: { discarded.append($0) })
        let call = OneShotCall {
            try await pending.request { () -> Int in
                pending.complete(99, with: .success(990))
                pending.complete(5, with: .success(50))
                return 5
            }
        }
        #expect(await call.callsOutcome() == .value(50))
        #expect(discarded.values == [990])
        #expect(pending.statistics.unknownReplies == 1)
    }

    @Test("an id in use is refused with RequestIDError and its start is never called")
    func idInUseIsRefused() async {
        let pending = PendingRequests<Int, Int>()
        let first = OneShotCall { try await pending.request(id: 5) { _ in } }
        #expect(await eventually { pending.statistics.pending == 1 })
        let starts = OneShotCounter()
        let second = OneShotCall { try await pending.request(id: 5) { _ in starts.increment() } }
        #expect(await second.callsOutcome() == .idInUse)
        #expect(starts.value == 0)
        #expect(pending.complete(5, with: .success(55)))
        #expect(await first.callsOutcome() == .value(55))
        let statistics = pending.statistics
        #expect(statistics.refused == 1 && statistics.succeeded == 1 && statistics.failed == 0)
    }

    @Test(
        "a timeout cancels the request by id, leaves nothing in the table, and its late reply is counted and discarded")
    func timeoutCancelsByID() async {
        let cancelled = OneShotRecorder<Int>()
        let discarded = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(
            cancel: { id in cancelled.append(id) }, onDiscard: { discarded.append($0) })
        let call = OneShotCall { try await pending.request(id: 3, timeout: .milliseconds(1)) { _ in } }
        #expect(await call.callsOutcome() == .timedOut)
        #expect(pending.statistics.pending == 0, "the id is free once the caller is back")
        #expect(await eventually { cancelled.values == [3] })
        #expect(!pending.complete(3, with: .success(30)))
        #expect(discarded.values == [30])
        #expect(pending.statistics.lateReplies == 1 && pending.statistics.timedOut == 1)
        // The id can be used again at once.
        let again = OneShotCall {
            try await pending.request(id: 3) { id in pending.complete(id, with: .success(31)) }
        }
        #expect(await again.callsOutcome() == .value(31))
    }

    @Test("cancelling the caller's task calls cancel(id) as a job on the scheduler, never before the job runs")
    func cancellationOnTheScheduler() async {
        let loop = CallsManualScheduler()
        let cancelled = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler, cancel: { id in cancelled.append(id) })
        let call = OneShotCall { try await pending.request(id: 9) { _ in } }
        #expect(await eventually { pending.statistics.pending == 1 })
        call.cancel()
        #expect(await call.callsOutcome() == .cancelled)
        #expect(await eventually { loop.pending == 1 })
        #expect(cancelled.values.isEmpty, "the SDK's cancel runs on its loop only")
        loop.runAll()
        #expect(cancelled.values == [9])
        #expect(pending.statistics.cancelled == 1 && pending.statistics.pending == 0)
    }

    @Test(
        "without an SDK cancel, the id of a cancelled caller stays reserved until its late reply: a newer request for it is refused, never given that reply"
    )
    func abandonedIDWaitsForItsLateReply() async {
        let discarded = LockedValue<[Int]>([])
        let pending = PendingRequests<Int, Int>(onDiscard: { value in discarded.withLock { $0.append(value) } })
        let first = OneShotCall { try await pending.request(id: 7) { _ in } }
        #expect(await eventually { pending.statistics.pending == 1 })
        first.cancel()
        #expect(await first.callsOutcome() == .cancelled)
        #expect(pending.statistics.awaitingLateReply == 1)
        // The SDK still runs the first request: its reply is due under id 7.
        let starts = OneShotCounter()
        let second = OneShotCall { try await pending.request(id: 7) { _ in starts.increment() } }
        #expect(await second.callsOutcome() == .idInUse)
        #expect(starts.value == 0)
        #expect(!pending.complete(7, with: .success(70)))
        #expect(discarded.withLock { $0 } == [70])
        let statistics = pending.statistics
        #expect(statistics.lateReplies == 1 && statistics.awaitingLateReply == 0 && statistics.refused == 1)
        let third = OneShotCall {
            try await pending.request(id: 7) { id in _ = pending.complete(id, with: .success(71)) }
        }
        #expect(await third.callsOutcome() == .value(71))
    }

    @Test("without an SDK cancel, a start that throws reserves nothing: it made no SDK call, so no reply will come")
    func throwingStartReservesNothing() async {
        let pending = PendingRequests<Int, Int>()
        let refused = OneShotCall { try await pending.request(id: 4) { _ in throw DisconnectedForTest() } }
        #expect(await refused.callsOutcome() != .cancelled)
        #expect(pending.statistics.awaitingLateReply == 0)
        let again = OneShotCall {
            try await pending.request(id: 4) { id in _ = pending.complete(id, with: .success(41)) }
        }
        #expect(await again.callsOutcome() == .value(41))
    }

    @Test("without an SDK cancel, failAll frees the reserved ids of callers that left: no late reply will come")
    func failAllFreesReservedIDs() async {
        let pending = PendingRequests<Int, Int>()
        let first = OneShotCall { try await pending.request(id: 3) { _ in } }
        #expect(await eventually { pending.statistics.pending == 1 })
        first.cancel()
        #expect(await first.callsOutcome() == .cancelled)
        #expect(pending.statistics.awaitingLateReply == 1)
        _ = pending.failAll(DisconnectedForTest())
        #expect(pending.statistics.awaitingLateReply == 0)
        let again = OneShotCall {
            try await pending.request(id: 3) { id in _ = pending.complete(id, with: .success(31)) }
        }
        #expect(await again.callsOutcome() == .value(31))
    }

    @Test(
        "caller-assigned: an id reused while the old request's cancel waits on the SDK's loop is refused, so the old reply never completes the newer request; the id is free once that cancel ran"
    )
    func reuseBeforeQueuedCancelIsRefused() async {
        let loop = CallsManualScheduler()
        let cancelled = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler, cancel: { id in cancelled.append(id) })
        let first = OneShotCall { try await pending.request(id: 5, timeout: .zero) { _ in } }
        #expect(await first.callsOutcome() == .timedOut)
        // The first request's cancel is due, held on the loop: the SDK still runs that request.
        #expect(await eventually { loop.pending == 1 })
        #expect(pending.statistics.awaitingCancel == 1)
        let starts = OneShotCounter()
        let second = OneShotCall { try await pending.request(id: 5) { _ in starts.increment() } }
        #expect(await second.callsOutcome() == .idInUse)
        #expect(starts.value == 0, "the newer request's SDK call must not be made while the id is the old one's")
        loop.runAll()
        #expect(cancelled.values == [5])
        #expect(pending.statistics.awaitingCancel == 0 && pending.statistics.skippedCancels == 0)
        let third = OneShotCall { try await pending.request(id: 5) { id in pending.complete(id, with: .success(50)) } }
        #expect(await third.callsOutcome() == .value(50))
    }

    @Test(
        "caller-assigned: the old request's late reply, before its queued cancel ran, frees the id; the cancel then finds the newer request and is not made"
    )
    func lateReplyFreesHeldID() async {
        let loop = CallsManualScheduler()
        let cancelled = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler, cancel: { id in cancelled.append(id) })
        let first = OneShotCall { try await pending.request(id: 5, timeout: .zero) { _ in } }
        #expect(await first.callsOutcome() == .timedOut)
        #expect(await eventually { loop.pending == 1 })
        #expect(!pending.complete(5, with: .success(40)), "the old request's late reply completes nothing")
        #expect(pending.statistics.lateReplies == 1 && pending.statistics.awaitingCancel == 0)
        let second = OneShotCall { try await pending.request(id: 5) { _ in } }
        #expect(await eventually { pending.statistics.pending == 1 })
        loop.runAll()
        #expect(cancelled.values.isEmpty, "the first request's cancel reached the request that reuses its id")
        #expect(pending.statistics.skippedCancels == 1)
        #expect(pending.complete(5, with: .success(50)))
        #expect(await second.callsOutcome() == .value(50))
        #expect(pending.statistics.pending == 0)
    }

    @Test(
        "SDK-assigned: after the old request's late reply, its queued cancel that runs while the newer start that got the same id is returning is not made"
    )
    func staleCancelDuringNewerStart() async {
        let loop = CallsManualScheduler()
        let cancelled = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler, cancel: { id in cancelled.append(id) })
        let first = OneShotCall { try await pending.request(timeout: .zero) { 1 } }
        #expect(await first.callsOutcome() == .timedOut)
        #expect(await eventually { loop.pending == 1 })
        // The late reply: the SDK is done with request 1 and hands its lowest free id out again.
        #expect(!pending.complete(1, with: .success(10)))
        let second = OneShotCall {
            try await pending.request { () -> Int in
                // The SDK gave id 1 to this request; before this start returns, the SDK's thread
                // runs the old request's queued cancel.
                loop.runAll()
                return 1
            }
        }
        #expect(await eventually { pending.statistics.pending == 1 })
        #expect(cancelled.values.isEmpty, "the old request's cancel stopped the newer request that got its id")
        #expect(pending.statistics.skippedCancels == 1)
        #expect(pending.complete(1, with: .success(20)))
        #expect(await second.callsOutcome() == .value(20))
    }

    @Test(
        "SDK-assigned: an id the SDK gives to a newer request before the old one's late reply ends the old hold; the old cancel is not made and the newer request gets its reply"
    )
    func sdkReassignsHeldID() async {
        let loop = CallsManualScheduler()
        let cancelled = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler, cancel: { id in cancelled.append(id) })
        let first = OneShotCall { try await pending.request(timeout: .zero) { 3 } }
        #expect(await first.callsOutcome() == .timedOut)
        #expect(await eventually { loop.pending == 1 })
        #expect(pending.statistics.awaitingCancel == 1)
        let second = OneShotCall { try await pending.request { 3 } }
        #expect(await eventually { pending.statistics.pending == 1 })
        #expect(pending.statistics.awaitingCancel == 0)
        loop.runAll()
        #expect(cancelled.values.isEmpty)
        #expect(pending.complete(3, with: .success(30)))
        #expect(await second.callsOutcome() == .value(30))
    }

    @Test(
        "without an SDK cancel, at most reservedIDLimit ids stay reserved for late replies: past it the oldest is released, counted, and reusable"
    )
    func reservedIDsAreBounded() async {
        let pending = PendingRequests<Int, Int>(reservedIDLimit: 2)
        for id in 1...3 {
            let call = OneShotCall { try await pending.request(id: id, timeout: .zero) { _ in } }
            #expect(await call.callsOutcome() == .timedOut)
        }
        let statistics = pending.statistics
        #expect(statistics.awaitingLateReply == 2 && statistics.releasedReservations == 1)
        let reused = OneShotCall { try await pending.request(id: 1) { id in pending.complete(id, with: .success(11)) } }
        #expect(await reused.callsOutcome() == .value(11), "the oldest reservation was released")
        let stillReserved = OneShotCall { try await pending.request(id: 2) { _ in } }
        #expect(await stillReserved.callsOutcome() == .idInUse)
    }

    @Test("a cancel due before the id is reused is made, and while it runs the id is in use")
    func cancelHoldsTheIdWhileItRuns() async {
        let loop = CallsManualScheduler()
        let refusedInside = OneShotRecorder<Int>()
        let holder = OneShotSlot<PendingRequests<Int, Int>>()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler) { id in
            // Inside the SDK's cancel: the table still counts the id as taken.
            refusedInside.append(holder.value?.storage.machine.cancelRunning(id) != nil ? 1 : 0)
        }
        holder.store(pending)
        let first = OneShotCall { try await pending.request(id: 6, timeout: .zero) { _ in } }
        #expect(await first.callsOutcome() == .timedOut)
        #expect(await eventually { loop.pending == 1 })
        loop.runAll()
        #expect(refusedInside.values == [1])
        let again = OneShotCall { try await pending.request(id: 6) { id in pending.complete(id, with: .success(60)) } }
        #expect(await again.callsOutcome() == .value(60))
        holder.clear()
    }

    @Test("a cancel the scheduler refuses is not made, and the caller still resumes with nothing left behind")
    func refusedCancel() async {
        let loop = CallsManualScheduler(refusing: true)
        let cancelled = OneShotCounter()
        let pending = PendingRequests<Int, Int>(scheduler: loop.scheduler, cancel: { _ in cancelled.increment() })
        let call = OneShotCall { try await pending.request(id: 2, timeout: .zero) { _ in } }
        #expect(await call.callsOutcome() == .timedOut)
        #expect(cancelled.value == 0)
        #expect(pending.statistics.pending == 0)
        #expect(await eventually { pending.statistics.awaitingCancel == 0 }, "a refused cancel frees the id")
    }

    @Test("the SDK may reply from inside its cancel: the reply loses, goes to onDiscard, and nothing deadlocks")
    func replyInsideCancel() async {
        let discarded = OneShotRecorder<Int>()
        let holder = OneShotSlot<PendingRequests<Int, Int>>()
        let pending = PendingRequests<Int, Int> { id in
            holder.value?.complete(id, with: .success(77))
        } onDiscard: {
            discarded.append($0)
        }
        holder.store(pending)
        let call = OneShotCall { try await pending.request(id: 4, timeout: .zero) { _ in } }
        #expect(await call.callsOutcome() == .timedOut)
        #expect(await eventually { discarded.values == [77] })
        // The reply is counted just after the gate hands its value to onDiscard: wait for it (a
        // run under ThreadSanitizer read the counters between the two).
        #expect(await eventually { pending.statistics.lateReplies == 1 })
        let statistics = pending.statistics
        #expect(statistics.lateReplies == 1 && statistics.unknownReplies == 0 && statistics.pending == 0)
        holder.clear()
    }

    @Test("failAll fails every pending request once; their later replies are late")
    func failAllFailsEveryPending() async {
        let pending = PendingRequests<Int, Int>()
        let calls = (1...3).map { id in OneShotCall { try await pending.request(id: id) { _ in } } }
        #expect(await eventually { pending.statistics.pending == 3 })
        #expect(pending.failAll(OneShotTestError(code: 8)) == 3)
        for call in calls {
            #expect(await call.callsOutcome() == .failure(8))
        }
        #expect(pending.failAll(OneShotTestError(code: 9)) == 0)
        #expect(!pending.complete(2, with: .success(20)))
        let statistics = pending.statistics
        #expect(statistics.failed == 3 && statistics.lateReplies == 1 && statistics.pending == 0)
    }

    @Test("failAll while an SDK-assigned start runs fails that request when the start returns")
    func failAllDuringStart() async {
        let pending = PendingRequests<Int, Int>()
        let call = OneShotCall {
            try await pending.request { () -> Int in
                pending.failAll(OneShotTestError(code: 1))  // the connection drops during the publish
                return 4
            }
        }
        #expect(await call.callsOutcome() == .failure(1))
        #expect(!pending.complete(4, with: .success(40)))
        #expect(pending.statistics.lateReplies == 1 && pending.statistics.pending == 0)
    }

    @Test("a reply parked before a failAll wins over it: it came first")
    func parkedReplyBeforeFailAll() async {
        let pending = PendingRequests<Int, Int>()
        let call = OneShotCall {
            try await pending.request { () -> Int in
                pending.complete(4, with: .success(40))
                pending.failAll(OneShotTestError(code: 1))
                return 4
            }
        }
        #expect(await call.callsOutcome() == .value(40))
    }

    @Test("an SDK-assigned id that is still pending is taken over; the older request throws RequestIDError")
    func reassignedID() async {
        let pending = PendingRequests<Int, Int>()
        let older = OneShotCall { try await pending.request { 8 } }
        #expect(await eventually { pending.statistics.pending == 1 })
        let newer = OneShotCall { try await pending.request { 8 } }
        #expect(await older.callsOutcome() == .idReassigned)
        #expect(pending.complete(8, with: .success(80)))
        #expect(await newer.callsOutcome() == .value(80))
    }

    @Test("unknown and duplicate replies are counted, their values discarded, and nothing crashes")
    func unknownAndDuplicate() async {
        let discarded = OneShotRecorder<Int>()
        let pending = PendingRequests<Int, Int>(onDiscard: { discarded.append($0) })
        #expect(!pending.complete(99, with: .success(1)))
        #expect(!pending.complete(98, with: .failure(OneShotTestError(code: 2))))
        let call = OneShotCall {
            try await pending.request(id: 1) { id in
                pending.complete(id, with: .success(10))
                pending.complete(id, with: .success(11))  // the SDK delivers twice
            }
        }
        #expect(await call.callsOutcome() == .value(10))
        let statistics = pending.statistics
        #expect(statistics.unknownReplies == 2 && statistics.duplicateReplies == 1)
        #expect(discarded.values == [1, 11])
    }

    @Test("a start that throws fails its request with that error and frees the id")
    func startThrows() async {
        let pending = PendingRequests<Int, Int>()
        let caller = OneShotCall { try await pending.request(id: 6) { _ in throw OneShotTestError(code: 6) } }
        #expect(await caller.callsOutcome() == .failure(6))
        let sdk = OneShotCall { try await pending.request { () throws -> Int in throw OneShotTestError(code: 7) } }
        #expect(await sdk.callsOutcome() == .failure(7))
        let statistics = pending.statistics
        #expect(statistics.pending == 0 && statistics.failed == 2)
        #expect(pending.storage.machine.startingCount == 0)
    }

    @Test("RequestIDError says which id and why")
    func errorDescription() {
        #expect(RequestIDError(.inUse, id: "7").description.contains("request id 7 is in use"))
        #expect(RequestIDError(.reassigned, id: "7").description.contains("reassigned"))
        #expect(RequestIDError.Reason.inUse != .reassigned)
    }
}

private struct DisconnectedForTest: Error {}
