// Bad-adapter gallery, keyed requests over one global reply callback: WRONG ON PURPOSE. See
// Gallery.swift.

import LegacyBridge
import LegacyBridgeConformance
import LegacySimulator

/// WRONG ON PURPOSE. An id → checked continuation dictionary whose disconnect handler resumes
/// every continuation and leaves the entries in place.
///
/// Why it is wrong: a disconnect that the SDK reports only through its disconnect callback is
/// handled, but the dictionary still holds every continuation it resumed. The next reply for one of
/// those ids, a late reply the SDK sends after the drop, finds the entry and resumes the
/// continuation a second time: the process traps (modelcontextprotocol/swift-sdk#113).
/// Flagged by: `keyed-disconnect-fails-all` (a crash).
public struct ContinuationDictionaryAdapter: KeyedRequestAdapter {
    /// Creates the adapter.
    public init() {}
    /// `continuation-dictionary`.
    public var name: String { "continuation-dictionary" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: an id → continuation dictionary whose disconnect handler resumes every entry and keeps them"
    }

    /// Installs the callbacks and returns a session over the dictionary.
    /// - Parameter connection: The connection.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ connection: LegacyRPCConnection) async throws -> any KeyedRequestSession {
        let waiters = LockedBox<[UInt64: CheckedContinuation<LegacyRPCAnswer, any Error>]>([:])
        connection.setHandlers(
            onReply: { reply in
                guard reply.attempt == 1 else { return }
                waiters.withLock { $0.removeValue(forKey: reply.id) }?.resume(with: reply.result)
            },
            onDisconnect: {
                for waiter in waiters.withLock({ $0.values }) {
                    waiter.resume(throwing: LegacySDKError.disconnected)  // WRONG: the entries stay
                }
            })
        return Session(connection: connection, waiters: waiters)
    }

    private struct Session: KeyedRequestSession {
        let connection: LegacyRPCConnection
        let waiters: LockedBox<[UInt64: CheckedContinuation<LegacyRPCAnswer, any Error>]>

        func request(id: UInt64, timeout: Duration?) async throws -> LegacyRPCAnswer {
            let waiters = self.waiters
            let connection = self.connection
            /// Ends the request with `error` if it is still waiting.
            @Sendable func abandon(_ error: any Error) {
                guard let waiter = waiters.withLock({ $0.removeValue(forKey: id) }) else { return }
                connection.cancel(id: id)
                waiter.resume(throwing: error)
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    waiters.withLock { $0[id] = continuation }
                    do {
                        try connection.send(id: id)
                    } catch {
                        waiters.withLock { $0.removeValue(forKey: id) }?.resume(throwing: error)
                        return
                    }
                    if Task.isCancelled { abandon(CancellationError()) }
                    if let timeout {
                        Task {
                            try? await Task.sleep(for: timeout)
                            abandon(BridgeTimeoutError(timeout: timeout))
                        }
                    }
                }
            } onCancel: {
                abandon(CancellationError())
            }
        }

        var pendingCount: Int { waiters.withLock { $0.count } }
    }
}

/// WRONG ON PURPOSE. A table of pending requests whose cancel handle cancels the SDK request and
/// forgets to remove the entry.
///
/// Why it is wrong: each request's outcome goes through `withCallback`, so a timeout or a
/// cancellation resumes its caller once. But the entry stays in the table: a request that the SDK
/// never answers leaks one entry per timeout, and the table grows for the life of the connection
/// (superwall/expo-superwall#160).
/// Flagged by: `keyed-timeout-and-cancel-leave-nothing`.
public struct LeakingTableAdapter: KeyedRequestAdapter {
    /// Creates the adapter.
    public init() {}
    /// `leaking-request-table`.
    public var name: String { "leaking-request-table" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a timeout or a cancellation cancels the SDK request but leaves its entry in the table"
    }

    /// Installs the callbacks and returns a session over the table.
    /// - Parameter connection: The connection.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ connection: LegacyRPCConnection) async throws -> any KeyedRequestSession {
        let table = LockedBox<[UInt64: Completion<LegacyRPCAnswer>]>([:])
        connection.setHandlers(
            onReply: { reply in
                guard reply.attempt == 1 else { return }
                if let completion = table.withLock({ $0.removeValue(forKey: reply.id) }) {
                    completion(reply.result)
                }
            },
            onDisconnect: {
                let all = table.withLock { table in
                    defer { table.removeAll() }
                    return table.values
                }
                for completion in all { completion.fail(LegacySDKError.disconnected) }
            })
        return Session(connection: connection, table: table)
    }

    private struct Session: KeyedRequestSession {
        let connection: LegacyRPCConnection
        let table: LockedBox<[UInt64: Completion<LegacyRPCAnswer>]>

        func request(id: UInt64, timeout: Duration?) async throws -> LegacyRPCAnswer {
            let connection = self.connection
            let table = self.table
            return try await withCallback(timeout: timeout) { completion in
                table.withLock { $0[id] = completion }
                do {
                    try connection.send(id: id)
                } catch {
                    table.withLock { _ = $0.removeValue(forKey: id) }
                    throw error
                }
                return CancelHandle { connection.cancel(id: id) }  // WRONG: the entry stays in the table
            }
        }

        var pendingCount: Int { table.withLock { $0.count } }
    }
}

/// WRONG ON PURPOSE. Registers a request's id after the send returned.
///
/// Why it is wrong: "the reply comes later" holds until the SDK answers inside the send, from a
/// cache or a local error path. That reply finds no entry and is dropped, and the caller waits
/// for a reply that already came. Register the id before the send.
/// Flagged by: `keyed-synchronous-reply`.
public struct RegisterAfterSendAdapter: KeyedRequestAdapter {
    /// Creates the adapter.
    public init() {}
    /// `register-after-send`.
    public var name: String { "register-after-send" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: registers the request's id after the send returned (a reply inside the send is lost)"
    }

    /// Installs the callbacks and returns a session over the table.
    /// - Parameter connection: The connection.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ connection: LegacyRPCConnection) async throws -> any KeyedRequestSession {
        let table = LockedBox<[UInt64: Completion<LegacyRPCAnswer>]>([:])
        connection.setHandlers(
            onReply: { reply in
                guard reply.attempt == 1 else { return }
                if let completion = table.withLock({ $0.removeValue(forKey: reply.id) }) {
                    completion(reply.result)
                }
            },
            onDisconnect: {
                let all = table.withLock { table in
                    defer { table.removeAll() }
                    return table.values
                }
                for completion in all { completion.fail(LegacySDKError.disconnected) }
            })
        return Session(connection: connection, table: table)
    }

    private struct Session: KeyedRequestSession {
        let connection: LegacyRPCConnection
        let table: LockedBox<[UInt64: Completion<LegacyRPCAnswer>]>

        func request(id: UInt64, timeout: Duration?) async throws -> LegacyRPCAnswer {
            let connection = self.connection
            let table = self.table
            return try await withCallback(timeout: timeout) { completion in
                try connection.send(id: id)
                table.withLock { $0[id] = completion }  // WRONG: a reply inside the send came first
                return CancelHandle {
                    guard table.withLock({ $0.removeValue(forKey: id) }) != nil else { return }
                    connection.cancel(id: id)
                }
            }
        }

        var pendingCount: Int { table.withLock { $0.count } }
    }
}
