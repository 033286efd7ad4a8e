// The raw connection and listener API of the SDK layer (what adapters are built on).

import Foundation
import TestSupport
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("SDKConnection and SDK.startListener", .onOwnThread)
struct SDKConnectionTests {
    @Test("Replies reach the installed handlers as Swift values; each set is released once, after its last callback")
    func handlersAndRelease() throws {
        let client = try SDKClient()
        let first = SDKTestCollector<RawReply>()
        let second = SDKTestCollector<RawReply>()
        let connection = try SDKConnection(
            client: client, handlers: SDKReplyHandlers(onReply: first.append, onRelease: first.released))
        let id = try connection.send(FetchRequest(path: "/raw", responseSize: 4), behavior: .synchronous, id: nil).get()
        #expect(first.values.map(\.id) == [id])
        let reply = try #require(first.values.first)
        #expect(reply.status == 0 && reply.attempt == 1 && reply.message == "/raw")
        #expect(try reply.result.get().body.count == 4)

        try connection.setHandlers(SDKReplyHandlers(onReply: second.append, onRelease: second.released))
        #expect(first.releaseCount == 1)
        _ = try connection.send(FetchRequest(path: "/two"), behavior: .synchronous, id: 9).get()
        #expect(second.values.map(\.id) == [9])
        #expect(first.values.count == 1)

        #expect(try connection.cancel(id: 12345) == false)
        try connection.destroy()
        #expect(second.waitReleased())
        #expect(throws: LegacySDKError.clientDestroyed) { try connection.destroy() }
        #expect(throws: LegacySDKError.clientDestroyed) { try connection.setHandlers(nil) }
        #expect(connection.send(FetchRequest(path: "/x"), behavior: .wellBehaved, id: 1) == .failure(.clientDestroyed))
        let counters = client.counters
        #expect(counters.contextsCreated == 2 && counters.contextsReleased == 2)
        #expect(counters.rpcConnectionsFinished == 1)
    }

    @Test("A refused connection or set of handlers is released at once and never called")
    func refused() throws {
        let client = try SDKClient()
        let lifetimes = SDKTestCounter()
        let token = SDKTestLifetimeToken(lifetimes)
        #expect(throws: LegacySDKError.outOfRange) {
            _ = try SDKConnection(
                client: client, idBits: 7, handlers: SDKReplyHandlers(onReply: { _ in _ = token }))
        }
        let connection = try SDKConnection(client: client, handlers: nil)
        try connection.destroy()
        #expect(throws: LegacySDKError.clientDestroyed) {
            try connection.setHandlers(SDKReplyHandlers(onReply: { _ in _ = token }))
        }
        _ = consume token
        #expect(lifetimes.value == 1)
        #expect(client.counters.contextsCreated == 0)
    }

    @Test("SDK.startListener takes the topic; a second start on it fails with no callback")
    func listenerTopic() throws {
        let client = try SDKClient()
        let events = SDKTestCollector<RawDownloadEvent>()
        let behavior = SimulatedBehavior.wellBehaved.with { $0.intervalMicroseconds = 500 }
        let handle = try SDK.startListener(
            client: client, topic: 1, eventCount: 0, behavior: behavior, onEvent: events.append,
            onRelease: events.released
        ).get()
        let refused = SDK.startListener(
            client: client, topic: 1, eventCount: 1, behavior: .wellBehaved, onEvent: { _ in Issue.record("called") })
        #expect(throws: LegacySDKError.alreadyListening) { try refused.get() }
        #expect(events.wait { $0.values.count >= 3 })
        handle.cancel()
        #expect(events.waitReleased())
        #expect(client.counters.listenerStops == 1 && client.counters.listenerBusy == 1)
    }
}
