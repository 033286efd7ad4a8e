// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

// Stand-ins for the SDKs of "One callback for many calls". The ones the README's quick starts use
// call back from CLegacySDK's threads (DocSDK) through plain closures, as an imported SDK does.

nonisolated struct MQTTError: Error {
    init(_ reason: Int32) {}
}

/// A JSON-RPC connection driven by its own loop thread.
nonisolated struct RPCReply: Sendable {}

nonisolated final class RPCConnection: Sendable {
    func send(method: String, id: UInt64) throws {}
    func abandon(_ id: UInt64) {}
}

nonisolated let rpc = RPCConnection()
nonisolated let rpcLoop = EventLoopStandIn()

nonisolated final class EventLoopStandIn: Sendable {
    var scheduler: SDKScheduler { SDKScheduler { job in job() } }
}

nonisolated func nextRequestID() -> UInt64 { 1 }

// snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
final class Publisher: Sendable {
    private let client: MQTTClient
    private let publishes = PendingRequests<Int32, Void>()

    init(client: MQTTClient) {
        self.client = client
        client.onPublish = { @Sendable [publishes] mid in publishes.complete(mid, with: .success(())) }
        client.onDisconnect = { @Sendable [publishes] reason in publishes.failAll(MQTTError(reason)) }
    }

    func publish(_ payload: [UInt8], to topic: String) async throws {
        try await publishes.request(timeout: .seconds(5)) { () throws -> Int32 in
            try client.publish(topic: topic, payload: payload, qos: 1)   // returns the message id
        }
    }
}
// end snippet

func guideKeyedCallerAssigned() {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
    let calls = PendingRequests<UInt64, RPCReply>(scheduler: rpcLoop.scheduler) { id in
        rpc.abandon(id)                         // runs on the loop, for a timed-out or cancelled call
    }

    func status() async throws -> RPCReply {
        try await calls.request(id: nextRequestID(), timeout: .seconds(2)) { id in
            try rpc.send(method: "status", id: id)
        }
    }
    // end snippet
    _ = status
}

// snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
@MainActor
final class SearchModel {
    private let search = LatestWins<[Hit]>()
    private(set) var hits: [Hit] = []

    func queryChanged(_ text: String) async {
        do {
            hits = try await search.run(timeout: .seconds(2)) { completion in
                let query = searchIndex.search(text) { @Sendable result in completion(result) }
                return CancelHandle { query.cancel() }
            }
        } catch is SupersededError {
            // a newer query is running: the screen belongs to it
        } catch {
            hits = []
        }
    }
}
// end snippet

func guideCoalesced(url: String) async throws -> Thumbnail {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
    let thumbnails = CoalescedCalls<String, Thumbnail>()

    func thumbnail(for url: String) async throws -> Thumbnail {
        try await thumbnails.value(for: url, timeout: .seconds(10)) { completion in
            let request = decoder.decode(url) { @Sendable thumbnail, error in
                if let thumbnail { completion.succeed(thumbnail) } else { completion.fail(error!) }
            }
            return CancelHandle { request.cancel() }
        }
    }
    // end snippet
    return try await thumbnail(for: url)
}

/// A market-data feed with one listener per topic.
nonisolated struct Quote: Sendable {
    var raw: Int32
    init(copying raw: Int32) { self.raw = raw }
}

nonisolated struct TickerError: Error {
    init(_ status: Int32) {}
}

nonisolated let tickerLoop = EventLoopStandIn()

/// How many quotes the snippets have shown.
nonisolated let shownQuotes = LockedValue(0)

nonisolated func show(_ quote: Quote) { shownQuotes.withLock { $0 += 1 } }

func guideShared() async throws {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
    let quotes = SharedSubscription(of: Quote.self, replay: .latest, linger: .seconds(2)) { sink in
        let listener = try ticker.listen(
            topic: "quotes",
            onQuote: { sink.yield(Quote(copying: $0)) },
            onEnd: { status in status == 0 ? sink.finish() : sink.finish(throwing: TickerError(status)) })
        return StreamControl(scheduler: tickerLoop.scheduler, cancel: CancelHandle { listener.cancel() })
    }

    // In any number of tasks:
    for try await quote in quotes.subscribe(buffering: .bufferingNewest(100)) {
        show(quote)
    }
    // end snippet
}

nonisolated func render(_ quote: Quote) {}

func guideSlowConsumer(quotes: SharedSubscription<Quote>) async throws {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
    do {
        for try await quote in quotes.subscribe(failingAbove: 500) {
            render(quote)
        }
    } catch let error as SlowConsumerError {
        print("\(error)")   // subscribe again to catch up from the live quotes
    }
    // end snippet
}
