// The one file of DNSResolver that calls C (c-ares).
//
// It is the only place with Unmanaged, raw pointers and @convention(c) trampolines. Everything
// above it speaks Swift values: AresDriver's start/cancel/socketChanged/prepareWait/destroyAll, ResolvedAddress,
// AresError.
//
// Threading: a c-ares channel must only be used from one thread. An AresDriver is used on its
// resolver's SDKLoop thread only (its beforeWait, handlers, timers and posted jobs); each channel call checks
// that it runs on the thread of the driver's first call and counts any that does not.
//
// Channels: one per query. ares_cancel cancels every query of a channel, so a channel per query is
// what makes cancelling one lookup possible (libcurl and gRPC use c-ares the same way).
//
// Context lifetime: c-ares calls the getaddrinfo callback exactly once per query (with the answer,
// an error, ARES_ECANCELLED inside ares_cancel, or ARES_EDESTRUCTION inside ares_destroy) and has
// no release callback. So each query hands c-ares one retain (Unmanaged.passRetained) and gives it
// back inside that callback. The driver also keeps the query in its table until the channel is
// destroyed, so a second callback (a broken contract) finds the object alive, is counted and
// releases nothing.

import CAres
import LegacyBridge

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Library

enum Ares {
    /// `ares_library_init`, run once per process on first use (Swift globals initialise once,
    /// thread-safely), before any channel exists.
    private static let libraryStatus: Int32 = ares_library_init(ARES_LIB_INIT_ALL)

    /// Initialises the library once; throws its status if that failed.
    static func initializeLibrary() throws(AresError) {
        guard libraryStatus == ARES_SUCCESS else { throw AresError(rawValue: libraryStatus) }
        precondition(
            AresError.notFound.rawValue == ARES_ENOTFOUND && AresError.timeout.rawValue == ARES_ETIMEOUT
                && AresError.cancelled.rawValue == ARES_ECANCELLED
                && AresError.destruction.rawValue == ARES_EDESTRUCTION
                && AresError.connectionRefused.rawValue == ARES_ECONNREFUSED,
            "AresError's codes must be ares.h's")
    }

    /// c-ares's text for a status code (`ares_strerror`; static strings, any thread).
    static func statusString(_ code: Int32) -> String {
        String(cString: ares_strerror(code))
    }

    /// The version of the c-ares library in use (`ares_version`), e.g. "1.18.1".
    static var version: String {
        String(cString: ares_version(nil))
    }
}

// MARK: - Channel options

/// How each channel is configured, as Swift values.
struct AresChannelOptions: Sendable {
    /// Servers as c-ares's CSV: "127.0.0.1:5353,[::1]:53".
    var serversCSV: String
    /// Per-attempt timeout, milliseconds (1 ... Int32.max).
    var attemptTimeoutMilliseconds: Int32
    /// Attempts per server (1 ... Int32.max).
    var attempts: Int32
}

// MARK: - Query (the context handed to c-ares)

/// Where the loop thread was when c-ares called back.
enum AresCallSite {
    case idle, insideStart, insideProcess, insideCancel, insideDestroy
}

/// One lookup: its channel and how to report its answer. Owned by the driver's table; while
/// c-ares holds the query, it also holds one retain of it.
private final class AresQuery {
    let id: UInt64
    let counters: ResolverCounters
    let onAnswer: @Sendable (Result<[ResolvedAddress], AresError>) -> Void
    var channel: OpaquePointer?
    var callSite = AresCallSite.idle
    var answered = false
    /// Told of the channel's sockets (the socket-state callback); it outlives every channel.
    weak var driver: AresDriver?

    init(
        id: UInt64, counters: ResolverCounters,
        onAnswer: @escaping @Sendable (Result<[ResolvedAddress], AresError>) -> Void
    ) {
        self.id = id
        self.counters = counters
        self.onAnswer = onAnswer
    }

    deinit {
        counters.contextsFreed.increment()
    }
}

/// c-ares's socket-state callback: nonisolated, file-level. Runs on the loop thread, inside the
/// c-ares call that opens, changes or is about to close a socket of the query's channel.
private func socketStateTrampoline(
    _ data: UnsafeMutableRawPointer?, _ socket: ares_socket_t, _ readable: Int32, _ writable: Int32
) {
    guard let data else { return }
    let query = Unmanaged<AresQuery>.fromOpaque(data).takeUnretainedValue()  // kept by its driver
    query.driver?.socketChanged(socket, of: query, readable: readable != 0, writable: writable != 0)
}

