// Test helpers shared by the keyed, latest-wins and coalesced suites: what a call ended with, a
// scheduler whose jobs the test runs by hand, and an executor the test can hold still. Built on
// the one-shot helpers (OneShotCall, OneShotCounter, OneShotRecorder, eventually).

import ToolSupport
import Dispatch
import TestSupport
import Testing
@testable import LegacyBridge

/// What a call ended with, comparable in `#expect`.
enum CallsOutcome: Equatable, Sendable, CustomStringConvertible {
    case value(Int)
    case failure(Int)
    case cancelled
    case timedOut
    case superseded
    case idInUse
    case idReassigned
    case other(String)

    init(_ result: Result<Int, any Error>?) {
        switch result {
        case nil: self = .other("did not end in time")
        case .success(let value): self = .value(value)
        case .failure(let error as OneShotTestError): self = .failure(error.code)
        case .failure(is CancellationError): self = .cancelled
        case .failure(is BridgeTimeoutError): self = .timedOut
        case .failure(is SupersededError): self = .superseded
        case .failure(let error as RequestIDError) where error.reason == .inUse: self = .idInUse
        case .failure(let error as RequestIDError) where error.reason == .reassigned: self = .idReassigned
        case .failure(let error): self = .other(String(describing: error))
        }
    }

    var description: String {
        switch self {
        case .value(let value): "value(\(value))"
        case .failure(let code): "failure(\(code))"
        case .cancelled: "cancelled"
        case .timedOut: "timedOut"
        case .superseded: "superseded"
        case .idInUse: "idInUse"
        case .idReassigned: "idReassigned"
        case .other(let text): "other(\(text))"
        }
    }
}

extension OneShotCall where T == Int {
    /// The call's outcome, `.other` if it did not end within the hang bound.
    func callsOutcome() async -> CallsOutcome {
        CallsOutcome(await result())
    }
}

/// A scheduler whose posted jobs wait until the test runs them (the SDK's loop, held still), or
/// that refuses every job (the loop is gone).
final class CallsManualScheduler: Sendable {
    private let jobs = LockedBox<[@Sendable () -> Void]>([])
    private let refuses: Bool

    init(refusing: Bool = false) {
        self.refuses = refusing
    }

    struct Refused: Error {}

    var scheduler: SDKScheduler {
        SDKScheduler { job in
            if self.refuses { throw Refused() }
            self.jobs.withLock { $0.append(job) }
        }
    }

    var pending: Int { jobs.withLock { $0.count } }

    /// Runs the jobs posted so far, in order, on the calling thread.
    func runAll() {
        let taken = jobs.withLock { jobs -> [@Sendable () -> Void] in
            defer { jobs.removeAll() }
            return jobs
        }
        for job in taken { job() }
    }
}

/// A serial executor on a dispatch queue that the test can suspend, to hold an actor's resumed
/// caller before it runs (a caller whose result is in but who has not come back yet).
final class CallsHoldableExecutor: SerialExecutor {
    let queue = DispatchQueue(label: "calls.holdable-executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func hold() { queue.suspend() }
    func release() { queue.resume() }
}

/// An actor on a `CallsHoldableExecutor`.
actor CallsHeldActor {
    let executor = CallsHoldableExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Runs a `LatestWins` run on this actor; `start` sees the run's completion.
    func run(_ latest: LatestWins<Int>, _ keep: @Sendable (Completion<Int>) -> Void) async throws -> Int {
        try await latest.run { completion in
            keep(completion)
            return nil
        }
    }
}

/// Hands out 1, 2, 3, … from any thread: unique values, so each can be traced to where it went.
final class CallsSequence: Sendable {
    private let last = AtomicCell<Int>(0)
    func next() -> Int { last.add(1, ordering: .relaxed).newValue }
}
