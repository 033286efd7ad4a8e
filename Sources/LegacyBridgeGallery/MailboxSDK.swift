// A test double of an SDK whose descriptor only says "go look", the shape of ZeroMQ's `ZMQ_FD`
// with `ZMQ_EVENTS`, eventfd-signalled SDK queues and some D-Bus bindings: replies land in a
// mailbox, the descriptor is a signal raised when the mailbox goes from empty to not empty, and
// every call into the SDK (asking its events, receiving, sending) takes the signal while it
// processes the mailbox. So a send can make a reply receivable and leave the descriptor quiet.
//
// `MailboxClient` is the correct adapter: it watches the descriptor with the SDK's readiness
// query, which the loop asks before each wait. The gallery's `mailbox-sdk-level-triggered` watches
// it as if it were level-triggered, and waits for a signal that never comes.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request-reply SDK on a loop thread of its own whose descriptor only says "go look".
///
/// Rules, as a C header would state them:
/// - ``send(_:_:)``, ``receive()``, ``events()`` and ``cancel(_:)`` must be called on the loop
///   thread (``loop``); a call from elsewhere is counted in ``offLoopCalls`` (and still served).
/// - The caller names each request with an id of its own. Its reply comes back through
///   ``receive()`` as `(id, status, value)`: ``LoopSDK/okStatus`` with the value, or
///   ``LoopSDK/failedStatus``.
/// - ``signal`` is readable while the SDK has an unprocessed change. It is not a count of replies:
///   a reply that lands while the SDK is processing a call (a send) raises nothing. Ask
///   ``events()`` after every call, and receive while it reports `.readable`.
/// - A request made with ``LoopSDKBehavior/value(_:)`` or ``LoopSDKBehavior/failure(_:)`` is
///   answered during its own send, which is the case that leaves the descriptor quiet; one made
///   with ``LoopSDKBehavior/hang`` is answered (42) by ``releaseHeld()``, which raises the signal.
///   ``cancel(_:)`` withdraws a request not answered yet; it makes no reply.
public final class MailboxSDK: Sendable {
    /// The loop thread every SDK function must be called on.
    public let loop: SDKLoop
    /// The descriptor to watch for readable.
    public let signal: Int32
    private let raiseEnd: Int32

    private struct Reply: Sendable {
        var id: UInt64
        var status: Int32
        var value: Int64
    }

    private struct State: Sendable {
        /// Replies that arrived and are not processed yet.
        var mailbox: [Reply] = []
        /// Replies processed and ready to receive.
        var receivable: [Reply] = []
        var raised = false
        /// Requests sent and not answered or withdrawn.
        var held: Set<UInt64> = []
        var offLoopCalls = 0
        var shutDown = false
    }
    private let state = LockedValue(State())