/// c-ares's getaddrinfo callback: nonisolated, file-level. Runs on the loop thread, inside
/// ares_getaddrinfo, ares_process_fd, ares_cancel or ares_destroy.
private func addrinfoTrampoline(
    _ argument: UnsafeMutableRawPointer?, _ status: Int32, _ timeouts: Int32,
    _ result: UnsafeMutablePointer<ares_addrinfo>?
) {
    guard let argument else { return }
    let unmanaged = Unmanaged<AresQuery>.fromOpaque(argument)
    // The driver's table still holds the query, so reading it here is safe even on a (contract-
    // breaking) second callback.
    let query = unmanaged.takeUnretainedValue()
    let addresses = result.map(copyAddresses) ?? []
    if let result { ares_freeaddrinfo(result) }
    guard !query.answered else {
        query.counters.repeatedCallbacks.increment()
        return
    }
    query.answered = true
    unmanaged.release()  // c-ares calls back once and has no release callback: give the retain back now
    query.counters.contextsReleased.increment()
    switch query.callSite {
    case .insideStart: query.counters.answersInsideStart.increment()
    case .insideProcess, .idle: query.counters.answersFromEventLoop.increment()
    case .insideCancel: query.counters.answersInsideCancel.increment()
    case .insideDestroy: query.counters.answersInsideDestroy.increment()
    }
    query.onAnswer(status == ARES_SUCCESS ? .success(addresses) : .failure(AresError(rawValue: status)))
}

/// Copies every address of c-ares's answer into Swift values (the answer dies with the callback).
private func copyAddresses(_ result: UnsafeMutablePointer<ares_addrinfo>) -> [ResolvedAddress] {
    var addresses: [ResolvedAddress] = []
    var node = result.pointee.nodes
    while let current = node {
        if let address = current.pointee.ai_addr {
            switch current.pointee.ai_family {
            case AF_INET:
                let bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet in
                    withUnsafeBytes(of: inet.pointee.sin_addr) { Array($0) }
                }
                addresses.append(
                    ResolvedAddress(family: .ipv4, bytes: bytes, description: presentation(AF_INET, bytes)))
            case AF_INET6:
                let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { inet6 in
                    withUnsafeBytes(of: inet6.pointee.sin6_addr) { Array($0) }
                }
                addresses.append(
                    ResolvedAddress(family: .ipv6, bytes: bytes, description: presentation(AF_INET6, bytes)))
            default:
                break
            }
        }
        node = current.pointee.ai_next
    }
    return addresses
}

