// The keyed-requests kind: an SDK connection with ONE reply callback for every request, each
// request named by an id, as MQTT message ids and JSON-RPC work. The hazards an adapter must
// survive: replies out of order, duplicated, for ids nobody sent, inside the send itself, and a
// disconnect that drops every pending request.

import LegacyBridge
import LegacySimulator

/// What a reply of a ``LegacyRPCConnection`` carries on success.
public struct LegacyRPCAnswer: Sendable, Hashable {
    /// The id of the request the SDK answered: equal to the id the caller sent, or `nil` for a
    /// reply the SDK made up for an id nobody sent.
    public var answersID: UInt64?
}

/// One reply of a ``LegacyRPCConnection``, as its reply callback receives it.
public struct LegacyRPCReply: Sendable {
    /// The id the reply names.
    public var id: UInt64
    /// Numbers the request's callbacks from 1: a duplicate, a report after an earlier reply or a
    /// late reply has an attempt above 1.
    public var attempt: Int
    /// The answer, or the SDK's error: a failure of the request, or ``LegacySDKError/cancelled``
    /// and ``LegacySDKError/disconnected`` for the SDK's own reports.
    public var result: Result<LegacyRPCAnswer, any Error>
}

/// A simulated SDK connection with one reply callback for every request, as a keyed-request
/// scenario hands it to an adapter.
///
/// - ``setHandlers(onReply:onDisconnect:)`` installs the connection's one reply callback. Replies
///   come on the SDK's threads, possibly inside ``send(id:)``, several at once, out of order,
///   twice for one request, or for ids nobody sent.
/// - ``send(id:)`` sends a request under an id the caller chose. Its reply may come before the
///   send returns.
/// - ``cancel(id:)`` asks the SDK to stop a pending request. What the SDK does then, a report,
///   nothing, or a late reply, depends on the scenario.
/// - A disconnect drops every pending request. Depending on the scenario each gets a
///   ``LegacySDKError/disconnected`` reply, or only the disconnect callback tells.
public struct LegacyRPCConnection: Sendable {
    let connection: SDKConnection
    let router: RPCRouter
    let behavior: @Sendable (UInt64) -> SimulatedBehavior

    /// Installs the connection's reply callback and disconnect callback in place of the previous
    /// ones. Replies that come while none is installed are dropped.
    ///
    /// - Parameters:
    ///   - onReply: Every reply of the connection, on any thread, possibly inside a send, a cancel
    ///     or a disconnect, possibly concurrently with itself.
    ///   - onDisconnect: Once per disconnect, after the disconnect's own replies if any.
    public func setHandlers(
        onReply: @escaping @Sendable (LegacyRPCReply) -> Void, onDisconnect: @escaping @Sendable () -> Void
    ) {
        router.install(onReply: onReply, onDisconnect: onDisconnect)
    }

    /// Sends a request under `id`. Register the request before calling this: its reply may come
    /// inside this call.
    ///
    /// - Parameter id: The request's id, 1 or more.
    /// - Throws: ``LegacySDKError/duplicateID`` when a request with that id is still pending in the
    ///   SDK, or another ``LegacySDKError`` the SDK returns. No reply comes for a refused send.
    public func send(id: UInt64) throws {
        let sent = connection.send(
            FetchRequest(path: RPCRouter.path(for: id), responseSize: 8), behavior: behavior(id), id: id)
        if case .failure(let error) = sent { throw error }
    }

    /// Asks the SDK to stop the pending request with `id`. Callable from any thread, inside a
    /// callback too.
    ///
    /// - Parameter id: The request's id.
    /// - Returns: Whether a request with that id was pending in the SDK.
    @discardableResult
    public func cancel(id: UInt64) -> Bool {
        return (try? connection.cancel(id: id)) ?? false
    }
}