    /// Starts the SDK's loop thread.
    ///
    /// - Parameter name: The loop thread's name.
    /// - Throws: What `SDKLoop` throws when the thread cannot be created.
    public init(name: String = "mailbox-sdk") throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw LoopSDKError(status: LoopSDK.failedStatus) }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        (signal, raiseEnd) = (ends[0], ends[1])
        do {
            loop = try SDKLoop(name: name)
        } catch {
            close(signal)
            close(raiseEnd)
            throw error
        }
    }

    /// Ends the SDK: held requests are withdrawn, the loop thread ends, and the descriptors close.
    /// Test control, not an SDK function.
    public func shutdown() async {
        state.withLock { state in
            state.held.removeAll()
            state.shutDown = true
        }
        var byte: UInt8 = 1
        _ = write(raiseEnd, &byte, 1)  // ends a poll(timeout:) in progress
        await loop.shutdown()
        close(signal)
        close(raiseEnd)
    }

    /// SDK calls made off the loop thread so far.
    public var offLoopCalls: Int { state.withLock { $0.offLoopCalls } }

    /// Requests sent and not answered or withdrawn, plus replies not received yet.
    public var liveRequests: Int {
        state.withLock { $0.held.count + $0.mailbox.count + $0.receivable.count }
    }

    /// Sends a request (loop thread only). It processes the mailbox first, as every call does.
    ///
    /// - Parameters:
    ///   - id: The caller's name for the request, handed back with its reply.
    ///   - behavior: How the request is answered.
    public func send(_ id: UInt64, _ behavior: LoopSDKBehavior) {
        call { state in
            switch behavior {
            case .value(let value):
                // The reply comes in with the command the send processes: receivable, no signal.
                state.receivable.append(Reply(id: id, status: LoopSDK.okStatus, value: value))
            case .failure(let status):
                state.receivable.append(Reply(id: id, status: status, value: 0))
            case .hang:
                state.held.insert(id)
            }
        }
    }

    /// Withdraws a request not answered yet (loop thread only). It makes no reply.
    public func cancel(_ id: UInt64) {
        call { state in _ = state.held.remove(id) }
    }

    /// What the SDK is ready for, `ZMQ_EVENTS`-style (loop thread only): `.readable` while a reply
    /// waits to be received.
    public func events() -> DescriptorEvents {
        call { state in state.receivable.isEmpty ? [] : .readable }
    }

    /// The next reply, or `nil` when none is receivable (loop thread only).
    public func receive() -> (id: UInt64, status: Int32, value: Int64)? {
        call { state in
            guard !state.receivable.isEmpty else { return nil }
            let reply = state.receivable.removeFirst()
            return (reply.id, reply.status, reply.value)
        }
    }

    /// Blocks until a reply is receivable (`zmq_poll`-style, loop thread only); returns whether
    /// one is. Returns false at `timeout`, and at once when the SDK has shut down.
    public func poll(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if events().contains(.readable) { return true }
            let left = deadline - ContinuousClock.now
            if state.withLock({ $0.shutDown }) || left <= .zero { return false }
            var descriptor = pollfd(fd: signal, events: Int16(POLLIN), revents: 0)
            let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
            _ = pollDescriptors(&descriptor, 1, Int32(clamping: max(1, milliseconds)))
        }
    }

    /// Answers every held request with 42, as replies arriving from the peer: the signal is
    /// raised. Any thread; test control, not an SDK function.
    public func releaseHeld() {
        state.withLock { state in
            for id in state.held.sorted() { state.mailbox.append(Reply(id: id, status: LoopSDK.okStatus, value: 42)) }
            state.held.removeAll()
            if !state.mailbox.isEmpty && !state.raised {
                state.raised = true
                var byte: UInt8 = 1
                _ = write(raiseEnd, &byte, 1)
            }
        }
    }

    /// One SDK call: counted when off the loop thread; the mailbox is processed and the signal
    /// taken before `body` runs.
    private func call<T>(_ body: (inout State) -> T) -> T {
        let offLoop = !loop.isCurrent
        return state.withLock { state in
            if offLoop { state.offLoopCalls += 1 }
            state.receivable += state.mailbox
            state.mailbox.removeAll()
            if state.raised {
                var byte: UInt8 = 0
                while read(signal, &byte, 1) > 0 {}
                state.raised = false
            }
            return body(&state)
        }
    }
}

/// `poll(2)`, under a name that ``MailboxSDK/poll(timeout:)`` does not hide.
private let pollDescriptors = poll

/// The requests of one ``MailboxSDK`` waiting for their replies, matched by id.
final class MailboxReplies: Sendable {
    private struct Table: Sendable {
        var nextID: UInt64 = 1
        var waiting: [UInt64: @Sendable (Result<Int64, any Error>) -> Void] = [:]
    }
    private let table = LockedValue(Table())

    /// Requests waiting.
    var count: Int { table.withLock { $0.waiting.count } }

    /// A fresh id, with `deliver` to call with its reply.
    func register(_ deliver: @escaping @Sendable (Result<Int64, any Error>) -> Void) -> UInt64 {
        table.withLock { table in
            let id = table.nextID
            table.nextID += 1
            table.waiting[id] = deliver
            return id
        }
    }

