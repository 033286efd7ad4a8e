import LegacyBridge

/// The library's blocking adapter: `OffloadPool.run` on a pool of dedicated threads, the call's
/// interrupt passed on so a cancelled caller's thread comes back at once.
package struct OffloadPoolAdapter: BlockingAdapter {
    /// One pool for every call of the process: threads are not made per call.
    private static let pool = Result { try OffloadPool(threads: 16, queueLimit: 4_096, name: "conformance") }

    /// Creates the adapter.
    package init() {}
    /// `offload-pool`.
    package var name: String { "offload-pool" }
    /// One line describing the adapter.
    package var summary: String { "OffloadPool.run with the call's interrupt (the library's blocking-call bridge)" }

    /// Runs `call` on the pool.
    /// - Parameters:
    ///   - call: The blocking call.
    ///   - isolation: The caller's actor.
    /// - Returns: The call's payload.
    /// - Throws: The call's error, `CancellationError`, or the pool's `OffloadError`.
    package func value(of call: LegacyBlockingCall, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let pool = try Self.pool.get()
        return try await pool.run(
            isolation: isolation, cancel: CancelHandle { call.interrupt() }, { try call.perform() })
    }
}
