// Contract tests for withCallback. Every racing step is forced: the test waits
// (polling, with a generous upper bound) until the waiter is installed, holds
// `start` open with a semaphore, or cancels the task from inside `start`.
// Calls run as watched calls, so a lost resume fails the test instead of hanging the run.

import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// A fake asynchronous operation: keeps the completion it was given until the
/// test drops it, and counts calls of its cancel handle.
private final class FakeOperation: Sendable {
    let completion = OneShotSlot<Completion<Int>>()
    let cancels = OneShotCounter()

    /// Hands out a cancel handle that counts its calls.
    func handle() -> CancelHandle {
        CancelHandle { self.cancels.increment() }
    }

    /// Starts a plain call (no timeout, no `onDiscard`) that hands its completion to this
    /// operation and returns the counting handle.
    func startCall() -> OneShotCall<Int> {
        OneShotCall {
            try await withCallback { (completion: Completion<Int>) in
                self.completion.store(completion)
                return self.handle()
            }
        }
    }

    /// Waits until the call's waiter is installed (the caller is suspended).
    func waitUntilSuspended() async -> Bool {
        await eventually { self.completion.value?.oneShotHasWaiter ?? false }
    }
}

@Suite("OneShot: withCallback contract", .timeLimit(.minutes(5)))
struct OneShotWithCallbackTests {
    // MARK: 1-3: first outcome wins, synchronous completion, repeated callbacks

    @Test("a success reported synchronously inside start is returned")
    func synchronousSuccess() async {
        let decided = OneShotRecorder<Bool>()
        let result = await oneShotOutcome {
            try await withCallback { (completion: Completion<Int>) in
                decided.append(completion.succeed(42))
                return nil
            }
        }
        #expect(result == .success(42))
        #expect(decided.values == [true])
    }

    @Test("success then error inside start: the success wins, the second call reports it lost")
    func successThenError() async {
        let decided = OneShotRecorder<Bool>()
        let result = await oneShotOutcome {
            try await withCallback { (completion: Completion<Int>) in
                decided.append(completion.succeed(1))
                decided.append(completion.fail(OneShotTestError(code: 2)))
                return nil
            }
        }
        #expect(result == .success(1))
        #expect(decided.values == [true, false])
    }

    @Test("error then success inside start: the error wins and the success goes to onDiscard")
    func errorThenSuccess() async {
        let discarded = OneShotRecorder<Int>()
        let result = await oneShotOutcome {
            try await withCallback(onDiscard: { discarded.append($0) }) { (completion: Completion<Int>) in
                completion.fail(OneShotTestError(code: 2))
                completion.succeed(1)
                return nil
            }
        }
        #expect(result == .failure(2))
        #expect(discarded.values == [1])
    }

    @Test("repeated successes: the first is returned, every later one goes to onDiscard exactly once")
    func repeatedSuccesses() async {
        let discarded = OneShotRecorder<Int>()
        let result = await oneShotOutcome {
            try await withCallback(onDiscard: { discarded.append($0) }) { (completion: Completion<Int>) in
                completion.succeed(1)
                completion.succeed(2)
                completion.succeed(3)
                return nil
            }
        }
        #expect(result == .success(1))
        #expect(discarded.values == [2, 3])
    }

    /// The synchronous path returns without a continuation, handler or timer: everything the
    /// call held must still be freed when it returns, with and without `onDiscard`.
    @Test(
        "an outcome inside start frees the gate and what the call held: the value, a late value, the handle, onDiscard's captures",
        arguments: [false, true])
    func synchronousOutcomeFreesEverything(withOnDiscard: Bool) async throws {
        let alive = OneShotAlive()
        let storage = OneShotSlot<OneShotWeak>()
        try await Self.callDecidedInsideStart(alive: alive, storage: storage, withOnDiscard: withOnDiscard)
        #expect(alive.value == 0, "\(alive.value) objects outlived the call")
        #expect(storage.value?.object == nil, "the gate outlived the call")
    }