    /// Forgets `id`; whether it was still waiting.
    func remove(_ id: UInt64) -> Bool {
        table.withLock { $0.waiting.removeValue(forKey: id) != nil }
    }

    /// Receives every reply the SDK has and hands each to its request (loop thread). A reply whose
    /// request was withdrawn is dropped.
    func drain(_ sdk: MailboxSDK) {
        while let reply = sdk.receive() {
            guard let deliver = table.withLock({ $0.waiting.removeValue(forKey: reply.id) }) else { continue }
            deliver(
                reply.status == LoopSDK.okStatus ? .success(reply.value) : .failure(LoopSDKError(status: reply.status)))
        }
    }
}

/// An async face for ``MailboxSDK``: one-shot requests over a descriptor that only says "go look".
public final class MailboxClient: Sendable {
    /// The SDK.
    public let sdk: MailboxSDK
    let replies: MailboxReplies
    private let watch: DescriptorWatch

    /// Creates the client and watches the SDK's descriptor with the SDK's readiness query, which
    /// the loop asks before each wait: a reply that a send made receivable, with no signal, is
    /// received at once.
    ///
    /// - Parameter sdk: The SDK.
    /// - Throws: `OffloadError.shutDown` when the SDK's loop has shut down.
    public convenience init(sdk: MailboxSDK) throws {
        try self.init(sdk: sdk) { sdk, replies in
            try sdk.loop.watch(sdk.signal, for: .readable, readiness: { sdk.events() }) { _ in replies.drain(sdk) }
        }
    }

    /// A client whose watch `watching` makes: the gallery's mistakes differ from the correct
    /// client there only.
    init(sdk: MailboxSDK, watching: (MailboxSDK, MailboxReplies) throws -> DescriptorWatch) throws {
        self.sdk = sdk
        let replies = MailboxReplies()
        self.replies = replies
        watch = try watching(sdk, replies)
    }

    /// One process-wide client, created on first use (the adapter catalog's fixture uses it).
    public static let shared: MailboxClient = {
        do {
            return try MailboxClient(sdk: MailboxSDK(name: "mailbox-sdk"))
        } catch {
            preconditionFailure("MailboxSDK could not start its loop thread: \(error)")
        }
    }()

    deinit { watch.cancel() }

    /// SDK resources live now: requests the SDK holds or answered unreceived, and requests this
    /// client waits for.
    public var liveResources: Int { sdk.liveRequests + replies.count }

