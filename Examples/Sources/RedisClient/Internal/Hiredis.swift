// The one file of RedisClient that calls C (hiredis's asynchronous API).
//
// It is the only place with Unmanaged, raw pointers and @convention(c) trampolines. Everything
// above it speaks Swift values: HiredisDriver's connect/command/subscribe/close, RedisReply,
// RedisError.
//
// Threading: a redisAsyncContext is not thread-safe. A HiredisDriver is used on its connection's
// SDKLoop thread only (posted jobs and the loop's handlers); every context call checks that and
// counts any call that is not. hiredis calls every callback on that thread too, from inside
// redisAsyncHandleRead/Write and redisAsyncFree.
//
// The loop: hiredis's event-library hooks (ev.addRead, delRead, addWrite, delWrite, cleanup) set
// what the library's descriptor loop watches the context's socket for; the socket's handler calls
// redisAsyncHandleRead/Write. There is no loop function, no timer (hiredis 0.14 has none) and no
// wake pipe of our own: a posted command wakes the loop, and hiredis asks for writability.
//
// Per-request cancel: hiredis has none. A command once written is answered, and its reply is
// matched by position. A caller that times out or is cancelled is let go at once by the pending
// table; the reply comes later and is counted as late. hiredis's privdata is the request id (in
// the pointer's bits, nothing allocated); the driver's entry for the id, how its reply reaches the
// table, goes when the reply comes, late or not, or when the context is freed.
//
// Context lifetime: the context's `data` and `ev.data` are the driver, unretained. hiredis frees
// the context itself when the connection fails or the server closes it; the cleanup hook tells
// the driver, which never touches the context after that.

import CHiredis
import LegacyBridge
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Library

enum Hiredis {
    /// hiredis writes with write(2): a write to a connection the server dropped raises SIGPIPE,
    /// which kills the process. Like most Redis clients, the example ignores it (once, on first
    /// connect); the write then fails with EPIPE and hiredis reports the connection lost.
    private static let sigpipeIgnored: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return true
    }()

    static func prepareProcess() {
        _ = sigpipeIgnored
    }

    /// hiredis's version, e.g. "0.14.1".
    static var version: String {
        "\(HIREDIS_MAJOR).\(HIREDIS_MINOR).\(HIREDIS_PATCH)"
    }

    /// Copies a reply out of hiredis's memory, which it frees when the callback returns.
    static func copy(_ reply: UnsafePointer<redisReply>) -> Result<RedisReply, RedisError> {
        let value = reply.pointee
        switch value.type {
        case REDIS_REPLY_ERROR:
            return .failure(.server(text(value)))
        case REDIS_REPLY_STRING:
            return .success(.string(bytes(value)))
        case REDIS_REPLY_STATUS:
            return .success(.status(text(value)))
        case REDIS_REPLY_INTEGER:
            return .success(.integer(Int64(value.integer)))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            elements.reserveCapacity(value.elements)
            for index in 0..<value.elements {
                guard let element = value.element[index] else { continue }
                switch copy(element) {
                case .success(let reply): elements.append(reply)
                case .failure(let error):
                    if case .server(let message) = error { elements.append(.error(message)) }
                }
            }
            return .success(.array(elements))
        default:
            return .success(.null)
        }
    }

    private static func bytes(_ reply: redisReply) -> [UInt8] {
        guard let string = reply.str, reply.len > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: string, count: reply.len))
    }

    private static func text(_ reply: redisReply) -> String {
        String(decoding: bytes(reply), as: UTF8.self)
    }

    /// Calls `body` with argc, argv and argvlen for `arguments`, valid during the call (hiredis
    /// copies them into its output buffer before redisAsyncCommandArgv returns).
    static func withArguments<R>(
        _ arguments: [[UInt8]],
        _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
    ) -> R {
        let total = arguments.reduce(0) { $0 + $1.count }
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        var offset = 0
        for argument in arguments {
            argument.withUnsafeBytes { source in
                if let base = source.baseAddress { (storage + offset).copyMemory(from: base, byteCount: source.count) }
            }
            pointers.append(UnsafePointer((storage + offset).assumingMemoryBound(to: CChar.self)))
            lengths.append(argument.count)
            offset += argument.count
        }
        return pointers.withUnsafeMutableBufferPointer { argv in
            lengths.withUnsafeBufferPointer { argvlen in
                body(Int32(arguments.count), argv.baseAddress!, argvlen.baseAddress!)
            }
        }
    }
}

