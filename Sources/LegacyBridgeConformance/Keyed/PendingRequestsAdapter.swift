import LegacyBridge
import LegacySimulator

/// The library's keyed-request adapter: a `PendingRequests` table fed by the connection's one
/// reply callback. A disconnect fails every request still pending at once.
package struct PendingRequestsAdapter: KeyedRequestAdapter {
    /// Creates the adapter.
    package init() {}
    /// `pending-requests`.
    package var name: String { "pending-requests" }
    /// One line describing the adapter.
    package var summary: String {
        "PendingRequests over one global reply callback (the library's keyed-request bridge)"
    }

    /// Installs the connection's callbacks and returns a session over its table.
    /// - Parameter connection: The connection.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    package func open(_ connection: LegacyRPCConnection) async throws -> any KeyedRequestSession {
        let table = PendingRequests<UInt64, LegacyRPCAnswer>(cancel: { id in connection.cancel(id: id) })
        connection.setHandlers(
            onReply: { reply in
                // Only a request's first callback answers it: a later one (a duplicate, a report
                // after a reply, a late reply) may name an id that a newer request reuses.
                guard reply.attempt == 1 else { return }
                table.complete(reply.id, with: reply.result)
            },
            onDisconnect: { table.failAll(LegacySDKError.disconnected) })
        return Session(connection: connection, table: table)
    }

    private struct Session: KeyedRequestSession {
        let connection: LegacyRPCConnection
        let table: PendingRequests<UInt64, LegacyRPCAnswer>

        func request(id: UInt64, timeout: Duration?) async throws -> LegacyRPCAnswer {
            try await table.request(id: id, timeout: timeout) { id in try connection.send(id: id) }
        }

        var pendingCount: Int { table.statistics.pending }
    }
}
