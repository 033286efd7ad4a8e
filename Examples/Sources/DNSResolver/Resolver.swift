import LegacyBridge
import Synchronization

/// Resolves host names with c-ares, from async code.
///
/// c-ares is a single-threaded library: a channel must only be used from one thread. A `Resolver`
/// runs c-ares's event loop on an `SDKLoop`, and every channel call (create, `ares_getaddrinfo`,
/// `ares_cancel`, `ares_destroy`) runs there: lookups go through `withCallback(scheduler:)`. Each
/// lookup gets its own channel, because `ares_cancel` cancels every query of a channel.
///
/// ```swift
/// let resolver = try Resolver(configuration: .init(servers: ["127.0.0.1:53"]))
/// let addresses = try await resolver.resolve(host: "localhost", timeout: .seconds(2))
/// await resolver.shutdown()
/// ```
///
/// Dropping the last reference shuts the loop down too, without waiting: pending lookups fail
/// with ``AresError/destruction``.
public final class Resolver: Sendable {
    /// How the resolver's channels are configured.
    public struct Configuration: Sendable {
        /// The DNS servers, as "address:port" ("127.0.0.1:5353", "[::1]:53"); a missing port
        /// means 53. Only these are ever contacted (search domains are off).
        public var servers: [String]
        /// How long one attempt waits for a server's reply.
        public var attemptTimeout: Duration
        /// Attempts per server before a lookup fails with ``AresError/timeout``.
        public var attempts: Int

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - servers: The DNS servers ("address:port"); must not be empty.
        ///   - attemptTimeout: Per-attempt timeout; at least 1 ms (rounded up to milliseconds).
        ///   - attempts: Attempts per server; at least 1.
        public init(servers: [String], attemptTimeout: Duration = .seconds(2), attempts: Int = 2) {
            self.servers = servers
            self.attemptTimeout = attemptTimeout
            self.attempts = attempts
        }
    }

    /// The servers c-ares will contact, read back from a channel built with the configuration.
    public let servers: [String]
    private let loop: SDKLoop
    private let driver: AresDriver
    private let counters: ResolverCounters
    private let nextID = Atomic<UInt64>(0)

    /// Creates a resolver and starts its loop thread.
    ///
    /// - Parameter configuration: The servers and timeouts of every lookup.
    /// - Throws: ``AresError/badString`` for a malformed or empty server list,
    ///   ``AresError/noMemory`` if the loop thread cannot be started, or the status of a failed
    ///   c-ares initialisation.
    /// - Precondition: `attemptTimeout` is positive and `attempts` at least 1.
    public init(configuration: Configuration) throws(AresError) {
        precondition(
            configuration.attemptTimeout > .zero,
            "Resolver.Configuration.attemptTimeout must be positive, e.g. .milliseconds(500)")
        precondition(configuration.attempts >= 1, "Resolver.Configuration.attempts must be at least 1")
        guard !configuration.servers.isEmpty else { throw AresError.badString }
        try Ares.initializeLibrary()
        let (seconds, attoseconds) = configuration.attemptTimeout.components
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        let total =
            milliseconds.overflow
            ? Int64(Int32.max)
            : milliseconds.partialValue.addingReportingOverflow(
                (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            ).partialValue
        let options = AresChannelOptions(
            serversCSV: configuration.servers.joined(separator: ","),
            attemptTimeoutMilliseconds: Int32(clamping: max(1, total)),
            attempts: Int32(clamping: configuration.attempts))
        let counters = ResolverCounters()
        self.servers = try AresDriver.checkOptions(options, counters: counters)
        self.counters = counters
        let driver = AresDriver(options: options, counters: counters)
        self.driver = driver
        do {
            // The loop waits on the sockets and the timeout that c-ares asks for before each wait.
            let loop = try SDKLoop(name: "c-ares loop", beforeWait: { driver.prepareWait() })
            try loop.post { [weak loop] in if let loop { driver.attach(to: loop) } }
            self.loop = loop
        } catch {
            throw AresError.noMemory
        }
    }

    deinit {
        // The loop shuts down in the background once released; this job runs before it stops.
        try? loop.post { [driver] in driver.destroyAll() }
    }

    /// Resolves `host` to its addresses.
    ///
    /// Names in `/etc/hosts`, `localhost` and numeric addresses are usually answered by c-ares
    /// without a query; other names are asked of the configured servers.
    ///
    /// Cancelling the calling task resumes it at once with `CancellationError` and posts
    /// `ares_cancel` for this lookup's channel to the loop thread; c-ares then answers the lookup
    /// inside `ares_cancel` (that late answer is ignored). The timeout does the same and throws
    /// `BridgeTimeoutError`.
    ///
    /// - Parameters:
    ///   - host: A host name or a numeric address.
    ///   - family: The address family wanted, or nil (the default) for both.
    ///   - timeout: How long to wait for the whole lookup; nil (the default) relies on the
    ///     configuration's attempts alone.
    ///   - probe: The conformance suite's probe; leave the default, `.off`, which changes nothing.
    ///   - isolation: The caller's isolation; leave the default.
    /// - Returns: The addresses, in c-ares's order.
    /// - Throws: ``AresError`` from c-ares (``AresError/notFound``, ``AresError/timeout``,
    ///   ``AresError/connectionRefused``, ``AresError/destruction`` after ``shutdown()``…),
    ///   `CancellationError`, or `BridgeTimeoutError`.
    public func resolve(
        host: String,
        family: ResolvedAddress.Family? = nil,
        timeout: Duration? = nil,
        probe: CallProbe<[ResolvedAddress]> = .off,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> [ResolvedAddress] {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let driver = self.driver
        return try await withCallback(isolation: isolation, timeout: timeout, scheduler: scheduler) { completion in
            let deliver = probe.callback { completion($0) }
            probe.start {
                driver.start(id: id, host: host, family: family) { result in
                    deliver(result.mapError { $0 })
                }
            }
            // Runs on the loop thread too. A shut-down loop destroyed every channel, which
            // answered this lookup already.
            return CancelHandle { probe.cancel { driver.cancel(id: id) } }
        }
    }

    /// The loop thread every c-ares call of this resolver runs on, as a scheduler. A post after
    /// shutdown throws ``AresError/destruction``, what a lookup then fails with.
    package var scheduler: SDKScheduler {
        let loop = self.loop
        return SDKScheduler(
            post: { job in
                do { try loop.post(job) } catch { throw AresError.destruction }
            },
            isCurrent: { loop.isCurrent })
    }

    /// What the resolver has done so far.
    public var statistics: ResolverStatistics {
        counters.snapshot
    }

    /// The version of the c-ares library in use, e.g. "1.18.1".
    public static var libraryVersion: String {
        Ares.version
    }

    /// Stops the loop thread and returns when it has destroyed every channel; lookups still
    /// pending fail with ``AresError/destruction``, later ones throw it at once.
    public func shutdown() async {
        let driver = self.driver
        try? loop.post { driver.destroyAll() }
        await loop.shutdown()
    }
}
