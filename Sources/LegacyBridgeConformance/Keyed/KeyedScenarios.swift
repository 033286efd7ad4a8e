import Dispatch
import LegacyBridge
import LegacySimulator

/// The keyed-request contract: over a connection with one reply callback for every request, each
/// caller gets the reply to its own id exactly once, whatever order, duplicates or strangers the
/// replies come in, and nothing of an ended request stays behind.
///
/// Every order is forced: the lab holds replies on the SDK's threads (``ReplyReverser``), uses the
/// SDK's synchronous delivery, or waits for the SDK's counters before it disconnects or cancels.
enum KeyedScenarios {
    static let all: [Scenario<any KeyedRequestAdapter, LabContext>] = [
        outOfOrder, synchronousReply, disconnectFailsAll, timeoutAndCancelLeaveNothing,
    ]

    /// A connection on the lab's client, `behavior` per id, opened by `adapter`; stops the
    /// scenario when that fails.
    static func open(
        _ adapter: any KeyedRequestAdapter, _ context: LabContext,
        disconnectReport: SDKConnection.DisconnectReport = .synchronous, unknownRepliesPerMille: Int = 0,
        router: RPCRouter = RPCRouter(), behavior: @escaping @Sendable (UInt64) -> SimulatedBehavior
    ) async throws -> (LegacyRPCConnection, any KeyedRequestSession) {
        do {
            let connection = try SDKConnection(
                client: context.lab.sdk, disconnectReport: disconnectReport,
                unknownRepliesPerMille: unknownRepliesPerMille, seed: context.options.seed, handlers: router.handlers)
            let rpc = LegacyRPCConnection(connection: connection, router: router, behavior: behavior)
            return (rpc, try await adapter.open(rpc))
        } catch {
            throw ScenarioStop(check: .fail("could not open the adapter: \(error)"))
        }
    }

    /// Ends the scenario's connection: the adapter's callbacks are dropped and the connection is
    /// destroyed, so that the SDK lets go of them and the lab's client can be destroyed in turn.
    static func close(_ rpc: LegacyRPCConnection) {
        rpc.router.uninstall()
        try? rpc.connection.destroy()
    }

    /// Starts `session.request(id:timeout:)` in a task of the scenario's own.
    static func launch(
        _ session: any KeyedRequestSession, id: UInt64, timeout: Duration? = nil
    ) -> Task<Result<LegacyRPCAnswer, any Error>, Never> {
        ScenarioThreads.task {
            do { return .success(try await session.request(id: id, timeout: timeout)) } catch { return .failure(error) }
        }
    }

    /// The outcomes of `tasks` in order, or the ids of the callers not resumed within `bound`.
    static func outcomes(
        _ tasks: [(id: UInt64, task: Task<Result<LegacyRPCAnswer, any Error>, Never>)], within bound: Duration
    ) async -> Result<[Result<LegacyRPCAnswer, any Error>], NotResumed> {
        let done = LockedBox<[UInt64: Result<LegacyRPCAnswer, any Error>]>([:])
        let latch = FirstResultLatch<Bool>()
        for (id, task) in tasks {
            // On the scenario's own threads: an adapter elsewhere may hold the cooperative pool.
            _ = ScenarioThreads.task {
                let result = await task.value
                let count = done.withLock {
                    $0[id] = result
                    return $0.count
                }
                if count == tasks.count { latch.offer(true) }
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(bound.nanosecondsClamped))) {
            latch.offer(false)
        }
        _ = await latch.value()
        let results = done.withLock { $0 }
        let missing = tasks.map(\.id).filter { results[$0] == nil }
        guard missing.isEmpty else {
            for (id, task) in tasks where missing.contains(id) { task.cancel() }
            return .failure(NotResumed(ids: missing))
        }
        return .success(tasks.map { results[$0.id]! })
    }

    struct NotResumed: Error {
        var ids: [UInt64]
    }

    static func describe(_ result: Result<LegacyRPCAnswer, any Error>) -> String {
        switch result {
        case .success(let answer):
            return answer.answersID.map { "the answer to id \($0)" } ?? "the answer to an id nobody sent"
        case .failure(let error): return "error \(type(of: error)): \(error)"
        }
    }

    /// Waits until the adapter tracks no request, or fails saying how many it still tracks.
    static func nothingTracked(_ session: any KeyedRequestSession, after what: String) async -> Check? {
        guard await eventually({ session.pendingCount == 0 }) else {
            return .fail(
                "\(what), the adapter still tracks \(session.pendingCount) request(s): an entry of its id table leaked (remove it on every path that ends a request: reply, timeout, cancellation, disconnect)"
            )
        }
        return nil
    }