// MARK: - Trampolines (file-level; hiredis calls them on the loop thread)

private func driver(_ data: UnsafeMutableRawPointer?) -> HiredisDriver? {
    data.map { Unmanaged<HiredisDriver>.fromOpaque($0).takeUnretainedValue() }
}

private func replyTrampoline(
    _ context: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?,
    _ privdata: UnsafeMutableRawPointer?
) {
    guard let context else { return }
    driver(context.pointee.data)?.replied(
        id: UInt64(UInt(bitPattern: privdata)), reply: reply?.assumingMemoryBound(to: redisReply.self),
        context: context)
}

private func subscriptionTrampoline(
    _ context: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?,
    _ privdata: UnsafeMutableRawPointer?
) {
    // A nil reply: the context is being freed; the cleanup hook ends the subscriptions.
    guard let context, let reply else { return }
    driver(context.pointee.data)?.published(reply.assumingMemoryBound(to: redisReply.self))
}

private func connectTrampoline(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, status != REDIS_OK else { return }
    driver(context.pointee.data)?.failed(connecting: context)
}

private func disconnectTrampoline(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context else { return }
    driver(context.pointee.data)?.disconnected(context, requested: status == REDIS_OK)
}

// MARK: - Driver (loop thread only)

/// Owns one hiredis context. Every method but `init` runs on the connection's loop thread.
///
/// `@unchecked Sendable`: it is handed to the loop once and touched only there afterwards; its
/// `counters` and `replies` are thread-safe.
final class HiredisDriver: @unchecked Sendable {
    private struct Subscription {
        let run: UInt64
        let sink: EventSink<RedisMessage>
    }

    let counters: RedisCounters
    /// Commands waiting for their reply, by request id.
    let replies: PendingRequests<UInt64, RedisReply>
    private let host: String
    private let port: Int32
    private weak var loop: SDKLoop?
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    /// Whether `connect` ran once: a context is never made twice.
    private var started = false
    /// Why the context is gone (or going): what every pending and later call fails with.
    private var endError: RedisError?
    private var watch: DescriptorWatch?
    private var interest: DescriptorEvents = []
    private var ownerThread: pthread_t?
    typealias Deliver = @Sendable (Result<RedisReply, any Error>) -> Void
    /// A written command: how its reply reaches the table, and the suite's probe of its call.
    private struct Command {
        let deliver: Deliver
        let probe: CallProbe<RedisReply>
    }
    /// The written commands, by request id.
    private var inFlight: [UInt64: Command] = [:] {
        didSet { awaitingReply.store(inFlight.count, ordering: .relaxed) }
    }
    /// Commands written and not answered yet, callers gone or not (their entries go with the
    /// reply): read from any thread.
    let awaitingReply = Atomic<Int>(0)
    private var subscriptions: [String: Subscription] = [:]
    /// Channels with an UNSUBSCRIBE on the wire: a new SUBSCRIBE waits for its reply (hiredis
    /// deletes the channel's callback when that reply comes, also a newer one).
    private var unsubscribing: Set<String> = []
    private var waitingToSubscribe: [String: Subscription] = [:]

    init(host: String, port: Int, counters: RedisCounters, replies: PendingRequests<UInt64, RedisReply>) {
        self.host = host
        self.port = Int32(clamping: port)
        self.counters = counters
        self.replies = replies
    }

    /// Counts a context call made off the loop thread.
    private func checkThread() {
        let current = pthread_self()
        guard let owner = ownerThread else {
            ownerThread = current
            return
        }
        if pthread_equal(owner, current) == 0 {
            counters.callsOffLoopThread.add(1, ordering: .relaxed)
        }
    }

    // MARK: Connection

