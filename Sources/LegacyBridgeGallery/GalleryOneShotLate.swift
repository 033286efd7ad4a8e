// Bad-adapter gallery, one-shot calls that go wrong after the operation ended: WRONG ON PURPOSE.
// See Gallery.swift.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. Cancels, then cancels again a little later "in case the first one was lost".
///
/// Why it is wrong: by the time the retry runs, the SDK has ended the operation and released its
/// handle; a real SDK may have given that handle to another request, which the retry cancels.
/// Everything else is `withCallback`'s and correct, and the first cancel comes when it should.
/// Flagged by: `never-calls-back-then-cancel` (the cancel function called again after the SDK
/// released the operation).
public struct LateRetryCancelAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `late-retry-cancel`.
    public var name: String { "late-retry-cancel" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: cancels again 20 ms later, after the SDK ended the operation and released its handle"
    }

    /// Bridges with `withCallback`, and retries the cancel.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map { cancel in
                CancelHandle {
                    cancel()
                    // WRONG: the operation is over by then; the handle may belong to another request
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { cancel() }
                }
            }
        }
    }
}
