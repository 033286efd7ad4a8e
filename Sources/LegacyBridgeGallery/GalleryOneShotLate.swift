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
/// Flagged by: `cancel-in-flight` (the cancel function called again after the SDK
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

/// WRONG ON PURPOSE. Releases its C context in the SDK's release callback, then reads it once more
/// from a queue: a safety net that makes sure the caller was answered "in case the SDK released
/// without calling back".
///
/// Why it is wrong: once the adapter gives up its retain in the release callback, the context is
/// freed; the queued block runs a moment later, on another thread, and reads freed memory. Over a
/// real SDK that crashes now and then, long after the call, or corrupts another object silently.
/// Everything else is `withCallback`'s and correct: the caller is answered inside the callback.
/// Flagged by: `context-unused-after-release`, in an AddressSanitizer build (there the suite frees
/// the context at the SDK's release, and AddressSanitizer reports the read).
public struct ContextUsedAfterReleaseAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `context-used-after-release`.
    public var name: String { "context-used-after-release" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: releases its C context in the release callback, then reads it from a queue"
    }

    private final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    /// The context as the queued block keeps it: a raw pointer, no reference.
    private struct RawContext: @unchecked Sendable {
        let value: Unmanaged<AnyObject>
    }

    /// Bridges with `withCallback` and a C context, and reads the context after its release.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Unmanaged<AnyObject>.passRetained(Context(completion))
            let cancel = operation.start(
                context: context,
                callback: { context, result in
                    (context.takeUnretainedValue() as! Context).completion(result)
                },
                release: { context in
                    context.release()
                    // WRONG: the context was freed by the line above; this block reads it later.
                    let late = RawContext(value: context)
                    DispatchQueue.global().async {
                        (late.value.takeUnretainedValue() as! Context).completion(.failure(CancellationError()))
                    }
                })
            return cancel.map(CancelHandle.init)
        }
    }
}