/// The presentation form of an address (`ares_inet_ntop`).
private func presentation(_ family: Int32, _ bytes: [UInt8]) -> String {
    var text = [CChar](repeating: 0, count: 64)
    let ok = bytes.withUnsafeBytes { raw in
        ares_inet_ntop(family, raw.baseAddress, &text, ares_socklen_t(text.count)) != nil
    }
    guard ok else { return "?" }
    let length = text.firstIndex(of: 0) ?? text.count
    return String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

// MARK: - Driver (loop thread only)

/// Owns every channel of one resolver. Every method is called on the resolver's loop thread.
///
/// `@unchecked Sendable`: it is handed to the loop once and touched only there afterwards.
final class AresDriver: @unchecked Sendable {
    private let options: AresChannelOptions
    private let counters: ResolverCounters
    /// The loop thread, known from the first call.
    private var ownerThread: pthread_t?
    private var queries: [UInt64: AresQuery] = [:]
    /// Set by `destroyAll`: a lookup posted after it fails with `ARES_EDESTRUCTION`.
    private var destroyed = false
    /// The loop's watch of each socket c-ares waits on, and the query that socket belongs to.
    private var watches: [Int32: DescriptorWatch] = [:]
    private var socketOwners: [Int32: UInt64] = [:]
    /// The loop's timer for the nearest c-ares timeout.
    private var timer: LoopTimer?
    /// The resolver's loop, weakly: the loop holds this driver.
    private weak var loop: SDKLoop?

    init(options: AresChannelOptions, counters: ResolverCounters) {
        self.options = options
        self.counters = counters
    }

    /// Queries whose channel still exists.
    var pendingCount: Int { queries.count }

    /// Creates a configured channel; on failure returns c-ares's status.
    private static func makeChannel(
        _ options: AresChannelOptions, _ counters: ResolverCounters, socketsOf query: AresQuery? = nil
    ) -> Result<OpaquePointer, AresError> {
        var channelOptions = ares_options()
        channelOptions.timeout = options.attemptTimeoutMilliseconds
        channelOptions.tries = options.attempts
        channelOptions.domains = nil
        channelOptions.ndomains = 0  // no search domains: a name is asked for as given, once
        let lookups = strdup("fb")  // /etc/hosts first, then DNS
        defer { free(lookups) }
        channelOptions.lookups = lookups
        var mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS
        if let query {
            // c-ares says when a socket of this channel opens, changes what it waits for, or is
            // about to close (readable and writable both 0): the loop's watches follow it.
            channelOptions.sock_state_cb = socketStateTrampoline
            channelOptions.sock_state_cb_data = Unmanaged.passUnretained(query).toOpaque()
            mask |= ARES_OPT_SOCK_STATE_CB
        }
        var channel: OpaquePointer?
        let status = ares_init_options(&channel, &channelOptions, mask)
        guard status == ARES_SUCCESS, let channel else {
            if let channel { ares_destroy(channel) }
            return .failure(AresError(rawValue: status))
        }
        counters.channelsCreated.increment()
        let serverStatus = ares_set_servers_ports_csv(channel, options.serversCSV)
        guard serverStatus == ARES_SUCCESS else {
            ares_destroy(channel)
            counters.channelsDestroyed.increment()
            return .failure(AresError(rawValue: serverStatus))
        }
        return .success(channel)
    }

    /// Checks the options by building one channel, and returns the servers c-ares will use, read
    /// back from it ("127.0.0.1:5353"). Runs on the caller's thread: the channel is never shared.
    static func checkOptions(_ options: AresChannelOptions, counters: ResolverCounters) throws(AresError) -> [String] {
        let channel = try makeChannel(options, counters).get()
        defer {
            ares_destroy(channel)
            counters.channelsDestroyed.increment()
        }
        var list: UnsafeMutablePointer<ares_addr_port_node>?
        let status = ares_get_servers_ports(channel, &list)
        guard status == ARES_SUCCESS else { throw AresError(rawValue: status) }
        defer { ares_free_data(list) }
        var servers: [String] = []
        var node = list
        while let current = node {
            let family = current.pointee.family
            let bytes: [UInt8] =
                family == AF_INET
                ? withUnsafeBytes(of: current.pointee.addr.addr4) { Array($0) }
                : withUnsafeBytes(of: current.pointee.addr.addr6) { Array($0) }
            let host = presentation(family, bytes)
            let port = current.pointee.udp_port
            servers.append(family == AF_INET ? "\(host):\(port)" : "[\(host)]:\(port)")
            node = current.pointee.next
        }
        return servers
    }

    private func checkThread() {
        let current = pthread_self()
        guard let ownerThread else {
            ownerThread = current
            return
        }
        if pthread_equal(current, ownerThread) == 0 {
            counters.callsOffLoopThread.increment()
            preconditionFailure("a c-ares channel was used off its resolver's loop thread")
        }
    }

    /// Starts a lookup of `host` on a new channel. The answer may come inside this call.
    func start(
        id: UInt64, host: String, family: ResolvedAddress.Family?,
        onAnswer: @escaping @Sendable (Result<[ResolvedAddress], AresError>) -> Void
    ) {
        checkThread()
        guard !destroyed else {
            onAnswer(.failure(.destruction))
            return
        }
        let query = AresQuery(id: id, counters: counters, onAnswer: onAnswer)
        query.driver = self
        let channel: OpaquePointer
        switch Self.makeChannel(options, counters, socketsOf: query) {
        case .success(let made): channel = made
        case .failure(let error):
            onAnswer(.failure(error))
            return
        }
        query.channel = channel
        queries[id] = query
        var hints = ares_addrinfo_hints()
        switch family {
        case nil: hints.ai_family = AF_UNSPEC
        case .ipv4: hints.ai_family = AF_INET
        case .ipv6: hints.ai_family = AF_INET6
        }
        let context = Unmanaged.passRetained(query).toOpaque()
        counters.contextsRetained.increment()
        counters.queriesStarted.increment()
        query.callSite = .insideStart
        ares_getaddrinfo(channel, host, nil, &hints, addrinfoTrampoline, context)
        query.callSite = .idle
        destroyIfAnswered(query)
    }

    /// Cancels the lookup `id` if it is still pending: `ares_cancel` answers it inside itself.
    func cancel(id: UInt64) {
        checkThread()
        guard let query = queries[id], !query.answered, let channel = query.channel else {
            counters.cancelsAfterAnswer.increment()
            return
        }
        counters.cancelsApplied.increment()
        query.callSite = .insideCancel
        ares_cancel(channel)
        query.callSite = .idle
        destroyIfAnswered(query)
    }

    // MARK: Loop glue

    /// Tells the driver its loop; a job on that loop, before any lookup.
    func attach(to loop: SDKLoop) {
        checkThread()
        self.loop = loop
    }

    /// c-ares's socket-state callback, inside a c-ares call on the loop thread: the loop watches
    /// `socket` for what c-ares waits for, and stops before c-ares closes it (both false), so a
    /// number c-ares reuses later is watched afresh.
    fileprivate func socketChanged(_ socket: Int32, of query: AresQuery, readable: Bool, writable: Bool) {
        var interest: DescriptorEvents = []
        if readable { interest.insert(.readable) }
        if writable { interest.insert(.writable) }
        if interest.isEmpty {
            watches.removeValue(forKey: socket)?.cancel()
            socketOwners[socket] = nil
            return
        }
        socketOwners[socket] = query.id
        if let watch = watches[socket] {
            watch.update(interest: interest)
        } else if let loop {
            watches[socket] = try? loop.watch(socket, for: interest) { [unowned self] events in
                self.process(socket: socket, events)
            }
        }
    }

    /// Before each wait of the resolver's loop: a timer for the nearest c-ares timeout.
    func prepareWait() {
        guard let loop, !queries.isEmpty else { return }
        var nearest: Duration?
        var next = timeval()
        for query in queries.values {
            guard !query.answered, let channel = query.channel, let due = ares_timeout(channel, nil, &next) else {
                continue
            }
            let left = Duration.seconds(Int64(due.pointee.tv_sec)) + .microseconds(Int64(due.pointee.tv_usec))
            nearest = min(nearest ?? left, left)
        }
        timer?.cancel()
        timer = nearest.flatMap { delay in try? loop.schedule(after: delay) { [unowned self] in self.processTimeouts() }
        }
    }

    /// A watched socket is ready: c-ares reads or writes it for the query that owns it.
    private func process(socket: Int32, _ events: DescriptorEvents) {
        guard let id = socketOwners[socket], let query = queries[id], !query.answered, let channel = query.channel
        else { return }
        let readable = !events.isDisjoint(with: [.readable, .error, .hangUp, .invalid])
        query.callSite = .insideProcess
        ares_process_fd(
            channel, readable ? socket : ARES_SOCKET_BAD, events.contains(.writable) ? socket : ARES_SOCKET_BAD)
        query.callSite = .idle
        destroyIfAnswered(query)
    }

    /// A c-ares timeout is due: processing with no socket handles timeouts and retries.
    private func processTimeouts() {
        for query in Array(queries.values) {
            if !query.answered, let channel = query.channel {
                query.callSite = .insideProcess
                ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD)
                query.callSite = .idle
            }
            destroyIfAnswered(query)
        }
    }

    /// Destroys every channel; c-ares answers each pending query with `ARES_EDESTRUCTION` inside
    /// `ares_destroy`. The resolver's loop calls this when it shuts down.
    func destroyAll() {
        checkThread()
        destroyed = true
        for query in Array(queries.values) {
            guard let channel = query.channel else { continue }
            query.callSite = .insideDestroy
            ares_destroy(channel)
            query.callSite = .idle
            query.channel = nil
            counters.channelsDestroyed.increment()
            queries[query.id] = nil
        }
    }

    /// After a c-ares call returned: a query that has its answer no longer needs its channel.
    private func destroyIfAnswered(_ query: AresQuery) {
        guard query.answered, let channel = query.channel else { return }
        query.channel = nil
        ares_destroy(channel)  // nothing pending on it: no callback
        counters.channelsDestroyed.increment()
        queries[query.id] = nil
    }
}
