import LegacyBridge
import LegacySimulator

/// The library's one-shot adapter: `withCallback` around the raw callback, the cancel function
/// becoming the gate's `CancelHandle`, the caller's timeout and isolation passed on.
package struct WithCallbackAdapter: OneShotAdapter {
    /// Creates the adapter.
    package init() {}
    /// `with-callback`.
    package var name: String { "with-callback" }
    /// One line describing the adapter.
    package var summary: String { "withCallback around the closure callback (the library's one-shot bridge)" }

    /// Bridges `operation` with `withCallback`.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    package func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

/// The library's one-shot adapter over a C-style start with an owned context: the context holds
/// the `Completion`, is retained for the SDK and released only in the SDK's release callback.
package struct WithCallbackContextAdapter: OneShotAdapter {
    /// Creates the adapter.
    package init() {}
    /// `with-callback-context`.
    package var name: String { "with-callback-context" }
    /// One line describing the adapter.
    package var summary: String {
        "withCallback over the C-style start: context retained for the SDK, released in its release callback"
    }

    private final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    /// Bridges `operation` with `withCallback` and an SDK-owned context.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    package func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Unmanaged<AnyObject>.passRetained(Context(completion))
            let cancel = operation.start(
                context: context,
                callback: { context, result in
                    (context.takeUnretainedValue() as! Context).completion(result)
                },
                release: { context in context.release() })
            return cancel.map(CancelHandle.init)
        }
    }
}