    static let outOfOrder = Scenario<any KeyedRequestAdapter, LabContext>(
        name: "keyed-out-of-order-replies",
        summary:
            "8 concurrent requests answered last first, each reply twice, replies for unknown ids in between: each caller gets the answer to its own id"
    ) { adapter, context in
        let count = 8
        let reverser = ReplyReverser(count: count, patience: context.lab.patience)
        let (rpc, session) = try await open(
            adapter, context, unknownRepliesPerMille: 1000,
            router: RPCRouter(beforeReply: reverser.before, afterReply: reverser.after),
            behavior: { _ in
                .wellBehaved.with {
                    $0.delivery = .freshThread
                    $0.outcomes = [.success, .success]
                }
            })
        defer { close(rpc) }
        let tasks = (1...UInt64(count)).map { (id: $0, task: launch(session, id: $0)) }
        let results: [Result<LegacyRPCAnswer, any Error>]
        switch await outcomes(tasks, within: Patience.bound) {
        case .success(let all): results = all
        case .failure(let missing):
            return .fail(
                "the callers of id(s) \(missing.ids) were not resumed within \(Patience.bound): their replies were lost or went to another caller"
            )
        }
        for (index, result) in results.enumerated() {
            let id = UInt64(index + 1)
            guard case .success(let answer) = result, answer.answersID == id else {
                return .fail(
                    "the caller of id \(id) got \(describe(result)): each caller must get the reply that names its id, whatever order replies come in"
                )
            }
        }
        if let problem = await nothingTracked(session, after: "after every caller got its answer") { return problem }
        guard await eventually({ rpc.connection.client.counters.rpcRepliesDuplicate >= UInt64(count) }) else {
            return .fail("the SDK never sent its duplicate replies (the lab's own failure)")
        }
        let counters = rpc.connection.client.counters
        guard reverser.reversed else {
            return .passWithNote("the replies did not all arrive in the lab in time to be reversed")
        }
        guard counters.rpcRepliesUnknownID > 0 else {
            return .passWithNote("the SDK happened to send no reply for an unknown id")
        }
        return .pass
    }

    static let synchronousReply = Scenario<any KeyedRequestAdapter, LabContext>(
        name: "keyed-synchronous-reply",
        summary: "the SDK replies inside the send, before it returns: the reply finds its caller"
    ) { adapter, context in
        let (rpc, session) = try await open(adapter, context, behavior: { _ in .synchronous })
        defer { close(rpc) }
        let task = launch(session, id: 1)
        let result: Result<LegacyRPCAnswer, any Error>
        switch await outcomes([(1, task)], within: Patience.bound) {
        case .success(let all): result = all[0]
        case .failure:
            return .fail(
                "the caller was not resumed within \(Patience.bound) of a reply the SDK gave inside the send: the adapter registered the id after sending, so the reply found nobody. Register the id before the send"
            )
        }
        guard case .success(let answer) = result, answer.answersID == 1 else {
            return .fail("the caller of id 1 got \(describe(result)), expected the answer to id 1")
        }
        if let problem = await nothingTracked(session, after: "after the caller got its answer") { return problem }
        return .pass
    }

    static let disconnectFailsAll = Scenario<any KeyedRequestAdapter, LabContext>(
        name: "keyed-disconnect-fails-all",
        summary:
            "6 requests pending when the connection drops silently (only the disconnect callback tells), then a late reply for each: every caller throws once, the late replies are ignored"
    ) { adapter, context in
        let count = 6
        let router = RPCRouter()
        let (rpc, session) = try await open(
            adapter, context, disconnectReport: .silent, router: router,
            behavior: { _ in SimulatedBehavior.neverCompletes.with { $0.lateCallbackAfterCancel = true } })
        defer { close(rpc) }
        let tasks = (1...UInt64(count)).map { (id: $0, task: launch(session, id: $0)) }
        guard await eventually({ rpc.connection.client.counters.rpcRequestsPending == UInt64(count) }) else {
            for (_, task) in tasks { task.cancel() }
            return .fail("the adapter sent \(rpc.connection.client.counters.rpcRequestsSent) of \(count) requests")
        }
        do {
            try rpc.connection.disconnect()
        } catch {
            return .fail("could not disconnect (the lab's own failure): \(error)")
        }
        let results: [Result<LegacyRPCAnswer, any Error>]
        switch await outcomes(tasks, within: Patience.bound) {
        case .success(let all): results = all
        case .failure(let missing):
            return .fail(
                "the callers of id(s) \(missing.ids) were not resumed within \(Patience.bound) of a disconnect: fail every pending request when the SDK says it disconnected"
            )
        }
        for (index, result) in results.enumerated() where (try? result.get()) != nil {
            return .fail("the caller of id \(index + 1) got \(describe(result)) after a disconnect, expected an error")
        }
        // The late replies come after the disconnect callback returned: each names an id whose
        // request has ended, and must be ignored.
        guard await eventually({ router.replies >= count }) else {
            return .fail("the SDK's late replies never came (the lab's own failure)")
        }
        if let problem = await nothingTracked(session, after: "after the disconnect and its late replies") {
            return problem
        }
        return .pass
    }

