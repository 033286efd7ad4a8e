import LegacyBridge

/// A client of the simulated SDK in thread-affine mode: the SDK counts every call that does not
/// come from its owner thread, and this actor makes sure there are none.
///
/// The actor's executor is an ``SDKThreadExecutor`` on the owner thread, so every method runs
/// there and every SDK call it makes (starting a request, reading the session token) comes from
/// that thread. The one call that starts elsewhere, cancelling a request when the calling task is
/// cancelled, is posted to the owner thread instead of being made in the cancellation handler.
/// ``counters`` proves it: `affinityViolations` stays 0.
///
/// Two owners, the two shapes of real single-threaded SDKs:
/// - ``Owner/dedicatedThread``: the SDK client is created on a pthread of the actor's own (the
///   "creator" rule of sqlite connections, many device SDKs).
/// - ``Owner/sdkLoopThread``: the SDK runs its own loop thread and must only be called from there
///   (libcurl multi, c-ares, GUI toolkits); the executor posts the actor's jobs through the SDK's
///   post function. Callbacks of ``SimulatedBehavior/Delivery/loop`` operations then arrive on
///   the actor's own thread, where `assumeIsolated` enters the actor without a hop.
public actor LegacyAffineClient {
    /// Which thread owns the SDK client.
    public enum Owner: Sendable, Hashable {
        /// A dedicated pthread of this actor creates the client and makes every call.
        case dedicatedThread
        /// The SDK's own loop thread makes every call; the actor runs on it.
        case sdkLoopThread
    }

    private let executor: SDKThreadExecutor
    nonisolated let sdk: SDKClient
    /// The thread that owns the SDK client.
    public nonisolated let owner: Owner

    /// The actor runs on the owner thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Creates the SDK client on its owner thread.
    ///
    /// - Parameters:
    ///   - owner: Which thread owns the SDK client (default: a dedicated thread).
    ///   - workerThreads: The SDK's worker threads, 1 ... 64.
    ///   - seed: The seed of the client's operations.
    /// - Throws: ``LegacySDKError`` when the SDK refuses the configuration or cannot create its
    ///   threads; `OffloadError.threadCreationFailed` when the dedicated thread cannot be created.
    public init(owner: Owner = .dedicatedThread, workerThreads: Int = 4, seed: UInt64 = 0) async throws {
        self.owner = owner
        switch owner {
        case .dedicatedThread:
            let executor = try SDKThreadExecutor(name: "legacy-affine")
            self.executor = executor
            self.sdk = try await executor.run {
                try SDKClient(workerThreads: workerThreads, seed: seed, affinity: .creator)
            }
        case .sdkLoopThread:
            let sdk = try SDKClient(workerThreads: workerThreads, seed: seed, loopThread: true, affinity: .loop)
            self.sdk = sdk
            // The executor keeps the SDK client alive, and a live client with a loop thread
            // accepts every post.
            self.executor = SDKThreadExecutor(
                name: "legacy-loop",
                scheduler: SDKScheduler(post: { job in try sdk.post(job) }, isCurrent: { sdk.isLoopThread }))
        }
    }

    /// What the SDK has done for this client so far; `affinityViolations` counts calls that came
    /// from another thread than the owner.
    public nonisolated var counters: SDKCounters { sdk.counters }

    /// Whether the calling code runs on the owner thread (where `assumeIsolated` succeeds).
    public nonisolated var isOwnerThread: Bool { executor.isCurrentThread }

    /// Runs one request on the simulated SDK, every SDK call made on the owner thread.
    ///
    /// Like ``LegacyClient/fetch(_:behavior:timeout:isolation:)``: the first outcome wins,
    /// cancelling the calling task (or the timeout) cancels the SDK operation, a late callback
    /// is ignored. The cancellation is posted to the owner thread, never made from the task's
    /// cancellation handler. The caller resumes on its own isolation after at most the hops an
    /// actor call takes.
    ///
    /// - Parameters:
    ///   - request: What to fetch.
    ///   - behavior: How the simulated SDK misbehaves for this request (``SimulatedBehavior/Delivery/loop``
    ///     needs ``Owner/sdkLoopThread``).
    ///   - timeout: Give up after this long, or `nil` for no limit.
    /// - Returns: The response of the first completion.
    /// - Throws: ``LegacySDKError``, `CancellationError` or `BridgeTimeoutError`.
    public func fetch(
        _ request: FetchRequest, behavior: SimulatedBehavior = .wellBehaved, timeout: Duration? = nil
    ) async throws -> FetchResponse {
        let sdk = self.sdk
        let executor = self.executor
        return try await withCallback(timeout: timeout) { completion in
            let started = SDK.startRequest(
                client: sdk, request: request, behavior: behavior,
                onCompletion: { result in completion(result.mapError { $0 }) })
            switch started {
            case .success(let handle):
                return CancelHandle { executor.execute { handle.cancel() } }
            case .failure(let error):
                throw error
            }
        }
    }

    /// The current session token, read on the owner thread.
    ///
    /// - Returns: The token, or `nil` when none is set.
    /// - Throws: ``LegacySDKError/clientDestroyed`` if the client is being destroyed.
    public func sessionToken() throws(LegacySDKError) -> String? {
        try sdk.sessionToken()
    }
}
