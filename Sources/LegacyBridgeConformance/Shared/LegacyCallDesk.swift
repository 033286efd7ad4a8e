// A one-shot SDK call that the scenario answers by hand: latest-wins and coalesced scenarios need
// to decide exactly when each call answers (after a newer one started, after a waiter left), and
// a desk of calls held open until then forces those orders without a sleep.

import Dispatch
import LegacyBridge
import LegacySimulator

/// What a call of a ``LegacyCallSDK`` answers.
public struct LegacyAnswer: Sendable, Hashable {
    /// The key the call was started for.
    public var key: UInt64
    /// The SDK call's number, from 1 in start order: callers that shared one call get the same.
    public var call: Int
}

/// A one-shot SDK call, as latest-wins and coalesced scenarios hand it to an adapter.
///
/// - ``start(_:_:)`` starts a call for a key and returns its cancel function.
/// - The callback comes later, from a thread of the SDK's, with the call's answer, or with
///   ``LegacySDKError/cancelled`` after a cancel. A scenario may also send an answer after the
///   cancel, as an SDK whose result was already on its way does.
/// - Cancel is idempotent and may be called from any thread.
public struct LegacyCallSDK: Sendable {
    let desk: CallDesk

    /// Starts a call for `key`.
    ///
    /// - Parameters:
    ///   - key: What the call is for.
    ///   - callback: Called with the call's outcome, later, from one of the SDK's threads.
    /// - Returns: The call's cancel function.
    public func start(
        _ key: UInt64, _ callback: @escaping @Sendable (Result<LegacyAnswer, any Error>) -> Void
    ) -> LegacyCancel {
        let call = desk.open(key, callback)
        return { desk.cancel(call) }
    }
}

/// The calls of a ``LegacyCallSDK``, held open until the scenario answers them.
final class CallDesk: Sendable {
    private enum Status {
        case pending
        case cancelled
        case answered
    }
    private struct Call {
        var key: UInt64
        var callback: @Sendable (Result<LegacyAnswer, any Error>) -> Void
        var status = Status.pending
        var cancels = 0
        var callbacks = 0
    }
    private let calls = LockedBox<[Call]>([])

    /// Calls started so far.
    var starts: Int { calls.withLock { $0.count } }

    func open(_ key: UInt64, _ callback: @escaping @Sendable (Result<LegacyAnswer, any Error>) -> Void) -> Int {
        calls.withLock {
            $0.append(Call(key: key, callback: callback))
            return $0.count
        }
    }

    /// A pending call is cancelled and reports ``LegacySDKError/cancelled`` later, on an SDK thread.
    func cancel(_ call: Int) {
        let report = calls.withLock { calls -> (@Sendable (Result<LegacyAnswer, any Error>) -> Void)? in
            calls[call - 1].cancels += 1
            guard case .pending = calls[call - 1].status else { return nil }
            calls[call - 1].status = .cancelled
            return calls[call - 1].callback
        }
        guard let report else { return }
        DispatchQueue.global().async {
            self.noteCallback(call)
            report(.failure(LegacySDKError.cancelled))
        }
    }

    /// Answers `call` on an SDK thread and returns once its callback returned (or the run's
    /// patience ran out). A cancelled call is answered only when `evenIfCancelled` (a late
    /// result); an answered one never again.
    ///
    /// - Returns: Whether an answer was sent.
    @discardableResult
    func answer(_ call: Int, evenIfCancelled: Bool = false) async -> Bool {
        await complete(call, evenIfCancelled: evenIfCancelled) { key in .success(LegacyAnswer(key: key, call: call)) }
    }

    /// Fails `call` with ``LegacySDKError/remote`` on an SDK thread and returns once its callback
    /// returned (or the run's patience ran out); like ``answer(_:evenIfCancelled:)``, only a
    /// pending call.
    ///
    /// - Returns: Whether the failure was sent.
    @discardableResult
    func fail(_ call: Int) async -> Bool {
        await complete(call, evenIfCancelled: false) { _ in .failure(LegacySDKError.remote) }
    }

    /// Delivers `outcome(key)` to `call` once, on an SDK thread, and waits for its callback.
    private func complete(
        _ call: Int, evenIfCancelled: Bool, _ outcome: @escaping @Sendable (UInt64) -> Result<LegacyAnswer, any Error>
    ) async -> Bool {
        let claimed = calls.withLock { calls -> (UInt64, @Sendable (Result<LegacyAnswer, any Error>) -> Void)? in
            switch calls[call - 1].status {
            case .pending: break
            case .cancelled: guard evenIfCancelled else { return nil }
            case .answered: return nil
            }
            calls[call - 1].status = .answered
            return (calls[call - 1].key, calls[call - 1].callback)
        }
        guard let (key, callback) = claimed else { return false }
        let done = LockedBox(false)
        DispatchQueue.global().async {
            self.noteCallback(call)
            callback(outcome(key))
            done.withLock { $0 = true }
        }
        _ = await eventually { done.withLock { $0 } }
        return true
    }

    /// Answers every call still pending, so that nothing a broken adapter started waits forever.
    func answerAllPending() async {
        for call in stride(from: 1, through: starts, by: 1) { await answer(call) }
    }

    private func noteCallback(_ call: Int) { calls.withLock { $0[call - 1].callbacks += 1 } }

    /// How many times the adapter called `call`'s cancel.
    func cancels(of call: Int) -> Int { calls.withLock { $0.count >= call ? $0[call - 1].cancels : 0 } }

    /// Whether `call` was cancelled while it was pending.
    func wasCancelled(_ call: Int) -> Bool {
        calls.withLock {
            guard $0.count >= call, case .cancelled = $0[call - 1].status else { return false }
            return true
        }
    }
}

/// The values of `tasks` in order, or `nil` when some did not end within `bound` (then every task
/// is cancelled).
func values<T: Sendable>(of tasks: [Task<T, Never>], within bound: Duration) async -> [T]? {
    let done = LockedBox<[Int: T]>([:])
    let latch = FirstResultLatch<Bool>()
    for (index, task) in tasks.enumerated() {
        // On the scenario's own threads: an adapter elsewhere may hold the cooperative pool.
        _ = ScenarioThreads.task {
            let value = await task.value
            let count = done.withLock {
                $0[index] = value
                return $0.count
            }
            if count == tasks.count { latch.offer(true) }
        }
    }
    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(bound.nanosecondsClamped))) {
        latch.offer(false)
    }
    guard await latch.value() else {
        for task in tasks { task.cancel() }
        return nil
    }
    return done.withLock { values in tasks.indices.map { values[$0]! } }
}

/// Describes the outcome of a call to a ``LegacyCallSDK`` adapter.
func describe(_ result: Result<LegacyAnswer, any Error>) -> String {
    switch result {
    case .success(let answer): return "the answer of call \(answer.call) for key \(answer.key)"
    case .failure(let error): return "error \(type(of: error)): \(error)"
    }
}

/// Starts `body` in a task of the scenario's own, its outcome as a `Result`.
func launchCall(
    _ body: @escaping @Sendable () async throws -> LegacyAnswer
) -> Task<Result<LegacyAnswer, any Error>, Never> {
    ScenarioThreads.task {
        do { return .success(try await body()) } catch { return .failure(error) }
    }
}