    /// A completion the SDK kept after the call returned must never reach a later call, whatever
    /// gates later calls get.
    @Test("a completion the SDK kept after a synchronous outcome never reaches a later call: it only discards")
    func keptCompletionNeverReachesALaterCall() async throws {
        let kept = OneShotSlot<Completion<Int>>()
        let discarded = OneShotRecorder<Int>()
        let gateOfFirst = OneShotSlot<OneShotWeak>()
        let onDiscard: @Sendable (Int) -> Void = { discarded.append($0) }
        let first: Int = try await withCallback(onDiscard: onDiscard) { completion in
            kept.store(completion)
            gateOfFirst.store(OneShotWeak(completion.oneShotStorageObject))
            completion.succeed(1)
            return nil
        }
        #expect(first == 1)
        // The next calls, on this thread or another, each make or reuse a gate: never the kept one.
        for round in 0..<3 {
            let operation = FakeOperation()
            let call = operation.startCall()
            #expect(await operation.waitUntilSuspended())
            #expect(
                operation.completion.value?.oneShotStorageObject !== gateOfFirst.value?.object,
                "round \(round): a later call got the gate of a completion still held")
            #expect(kept.value?.succeed(100 + round) == false, "the kept completion decided a later call")
            #expect(operation.completion.value?.succeed(round) == true)
            #expect(await call.outcome() == .success(round))
            let synchronous: Int = try await withCallback { completion in
                completion.succeed(7)
                return nil
            }
            #expect(synchronous == 7)
        }
        #expect(discarded.values == [100, 101, 102])
    }

    private static func callDecidedInsideStart(
        alive: OneShotAlive, storage: OneShotSlot<OneShotWeak>, withOnDiscard: Bool
    ) async throws {
        let discardToken = OneShotToken(alive)
        let handleToken = OneShotToken(alive)
        var onDiscard: (@Sendable (OneShotToken) -> Void)? = nil
        if withOnDiscard { onDiscard = { _ in _ = discardToken } }
        let value: OneShotToken = try await withCallback(onDiscard: onDiscard) { completion in
            storage.store(OneShotWeak(completion.oneShotStorageObject))
            completion.succeed(OneShotToken(alive))
            completion.succeed(OneShotToken(alive))  // loses: discarded (or dropped) at once
            return CancelHandle { _ = handleToken }
        }
        #expect(alive.value == 3, "the returned value, discardToken and handleToken: \(alive.value) alive")
        _ = value
    }

    @Test("start throwing makes its error the outcome")
    func startThrows() async {
        let result = await oneShotOutcome {
            try await withCallback { (_: Completion<Int>) in throw OneShotTestError(code: 9) }
        }
        #expect(result == .failure(9))
    }

    @Test("start throwing after the completion decided: the completion's outcome stands")
    func startThrowsAfterCompletion() async {
        let result = await oneShotOutcome {
            try await withCallback { (completion: Completion<Int>) in
                completion.succeed(5)
                throw OneShotTestError(code: 9)
            }
        }
        #expect(result == .success(5))
    }

    @Test("a success from a foreign thread after the caller suspended resumes it")
    func asynchronousSuccess() async {
        let operation = FakeOperation()
        let call = operation.startCall()
        #expect(await operation.waitUntilSuspended())
        let decided = OneShotRecorder<Bool>()
        oneShotOnForeignThread {
            decided.append(operation.completion.value!.succeed(8))
        }
        #expect(await call.outcome() == .success(8))
        #expect(decided.values == [true])
        #expect(operation.cancels.value == 0)
    }

    // MARK: 4: cancellation

    @Test("cancelling a call whose operation never calls back throws CancellationError and cancels the operation once")
    func cancelSilentOperation() async {
        let operation = FakeOperation()
        let discarded = OneShotRecorder<Int>()
        let call = OneShotCall {
            try await withCallback(onDiscard: { discarded.append($0) }) { (completion: Completion<Int>) in
                operation.completion.store(completion)
                return operation.handle()
            }
        }
        #expect(await operation.waitUntilSuspended())
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        #expect(await operation.cancels.reaches(1))
        // The operation reports late: first wins, the value is discarded, nothing is resumed again.
        #expect(operation.completion.value?.succeed(3) == false)
        #expect(discarded.values == [3])
        call.cancel()
        #expect(await operation.cancels.reaches(1))
    }

    @Test("a cancel after the completion decided changes nothing and does not call the handle")
    func cancelAfterSuccess() async {
        let operation = FakeOperation()
        let call = operation.startCall()
        #expect(await operation.waitUntilSuspended())
        #expect(operation.completion.value?.succeed(4) == true)
        call.cancel()
        #expect(await call.outcome() == .success(4))
        #expect(operation.cancels.value == 0)
    }

    // MARK: 5: cancel-handle race

    @Test(
        "cancel before the handle is returned: the task cancels itself inside start; the handle is called once after"
    )
    func cancelBeforeHandleIsReturned() async {
        let operation = FakeOperation()
        let callsDuringStart = OneShotRecorder<Int>()
        let result = await oneShotOutcome {
            try await withCallback { (completion: Completion<Int>) in
                operation.completion.store(completion)
                withUnsafeCurrentTask { $0?.cancel() }  // cancellation arrives before start returns
                callsDuringStart.append(operation.cancels.value)
                return operation.handle()
            }
        }
        #expect(result == .cancelled)
        #expect(callsDuringStart.values == [0])
        #expect(await operation.cancels.reaches(1))
    }

    @Test("cancel before the handle is returned, from another thread while start is held open")
    func cancelBeforeHandleFromAnotherThread() async {
        let operation = FakeOperation()
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let callSlot = OneShotSlot<OneShotCall<Int>>()
        let callsAtCancel = OneShotRecorder<Int>()
        let call = OneShotCall {
            try await withCallback { (completion: Completion<Int>) in
                operation.completion.store(completion)
                entered.signal()
                // start is held open until the canceller has cancelled (bounded, so nothing hangs).
                _ = proceed.wait(timeout: .now() + 10)
                return operation.handle()
            }
        }
        callSlot.store(call)
        oneShotOnForeignThread {
            entered.wait()
            callSlot.value!.cancel()  // the handle does not exist yet
            callsAtCancel.append(operation.cancels.value)
            proceed.signal()
        }
        #expect(await call.outcome() == .cancelled)
        #expect(callsAtCancel.values == [0])
        #expect(await operation.cancels.reaches(1))
    }

    @Test("a result reported synchronously inside start is returned even if the task was cancelled while start ran")
    func synchronousResultBeatsCancellationDuringStart() async {
        // Cancellation is observed once start returns; a synchronous outcome is already there.
        let operation = FakeOperation()
        let discarded = OneShotRecorder<Int>()
        let result = await oneShotOutcome {
            try await withCallback(onDiscard: { discarded.append($0) }) { (completion: Completion<Int>) in
                withUnsafeCurrentTask { $0?.cancel() }
                completion.succeed(12)
                return operation.handle()
            }
        }
        #expect(result == .success(12))
        #expect(operation.cancels.value == 0)
        #expect(discarded.values.isEmpty)
    }

    @Test("a task already cancelled when start runs: start still runs, its handle is called once")
    func alreadyCancelled() async {
        let operation = FakeOperation()
        let started = OneShotCounter()
        let result = await oneShotOutcome {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withCallback { (completion: Completion<Int>) in
                started.increment()
                operation.completion.store(completion)
                return operation.handle()
            }
        }
        #expect(result == .cancelled)
        #expect(started.value == 1)
        #expect(await operation.cancels.reaches(1))
    }

    @Test("a completion inside start before the handle is returned: the handle is never called")
    func completionBeforeHandleReturned() async {
        let operation = FakeOperation()
        let result = await oneShotOutcome {
            try await withCallback { (completion: Completion<Int>) in
                completion.succeed(6)
                return operation.handle()
            }
        }
        #expect(result == .success(6))
        #expect(operation.cancels.value == 0)
    }

    // MARK: 6: nothing called under the lock

    @Test(
        "a cancel handle that calls the completion synchronously does not deadlock; the outcome stays the cancellation",
        arguments: ["cancel after suspension", "cancel before the handle is returned", "timeout"]
    )
    func reentrantHandle(path: String) async {
        let discarded = OneShotRecorder<Int>()
        let completionSlot = OneShotSlot<Completion<Int>>()
        let handleCalls = OneShotCounter()
        let reentrantResults = OneShotRecorder<Bool>()
        let timeout: Duration? = path == "timeout" ? .milliseconds(10) : nil
        let call = OneShotCall {
            try await withCallback(timeout: timeout, onDiscard: { discarded.append($0) }) {
                (completion: Completion<Int>) in
                completionSlot.store(completion)
                if path == "cancel before the handle is returned" {
                    withUnsafeCurrentTask { $0?.cancel() }
                }
                return CancelHandle {
                    handleCalls.increment()
                    // The SDK reports its result from inside its cancel function.
                    reentrantResults.append(completion.succeed(77))
                }
            }
        }
        if path == "cancel after suspension" {
            #expect(await eventually { completionSlot.value?.oneShotHasWaiter ?? false })
            call.cancel()
        }
        let expected: OneShotOutcome = path == "timeout" ? .timedOut(.milliseconds(10)) : .cancelled
        #expect(await call.outcome() == expected)
        #expect(await handleCalls.reaches(1))
        #expect(await eventually { reentrantResults.values.count == 1 })
        #expect(reentrantResults.values == [false])
        #expect(discarded.values == [77])
    }

    @Test("onDiscard may call back into the completion without deadlocking")
    func reentrantOnDiscard() async {
        let slot = OneShotSlot<Completion<Int>>()
        let discarded = OneShotRecorder<Int>()
        let result = await oneShotOutcome {
            try await withCallback(onDiscard: { value in
                discarded.append(value)
                if value == 2 { _ = slot.value?.succeed(3) }
            }) { (completion: Completion<Int>) in
                slot.store(completion)
                completion.succeed(1)
                completion.succeed(2)
                return nil
            }
        }
        slot.clear()
        #expect(result == .success(1))
        #expect(discarded.values == [2, 3])
    }

    // MARK: 7: timeout

    @Test("a silent operation times out with BridgeTimeoutError naming the timeout, and is cancelled once")
    func timeoutSilentOperation() async {
        let operation = FakeOperation()
        let discarded = OneShotRecorder<Int>()
        let result = await oneShotOutcome {
            try await withCallback(timeout: .milliseconds(20), onDiscard: { discarded.append($0) }) {
                (completion: Completion<Int>) in
                operation.completion.store(completion)
                return operation.handle()
            }
        }
        #expect(result == .timedOut(.milliseconds(20)))
        #expect(await operation.cancels.reaches(1))
        #expect(operation.completion.value?.succeed(5) == false)
        #expect(discarded.values == [5])
    }

    @Test("a timeout loses to an earlier success: no cancel, value returned")
    func timeoutLosesToSynchronousSuccess() async {
        let operation = FakeOperation()
        let result = await oneShotOutcome {
            try await withCallback(timeout: .milliseconds(1)) { (completion: Completion<Int>) in
                completion.succeed(3)
                return operation.handle()
            }
        }
        #expect(result == .success(3))
        #expect(operation.cancels.value == 0)
    }

    @Test("a call that completes early returns at once and leaves no timer behind")
    func earlyCompletionTearsDownTimer() async {
        let alive = OneShotAlive()
        let operation = FakeOperation()
        let storage = OneShotSlot<OneShotWeak>()
        let call = OneShotCall {
            let token = OneShotToken(alive)  // held by onDiscard, i.e. by the gate storage the timer holds
            return try await withCallback(timeout: .seconds(3600), onDiscard: { _ in _ = token }) {
                (completion: Completion<Int>) in
                storage.store(OneShotWeak(completion.oneShotStorageObject))
                operation.completion.store(completion)
                return operation.handle()
            }
        }
        #expect(await operation.waitUntilSuspended())
        #expect(await eventually { operation.completion.value?.oneShotHasTimer ?? false })
        #expect(operation.completion.value?.succeed(1) == true)
        #expect(await call.outcome() == .success(1))  // would take an hour if it waited for the timer
        operation.completion.clear()
        // The timer task held the gate storage; it is cancelled and lets go promptly.
        #expect(await alive.waitUntilAllFreed())
        #expect(storage.value?.object == nil)
        #expect(operation.cancels.value == 0)
    }

    @Test("BridgeTimeoutError says which timeout expired")
    func timeoutErrorDescription() {
        let error = BridgeTimeoutError(timeout: .milliseconds(250))
        #expect(error.timeout == .milliseconds(250))
        #expect(error.description == "operation timed out after 0.25 seconds")
        #expect(error == BridgeTimeoutError(timeout: .milliseconds(250)))
        #expect(error != BridgeTimeoutError(timeout: .seconds(1)))
    }

    // MARK: 9: isolation

    @Test("a caller on a custom actor runs start and resumes on it with no extra executor hops")
    func actorIsolation() async throws {
        let caller = OneShotIsolatedCaller()
        let synchronous = try #require(await OneShotCall { try await caller.callCompletingSynchronously() }.result())
            .get()
        #expect(synchronous.value == 1)
        #expect(synchronous.startOnActor && synchronous.afterOnActor)
        #expect(synchronous.hops == 0)  // completed inside start: never left the actor

        let asynchronous = try #require(
            await OneShotCall { try await caller.callCompletingFromForeignThread() }.result()
        ).get()
        #expect(asynchronous.value == 2)
        #expect(asynchronous.startOnActor && asynchronous.afterOnActor)
        // At most the one resumption onto the actor (zero if the callback won the
        // race with the actual suspension), like a bare continuation.
        #expect(asynchronous.hops <= 1)
    }

    @Test("a caller on the main actor runs start and resumes on the main actor's queue", arguments: [true, false])
    func mainActorIsolation(completesSynchronously: Bool) async throws {
        // The main actor runs on the main dispatch queue (here not always drained
        // by the main thread), so check the queue, not the thread.
        let key = DispatchSpecificKey<Int>()
        DispatchQueue.main.setSpecific(key: key, value: 1)
        defer { DispatchQueue.main.setSpecific(key: key, value: nil) }
        let observed = OneShotRecorder<String>()
        let result = await oneShotOutcome { @MainActor in
            let value = try await withCallback { (completion: Completion<Int>) in
                observed.append("start on main: \(DispatchQueue.getSpecific(key: key) == 1)")
                if completesSynchronously {
                    completion.succeed(5)
                } else {
                    oneShotOnForeignThread {
                        _ = spinUntil { completion.oneShotHasWaiter }
                        completion.succeed(5)
                    }
                }
                return nil
            }
            MainActor.assertIsolated()
            observed.append("after on main: \(DispatchQueue.getSpecific(key: key) == 1)")
            return value
        }
        #expect(result == .success(5))
        #expect(observed.values == ["start on main: true", "after on main: true"])
    }

    // MARK: 10: lifetime

    @Test(
        "after the call returns and the SDK drops the completion, the gate and everything start captured are freed",
        arguments: [
            "sync success", "async success", "cancel", "cancel before handle", "timeout",
            "handle after decision", "start throws",
        ]
    )
    func lifetime(path: String) async {
        let alive = OneShotAlive()
        let operation = FakeOperation()
        let storage = OneShotSlot<OneShotWeak>()
        let call = OneShotCall {
            let discardToken = OneShotToken(alive)
            let startToken = OneShotToken(alive)
            return try await withCallback(
                timeout: path == "timeout" ? .milliseconds(5) : nil,
                onDiscard: { _ in _ = discardToken }
            ) { (completion: Completion<Int>) in
                storage.store(OneShotWeak(completion.oneShotStorageObject))
                operation.completion.store(completion)
                // The handle captures the completion (and so the gate): a cycle
                // unless the gate lets go of the handle once decided.
                let handle = CancelHandle { [startToken] in
                    _ = startToken
                    _ = completion.fail(OneShotTestError(code: 0))
                }
                switch path {
                case "sync success", "handle after decision": completion.succeed(1)
                case "cancel before handle": withUnsafeCurrentTask { $0?.cancel() }
                case "start throws": throw OneShotTestError(code: 1)
                default: break
                }
                return handle
            }
        }
        switch path {
        case "async success":
            #expect(await operation.waitUntilSuspended())
            operation.completion.value?.succeed(2)
        case "cancel":
            #expect(await operation.waitUntilSuspended())
            call.cancel()
        default:
            break
        }
        let outcome = await call.outcome()
        #expect(outcome != .other("did not end within \(testHangBoundSeconds) s"))
        operation.completion.clear()
        #expect(await alive.waitUntilAllFreed(), "\(alive.value) objects still alive on path \(path)")
        #expect(storage.value?.object == nil)
    }

    // MARK: 11: per-call state

    @Test("each call has its own gate: one gate's lock held on another thread does not block other calls")
    func noSharedLock() async throws {
        // Call A is suspended; a foreign thread then holds A's lock until told to let go.
        let operation = FakeOperation()
        let callA = OneShotCall {
            try await withCallback { (completion: Completion<Int>) in
                operation.completion.store(completion)
                return nil
            }
        }
        #expect(await operation.waitUntilSuspended())
        let completionA = try #require(operation.completion.value)
        let locked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        oneShotOnForeignThread {
            completionA.storage.box.withLock { _ in
                locked.signal()
                _ = release.wait(timeout: .now() + 30)
            }
        }
        locked.wait()
        // Call B runs its synchronous and asynchronous paths while A's lock is held.
        let callB = OneShotCall {
            let one = try await withCallback { (completion: Completion<Int>) in
                completion.succeed(1)
                return nil
            }
            let two = try await withCallback { (completion: Completion<Int>) in
                DispatchQueue.global().async { completion.succeed(2) }
                return nil
            }
            return one + two
        }
        let outcomeB = await callB.outcome()
        release.signal()  // let A's lock go whatever happened
        #expect(outcomeB == .success(3))
        #expect(completionA.succeed(4))
        #expect(await callA.outcome() == .success(4))
    }

    @Test("two calls never share storage")
    func distinctStorage() async throws {
        // Keep the first completion alive, so its storage cannot be reused by the second call.
        let keptAlive = OneShotSlot<Completion<Int>>()
        let first = OneShotSlot<OneShotWeak>()
        let second = OneShotSlot<OneShotWeak>()
        _ = await oneShotOutcome {
            try await withCallback { (one: Completion<Int>) in
                keptAlive.store(one)
                first.store(OneShotWeak(one.oneShotStorageObject))
                one.succeed(1)
                return nil
            }
        }
        _ = await oneShotOutcome {
            try await withCallback { (two: Completion<Int>) in
                second.store(OneShotWeak(two.oneShotStorageObject))
                two.succeed(2)
                return nil
            }
        }
        let firstID = try #require(first.value?.identifier)
        let secondID = try #require(second.value?.identifier)
        #expect(firstID != secondID)
        keptAlive.clear()
    }
}

