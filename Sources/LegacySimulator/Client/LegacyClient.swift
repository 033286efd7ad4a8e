import LegacyBridge

/// A client of the simulated legacy SDK: its own worker threads, counters and session token.
///
/// Operations started through a client do not retain it. When the last reference to the client
/// goes away, its deinit destroys the SDK client: every operation still in flight is cancelled as
/// its behaviour prescribes (an ignored cancel counts as an asynchronous one, delays are skipped),
/// the callbacks that prescribes are made, every operation's context is released, and the SDK's
/// threads are joined. If that last reference goes away inside one of the SDK's callbacks, the
/// destroy happens on another thread shortly after.
public final class LegacyClient: Sendable {
    /// How a client is set up.
    public struct Configuration: Sendable, Hashable {
        /// The SDK's worker threads, 1 ... 64.
        public var workerThreads: Int
        /// The seed from which every operation's seed is derived (operations whose behaviour has a
        /// seed of 0), so a whole run is reproducible.
        public var seed: UInt64
        /// The threads of the client's ``OffloadPool`` for ``LegacyClient/blockingCall(duration:timeout:isolation:)``,
        /// 1 ... `OffloadPool.maximumThreads`: how many blocking calls run at once.
        public var blockingThreads: Int
        /// The SDK client runs a loop thread of its own, like libcurl's multi loop or a GUI main
        /// loop (default `false`). Operations whose behaviour delivers on
        /// ``SimulatedBehavior/Delivery/loop`` need it. A ``LegacyClient/download(_:behavior:buffering:)``
        /// on such a client is started, paused, resumed and cancelled on that thread only (the
        /// stream's `SDKScheduler` posts there), as a loop-thread-only SDK requires.
        public var loopThread: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - workerThreads: The SDK's worker threads, 1 ... 64.
        ///   - seed: The seed of the client's operations.
        ///   - blockingThreads: Threads for blocking calls (default 4), started by the first one.
        ///   - loopThread: The SDK client runs a loop thread of its own (default `false`).
        public init(workerThreads: Int = 4, seed: UInt64 = 0, blockingThreads: Int = 4, loopThread: Bool = false) {
            self.workerThreads = workerThreads
            self.seed = seed
            self.blockingThreads = blockingThreads
            self.loopThread = loopThread
        }
    }

    /// The configuration the client was created with.
    public let configuration: Configuration

    /// The SDK client every operation of this client runs on.
    let sdk: SDKClient
    /// Where blocking calls run (threads of its own, never the cooperative pool): made by the first
    /// blocking call, so a client that never blocks starts no thread for it.
    private let offloadPool = LockedBox<OffloadPool?>(nil)
    /// The key of the last blocking call made.
    private let blockingKeys = LockedBox<UInt64>(0)

    /// Creates a client and its SDK threads.
    ///
    /// - Parameter configuration: The set-up.
    /// - Throws: ``LegacySDKError/outOfRange`` for a worker count outside 1 ... 64 or a blocking
    ///   thread count outside 1 ... `OffloadPool.maximumThreads`, ``LegacySDKError/resources`` when
    ///   threads cannot be created.
    public init(configuration: Configuration = .init()) throws(LegacySDKError) {
        try Self.checkBlockingThreads(configuration)
        self.configuration = configuration
        self.sdk = try SDKClient(
            workerThreads: configuration.workerThreads, seed: configuration.seed, loopThread: configuration.loopThread)
    }

    /// Wraps an existing SDK client (tests use it to install a session-token probe).
    init(sdk: SDKClient, configuration: Configuration = .init()) throws(LegacySDKError) {
        try Self.checkBlockingThreads(configuration)
        self.configuration = configuration
        self.sdk = sdk
    }

    private static func checkBlockingThreads(_ configuration: Configuration) throws(LegacySDKError) {
        guard (1...OffloadPool.maximumThreads).contains(configuration.blockingThreads) else { throw .outOfRange }
    }

    /// The pool blocking calls run on, made on first use.
    /// - Throws: ``LegacySDKError/resources`` when its threads cannot be created.
    func offload() throws(LegacySDKError) -> OffloadPool {
        let threads = configuration.blockingThreads
        let made = offloadPool.withLock { pool -> Result<OffloadPool, LegacySDKError> in
            if let pool { return .success(pool) }
            do {
                let made = try OffloadPool(threads: threads, name: "legacy-blocking")
                pool = made
                return .success(made)
            } catch {
                return .failure(.resources)
            }
        }
        return try made.get()
    }

    /// A key for the next blocking call, unique within this client.
    func nextBlockingKey() -> UInt64 {
        blockingKeys.withLock { key in
            key += 1
            return key
        }
    }

    /// What the SDK has done for this client so far.
    public var counters: SDKCounters { sdk.counters }

    /// Sets the client-wide session token.
    ///
    /// The SDK documents this call as not thread-safe (a concurrent entry fails with
    /// ``LegacySDKError/busy``). Isolation to ``LegacySDKActor`` serialises every call, so
    /// concurrent callers simply take turns.
    ///
    /// - Parameter token: The token (the SDK keeps at most 255 bytes), or `nil` to clear it.
    /// - Throws: ``LegacySDKError/clientDestroyed`` if the client is being destroyed.
    @LegacySDKActor
    public func setSessionToken(_ token: String?) throws(LegacySDKError) {
        try sdk.setSessionToken(token)
    }

    /// The current session token.
    ///
    /// - Returns: The token, or `nil` when none is set (an empty token reads as `nil`).
    /// - Throws: ``LegacySDKError/clientDestroyed`` if the client is being destroyed.
    @LegacySDKActor
    public func sessionToken() throws(LegacySDKError) -> String? {
        try sdk.sessionToken()
    }
}
