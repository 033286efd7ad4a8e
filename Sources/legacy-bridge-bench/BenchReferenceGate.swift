import Foundation

// The usual alternative to `withCallback`, kept as the benchmark's reference: a per-call gate
// whose state (the outcome once decided, the waiting continuation once installed) sits behind an
// NSLock, a checked continuation, and a task cancellation handler that finishes the gate with
// CancellationError. First result wins; nothing is resumed under the lock. Its async entry point
// takes no isolation parameter, so it is a plain nonisolated async function: called from an actor
// (the main actor) every call hops to the global executor and back.

/// The reference gate's state: decided outcome and installed waiter, behind one NSLock.
final class ReferenceGate<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `outcome` and `waiter` are read and written only while `lock` is held.
    private let lock = NSLock()
    private var outcome: Result<Value, any Error>?
    private var waiter: CheckedContinuation<Value, any Error>?

    /// Installs the waiter; resumes it at once (outside the lock) if the outcome is decided.
    func install(_ continuation: CheckedContinuation<Value, any Error>) {
        lock.lock()
        if let decided = outcome {
            lock.unlock()
            continuation.resume(with: decided)
            return
        }
        precondition(waiter == nil, "ReferenceGate: one waiter per gate")
        waiter = continuation
        lock.unlock()
    }

    /// Decides the outcome if nothing decided yet, and resumes the waiter (outside the lock).
    func finish(_ result: Result<Value, any Error>) {
        lock.lock()
        guard outcome == nil else {
            lock.unlock()
            return
        }
        outcome = result
        let resumed = waiter
        waiter = nil
        lock.unlock()
        resumed?.resume(with: result)
    }
}

/// Awaits the first result `start` reports through its callback (the reference bridge).
func referenceBridge<Value: Sendable>(
    _ start: @Sendable (@escaping @Sendable (Result<Value, any Error>) -> Void) -> Void
) async throws -> Value {
    let gate = ReferenceGate<Value>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
            gate.install(continuation)
            start { result in gate.finish(result) }
        }
    } onCancel: {
        gate.finish(.failure(CancellationError()))
    }
}
