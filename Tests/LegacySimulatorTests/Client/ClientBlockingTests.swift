// LegacyClient.blockingCall over the simulator's lsdk_blocking_call, through the client's
// OffloadPool: values, bad durations, cancellation and timeouts that interrupt the blocked call,
// the race of an interrupt with a call that has not begun to block, and the cooperative pool
// staying free. Threads the tests block are their own (on Linux Dispatch's global queue is the
// cooperative pool).

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("LegacyClient: blocking calls on the offload pool")
struct ClientBlockingTests {
    @Test("a blocking call returns the SDK's documented result for its key")
    func value() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1, blockingThreads: 1))
        let first = try await client.blockingCall(duration: .milliseconds(1))
        let second = try await client.blockingCall(duration: .zero)
        #expect(first.key != second.key)
        #expect(first.value == SDK.blockingResult(key: first.key))
        #expect(second.value == SDK.blockingResult(key: second.key))
        #expect(client.counters.blockingCalls >= 1)
        #expect(client.counters.blockingCallsInterrupted == 0)
    }

    @Test("durations outside 0 ... 60 s and a zero-thread pool are refused with documented errors")
    func badInput() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1, blockingThreads: 1))
        await #expect(throws: LegacySDKError.outOfRange) { try await client.blockingCall(duration: .seconds(61)) }
        await #expect(throws: LegacySDKError.outOfRange) { try await client.blockingCall(duration: .milliseconds(-1)) }
        #expect(client.counters.blockingCalls == 0)
        #expect(throws: LegacySDKError.outOfRange) { try LegacyClient(configuration: .init(blockingThreads: 0)) }
    }

    @Test("cancelling a caller whose call is blocked throws at once, interrupts the call and frees its thread")
    func cancelInterrupts() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1, blockingThreads: 1))
        let call = ClientTestCall { try await client.blockingCall(duration: .seconds(60)) }
        #expect(await eventually { client.counters.blockingInFlight == 1 })
        call.cancel()
        let outcome = await call.result()
        #expect(throws: CancellationError.self) { try outcome?.get() }
        #expect(await eventually { client.counters.blockingCallsInterrupted == 1 })
        #expect(client.counters.blockingInFlight == 0)
        // The one pool thread came back: the next call runs.
        _ = try await client.blockingCall(duration: .zero)
    }

    @Test(
        "a timeout ends the wait with BridgeTimeoutError and leaves nothing blocked: the call is interrupted, or never made if the timeout came first"
    )
    func timeoutInterrupts() async throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 1, blockingThreads: 1))
        // The timer cannot be held back, so either order of "the call starts to block" and "the
        // timeout fires" can happen; both must leave the one pool thread free.
        await #expect(throws: BridgeTimeoutError(timeout: .milliseconds(200))) {
            try await client.blockingCall(duration: .seconds(60), timeout: .milliseconds(200))
        }
        // The pool has one thread and runs its queue in order: this call runs only after the first
        // body returned. Had the interrupt missed the blocked call, it would wait out the 60 s.
        _ = try await client.blockingCall(duration: .milliseconds(1))
        let counters = client.counters
        #expect(counters.blockingInFlight == 0)
        #expect(counters.blockingCalls == 1 || counters.blockingCalls == 2, "\(counters.blockingCalls)")
        // The second call blocked and returned; the first was interrupted if it blocked at all.
        #expect(counters.blockingCallsInterrupted == counters.blockingCalls - 1)
    }

    @Test(
        "with more blocking calls in flight than cores, an unrelated task still starts; destroy would interrupt them, cancel does"
    )
    func poolStaysFree() async throws {
        let count = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let client = try LegacyClient(configuration: .init(workerThreads: 1, blockingThreads: count))
        // Other tests share this process and its cooperative pool. Under ThreadSanitizer the
        // pool's queue can hold more than a minute of their work, longer than the SDK's longest
        // blocking call (60 s): an unrelated task that ran only after the calls had returned
        // proves nothing either way. Such an attempt is repeated, at most three times; an
        // adapter that really blocks the pool fails every attempt (its task always runs late).
        // The calls' own tasks wait in that queue too: one that starts more than 60 s after the
        // first finds the first returned, and the calls are never all blocked at once. Such an
        // attempt proves nothing either and is repeated the same way.
        let bound = 4.0 * 60
        for _ in 1...3 {
            let interruptedBefore = client.counters.blockingCallsInterrupted
            let calls = (0..<count).map { _ in
                ClientTestCall { try await client.blockingCall(duration: .seconds(60)) }
            }
            #expect(
                await eventually {
                    client.counters.blockingInFlight == UInt64(count) || calls.contains { $0.hasEnded }
                })
            guard !calls.contains(where: { $0.hasEnded }) else {
                for call in calls { _ = await call.result(within: bound) }  // returned after 60 s
                continue
            }
            // What the unrelated task saw when it ran: were all the calls still blocked?
            let seenInFlight = LockedBox<UInt64?>(nil)
            let unrelated = Task { seenInFlight.withLock { $0 = client.counters.blockingInFlight } }
            #expect(await eventually(within: bound) { seenInFlight.withLock { $0 } != nil })
            guard seenInFlight.withLock({ $0 }) == UInt64(count) else {
                for call in calls { _ = await call.result(within: bound) }  // returned after 60 s
                await unrelated.value
                continue
            }
            for call in calls { call.cancel() }
            for call in calls {
                let outcome = await call.result()
                #expect(throws: CancellationError.self) { try outcome?.get() }
            }
            #expect(
                await eventually {
                    client.counters.blockingCallsInterrupted - interruptedBefore == UInt64(count)
                })
            await unrelated.value
            return
        }
        Issue.record("in three attempts the unrelated task never ran while the blocking calls were blocked")
    }
}

