// The one file of PostgresClient that calls C (libpq's asynchronous API).
//
// It is the only place with raw pointers. Everything above it speaks Swift values:
// LibpqDriver's start/enqueue/withdraw/listen/unlisten/close, PostgresResult, PostgresError.
//
// Threading: a PGconn is not thread-safe. A LibpqDriver is used on its pool's SDKLoop thread only
// (posted jobs and the loop's handlers); every call checks that and counts any call that is not.
// The one exception is PQcancel, which libpq makes safe from any thread on a PGcancel object, and
// which blocks on a network round trip of its own: it runs on an OffloadPool thread, never on the
// loop, where it would stall every connection of the pool.
//
// The loop: libpq's non-blocking API on the library's descriptor loop. PQconnectPoll says which
// way to watch the socket while connecting; then the socket is watched for reading, and for
// writing while PQflush has bytes left. A readable socket runs PQconsumeInput, PQnotifies, and
// PQgetResult while PQisBusy is false. One statement runs at a time per connection; the others
// wait in the driver's queue.
//
// Cancel: a query whose caller left is removed from the queue if it was not sent. If it is
// running, the server is asked to cancel it (PQcancel); it then ends with SQLSTATE 57014, which
// reaches no caller and is counted late, and the connection goes on with the next query. A cancel
// request stops whatever the connection runs when the server gets it, so the next query is not
// sent until PQcancel has returned: a cancelled query that ended by itself meanwhile must not
// hand its cancel on to the next caller's query.

import CLibpq
import LegacyBridge
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A `PGcancel`, handed to the thread that sends the cancel request and freed there.
private struct CancelRequest: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Owns one libpq connection. Every method but `init` runs on the pool's loop thread.
///
/// `@unchecked Sendable`: it is handed to the loop once and touched only there afterwards; its
/// counters and `outstanding` are atomic.
final class LibpqDriver: @unchecked Sendable {
    typealias Done = @Sendable (Result<PostgresResult, any Error>) -> Void

    private struct Query {
        /// The caller's request id; nil for the driver's own LISTEN and UNLISTEN.
        let id: UInt64?
        let sql: String
        let parameters: [String?]
        let probe: CallProbe<PostgresResult>
        let done: Done
    }

    private struct Listener {
        let run: UInt64
        let sink: EventSink<PostgresNotification>
    }

    private enum Phase {
        case new, connecting, ready, ended(PostgresError)
    }

    let counters: PostgresCounters
    /// Queries the pool gave this connection that have not ended (counted by the pool when it
    /// picks the connection, uncounted here when they end), to pick the least busy.
    let outstanding = Atomic<Int>(0)
    /// Statements sent on this connection.
    let statements = Atomic<Int>(0)
    /// The server process serving this connection (`PQbackendPID`), once connected; else 0.
    let backendPID = Atomic<Int32>(0)
    /// Whether the connection is up: connected and not lost. The pool picks only such connections.
    let isUp = Atomic<Bool>(false)
    private let conninfo: String
    private let cancelPool: OffloadPool
    private weak var loop: SDKLoop?
    private var connection: OpaquePointer?
    private var phase = Phase.new
    private var connected: (@Sendable (Result<Void, PostgresError>) -> Void)?
    private var queue: [Query] = []
    private var active: Query?
    private var outcome: Result<PostgresResult, PostgresError>?
    private var watch: DescriptorWatch?
    private var listeners: [String: Listener] = [:]
    private var ownerThread: pthread_t?
    /// A cancel request for the active query is on its way to the server: nothing else is sent
    /// until it has arrived, since it stops whatever the connection runs then.
    private var cancelInFlight = false

    init(conninfo: String, counters: PostgresCounters, cancelPool: OffloadPool) {
        self.conninfo = conninfo
        self.counters = counters
        self.cancelPool = cancelPool
    }

    /// Counts a libpq call made off the loop thread.
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

    private static func message(_ connection: OpaquePointer?) -> String {
        guard let connection, let text = PQerrorMessage(connection) else { return "unknown error" }
        let message = String(cString: text)
        return message.hasSuffix("\n") ? String(message.dropLast()) : message
    }

    // MARK: Connection

