// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import LegacyBridge

// Stand-ins for the SDKs of "One callback for many calls": just enough surface for its snippets to
// compile against LegacyBridge as written.

/// An MQTT client with one global publish-acknowledgement callback, like libmosquitto's.
final class MQTTClient: @unchecked Sendable {
    // @unchecked Sendable: a stand-in; the callbacks are set once, before the client connects.
    var onPublish: (@Sendable (Int32) -> Void)?
    var onDisconnect: (@Sendable (Int32) -> Void)?
    func publish(topic: String, payload: [UInt8], qos: Int32) throws -> Int32 { 1 }
}

struct MQTTError: Error {
    init(_ reason: Int32) {}
}

/// A JSON-RPC connection driven by its own loop thread.
struct RPCReply: Sendable {}

final class RPCConnection: Sendable {
    func send(method: String, id: UInt64) throws {}
    func abandon(_ id: UInt64) {}
}

let rpc = RPCConnection()
let rpcLoop = EventLoopStandIn()

final class EventLoopStandIn: Sendable {
    var scheduler: SDKScheduler { SDKScheduler { job in job() } }
}

func nextRequestID() -> UInt64 { 1 }

/// A search index with a cancellable query.
struct Hit: Sendable {}

final class SearchQuery: Sendable {
    func cancel() {}
}

final class SearchIndex: Sendable {
    func search(_ text: String, _ done: @escaping @Sendable (Result<[Hit], any Error>) -> Void) -> SearchQuery {
        SearchQuery()
    }
}

let searchIndex = SearchIndex()

/// A thumbnail decoder with a cancellable request.
final class Thumbnail: Sendable {}

final class DecodeRequest: Sendable {
    func cancel() {}
}

final class ThumbnailDecoder: Sendable {
    func decode(_ url: String, _ done: @escaping @Sendable (Thumbnail?, (any Error)?) -> Void) -> DecodeRequest {
        DecodeRequest()
    }
}

let decoder = ThumbnailDecoder()

// snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
final class Publisher: Sendable {
    private let client: MQTTClient
    private let publishes = PendingRequests<Int32, Void>()

    init(client: MQTTClient) {
        self.client = client
        client.onPublish = { [publishes] mid in publishes.complete(mid, with: .success(())) }
        client.onDisconnect = { [publishes] reason in publishes.failAll(MQTTError(reason)) }
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
                let query = searchIndex.search(text) { result in completion(result) }
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

func guideCoalesced() {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/ManyCallsOneCallback.md
    let thumbnails = CoalescedCalls<String, Thumbnail>()

    func thumbnail(for url: String) async throws -> Thumbnail {
        try await thumbnails.value(for: url, timeout: .seconds(10)) { completion in
            let request = decoder.decode(url) { thumbnail, error in
                if let thumbnail { completion.succeed(thumbnail) } else { completion.fail(error!) }
            }
            return CancelHandle { request.cancel() }
        }
    }
    // end snippet
    _ = thumbnail
}

/// A market-data feed with one listener per topic.
struct Quote: Sendable {
    init(copying raw: Int32) {}
}

struct TickerError: Error {
    init(_ status: Int32) {}
}

final class TickerListener: Sendable {
    func cancel() {}
}

final class Ticker: Sendable {
    func listen(
        topic: String, onQuote: @escaping @Sendable (Int32) -> Void, onEnd: @escaping @Sendable (Int32) -> Void
    ) throws -> TickerListener {
        TickerListener()
    }
}

let ticker = Ticker()
let tickerLoop = EventLoopStandIn()

func show(_ quote: Quote) {}

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

func render(_ quote: Quote) {}

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