/// What an adapter of a keyed-request connection gives its callers.
public protocol KeyedRequestSession: Sendable {
    /// Sends a request under `id` and returns its reply's answer.
    ///
    /// - Parameters:
    ///   - id: The request's id, chosen by the caller.
    ///   - timeout: Give up after this long and cancel the request, or `nil` for no limit.
    /// - Returns: The answer of the request's reply.
    /// - Throws: The reply's error, an error for a disconnect or a timeout, or `CancellationError`
    ///   when the calling task was cancelled.
    func request(id: UInt64, timeout: Duration?) async throws -> LegacyRPCAnswer

    /// The requests the adapter keeps track of now (its table of pending ids), for the suite to
    /// check that an ended request leaves nothing behind.
    var pendingCount: Int { get }
}

/// Something that turns a connection with one reply callback for every request into an async call
/// per request.
///
/// Conform in a few lines with the library's `PendingRequests`:
/// ```swift
/// struct MyAdapter: KeyedRequestAdapter {
///     var name: String { "mine" }
///     var summary: String { "PendingRequests over the connection's reply callback" }
///     func open(_ connection: LegacyRPCConnection) async throws -> any KeyedRequestSession {
///         MySession(connection)
///     }
/// }
/// ```
public protocol KeyedRequestAdapter: Sendable {
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Wraps `connection`: installs its reply callback. The scenario then calls the session from
    /// many tasks at once.
    ///
    /// - Parameter connection: The connection.
    /// - Returns: The session.
    /// - Throws: When the adapter cannot set itself up.
    func open(_ connection: LegacyRPCConnection) async throws -> any KeyedRequestSession
}

/// Passes the SDK's replies on to the adapter's installed callbacks, and lets a scenario hold a
/// reply before it reaches the adapter (to force the order replies arrive in).
final class RPCRouter: Sendable {
    private struct State {
        var onReply: (@Sendable (LegacyRPCReply) -> Void)?
        var onDisconnect: (@Sendable () -> Void)?
        var replies = 0
    }
    private let state = LockedBox(State())
    /// Called on the SDK's thread before a reply is passed on; may block that thread (a scenario's hold).
    let beforeReply: (@Sendable (RawReply) -> Void)?
    /// Called on the SDK's thread once the adapter's reply callback returned.
    let afterReply: (@Sendable (RawReply) -> Void)?

    init(beforeReply: (@Sendable (RawReply) -> Void)? = nil, afterReply: (@Sendable (RawReply) -> Void)? = nil) {
        self.beforeReply = beforeReply
        self.afterReply = afterReply
    }

    /// The request path of `id`: the SDK echoes it in a success, so the answer names its request.
    static func path(for id: UInt64) -> String { "/rpc/\(id)" }

    func install(onReply: @escaping @Sendable (LegacyRPCReply) -> Void, onDisconnect: @escaping @Sendable () -> Void) {
        state.withLock {
            $0.onReply = onReply
            $0.onDisconnect = onDisconnect
        }
    }

    /// Forgets the adapter's callbacks: they hold the adapter, which holds the connection, which
    /// holds them through the SDK until it is destroyed.
    func uninstall() {
        state.withLock {
            $0.onReply = nil
            $0.onDisconnect = nil
        }
    }

    /// Replies the adapter's callback has returned from (or that found no callback installed).
    var replies: Int { state.withLock { $0.replies } }

    /// The SDK's handlers: every reply goes through `beforeReply`, then to the adapter.
    var handlers: SDKReplyHandlers {
        SDKReplyHandlers(
            onReply: { [self] raw in
                beforeReply?(raw)
                let result: Result<LegacyRPCAnswer, any Error> = raw.result.map { response in
                    let prefix = "/rpc/"
                    guard response.message.hasPrefix(prefix) else { return LegacyRPCAnswer(answersID: nil) }
                    return LegacyRPCAnswer(answersID: UInt64(response.message.dropFirst(prefix.count)))
                }.mapError { $0 }
                let onReply = state.withLock { $0.onReply }
                onReply?(LegacyRPCReply(id: raw.id, attempt: raw.attempt, result: result))
                state.withLock { $0.replies += 1 }
                afterReply?(raw)
            },
            onDisconnect: { [self] _, _ in
                let onDisconnect = state.withLock { $0.onDisconnect }
                onDisconnect?()
            })
    }
}