    /// Starts a non-blocking connect (`PQconnectStart`); `completion` gets the outcome.
    func start(on loop: SDKLoop, completion: @escaping @Sendable (Result<Void, PostgresError>) -> Void) {
        checkThread()
        guard case .new = phase else {
            completion(.failure(.notConnected))
            return
        }
        self.loop = loop
        connected = completion
        guard let connection = PQconnectStart(conninfo) else {
            end(.connectFailed("libpq could not allocate a connection"))
            return
        }
        self.connection = connection
        // The server's notices (and the FATAL a dying server sends) would go to stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        guard PQstatus(connection) != CONNECTION_BAD else {
            end(.connectFailed(Self.message(connection)))
            return
        }
        phase = .connecting
        // libpq's rule: begin as if PQconnectPoll had asked for writability.
        poll(PGRES_POLLING_WRITING)
    }

    /// Watches the connection's socket for `interest`; libpq may change sockets while connecting.
    private func watchSocket(_ interest: DescriptorEvents) {
        guard let connection, let loop else { return }
        let socket = PQsocket(connection)
        if let watch, watch.descriptor != socket {
            watch.cancel()
            self.watch = nil
        }
        guard socket >= 0 else { return }
        if let watch {
            watch.update(interest: interest)
        } else {
            do {
                watch = try loop.watch(socket, for: interest) { [self] events in ready(events) }
            } catch {
                end(.notConnected)
            }
        }
    }

    private func poll(_ status: PostgresPollingStatusType) {
        switch status {
        case PGRES_POLLING_READING:
            watchSocket(.readable)
        case PGRES_POLLING_WRITING:
            watchSocket(.writable)
        case PGRES_POLLING_OK:
            guard let connection else { return }
            phase = .ready
            _ = PQsetnonblocking(connection, 1)
            backendPID.store(PQbackendPID(connection), ordering: .relaxed)
            isUp.store(true, ordering: .relaxed)
            watchSocket(.readable)
            let completion = connected
            connected = nil
            completion?(.success(()))
            sendNext()
        default:
            end(.connectFailed(Self.message(connection)))
        }
    }

    /// The socket is ready: connect, write or read, by phase.
    private func ready(_ events: DescriptorEvents) {
        guard let connection else { return }
        checkThread()
        switch phase {
        case .connecting:
            poll(PQconnectPoll(connection))
        case .ready:
            if events.contains(.writable) { flush() }
            if !events.isDisjoint(with: [.readable, .error, .hangUp, .invalid]) { read() }
        case .new, .ended:
            break
        }
    }

    /// Ends the connection: the active query, every queued one and every listener fail with
    /// `error`, and the connection is closed (after its watch ends: the number may be reused).
    private func end(_ error: PostgresError) {
        if case .ended = phase { return }
        if case .ready = phase, error != .notConnected { counters.connectionsLost.add(1, ordering: .relaxed) }
        phase = .ended(error)
        isUp.store(false, ordering: .relaxed)
        watch?.cancel()
        watch = nil
        if let connection { PQfinish(connection) }
        connection = nil
        let failed = (active.map { [$0] } ?? []) + queue
        active = nil
        queue.removeAll()
        outstanding.subtract(failed.filter { $0.id != nil }.count, ordering: .relaxed)
        let completion = connected
        connected = nil
        let ended = listeners.values
        listeners.removeAll()
        completion?(.failure(error))
        for query in failed { query.done(.failure(error)) }
        for listener in ended { listener.sink.finish(throwing: error) }
    }

    /// Closes the connection; everything pending fails with ``PostgresError/notConnected``.
    func close() {
        checkThread()
        end(.notConnected)
    }

    // MARK: Queries

    /// Queues a query; `done` gets its result (the last statement's, or the first error).
    func enqueue(
        _ sql: String, _ parameters: [String?], id: UInt64?, probe: CallProbe<PostgresResult> = .off,
        done: @escaping Done
    ) {
        if case .ended(let error) = phase {
            if id != nil { outstanding.subtract(1, ordering: .relaxed) }
            done(.failure(error))
            return
        }
        queue.append(Query(id: id, sql: sql, parameters: parameters, probe: probe, done: done))
        sendNext()
    }

    /// The caller of query `id` left. Not sent yet: it leaves the queue. Running: the server is
    /// asked to cancel it, from an OffloadPool thread (PQcancel blocks on the network).
    func withdraw(id: UInt64) {
        if let index = queue.firstIndex(where: { $0.id == id }) {
            let query = queue.remove(at: index)
            outstanding.subtract(1, ordering: .relaxed)
            counters.withdrawnBeforeSending.add(1, ordering: .relaxed)
            query.probe.cancel {}
            return
        }
        guard let query = active, query.id == id, let connection else { return }
        checkThread()
        query.probe.cancel { sendCancelRequest(connection) }
    }

    /// Asks the server to stop the running statement: PQcancel, on an OffloadPool thread.
    private func sendCancelRequest(_ connection: OpaquePointer) {
        guard let cancel = PQgetCancel(connection) else { return }
        counters.cancelRequests.add(1, ordering: .relaxed)
        let request = CancelRequest(pointer: cancel)
        let (counters, scheduler) = (self.counters, loop?.scheduler)
        do {
            try cancelPool.execute { [self] in
                if scheduler?.isCurrent == true { counters.cancelRequestsOnLoopThread.add(1, ordering: .relaxed) }
                var buffer = [CChar](repeating: 0, count: 256)
                _ = PQcancel(request.pointer, &buffer, Int32(buffer.count))
                PQfreeCancel(request.pointer)
                // The server has the request: the next query can no longer be hit by it.
                try? scheduler?.post { [self] in
                    cancelInFlight = false
                    sendNext()
                }
            }
            cancelInFlight = true
        } catch {
            PQfreeCancel(cancel)  // the pool is shut down: the client is closing anyway
        }
    }

    private func sendNext() {
        guard case .ready = phase, active == nil, !cancelInFlight, !queue.isEmpty, let connection else { return }
        checkThread()
        let query = queue.removeFirst()
        let sent = Self.withCStrings(query.parameters) { values in
            PQsendQueryParams(connection, query.sql, Int32(query.parameters.count), nil, values, nil, nil, 0)
        }
        guard sent == 1 else {
            let error = PostgresError.connectionLost(Self.message(connection))
            if query.id != nil { outstanding.subtract(1, ordering: .relaxed) }
            query.done(.failure(error))
            if PQstatus(connection) == CONNECTION_BAD { end(error) } else { sendNext() }
            return
        }
        active = query
        outcome = nil
        statements.add(1, ordering: .relaxed)
        flush()
    }

    /// Writes what libpq has buffered; watches for writability while some is left.
    private func flush() {
        guard let connection else { return }
        switch PQflush(connection) {
        case 0: watchSocket(.readable)
        case 1: watchSocket([.readable, .writable])
        default: end(.connectionLost(Self.message(connection)))
        }
    }

    private func read() {
        guard let connection else { return }
        guard PQconsumeInput(connection) == 1 else {
            end(.connectionLost(Self.message(connection)))
            return
        }
        deliverNotifications()
        while self.connection != nil, active != nil, PQisBusy(connection) == 0 {
            if let result = PQgetResult(connection) {
                absorb(result)
                PQclear(result)
            } else {
                finishActive()
            }
        }
        deliverNotifications()
        if self.connection != nil, PQstatus(connection) == CONNECTION_BAD {
            end(.connectionLost(Self.message(connection)))
        }
    }

    /// One PGresult of the active query: the last success, or the first error, is its outcome.
    private func absorb(_ result: OpaquePointer) {
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            if case .failure = outcome { return }
            var copy = PostgresResult()
            let columns = PQnfields(result)
            let rows = PQntuples(result)
            copy.columns = (0..<columns).map { String(cString: PQfname(result, $0)) }
            copy.rows = (0..<rows).map { row in
                (0..<columns).map { column in
                    PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                }
            }
            copy.commandTag = String(cString: PQcmdStatus(result))
            outcome = .success(copy)
        default:
            if case .failure = outcome { return }
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let text = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? ""
            outcome = .failure(.server(sqlState: state, message: text))
        }
    }

    private func finishActive() {
        guard let query = active else { return }
        active = nil
        if query.id != nil { outstanding.subtract(1, ordering: .relaxed) }
        query.done((outcome ?? .success(PostgresResult())).mapError { $0 })
        outcome = nil
        sendNext()
    }

    private static func withCStrings<R>(
        _ values: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) -> R {
        let copies: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0) } ?? nil }
        defer { for copy in copies { free(copy) } }
        let pointers = copies.map { $0.map { UnsafePointer($0) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
    }

    // MARK: LISTEN / NOTIFY

    /// LISTEN for a new run of a channel's shared subscription.
    func listen(channel: String, run: UInt64, sink: EventSink<PostgresNotification>) {
        if case .ended(let error) = phase {
            sink.finish(throwing: error)
            return
        }
        listeners[channel] = Listener(run: run, sink: sink)
        let counters = self.counters
        enqueue("LISTEN " + Self.identifier(channel), [], id: nil) { [self] result in
            switch result {
            case .success: counters.listens.add(1, ordering: .relaxed)
            case .failure(let error):
                guard listeners[channel]?.run == run else { return }
                listeners[channel] = nil
                sink.finish(throwing: error)
            }
        }
    }

    /// UNLISTEN once the last consumer of that run left.
    func unlisten(channel: String, run: UInt64) {
        guard listeners[channel]?.run == run else { return }
        listeners[channel] = nil
        let counters = self.counters
        enqueue("UNLISTEN " + Self.identifier(channel), [], id: nil) { result in
            if case .success = result { counters.unlistens.add(1, ordering: .relaxed) }
        }
    }

    private func deliverNotifications() {
        guard let connection else { return }
        while let notification = PQnotifies(connection) {
            let channel = String(cString: notification.pointee.relname)
            let payload = notification.pointee.extra.map { String(cString: $0) } ?? ""
            let sender = notification.pointee.be_pid
            PQfreemem(notification)
            counters.notifications.add(1, ordering: .relaxed)
            _ = listeners[channel]?.sink.yield(
                PostgresNotification(channel: channel, payload: payload, senderPID: sender))
        }
    }

    /// A channel name as a quoted SQL identifier (case kept, quotes doubled).
    private static func identifier(_ name: String) -> String {
        "\"" + name.flatMap { $0 == "\"" ? ["\"", "\""] : [$0] } + "\""
    }
}

enum Libpq {
    /// libpq's version as a number, e.g. 150020 for 15.20 (`PQlibVersion`).
    static var version: Int { Int(PQlibVersion()) }
}
