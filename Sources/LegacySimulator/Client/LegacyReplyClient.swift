import LegacyBridge

/// A client of the simulated SDK's reply connections: one reply callback for every request, each
/// request named by an id, as MQTT message ids and JSON-RPC work.
///
/// Built on ``withCallback(isolation:timeout:onDiscard:_:)`` and a table of waiters by id:
/// - A caller-chosen id is registered before the SDK call, so a reply that comes inside the send
///   finds it. An id already waiting is refused with ``LegacySDKError/duplicateID``.
/// - An SDK-assigned id is known only when the send returns; a reply for it that comes first is
///   kept until then.
/// - The first reply with attempt 1 completes its request. Later ones (duplicates, reports after
///   an earlier callback, late replies) and replies nobody waits for are counted in
///   ``statistics`` and dropped.
/// - Cancelling the calling task or the timeout removes the waiter and cancels the request by id.
/// - A disconnect fails every pending request with ``LegacySDKError/disconnected``: through the
///   SDK's per-request reports, or, with ``DisconnectReport/silent``, all at once when the SDK says
///   it disconnected. Destroying the client does the same.
///
/// A late reply with attempt 1 for an id that was sent again meanwhile cannot be told from the new
/// request's reply; the SDK's id width (``Configuration/idBits``) decides how soon ids come back.
/// Chosen and assigned ids share one id space: when the SDK assigns an id that a chosen request
/// registered and has not sent yet, the assigned request is cancelled and throws
/// ``LegacySDKError/duplicateID``. Use one kind of id per connection to avoid it.
public final class LegacyReplyClient: Sendable {
    /// How a disconnect reports the requests it drops.
    public enum DisconnectReport: Int32, Sendable, Hashable, CaseIterable {
        /// A ``LegacySDKError/disconnected`` reply for each, inside the disconnect.
        case synchronous = 0
        /// A ``LegacySDKError/disconnected`` reply for each, later, from an SDK thread.
        case asynchronous = 1
        /// No reply at all: only the SDK's disconnect notification tells.
        case silent = 2
    }

    /// How the connection misbehaves.
    public struct Configuration: Sendable, Hashable {
        /// Width of the ids, 8 ... 64 bits: SDK-assigned ids count up and wrap within it, skipping
        /// ids still pending; a chosen id must fit in it.
        public var idBits: Int
        /// How a disconnect reports the requests it drops.
        public var disconnectReport: DisconnectReport
        /// After each reply, the chance in 1,000 of one more for an id nobody sent.
        public var unknownRepliesPerMille: Int
        /// Each request's chance in 1,000 to make the connection drop shortly after.
        public var spontaneousDisconnectsPerMille: Int
        /// Seed of the connection's own draws; 0 derives it from the client's seed.
        public var seed: UInt64

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - idBits: Width of the ids, 8 ... 64 (default 32).
        ///   - disconnectReport: How disconnects report dropped requests (default synchronous).
        ///   - unknownRepliesPerMille: Chance of a reply for an unknown id, 0 ... 1,000.
        ///   - spontaneousDisconnectsPerMille: Chance of a spontaneous disconnect per request, 0 ... 1,000.
        ///   - seed: Seed of the connection's draws.
        public init(
            idBits: Int = 32, disconnectReport: DisconnectReport = .synchronous, unknownRepliesPerMille: Int = 0,
            spontaneousDisconnectsPerMille: Int = 0, seed: UInt64 = 0
        ) {
            self.idBits = idBits
            self.disconnectReport = disconnectReport
            self.unknownRepliesPerMille = unknownRepliesPerMille
            self.spontaneousDisconnectsPerMille = spontaneousDisconnectsPerMille
            self.seed = seed
        }
    }

    /// What happened to the replies this client received.
    public struct Statistics: Sendable, Hashable {
        /// Replies that completed a request.
        public var matched: Int
        /// Replies nobody waited for: unknown ids, duplicates, reports and late replies for
        /// requests already decided.
        public var unmatched: Int
        /// Unmatched replies with attempt above 1.
        public var duplicates: Int
        /// Replies that came before their SDK-assigned id was known, and were claimed.
        public var claimedEarly: Int
        /// Requests failed at once by a silent disconnect.
        public var failedByDisconnect: Int
        /// Assigned requests refused because a chosen request waited under the same id.
        public var collisions: Int
    }

    /// The configuration the connection was created with.
    public let configuration: Configuration
    /// The SDK connection (the raw callback API, for adapters built on it).
    package let connection: SDKConnection
    private let table: LockedBox<ReplyTable<Completion<FetchResponse>>>

