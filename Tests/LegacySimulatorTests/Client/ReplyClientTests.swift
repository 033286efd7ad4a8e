// LegacyReplyClient against the real simulated C SDK: one reply callback, requests matched by id.

import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

/// Waits until the SDK owes nothing for the reply client's requests, then returns the counters.
private func settled(
    isolation: isolated (any Actor)? = #isolation, _ replies: LegacyReplyClient
) async -> SDKCounters {
    _ = await eventually {
        let counters = replies.counters
        return counters.rpcRequestsLive == 0 && counters.contextsCreated == counters.contextsReleased + 1
    }
    return replies.counters
}

@Suite("LegacyReplyClient")
struct ReplyClientTests {
    @Test("A request under a chosen id and one under an SDK-assigned id each get their own reply")
    func chosenAndAssigned() async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        let chosen = try await replies.request(FetchRequest(path: "/chosen", responseSize: 24), id: 77)
        let assigned = try await replies.request(FetchRequest(path: "/assigned", responseSize: 8))
        #expect(chosen.message == "/chosen" && chosen.body == clientTestContent(requestID: chosen.requestID, count: 24))
        #expect(assigned.message == "/assigned" && assigned.body.count == 8)
        let counters = await settled(replies)
        #expect(counters.rpcRequestsSent == 2 && counters.rpcReplies == 2)
        #expect(replies.statistics.matched == 2 && replies.pendingCount == 0)
    }

    @Test("A synchronous reply to an SDK-assigned id comes before the id is known, and is claimed")
    func synchronousReplyBeforeAssignedID() async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        let response = try await replies.request(FetchRequest(path: "/sync"), behavior: .synchronous)
        #expect(response.message == "/sync")
        #expect(replies.statistics.claimedEarly == 1)
        #expect(replies.counters.callbacksSync == 1)
    }

    @Test("Concurrent requests answered out of order each get their own reply")
    func outOfOrder() async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        // The oldest request stays unanswered: every reply below is out of order.
        let held = ClientTestCall {
            try await replies.request(FetchRequest(path: "/held"), behavior: .neverCompletes)
        }
        #expect(await eventually { replies.pendingCount == 1 })
        let behavior = SimulatedBehavior.wellBehaved.with { $0.jitterMicroseconds = 2_000 }
        try await withThrowingTaskGroup(of: (Int, FetchResponse).self) { group in
            for index in 0..<64 {
                group.addTask {
                    (index, try await replies.request(FetchRequest(path: "/r\(index)"), behavior: behavior))
                }
            }
            for try await (index, response) in group { #expect(response.message == "/r\(index)") }
        }
        #expect(replies.counters.rpcRepliesOutOfOrder == 64)
        held.cancel()
        #expect(await held.outcome() == .cancelled)
        let counters = await settled(replies)
        #expect(counters.rpcReplies == 64 + 1)  // the held one's cancellation report
        // The cancellation report comes after the held request's waiter left: nobody takes it.
        #expect(replies.statistics.matched == 64 && replies.statistics.unmatched == 1)
    }

    @Test("Duplicates and replies for unknown ids are dropped and counted, never delivered")
    func duplicatesAndUnknownIDs() async throws {
        let replies = try LegacyReplyClient(
            client: try LegacyClient(), configuration: .init(unknownRepliesPerMille: 1000))
        let behavior = SimulatedBehavior.repeats([.success, .success, .failure])
        for index in 0..<10 {
            let response = try await replies.request(FetchRequest(path: "/d\(index)"), behavior: behavior)
            #expect(response.attempt == 1 && response.message == "/d\(index)")
        }
        let counters = await settled(replies)
        #expect(counters.rpcRepliesDuplicate == 20)
        #expect(counters.rpcRepliesUnknownID == 30)
        let statistics = replies.statistics
        #expect(statistics.matched == 10)
        #expect(statistics.duplicates == 20)
        #expect(statistics.unmatched == 50)
    }

    @Test("A failure reply throws the SDK's error")
    func failure() async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        let result = await clientTestResult {
            try await replies.request(FetchRequest(path: "/f"), behavior: .failing(.remote, message: "nope"))
        }
        #expect(throws: LegacySDKError.remote) { try result.get() }
    }

    @Test("A chosen id still waiting is refused without calling the SDK")
    func duplicateID() async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        let waiting = ClientTestCall {
            try await replies.request(FetchRequest(path: "/wait"), id: 5, behavior: .neverCompletes)
        }
        #expect(await eventually { replies.pendingCount == 1 })
        let second = await clientTestResult { try await replies.request(FetchRequest(path: "/again"), id: 5) }
        #expect(throws: LegacySDKError.duplicateID) { try second.get() }
        #expect(replies.counters.rpcRequestsSent == 1)
        waiting.cancel()
        #expect(await waiting.outcome() == .cancelled)
    }

    @Test(
        "Cancelling the calling task cancels the request by id; nothing stays pending",
        arguments: SimulatedBehavior.CancelMode.allCases.filter { $0 != .waits && $0 != .ignored })
    func cancellation(mode: SimulatedBehavior.CancelMode) async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        let behavior = SimulatedBehavior.neverCompletes.with { $0.cancelMode = mode }
        let call = ClientTestCall { try await replies.request(FetchRequest(path: "/c"), behavior: behavior) }
        #expect(await eventually { replies.pendingCount == 1 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        let counters = await settled(replies)
        #expect(counters.rpcCancels == 1)
        #expect(counters.rpcRequestsPending == 0 && counters.rpcRequestsLive == 0)
        #expect(replies.pendingCount == 0)
    }

    @Test("A timeout cancels the request in the SDK")
    func timeout() async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient())
        let result = await clientTestResult {
            try await replies.request(
                FetchRequest(path: "/t"), id: 3, behavior: .neverCompletes, timeout: .milliseconds(20))
        }
        #expect(throws: BridgeTimeoutError.self) { try result.get() }
        let counters = await settled(replies)
        #expect(counters.rpcCancels == 1 && counters.rpcRequestsPending == 0)
        // The id is free again.
        _ = try await replies.request(FetchRequest(path: "/t2"), id: 3)
    }

    @Test(
        "A disconnect fails every pending request with .disconnected, whatever the SDK reports",
        arguments: LegacyReplyClient.DisconnectReport.allCases)
    func disconnect(report: LegacyReplyClient.DisconnectReport) async throws {
        let replies = try LegacyReplyClient(client: try LegacyClient(), configuration: .init(disconnectReport: report))
        let calls = (0..<5).map { index in
            ClientTestCall {
                try await replies.request(FetchRequest(path: "/p\(index)"), behavior: .neverCompletes)
            }
        }
        #expect(await eventually { replies.counters.rpcRequestsPending == 5 })
        try replies.disconnect()
        for call in calls {
            let result = await call.result()
            #expect(throws: LegacySDKError.disconnected) { try result?.get() }
        }
        let counters = await settled(replies)
        #expect(counters.rpcDroppedAtDisconnect == 5)
        #expect(replies.pendingCount == 0)
        if report == .silent { #expect(replies.statistics.failedByDisconnect == 5) }
        // The connection works again.
        _ = try await replies.request(FetchRequest(path: "/after"))
    }

    @Test(
        "Destroying a silent connection fails its pending requests through the disconnect notice, and releases everything"
    )
    func destroyFailsPending() async throws {
        let client = try LegacyClient()
        let replies = try LegacyReplyClient(client: client, configuration: .init(disconnectReport: .silent))
        let call = ClientTestCall {
            try await replies.request(FetchRequest(path: "/gone"), behavior: .neverCompletes)
        }
        #expect(await eventually { replies.pendingCount == 1 })
        try replies.connection.destroy()
        let result = await call.result()
        #expect(throws: LegacySDKError.disconnected) { try result?.get() }
        #expect(replies.statistics.failedByDisconnect == 1)
        #expect(await eventually { client.counters.rpcConnectionsFinished == 1 })
        let counters = client.counters
        #expect(counters.contextsCreated == counters.contextsReleased)
        #expect(counters.rpcRequestsLive == 0)
        let after = await clientTestResult { try await replies.request(FetchRequest(path: "/late")) }
        #expect(throws: LegacySDKError.clientDestroyed) { try after.get() }
    }

    @Test(
        "A burst of requests over chaos behaviours, with unknown ids, spontaneous disconnects, cancellations and timeouts: all end, nothing leaks"
    )
    func burst() async throws {
        let count = testsUnderThreadSanitizer ? 1_000 : 4_000
        let client = try LegacyClient(configuration: .init(workerThreads: 4, seed: 11))
        let replies = try LegacyReplyClient(
            client: client,
            configuration: .init(
                idBits: 16, disconnectReport: .asynchronous, unknownRepliesPerMille: 20,
                // Under ThreadSanitizer a quarter of the requests: a few more disconnects, so that
                // one still happens when a loaded machine lets most short timeouts expire first
                // (at 2 per mille none came once, under load).
                spontaneousDisconnectsPerMille: testsUnderThreadSanitizer ? 10 : 2, seed: 5))
        let ended = await withTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask {
                    let behavior = SimulatedBehavior.chaos(seed: UInt64(index + 1)).with { $0.seed = 0 }
                    // Every request ends: some never get a reply (chaos draws no completion), and the
                    // last disconnect may come before them.
                    let timeout: Duration = .milliseconds(index % 3 == 0 ? 1 + index % 7 : 200)
                    let task = Task {
                        _ = try? await replies.request(
                            FetchRequest(path: "/b\(index)", responseSize: index % 64),
                            id: index % 2 == 0 ? nil : UInt64(1 + index % 30_000), behavior: behavior,
                            timeout: timeout)
                    }
                    if index % 5 == 0 { task.cancel() }
                    await task.value
                    return 1
                }
            }
            return await group.reduce(0, +)
        }
        #expect(ended == count)
        // A timed-out or cancelled request leaves the table in its cancel handle, which the
        // library runs on a job thread of its own, maybe after the caller is back.
        #expect(await eventually { replies.pendingCount == 0 })
        let counters = await settled(replies)
        #expect(counters.rpcRequestsLive == 0 && counters.rpcRequestsPending == 0)
        #expect(counters.rpcDisconnectsSpontaneous > 0)
        #expect(counters.rpcRepliesUnknownID > 0)
    }
}
