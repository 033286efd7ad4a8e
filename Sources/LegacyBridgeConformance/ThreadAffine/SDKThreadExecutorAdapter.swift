import LegacyBridge

/// The library's thread-affine adapter: an actor whose executor is an `SDKThreadExecutor` over the
/// SDK's own post function, so every method runs on the SDK's thread; the cancel function is
/// posted there too.
package struct SDKThreadExecutorAdapter: ThreadAffineAdapter {
    /// Creates the adapter.
    package init() {}
    /// `sdk-thread-executor`.
    package var name: String { "sdk-thread-executor" }
    /// One line describing the adapter.
    package var summary: String {
        "actor on an SDKThreadExecutor over the SDK's post function (the library's thread-affine bridge)"
    }

    /// Opens an executor-backed session.
    /// - Parameter sdk: The thread-affine SDK.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    package func open(_ sdk: LegacyAffineSDK) async throws -> any ThreadAffineSession {
        ExecutorSession(sdk: sdk)
    }

    private actor ExecutorSession: ThreadAffineSession {
        let sdk: LegacyAffineSDK
        let executor: SDKThreadExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        init(sdk: LegacyAffineSDK) {
            self.sdk = sdk
            self.executor = SDKThreadExecutor(
                name: "affine-adapter", scheduler: SDKScheduler(post: sdk.post, isCurrent: { sdk.isSDKThread }))
        }

        func call(_ number: UInt64) -> LegacyPayload {
            sdk.call(number)
        }

        func value() async throws -> LegacyPayload {
            let sdk = self.sdk
            return try await withCallback { completion in
                sdk.start { completion($0) }.map { cancel in CancelHandle { sdk.post(cancel) } }
            }
        }
    }
}
