// Bad-adapter gallery, blocking calls: WRONG ON PURPOSE. See Gallery.swift.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. `DispatchQueue.global().async` plus a semaphore the caller waits on.
///
/// Why it is wrong: the blocking call does run on a Dispatch thread, but the calling task waits
/// for it in `semaphore.wait()`, which blocks the cooperative thread it runs on. The cooperative
/// pool has about one thread per core and does not grow: with as many such calls in flight as
/// there are cores, no other task in the process can start until one of them returns. It also
/// ignores cancellation: a cancelled caller stays blocked for the whole call.
///
/// The semaphore is not the only mistake. On Linux, Swift's cooperative pool runs on the threads
/// of Dispatch's global queues, so the blocking call on `DispatchQueue.global()` holds one of
/// those threads too: the same call awaited through a continuation, without the semaphore, still
/// starves the pool once a few calls are in flight. Run blocking calls on threads of their own
/// (`OffloadPool`, or a `Thread` you create), never on `DispatchQueue.global()`.
/// Flagged by: `blocking-leaves-pool-free` (the caller's thread runs nothing else while the call
/// is in flight), `blocking-cancel-interrupts`.
public struct DispatchSemaphoreBlockingAdapter: BlockingAdapter {
    /// Creates the adapter.
    public init() {}
    /// `dispatch-semaphore-blocking`.
    public var name: String { "dispatch-semaphore-blocking" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: DispatchQueue.global().async + a semaphore the calling task waits on (blocks the cooperative pool)"
    }

    private final class Box: @unchecked Sendable {
        // @unchecked Sendable: written by the Dispatch thread before signal, read after wait.
        var result: Result<LegacyPayload, any Error>?
    }

    /// Bridges by blocking the caller.
    /// - Parameters:
    ///   - call: The blocking call.
    ///   - isolation: The caller's actor.
    /// - Returns: The call's payload.
    /// - Throws: The call's error.
    public func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let semaphore = DispatchSemaphore(value: 0)
        let box = Box()
        DispatchQueue.global().async {
            box.result = Result { try call.perform() }
            semaphore.signal()
        }
        semaphore.wait()  // WRONG: blocks a cooperative thread until the call returns
        return try box.result!.get()
    }
}

/// WRONG ON PURPOSE. `OffloadPool.run` with the interrupt, and a retry after a short back-off
/// when the call fails.
///
/// Why it is wrong: an interrupted call fails, and the retry makes the blocking call again for a
/// caller that was cancelled and is gone. It blocks a pool thread for nothing, and a retry loop
/// keeps doing so. The caller itself is let go at once, so only the SDK sees it.
/// Flagged by: `blocking-cancel-interrupts` (the call began again after its interrupt).
public struct RetryAfterInterruptAdapter: BlockingAdapter {
    private static let pool = Result { try OffloadPool(threads: 8, name: "gallery-retry") }

    /// Creates the adapter.
    public init() {}
    /// `retry-after-interrupt`.
    public var name: String { "retry-after-interrupt" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: OffloadPool.run with the interrupt, retrying a failed call (an interrupted one too) after 20 ms, up to 3 times"
    }

    /// Runs `call` on a pool, retrying failures.
    /// - Parameters:
    ///   - call: The blocking call.
    ///   - isolation: The caller's actor.
    /// - Returns: The call's payload.
    /// - Throws: The last attempt's error, or `CancellationError`.
    public func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await Self.pool.get().run(isolation: isolation, cancel: CancelHandle { call.interrupt() }) {
            var attempt = 1
            while true {
                do {
                    return try call.perform()
                } catch  where attempt < 3 {
                    attempt += 1  // WRONG: an interrupted call is retried for a caller that is gone
                    // Back off, on the pool's own thread.
                    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(20))
                }
            }
        }
    }
}