/// An actor on a counting executor: every hop onto it is counted.
private actor OneShotIsolatedCaller {
    let executor = OneShotCountingExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }

    struct Observation: Sendable {
        var value: Int
        var startOnActor: Bool
        var afterOnActor: Bool
        var hops: Int
    }

    func callCompletingSynchronously() async throws -> Observation {
        let before = self.executor.hops
        var startOnActor = false
        let value = try await withCallback { (completion: Completion<Int>) in
            startOnActor = self.executor.isCurrent
            completion.succeed(1)
            return nil
        }
        let hops = self.executor.hops - before
        self.assertIsolated()
        return Observation(value: value, startOnActor: startOnActor, afterOnActor: self.executor.isCurrent, hops: hops)
    }

    func callCompletingFromForeignThread() async throws -> Observation {
        let before = self.executor.hops
        var startOnActor = false
        let value = try await withCallback { (completion: Completion<Int>) in
            startOnActor = self.executor.isCurrent
            oneShotOnForeignThread {
                // Report once the waiter is installed, so the caller (almost always) really suspends.
                _ = spinUntil { completion.oneShotHasWaiter }
                completion.succeed(2)
            }
            return nil
        }
        let hops = self.executor.hops - before
        self.assertIsolated()
        return Observation(value: value, startOnActor: startOnActor, afterOnActor: self.executor.isCurrent, hops: hops)
    }
}