    /// Starts a non-blocking connect (`redisAsyncConnect`) and watches its socket. The connect
    /// completes when the socket first becomes writable, which the first command asks for.
    func connect(on loop: SDKLoop) throws(RedisError) {
        checkThread()
        guard !started else { throw endError ?? .notConnected }
        started = true
        Hiredis.prepareProcess()
        self.loop = loop
        guard let context = redisAsyncConnect(host, port) else {
            endError = .connectFailed("hiredis could not allocate a context")
            throw endError!
        }
        if context.pointee.err != 0 {
            let error = RedisError.connectFailed(String(cString: context.pointee.errstr))
            endError = error
            redisAsyncFree(context)
            throw error
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        context.pointee.data = me
        context.pointee.ev.data = me
        context.pointee.ev.addRead = { driver($0)?.changeInterest { $0.insert(.readable) } }
        context.pointee.ev.delRead = { driver($0)?.changeInterest { $0.remove(.readable) } }
        context.pointee.ev.addWrite = { driver($0)?.changeInterest { $0.insert(.writable) } }
        context.pointee.ev.delWrite = { driver($0)?.changeInterest { $0.remove(.writable) } }
        context.pointee.ev.cleanup = { driver($0)?.contextFreed() }
        redisAsyncSetConnectCallback(context, connectTrampoline)
        redisAsyncSetDisconnectCallback(context, disconnectTrampoline)
        self.context = context
        do {
            // Errors and hang-ups reach the handler whatever the interest.
            watch = try loop.watch(context.pointee.c.fd, for: interest) { [self] events in process(events) }
        } catch {
            close(.notConnected)
            throw .notConnected
        }
    }

    /// Tells a driver that connects on first use (the subscriber) its loop. On the loop thread.
    func attach(to loop: SDKLoop) {
        self.loop = loop
    }

    /// Frees the context: every pending command and subscription fails with `error` now.
    func close(_ error: RedisError) {
        checkThread()
        if endError == nil { endError = error }
        started = true  // a driver never connected does not connect after this
        guard let context else { return }
        redisAsyncFree(context)  // nil replies to every callback, then the cleanup hook
    }

    /// `onConnect` with an error: the context is freed right after (without `onDisconnect`).
    fileprivate func failed(connecting context: UnsafePointer<redisAsyncContext>) {
        if endError == nil { endError = .connectFailed(Self.message(of: context)) }
    }

    /// `onDisconnect`: the context is being freed.
    fileprivate func disconnected(_ context: UnsafePointer<redisAsyncContext>, requested: Bool) {
        counters.disconnects.add(1, ordering: .relaxed)
        if endError == nil { endError = requested ? .notConnected : .connectionLost(Self.message(of: context)) }
    }

    /// hiredis's reason: the async context's copy, or the inner context's own (the async one is
    /// copied only on some paths, e.g. not before `onConnect`).
    private static func message(of context: UnsafePointer<redisAsyncContext>) -> String {
        if context.pointee.err != 0, let text = context.pointee.errstr {
            return String(cString: text)
        }
        if context.pointee.c.err != 0 {
            var inner = context.pointee.c.errstr
            let text = withUnsafeBytes(of: &inner) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !text.isEmpty { return text }
        }
        return "the server closed the connection"
    }

    /// The cleanup hook: hiredis frees the context and closes its socket right after.
    fileprivate func contextFreed() {
        watch?.cancel()  // before the socket is closed: its number may be reused at once
        watch = nil
        let error = endError ?? .connectionLost("the server closed the connection")
        endError = error
        context = nil
        inFlight.removeAll()
        replies.failAll(error)
        let ended = Array(subscriptions.values) + Array(waitingToSubscribe.values)
        subscriptions.removeAll()
        waitingToSubscribe.removeAll()
        unsubscribing.removeAll()
        for subscription in ended { subscription.sink.finish(throwing: error) }
    }

    // MARK: Loop glue

    private func changeInterest(_ change: (inout DescriptorEvents) -> Void) {
        var changed = interest
        change(&changed)
        guard changed != interest else { return }
        interest = changed
        watch?.update(interest: changed)
    }

    /// The socket is ready: hiredis reads or writes, and calls its callbacks inside. The context
    /// may be freed inside either call.
    private func process(_ events: DescriptorEvents) {
        checkThread()
        if let context, !events.isDisjoint(with: [.readable, .error, .hangUp, .invalid]) {
            redisAsyncHandleRead(context)
        }
        if let context, events.contains(.writable) {
            redisAsyncHandleWrite(context)
        }
    }

    // MARK: Commands

    /// Writes a command to hiredis's output buffer; its reply goes to `deliver` (which completes
    /// request `id` in the table).
    func command(_ arguments: [[UInt8]], id: UInt64, probe: CallProbe<RedisReply>, deliver: @escaping Deliver) {
        guard let context else {
            deliver(.failure(endError ?? .notConnected))
            return
        }
        checkThread()
        let status = Hiredis.withArguments(arguments) { argc, argv, lengths in
            redisAsyncCommandArgv(context, replyTrampoline, UnsafeMutableRawPointer(bitPattern: UInt(id)), argc, argv, lengths)
        }
        guard status == REDIS_OK else {
            deliver(.failure(RedisError.commandRefused))
            return
        }
        inFlight[id] = Command(deliver: deliver, probe: probe)
        counters.commands.add(1, ordering: .relaxed)
    }

    /// The caller of command `id` left (it timed out or was cancelled). hiredis has no call
    /// that withdraws a written command: the entry stays for its reply, which the table then
    /// counts as late. The "cancel" made is only the probe's record of this decision.
    func abandon(id: UInt64) {
        inFlight[id]?.probe.cancel {}
    }

    /// A command's reply, or nil when the context is being freed with the command pending.
    fileprivate func replied(id: UInt64, reply: UnsafePointer<redisReply>?, context: UnsafeMutablePointer<redisAsyncContext>) {
        guard let deliver = inFlight.removeValue(forKey: id)?.deliver else { return }
        guard let reply else {
            deliver(.failure(endError ?? .connectionLost(Self.message(of: context))))
            return
        }
        counters.replies.add(1, ordering: .relaxed)
        deliver(Hiredis.copy(reply).mapError { $0 })
    }

    // MARK: Subscriptions

    /// SUBSCRIBE for a new run of a channel's shared subscription.
    func subscribe(channel: String, run: UInt64, sink: EventSink<RedisMessage>) {
        if !started, let loop {
            do {
                try connect(on: loop)
            } catch {
                sink.finish(throwing: error)
                return
            }
        }
        guard context != nil else {
            sink.finish(throwing: endError ?? .notConnected)
            return
        }
        let subscription = Subscription(run: run, sink: sink)
        if unsubscribing.contains(channel) {
            waitingToSubscribe[channel] = subscription
            return
        }
        sendSubscribe(channel, subscription)
    }

    private func sendSubscribe(_ channel: String, _ subscription: Subscription) {
        guard let context else { return }
        checkThread()
        let status = Hiredis.withArguments([Array("SUBSCRIBE".utf8), Array(channel.utf8)]) { argc, argv, lengths in
            redisAsyncCommandArgv(context, subscriptionTrampoline, nil, argc, argv, lengths)
        }
        guard status == REDIS_OK else {
            subscription.sink.finish(throwing: RedisError.commandRefused)
            return
        }
        counters.subscribes.add(1, ordering: .relaxed)
        subscriptions[channel] = subscription
    }

    /// UNSUBSCRIBE once the last consumer of that run left.
    func unsubscribe(channel: String, run: UInt64) {
        if waitingToSubscribe[channel]?.run == run {
            waitingToSubscribe[channel] = nil
            return
        }
        guard subscriptions[channel]?.run == run else { return }
        subscriptions[channel] = nil
        guard let context else { return }
        checkThread()
        let status = Hiredis.withArguments([Array("UNSUBSCRIBE".utf8), Array(channel.utf8)]) { argc, argv, lengths in
            redisAsyncCommandArgv(context, subscriptionTrampoline, nil, argc, argv, lengths)
        }
        if status == REDIS_OK {
            counters.unsubscribes.add(1, ordering: .relaxed)
            unsubscribing.insert(channel)
        }
    }

    /// A reply on the subscription channel: a message, or the server's confirmation of a
    /// SUBSCRIBE or UNSUBSCRIBE.
    fileprivate func published(_ reply: UnsafePointer<redisReply>) {
        guard case .success(.array(let parts)) = Hiredis.copy(reply), parts.count >= 3,
            let kind = parts[0].text, let channel = parts[1].text
        else { return }
        switch kind {
        case "message":
            counters.messages.add(1, ordering: .relaxed)
            if case .string(let payload) = parts[2] {
                _ = subscriptions[channel]?.sink.yield(RedisMessage(channel: channel, payload: payload))
            }
        case "subscribe":
            counters.subscribeConfirmations.add(1, ordering: .relaxed)
        case "unsubscribe":
            unsubscribing.remove(channel)
            // Not from inside this callback: hiredis deletes the channel's callback after it returns.
            if let waiting = waitingToSubscribe.removeValue(forKey: channel), let loop {
                do {
                    try loop.post { [self] in sendSubscribe(channel, waiting) }
                } catch {
                    waiting.sink.finish(throwing: RedisError.notConnected)
                }
            }
        default:
            break
        }
    }
}
