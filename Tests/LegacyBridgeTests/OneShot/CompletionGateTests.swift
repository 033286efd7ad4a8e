// Tests for the public CompletionGate facade: the same contract as withCallback
// with the events driven by hand, plus the misuse preconditions (exit tests).
// An exit test's body must end by itself even if the code under test is broken:
// a hung child process stalls the whole test run.

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

@Suite("OneShot: CompletionGate", .timeLimit(.minutes(5)))
struct OneShotCompletionGateTests {
    @Test("finish before value(): value() returns the stored outcome at once")
    func finishBeforeValue() async throws {
        let gate = CompletionGate<Int>()
        #expect(gate.completion.succeed(3))
        #expect(await oneShotOutcome { try await gate.value() } == .success(3))
    }

    @Test("value() before finish: finish from a foreign thread resumes the waiter")
    func valueBeforeFinish() async throws {
        let gate = CompletionGate<Int>()
        let completion = gate.completion
        oneShotOnForeignThread {
            _ = spinUntil { completion.oneShotHasWaiter }
            completion.succeed(4)
        }
        #expect(await oneShotOutcome { try await gate.value() } == .success(4))
    }

    @Test("the first outcome wins and later results report that they lost")
    func firstWins() async {
        let discarded = OneShotRecorder<Int>()
        let gate = CompletionGate<Int>(onDiscard: { discarded.append($0) })
        #expect(gate.complete(.failure(OneShotTestError(code: 1))))
        #expect(!gate.complete(.success(2)))
        #expect(!gate.cancel())
        #expect(await oneShotOutcome { try await gate.value() } == .failure(1))
        #expect(discarded.values == [2])
    }

    @Test("cancel() before attach: the handle is called once when attached")
    func cancelBeforeAttach() async {
        let gate = CompletionGate<Int>()
        let calls = OneShotCounter()
        #expect(gate.cancel())
        gate.attach(CancelHandle { calls.increment() })
        #expect(await calls.reaches(1))
        #expect(!gate.cancel())
        #expect(calls.value == 1)
        #expect(await oneShotOutcome { try await gate.value() } == .cancelled)
    }

    @Test("a completion before attach: the handle is never called")
    func completionBeforeAttach() async throws {
        let gate = CompletionGate<Int>()
        let calls = OneShotCounter()
        gate.completion.succeed(1)
        gate.attach(CancelHandle { calls.increment() })
        _ = gate.cancel()
        #expect(calls.value == 0)
        #expect(await oneShotOutcome { try await gate.value() } == .success(1))
    }

    @Test("cancelling the task awaiting value() cancels the gate and its operation once")
    func taskCancellation() async {
        let gate = CompletionGate<Int>()
        let calls = OneShotCounter()
        gate.attach(CancelHandle { calls.increment() })
        let call = OneShotCall { try await gate.value() }
        #expect(await eventually { gate.completion.oneShotHasWaiter })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        #expect(await calls.reaches(1))
    }

    @Test("value(timeout:) times out a silent operation and cancels it through the handle")
    func valueTimeout() async {
        let gate = CompletionGate<Int>()
        let calls = OneShotCounter()
        gate.attach(CancelHandle { calls.increment() })
        #expect(await oneShotOutcome { try await gate.value(timeout: .milliseconds(5)) } == .timedOut(.milliseconds(5)))
        #expect(await calls.reaches(1))
    }

    @Test("a gate is freed once the gate and its completion are dropped, even with a handle capturing the completion")
    func gateLifetime() async throws {
        let alive = OneShotAlive()
        var weak: OneShotWeak?
        do {
            let token = OneShotToken(alive)
            let gate = CompletionGate<Int>(onDiscard: { _ in _ = token })
            let completion = gate.completion
            weak = OneShotWeak(completion.oneShotStorageObject)
            gate.attach(CancelHandle { completion.fail(OneShotTestError(code: 0)) })
            let call = OneShotCall { try await gate.value() }
            #expect(await eventually { completion.oneShotHasWaiter })
            call.cancel()
            #expect(await call.outcome() == .cancelled)
        }
        #expect(await alive.waitUntilAllFreed())
        #expect(weak?.object == nil)
    }

    @Test(
        "installing twice stops with a message saying to use one gate per call",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func installTwice() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            // Must not hang whatever the gate does: the body ends by itself.
            let gate = CompletionGate<Int>()
            _ = try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Int, any Error>) in
                gate.install(continuation)
                gate.install(continuation)
                gate.complete(.success(0))
            }
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("create a new gate for every call"))
        }
    }

    @Test(
        "attaching twice stops with a message saying to attach at most once",
        .enabled(
            if: !testsUnderThreadSanitizer,
            "an exit test re-runs the whole TSan-built test binary; the plain run checks it"))
    func attachTwice() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let gate = CompletionGate<Int>()
            gate.attach(nil)
            gate.attach(nil)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("at most once per gate"))
        }
    }

    @Test(
        "a timeout of zero or less times out as soon as start returns without an outcome, and cancels the operation once"
    )
    func zeroTimeout() async throws {
        for timeout in [Duration.zero, .seconds(-5)] {
            let cancels = StreamShared(0)
            await #expect(throws: BridgeTimeoutError(timeout: timeout)) {
                _ = try await withCallback(timeout: timeout) { (_: Completion<Int>) in
                    CancelHandle { cancels.update { $0 += 1 } }
                }
            }
            #expect(await eventually { cancels.value >= 1 } && cancels.value == 1)
            // An outcome decided inside start still wins over an immediate timeout.
            let value = try await withCallback(timeout: timeout) { (completion: Completion<Int>) in
                completion.succeed(7)
                return nil
            }
            #expect(value == 7)
            let gate = CompletionGate<Int>()
            gate.attach(CancelHandle { cancels.update { $0 += 1 } })
            await #expect(throws: BridgeTimeoutError(timeout: timeout)) { _ = try await gate.value(timeout: timeout) }
            #expect(await eventually { cancels.value >= 2 } && cancels.value == 2)
        }
    }

    @Test("a huge timeout (100 years or more, up to Duration.seconds(Int64.max)) means no timeout and never traps")
    func hugeTimeout() async throws {
        for timeout in [Duration.seconds(Int64.max), .seconds(100 * 365 * 24 * 3600)] {
            let value = try await withCallback(timeout: timeout) { (completion: Completion<Int>) in
                let completion = completion
                DispatchQueue.global().async { completion.succeed(3) }
                return nil
            }
            #expect(value == 3)
            let gate = CompletionGate<Int>()
            DispatchQueue.global().async { gate.complete(.success(4)) }
            #expect(try await gate.value(timeout: timeout) == 4)
        }
    }
}
