/// Requests that an SDK answers through one global callback, matched to their callers by id.
///
/// Many C SDKs take one reply handler for the whole client and hand back an id per request:
/// MQTT's message id, a JSON-RPC id, a Bluetooth attribute handle. A table of pending requests
/// turns each request into an `async` call and the global callback into one line:
///
/// ```swift
/// let publishes = PendingRequests<Int32, Void>(cancel: { mid in sdk.abandon(mid) })
///
/// // The SDK assigns the id: start returns it.
/// try await publishes.request(timeout: .seconds(5)) { try sdk.publish(topic, payload) }
///
/// // The SDK's global callback, on any thread:
/// publishes.complete(mid, with: .success(()))
///
/// // The connection dropped:
/// publishes.failAll(ConnectionError.disconnected)
/// ```
///
/// Contract:
/// - A caller-assigned id is registered before `start` runs, so a reply the SDK gives inside
///   `start`, on any thread, finds its request. An id that a pending request uses is refused with
///   ``RequestIDError/Reason/inUse`` and the SDK call is not made.
/// - An SDK-assigned id is known only when `start` returns it, and a reply can come first on
///   another thread. While any such start runs, a reply for an id that is not pending is parked,
///   and the start that returns that id claims it. A parked reply that no running start can claim
///   any more is counted as unknown, late or duplicate and dropped. If the SDK assigns an id that
///   is still pending, the newer request takes it and the older one throws
///   ``RequestIDError/Reason/reassigned``.
/// - Each request has one outcome, decided by the first of its reply, its timeout, the calling
///   task's cancellation and ``failAll(_:)``, as with ``withCallback(isolation:timeout:onDiscard:_:)``.
///   A timeout or a cancellation calls the SDK's `cancel` with the request's id, outside every
///   lock, and on the scheduler if one is given.
/// - An id belongs to one request from the moment the caller or the SDK names it until the SDK
///   is done with it: until its reply came, or, once its caller left, until its cancel returned
///   or was refused by the scheduler, or its late reply came. Meanwhile a caller-assigned request
///   for the id is refused with ``RequestIDError/Reason/inUse``, and a reply for it is the old
///   request's late reply. ``Statistics/awaitingCancel`` counts the ids held this way.
/// - The SDK's cancel runs only while its id still belongs to its request. If the late reply
///   came first, or the SDK already gave the id to a newer request, the cancel is skipped and
///   counted in ``Statistics/skippedCancels``: a cancel decided before a newer request took the
///   id never stops it, however the cancel, the newer start and the late reply interleave.
/// - Without a `cancel` (an SDK that cannot withdraw a request, such as hiredis or an MQTT
///   publish), the request goes on in the SDK after its caller left, and its reply will come: the
///   id stays reserved until that late reply, a newer SDK-assigned request with the id, or
///   ``failAll(_:)``. ``Statistics/awaitingLateReply`` counts such ids. At most
///   `reservedIDLimit` stay reserved: past it the oldest reservation is released and counted in
///   ``Statistics/releasedReservations``, so an SDK that drops requests never leaves every id
///   refused.
/// - Otherwise an id is free again as soon as a reply or ``failAll(_:)`` takes its request from
///   the table, or its caller returns or throws. Nothing of a request stays in the table after
///   its caller is back and its cancel, if any, has returned.
/// - A reply that finds no request never crashes. It is counted in ``statistics`` as unknown,
///   duplicate or late, and a success value goes to `onDiscard`. The table remembers how its last
///   128 ended ids ended to tell these apart; an id older than that counts as unknown.
/// - The table never calls the SDK, `onDiscard` or a completion while it holds its lock, so the
///   SDK may call ``complete(_:with:)`` from inside `start`, `cancel` or `onDiscard`.
///
/// A table may serve caller-assigned and SDK-assigned requests at once, but a parked reply is
/// only ever claimed by an SDK-assigned start.
public final class PendingRequests<ID: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let storage: PendingRequestsStorage<ID, Value>

    /// Creates an empty table.
    ///
    /// - Parameters:
    ///   - scheduler: Where the SDK's `cancel` must run, for an SDK that must be called from its
    ///     own thread. Nil runs it where the request's gate calls its cancel handle. A cancel the
    ///     scheduler refuses is not made.
    ///   - cancel: Asks the SDK to stop the request with this id. Called at most once per request,
    ///     only when its timeout or its caller's cancellation decided its outcome. Nil if the SDK
    ///     cannot cancel a request: the id of a request whose caller left then stays reserved
    ///     until its late reply comes (see the contract above).
    ///   - reservedIDLimit: Without a `cancel`, how many ids of callers that left may stay
    ///     reserved for their late replies. Past it the oldest reservation is released: a reply
    ///     that comes later still for that id would meet whichever request holds it then. Keep it
    ///     well below the size of the SDK's id space, such as 65,535 MQTT message ids. Must be
    ///     positive.
    ///   - onDiscard: Receives each success value that reached no caller, exactly once: a reply
    ///     that lost against a timeout, a cancellation or ``failAll(_:)``, and a reply that found no
    ///     request. Never receives a value a caller returned.
    public init(
        scheduler: SDKScheduler? = nil,
        cancel: (@Sendable (ID) -> Void)? = nil,
        reservedIDLimit: Int = 4_096,
        onDiscard: (@Sendable (Value) -> Void)? = nil
    ) {
        precondition(
            reservedIDLimit > 0,
            "PendingRequests(reservedIDLimit:) must be positive; it bounds the ids kept for late replies")
        self.storage = PendingRequestsStorage(
            scheduler: scheduler, onDiscard: onDiscard, cancel: cancel, reservedIDLimit: reservedIDLimit)
    }

    /// Sends a request under an id the caller chose and waits for the reply with that id.
    ///
    /// The id is registered before `start` runs, so a reply the SDK gives inside `start` finds it.
    /// If `start` throws, that error is the outcome unless a reply decided first.
    ///
    /// ```swift
    /// let reply = try await calls.request(id: nextID(), timeout: .seconds(5)) { id in
    ///     try rpc.send(method: "status", id: id)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - id: The request's id, free now (see the contract above).
    ///   - isolation: The caller's isolation; leave the default.
    ///   - timeout: How long to wait for the reply; nil (the default) waits forever. Zero or less
    ///     times out as soon as `start` returns without a reply.
    ///   - start: Makes the SDK call for `id`. It runs once, on the caller, before this function
    ///     suspends, and not at all if the id is in use.
    /// - Returns: The value of the reply.
    /// - Throws: The reply's error, the error `start` threw, ``RequestIDError`` if the id is in
    ///   use, the error passed to ``failAll(_:)``, `CancellationError`, or ``BridgeTimeoutError``.
    @inlinable @inline(__always)
    public func request(
        id: ID,
        isolation: isolated (any Actor)? = #isolation,
        timeout: Duration? = nil,
        _ start: (ID) throws -> Void
    ) async throws -> Value {
        let storage = self.storage
        var token: UInt64?
        var madeSDKCall = false
        let result: Result<Value, any Error>
        do {
            result = .success(
                try await withCallback(isolation: isolation, timeout: timeout, onDiscard: storage.onDiscard) {
                    completion in
                    guard let registered = storage.register(id, completion: completion) else {
                        throw RequestIDError(.inUse, id: String(describing: id))
                    }
                    token = registered
                    try start(id)
                    madeSDKCall = true
                    return storage.cancelHandle(for: id, token: registered)
                })
        } catch {
            result = .failure(error)
        }
        if let token {
            storage.requestEnded((id, token), outcome: .init(result), madeSDKCall: madeSDKCall)
        }
        return try result.get()
    }

    /// Sends a request whose id the SDK assigns and waits for the reply with that id.
    ///
    /// `start` makes the SDK call and returns the id the SDK gave the request. A reply that
    /// arrives before `start` returns, on any thread, is kept for it. If `start` throws, that
    /// error is the outcome and no id is registered.
    ///
    /// ```swift
    /// try await publishes.request(timeout: .seconds(5)) { () throws -> Int32 in
    ///     var mid: Int32 = 0
    ///     try check(mosquitto_publish(client, &mid, topic, count, bytes, 1, false))
    ///     return mid
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - isolation: The caller's isolation; leave the default.
    ///   - timeout: How long to wait for the reply; nil (the default) waits forever. Zero or less
    ///     times out as soon as `start` returns without a reply.
    ///   - start: Makes the SDK call and returns the request's id. It runs once, on the caller,
    ///     before this function suspends.
    /// - Returns: The value of the reply.
    /// - Throws: The reply's error, the error `start` threw, ``RequestIDError`` if the SDK gave
    ///   the id to a newer request, the error passed to ``failAll(_:)``, `CancellationError`, or
    ///   ``BridgeTimeoutError``.
    @inlinable @inline(__always)
    public func request(
        isolation: isolated (any Actor)? = #isolation,
        timeout: Duration? = nil,
        _ start: () throws -> ID
    ) async throws -> Value {
        let storage = self.storage
        var registration: (id: ID, token: UInt64)?
        let result: Result<Value, any Error>
        do {
            result = .success(
                try await withCallback(isolation: isolation, timeout: timeout, onDiscard: storage.onDiscard) {
                    completion in
                    let token = storage.beginStart()
                    let id: ID
                    do {
                        id = try start()
                    } catch {
                        storage.startThrew(token)
                        throw error
                    }
                    guard storage.startReturned(token, id: id, completion: completion) else { return nil }
                    registration = (id, token)
                    return storage.cancelHandle(for: id, token: token)
                })
        } catch {
            result = .failure(error)
        }
        storage.requestEnded(registration, outcome: .init(result), madeSDKCall: registration != nil)
        return try result.get()
    }

    /// Delivers the SDK's reply for `id` to the request waiting for it.
    ///
    /// Call it from the SDK's global reply callback, on any thread, any number of times. A reply
    /// that finds no request is counted in ``statistics`` and its success value goes to
    /// `onDiscard`.
    ///
    /// - Parameters:
    ///   - id: The id the SDK reported.
    ///   - result: The reply's value or error.
    /// - Returns: `true` if this reply decided a request's outcome. `false` if it found no request,
    ///   was parked for a request still starting, or lost against a timeout or a cancellation.
    @inlinable @discardableResult
    public func complete(_ id: ID, with result: Result<Value, any Error>) -> Bool {
        storage.complete(id, with: result)
    }

    /// Fails every pending request with `error`, for example when the connection drops.
    ///
    /// Requests whose SDK-assigned start is running fail with `error` when it returns, unless a
    /// reply parked before this call is theirs. Replies that arrive later for these ids are
    /// counted as late. Requests started after this call are not affected.
    ///
    /// - Parameter error: The error every pending caller throws.
    /// - Returns: How many pending requests this call failed. A request whose outcome was already
    ///   decided is not counted.
    @inlinable @discardableResult
    public func failAll(_ error: any Error) -> Int {
        storage.failAll(error)
    }

    /// The table's counters, read atomically.
    public var statistics: Statistics {
        storage.statistics
    }
}