@Suite("LegacyClient: an interrupt racing a call that has not begun to block")
struct ClientBlockingRaceTests {
    @Test("an interrupt that comes before the call means the SDK is never called")
    func interruptFirst() {
        let state = BlockingCallState()
        let attempts = AtomicCell<Int>(0)
        state.interrupt {
            attempts.add(1, ordering: .relaxed); return false
        }
        let firstAttempts = attempts.load(ordering: .relaxed)
        #expect(firstAttempts == 0)  // nothing was calling: no SDK interrupt
        let called = AtomicCell<Bool>(false)
        #expect(throws: LegacySDKError.interrupted) {
            try state.perform { called.store(true, ordering: .relaxed) }
        }
        let wasCalled = called.load(ordering: .relaxed)
        #expect(!wasCalled)
    }

    @Test("an interrupt that finds the call not yet blocked repeats until one lands")
    func repeatsUntilBlocked() async {
        let state = BlockingCallState()
        let inBody = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? state.perform {
                inBody.signal()
                _ = release.wait(timeout: .now() + .seconds(testHangBoundSeconds))
            }
            done.signal()
        }.start()
        #expect(await eventually { inBody.wait(timeout: .now()) == .success })
        let attempts = AtomicCell<Int>(0)
        // The "SDK" reports NOT_BLOCKED twice, then the interrupt lands.
        state.interrupt { attempts.add(1, ordering: .relaxed).newValue >= 3 }
        let landedAfter = attempts.load(ordering: .relaxed)
        #expect(landedAfter == 3)
        release.signal()
        #expect(await eventually { done.wait(timeout: .now()) == .success })
    }

    @Test("an interrupt that keeps missing stops once the call has returned")
    func stopsWhenReturned() async {
        let state = BlockingCallState()
        let inBody = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread {
            _ = try? state.perform {
                inBody.signal()
                _ = release.wait(timeout: .now() + .seconds(testHangBoundSeconds))
            }
        }.start()
        #expect(await eventually { inBody.wait(timeout: .now()) == .success })
        let attempts = AtomicCell<Int>(0)
        let returned = LockedBox(false)
        Thread {
            state.interrupt {
                // The body returns while the interrupt keeps missing.
                if attempts.add(1, ordering: .relaxed).newValue == 5 { release.signal() }
                return false
            }
            returned.withLock { $0 = true }
        }.start()
        #expect(await eventually { returned.withLock { $0 } })
        let tried = attempts.load(ordering: .relaxed)
        #expect(tried >= 5)
    }
}
