import LegacyBridge

extension LegacyClient {
    /// Runs one request on the simulated SDK and returns its response.
    ///
    /// Built on ``withCallback(isolation:timeout:onDiscard:_:)`` the way you would wrap your own
    /// SDK: the first outcome wins (repeated and late callbacks are ignored), cancelling the calling
    /// task cancels the SDK operation through its handle, and a timeout is one more outcome through
    /// the same gate. The SDK's payload is copied into the ``FetchResponse`` inside the callback;
    /// the C context is released only in the SDK's release callback, and the SDK handle exactly once
    /// on every path.
    ///
    /// - Parameters:
    ///   - request: What to fetch.
    ///   - behavior: How the simulated SDK misbehaves for this request.
    ///   - timeout: Give up after this long (and cancel the SDK operation), or `nil` for no limit.
    ///   - isolation: The caller's actor; the call adds no executor hop.
    /// - Returns: The response of the first completion.
    /// - Throws: ``LegacySDKError`` when the SDK fails the request or rejects it (an invalid
    ///   `behavior`), `CancellationError` when the calling task is cancelled, or
    ///   ``BridgeTimeoutError`` when `timeout` expires first.
    public func fetch(
        _ request: FetchRequest,
        behavior: SimulatedBehavior = .wellBehaved,
        timeout: Duration? = nil,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> FetchResponse {
        let sdk = self.sdk
        return try await withCallback(isolation: isolation, timeout: timeout) { completion in
            let started = SDK.startRequest(
                client: sdk, request: request, behavior: behavior,
                onCompletion: { result in completion(result.mapError { $0 }) })
            switch started {
            case .success(let handle):
                return CancelHandle { handle.cancel() }
            case .failure(let error):
                throw error
            }
        }
    }
}