    /// Creates a reply connection on `client`'s SDK threads.
    ///
    /// - Parameters:
    ///   - client: The client whose SDK threads deliver the replies; kept alive by this one.
    ///   - configuration: How the connection misbehaves.
    /// - Throws: ``LegacySDKError/outOfRange`` for a value outside its range.
    public init(client: LegacyClient, configuration: Configuration = .init()) throws(LegacySDKError) {
        let table = LockedBox(ReplyTable<Completion<FetchResponse>>())
        let silent = configuration.disconnectReport == .silent
        let handlers = SDKReplyHandlers(
            onReply: { reply in
                // The waiter is resumed after the lock is released.
                guard case .complete(let completion) = table.withLock({ $0.reply(reply) }) else { return }
                completion(reply.result.mapError { $0 })
            },
            onDisconnect: { _, _ in
                // With reports, each dropped request got its own; a new request registered since
                // the SDK dropped the others must not be failed with them.
                guard silent else { return }
                for completion in table.withLock({ $0.removeAll() }) {
                    completion.fail(LegacySDKError.disconnected)
                }
            })
        self.configuration = configuration
        self.table = table
        self.connection = try SDKConnection(
            client: client.sdk, idBits: configuration.idBits,
            disconnectReport: SDKConnection.DisconnectReport(rawValue: configuration.disconnectReport.rawValue)
                ?? .synchronous,
            unknownRepliesPerMille: configuration.unknownRepliesPerMille,
            spontaneousDisconnectsPerMille: configuration.spontaneousDisconnectsPerMille, seed: configuration.seed,
            handlers: handlers)
    }

    /// Sends one request and returns its reply.
    ///
    /// - Parameters:
    ///   - request: What to send.
    ///   - id: The id to send it under, or `nil` (the default) for one the SDK assigns.
    ///   - behavior: How the SDK answers it: its delivery, delay, outcomes (empty: never answered,
    ///     several: duplicates), cancel mode and late reply.
    ///   - timeout: Give up after this long (and cancel the request), or `nil` for no limit.
    ///   - isolation: The caller's actor; the call adds no executor hop.
    /// - Returns: The response of the first reply.
    /// - Throws: ``LegacySDKError`` when the reply is a failure, ``LegacySDKError/disconnected``
    ///   when the connection dropped the request, ``LegacySDKError/duplicateID`` for an id still
    ///   waiting, the SDK's error when it refuses the send, `CancellationError` or
    ///   `BridgeTimeoutError` as above.
    public func request(
        _ request: FetchRequest,
        id: UInt64? = nil,
        behavior: SimulatedBehavior = .wellBehaved,
        timeout: Duration? = nil,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> FetchResponse {
        let connection = self.connection
        let table = self.table
        return try await withCallback(isolation: isolation, timeout: timeout) { completion in
            let sentID: UInt64
            if let id {
                guard table.withLock({ $0.register(id, completion) }) else { throw LegacySDKError.duplicateID }
                switch connection.send(request, behavior: behavior, id: id) {
                case .success: sentID = id
                case .failure(let error):
                    _ = table.withLock { $0.remove(id) }
                    throw error
                }
            } else {
                // Replies for unknown ids are parked until the send returns the id it was given.
                table.withLock { $0.assignedSendStarted() }
                let sent = connection.send(request, behavior: behavior, id: nil)
                let action = table.withLock { $0.assignedSendEnded(try? sent.get(), completion) }
                switch (sent, action) {
                case (.failure(let error), _): throw error
                case (.success, .claimed(let reply)):
                    completion(reply.result.mapError { $0 })
                    return nil
                case (.success(let id), .collision):
                    // A chosen request waits under this id: the assigned one cannot be told apart.
                    _ = try? connection.cancel(id: id)
                    throw LegacySDKError.duplicateID
                case (.success(let id), _):
                    sentID = id
                }
            }
            return CancelHandle {
                // Only a request still waiting is cancelled in the SDK: an id whose waiter is gone
                // may already name a newer request.
                guard table.withLock({ $0.remove(sentID) }) != nil else { return }
                _ = try? connection.cancel(id: sentID)
            }
        }
    }

    /// Drops the connection and makes it again: every pending request fails with
    /// ``LegacySDKError/disconnected``.
    ///
    /// - Throws: ``LegacySDKError/clientDestroyed`` if the client is being destroyed.
    public func disconnect() throws(LegacySDKError) {
        try connection.disconnect()
    }

    /// What the SDK has done for this connection's client so far.
    public var counters: SDKCounters { connection.client.counters }

    /// What happened to the replies this client received.
    public var statistics: Statistics {
        let counts = table.withLock { $0.statistics }
        return Statistics(
            matched: counts.matched, unmatched: counts.unmatched, duplicates: counts.duplicates,
            claimedEarly: counts.claimedParked, failedByDisconnect: counts.failedByDisconnect,
            collisions: counts.collisions)
    }

    /// Requests waiting for their reply now.
    public var pendingCount: Int { table.withLock { $0.count } }
}