    static let timeoutAndCancelLeaveNothing = Scenario<any KeyedRequestAdapter, LabContext>(
        name: "keyed-timeout-and-cancel-leave-nothing",
        summary:
            "a request times out, another is cancelled and then gets a late reply: each caller throws, the SDK request is cancelled by id, the adapter tracks nothing"
    ) { adapter, context in
        let router = RPCRouter()
        let (rpc, session) = try await open(
            adapter, context, router: router,
            behavior: { id in
                SimulatedBehavior.neverCompletes.with {
                    $0.cancelMode = .silent
                    $0.lateCallbackAfterCancel = id == 2
                }
            })
        defer { close(rpc) }
        var counters: SDKCounters { rpc.connection.client.counters }
        // Never answered: only the timeout ends it.
        let timed = launch(session, id: 1, timeout: .milliseconds(10))
        switch await outcomes([(1, timed)], within: Patience.bound) {
        case .success(let all):
            if case .success = all[0] {
                return .fail("a request the SDK never answers returned \(describe(all[0])), expected a timeout error")
            }
        case .failure:
            return .fail("the caller of a request with a 10 ms timeout was not resumed within \(Patience.bound)")
        }
        if let problem = await nothingTracked(session, after: "after its caller timed out") { return problem }
        guard await eventually({ counters.rpcRequestsPending == 0 }) else {
            return .fail("after the timeout the SDK request was still pending: cancel it by its id")
        }
        // Cancelled while pending; the SDK then sends a late reply for its id.
        let cancelled = launch(session, id: 2)
        guard await eventually({ counters.rpcRequestsPending == 1 }) else {
            cancelled.cancel()
            return .fail("the second request never reached the SDK")
        }
        let repliesBefore = router.replies
        cancelFromForeignThread(cancelled)
        switch await outcomes([(2, cancelled)], within: Patience.bound) {
        case .success(let all):
            guard case .failure(let error) = all[0], error is CancellationError else {
                return .fail("a cancelled caller got \(describe(all[0])), expected CancellationError")
            }
        case .failure:
            return .fail("a cancelled caller was not resumed within \(Patience.bound)")
        }
        guard await eventually({ counters.rpcRequestsPending == 0 }) else {
            return .fail("after the cancellation the SDK request was still pending: cancel it by its id")
        }
        guard await eventually({ router.replies > repliesBefore }) else {
            return .fail("the SDK's late reply never came (the lab's own failure)")
        }
        if let problem = await nothingTracked(session, after: "after a cancellation and the late reply that followed") {
            return problem
        }
        return .pass
    }
}

/// Holds the first reply of each of `count` requests on the SDK's thread until all have arrived,
/// then lets them reach the adapter last first, one at a time. Duplicates and replies for unknown
/// ids pass at once.
final class ReplyReverser: Sendable {
    private struct State {
        var arrived = 0
        /// The next id to pass; 0 once all passed.
        var turn: UInt64
        var inOrder = true
    }
    private let state: LockedBox<State>
    private let count: Int
    private let patience: Duration

    init(count: Int, patience: Duration) {
        self.count = count
        self.patience = patience
        self.state = LockedBox(State(turn: UInt64(count)))
    }

    /// Whether every held reply passed in its turn.
    var reversed: Bool { state.withLock { $0.inOrder && $0.turn == 0 } }

    @Sendable func before(_ reply: RawReply) {
        guard reply.attempt == 1, reply.requestID != 0, reply.status == 0 else { return }
        state.withLock { $0.arrived += 1 }
        let all = waitUntil(within: patience) { state.withLock { $0.arrived >= count } }
        let onTime = all && waitUntil(within: patience) { state.withLock { $0.turn == reply.id } }
        if !onTime { state.withLock { $0.inOrder = false } }
    }

    @Sendable func after(_ reply: RawReply) {
        guard reply.attempt == 1, reply.requestID != 0, reply.status == 0 else { return }
        state.withLock { if $0.turn == reply.id { $0.turn -= 1 } }
    }
}