    /// Runs one request to its reply.
    ///
    /// - Parameters:
    ///   - behavior: How the SDK answers.
    ///   - timeout: How long to wait, or `nil`.
    ///   - probe: The conformance probe; `.off` in production.
    ///   - isolation: The caller's isolation; leave the default.
    /// - Returns: The reply's value.
    /// - Throws: ``LoopSDKError``, `CancellationError` or `BridgeTimeoutError`.
    public func fetch(
        _ behavior: LoopSDKBehavior, timeout: Duration? = nil, probe: CallProbe<Int64> = .off,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Int64 {
        let sdk = self.sdk
        let replies = self.replies
        return try await withCallback(isolation: isolation, timeout: timeout) { completion in
            // Registered before the send, so a reply that comes during the send finds its request.
            let id = replies.register(probe.callback { completion($0) })
            try sdk.loop.post { probe.start { sdk.send(id, behavior) } }
            return CancelHandle {
                // Posted after the send, so it runs after it; a request already answered is not
                // withdrawn.
                try? sdk.loop.post { if replies.remove(id) { probe.cancel { sdk.cancel(id) } } }
            }
        }
    }
}

/// Fixtures over ``MailboxSDK``.
public enum MailboxFixtures {
    /// A one-shot fixture of `client`'s ``MailboxClient/fetch(_:timeout:probe:isolation:)``.
    ///
    /// - Parameters:
    ///   - name: The fixture's name.
    ///   - client: The client; asked for when a call is made.
    /// - Returns: The fixture.
    public static func oneShot(
        name: String = "mailbox-sdk-client", client: @escaping @Sendable () -> MailboxClient = { .shared }
    ) -> OneShotFixture<Int64> {
        OneShotFixture(
            name: name,
            threading: .sdkLoop { client().sdk.loop },
            succeeding: { probe in try await client().fetch(.value(7), probe: probe) },
            expecting: 7,
            failing: { probe in try await client().fetch(.failure(LoopSDK.failedStatus), probe: probe) },
            hanging: .init(
                start: { probe in try await client().fetch(.hang, probe: probe) },
                release: { client().sdk.releaseHeld() }),
            timingOut: .init { probe, timeout in try await client().fetch(.hang, timeout: timeout, probe: probe) },
            liveResources: { client().liveResources },
            offThreadCalls: { client().sdk.offLoopCalls })
    }
}

/// One mistake of an adapter over ``MailboxSDK``: WRONG ON PURPOSE.
public enum MailboxMistake: String, CaseIterable, Sendable {
    /// Watches the SDK's descriptor as if it were level-triggered (`SDKLoop.watch(_:for:_:)`,
    /// without the SDK's readiness query), and receives only when it signals. A reply that lands
    /// while a send is processed raises no signal: it waits unreceived, and its caller with it,
    /// until some later reply signals. On ZeroMQ this hangs now and then; this SDK makes it certain.
    case levelTriggered = "mailbox-sdk-level-triggered"
    /// Its handler, once it has received what is ready, waits on the loop thread (with the SDK's
    /// `poll`) until every request it sent is answered, as a blocking client's read loop does.
    /// While one request hangs, the loop runs nothing else: no send, no cancel, no timer.
    case handlerWaitsForAll = "mailbox-sdk-handler-waits-for-all"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .levelTriggered: return ["success"]
        case .handlerWaitsForAll: return ["sdk-thread-not-held"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .levelTriggered:
            return
                "WRONG ON PURPOSE: over an SDK whose descriptor only says \"go look\", a watch without its readiness query"
        case .handlerWaitsForAll:
            return
                "WRONG ON PURPOSE: over MailboxSDK, a handler that waits on the loop thread until every request is answered"
        }
    }

    /// The mistaken adapter's client, one per process.
    var client: MailboxClient {
        switch self {
        case .levelTriggered: return Self.levelTriggeredClient
        case .handlerWaitsForAll: return Self.waitsForAllClient
        }
    }

    private static let waitsForAllClient: MailboxClient = {
        do {
            return try MailboxClient(sdk: MailboxSDK(name: "mailbox-sdk-all")) { sdk, replies in
                try sdk.loop.watch(sdk.signal, for: .readable, readiness: { sdk.events() }) { _ in
                    replies.drain(sdk)
                    // WRONG: waits on the loop thread for the replies still due; the sends and
                    // cancels posted meanwhile wait behind it.
                    while replies.count > 0, sdk.poll(timeout: .seconds(60)) { replies.drain(sdk) }
                }
            }
        } catch {
            preconditionFailure("MailboxSDK could not start its loop thread: \(error)")
        }
    }()

    private static let levelTriggeredClient: MailboxClient = {
        do {
            return try MailboxClient(sdk: MailboxSDK(name: "mailbox-sdk-lvl")) { sdk, replies in
                // WRONG: the descriptor is not a count of replies; without the readiness query a
                // reply that a send made receivable is never heard.
                try sdk.loop.watch(sdk.signal, for: .readable) { _ in replies.drain(sdk) }
            }
        } catch {
            preconditionFailure("MailboxSDK could not start its loop thread: \(error)")
        }
    }()

    /// The fixture of every mistake.
    public static func fixtures() -> [(MailboxMistake, OneShotFixture<Int64>)] {
        allCases.map { mistake in (mistake, MailboxFixtures.oneShot(name: mistake.rawValue) { mistake.client }) }
    }
}
