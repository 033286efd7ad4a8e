// The vocabulary of keyed requests: their error and their counters.

/// The error of a keyed request whose id collided with another request's.
///
/// ```swift
/// do {
///     let reply = try await pending.request(id: 7) { id in try sdk.send(id) }
/// } catch let error as RequestIDError where error.reason == .inUse {
///     // another request still waits for id 7: the SDK call was not made
/// }
/// ```
public struct RequestIDError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why the id could not be used.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        @usableFromInline let code: Int

        /// The caller chose an id that a pending request already uses. The request was refused
        /// before its SDK call.
        public static var inUse: Reason { Reason(code: 1) }

        /// The SDK assigned the request's id to a newer request while it still waited, so no
        /// reply can reach it any more.
        public static var reassigned: Reason { Reason(code: 2) }

        /// A readable name: "in use" or "reassigned".
        public var description: String {
            code == 1 ? "in use" : "reassigned"
        }
    }

    /// Why the id could not be used.
    public let reason: Reason
    /// The id, as `String(describing:)` renders it.
    public let id: String

    /// Creates the error for `id`.
    ///
    /// - Parameters:
    ///   - reason: Why the id could not be used.
    ///   - id: The id, as text.
    public init(_ reason: Reason, id: String) {
        self.reason = reason
        self.id = id
    }

    /// A readable message naming the id, for example
    /// "request id 7 is in use by a pending request".
    public var description: String {
        if reason == .inUse {
            return
                "request id \(id) is in use by a pending request, or reserved until the late reply of a request whose caller left; the request was not started"
        }
        return "request id \(id) was reassigned by the SDK to a newer request"
    }
}

extension PendingRequests {
    /// Counters of a ``PendingRequests`` table, read through ``PendingRequests/statistics``.
    ///
    /// Every request that got past its id check is counted once when its caller returns or
    /// throws, under the outcome the caller saw. Every reply that found no request is counted once
    /// as unknown, duplicate or late.
    public struct Statistics: Sendable, Hashable {
        /// Requests waiting for their reply now.
        public var pending: Int
        /// Requests that returned a value.
        public var succeeded: Int
        /// Requests that threw an error other than a timeout or a cancellation: a failure reply,
        /// ``PendingRequests/failAll(_:)``, an error thrown by `start`, a reassigned id.
        public var failed: Int
        /// Requests that threw ``BridgeTimeoutError``.
        public var timedOut: Int
        /// Requests that threw `CancellationError`.
        public var cancelled: Int
        /// Requests refused because their caller-assigned id was in use. They never started.
        public var refused: Int
        /// Replies for ids the table does not know: never used, or used too long ago to be
        /// remembered.
        public var unknownReplies: Int
        /// Replies for an id whose request had already been completed by a reply.
        public var duplicateReplies: Int
        /// Replies for an id whose request had ended another way: timeout, cancellation,
        /// ``PendingRequests/failAll(_:)``, or an error thrown by its start.
        public var lateReplies: Int
        /// Cancels not made because a newer request had taken the id before the cancel could
        /// run: calling the SDK would have stopped that newer request.
        public var skippedCancels: Int
        /// Ids whose caller left before their reply, kept reserved until that late reply comes
        /// (only in a table without an SDK `cancel`: the SDK cannot withdraw the request, so its
        /// reply will come). ``PendingRequests/failAll(_:)`` frees them.
        public var awaitingLateReply: Int
        /// Ids whose caller left before their reply, held until the SDK's cancel for them ran or
        /// their late reply came (only in a table with an SDK `cancel`). A caller-assigned
        /// request for such an id is refused meanwhile, so the old request's reply or cancel
        /// never reaches it.
        public var awaitingCancel: Int
        /// Reservations released because ``awaitingLateReply`` reached the table's
        /// `reservedIDLimit`: the oldest reserved id was freed for reuse before its late reply.
        public var releasedReservations: Int
    }
}
