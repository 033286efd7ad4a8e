// Many concurrent calls completed from Dispatch threads (outside the Swift
// concurrency pool), with random cancellations and short timeouts. Bounded in
// count; checks per call that exactly one outcome was decided, by whom, and
// what happened to the handle and the losing values; then that every gate was freed.

import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

private struct Record {
    var decidingValue: Int? = nil
    var decidingCompletions = 0
    var handleCalls = 0
    var sentSuccesses: [Int] = []
    var discarded: [Int] = []
}

/// One simulated SDK operation and what happened to it.
private final class StressOperation: Sendable {
    enum Kind: CaseIterable {
        /// Succeeds inside start, then again later from a Dispatch thread.
        case synchronous
        /// Succeeds twice from a Dispatch thread.
        case asynchronous
        /// Fails, then succeeds, from a Dispatch thread.
        case failThenSucceed
        /// Never calls back: ends only through cancellation.
        case silentCancelled
        /// Never calls back: ends through its short timeout (or a cancellation).
        case silentTimeout
        /// Succeeds from a Dispatch thread; its cancel handle fails the call synchronously.
        case reentrantHandle
    }

    let index: Int
    let kind: Kind
    let record = LockedBox(Record())

    init(index: Int) {
        self.index = index
        self.kind = Kind.allCases[index % Kind.allCases.count]
    }

    func report(_ completion: Completion<Int>, _ result: Result<Int, any Error>) {
        if case .success(let value) = result { self.record.withLock { $0.sentSuccesses.append(value) } }
        if completion(result) {
            self.record.withLock { record in
                record.decidingCompletions += 1
                if case .success(let value) = result { record.decidingValue = value }
            }
        }
    }
}

@Suite("OneShot: withCallback under concurrent stress")
struct OneShotStressTests {
    @Test(
        "10,000 concurrent calls completed from Dispatch threads with random cancels all end exactly once and free their gates",
        .timeLimit(.minutes(5))
    )
    func concurrentCalls() async throws {
        let total = 10_000
        let batchSize = 1_000
        let alive = OneShotAlive()
        let sdkPending = OneShotCounter()
        let sdkDone = OneShotCounter()
        var operations: [StressOperation] = []
        var outcomes: [OneShotOutcome] = []

        for batchStart in stride(from: 0, to: total, by: batchSize) {
            var tasks: [OneShotCall<Int>] = []
            for index in batchStart..<(batchStart + batchSize) {
                let operation = StressOperation(index: index)
                operations.append(operation)
                let token = OneShotToken(alive)
                tasks.append(
                    OneShotCall {
                        try await withCallback(
                            timeout: operation.kind == .silentTimeout ? .milliseconds(Int.random(in: 1...5)) : nil,
                            onDiscard: { value in
                                _ = token  // the gate (which holds onDiscard) keeps the token alive
                                operation.record.withLock { $0.discarded.append(value) }
                            }
                        ) { (completion: Completion<Int>) in
                            let first = operation.index * 10 + 1
                            switch operation.kind {
                            case .synchronous:
                                operation.report(completion, .success(first))
                                sdkPending.increment()
                                DispatchQueue.global().async {
                                    operation.report(completion, .success(first + 1))
                                    sdkDone.increment()
                                }
                            case .asynchronous, .reentrantHandle:
                                sdkPending.increment()
                                DispatchQueue.global().async {
                                    operation.report(completion, .success(first))
                                    operation.report(completion, .success(first + 1))
                                    sdkDone.increment()
                                }
                            case .failThenSucceed:
                                sdkPending.increment()
                                DispatchQueue.global().async {
                                    operation.report(completion, .failure(OneShotTestError(code: operation.index)))
                                    operation.report(completion, .success(first))
                                    sdkDone.increment()
                                }
                            case .silentCancelled, .silentTimeout:
                                break
                            }
                            let reentrant = operation.kind == .reentrantHandle
                            return CancelHandle {
                                operation.record.withLock { $0.handleCalls += 1 }
                                if reentrant {
                                    operation.report(completion, .failure(OneShotTestError(code: -1)))
                                }
                            }
                        }
                    })
            }
            // Cancel every silent-cancelled call and a random quarter of the others,
            // from a Dispatch thread, racing with the calls themselves.
            let toCancel = tasks.indices.filter { offset in
                operations[batchStart + offset].kind == .silentCancelled || Int.random(in: 0..<4) == 0
            }.map { tasks[$0] }
            DispatchQueue.global().async {
                for task in toCancel.shuffled() { task.cancel() }
            }
            // A hang bound: a TSan run on two cores can keep these tasks waiting for the pool for minutes.
            let deadline = ContinuousClock.now + .seconds(3 * testHangBoundSeconds)
            for task in tasks {
                outcomes.append(await task.outcome(before: deadline))  // a hung call is reported, not waited for
            }
        }

        #expect(outcomes.count == total)
        #expect(await eventually { sdkDone.value == sdkPending.value }, "SDK callbacks did not all run")

        var problems: [String] = []
        var counts: [String: Int] = [:]
        for (operation, outcome) in zip(operations, outcomes) {
            let record = operation.record.withLock { $0 }
            func expect(_ condition: Bool, _ message: String) {
                if !condition {
                    problems.append("#\(operation.index) \(operation.kind) -> \(outcome): \(message); \(record)")
                }
            }
            var losers = record.sentSuccesses
            switch outcome {
            case .success(let value):
                counts["success", default: 0] += 1
                expect(
                    record.decidingCompletions == 1 && record.decidingValue == value,
                    "the returned value did not decide")
                expect(record.handleCalls == 0, "handle called although the completion decided")
                losers.removeAll { $0 == value }
            case .failure:
                counts["failure", default: 0] += 1
                expect(record.decidingCompletions == 1 && record.decidingValue == nil, "the failure did not decide")
                expect(record.handleCalls == 0, "handle called although the completion decided")
            case .cancelled, .timedOut:
                counts[outcome == .cancelled ? "cancelled" : "timedOut", default: 0] += 1
                expect(record.decidingCompletions == 0, "a completion also reported deciding")
                expect(record.handleCalls == 1, "handle not called exactly once")
                if case .timedOut = outcome { expect(operation.kind == .silentTimeout, "timed out without a timeout") }
            case .other(let text):
                expect(false, "unexpected error \(text)")
            }
            expect(record.discarded.sorted() == losers.sorted(), "onDiscard did not get exactly the losing values")
            if operation.kind == .silentCancelled { expect(outcome == .cancelled, "silent call not cancelled") }
        }
        let broken = problems.count
        #expect(broken == 0, "first: \(problems.prefix(5).joined(separator: "\n"))")
        #expect((counts["success"] ?? 0) > 0 && (counts["cancelled"] ?? 0) > 0 && (counts["timedOut"] ?? 0) > 0)

        // Every gate is freed once its call returned and the SDK let go of the completion.
        #expect(await alive.waitUntilAllFreed(60), "\(alive.value) gates still alive")
    }
}
