// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

// README, many calls, one callback: the stand-ins of the guide's copy (Guide/ManyCallsOneCallback.swift).

func readmeKeyedQuickStart(client: MQTTClient, bytes: [UInt8]) async throws {
    // snippet: README.md
    let publishes = PendingRequests<Int32, Void>()                 // the SDK's one reply callback
    client.onPublish = { @Sendable mid in publishes.complete(mid, with: .success(())) }
    try await publishes.request(timeout: .seconds(5)) { () throws -> Int32 in
        try client.publish(topic: "t", payload: bytes, qos: 1)    // returns the message id
    }
    // end snippet
}

func readmeLatestWinsQuickStart(text: String) async throws -> [Hit] {
    var hits: [Hit] = []
    // snippet: README.md
    let search = LatestWins<[Hit]>()           // the superseded caller throws SupersededError
    hits = try await search.run { completion in
        let query = searchIndex.search(text) { @Sendable in completion($0) }
        return CancelHandle { query.cancel() }
    }
    // end snippet
    return hits
}

func readmeCoalescedQuickStart(url: String) async throws -> Thumbnail {
    // snippet: README.md
    let thumbnails = CoalescedCalls<String, Thumbnail>()        // one SDK call per key in flight
    let thumbnail = try await thumbnails.value(for: url) { completion in
        let request = decoder.decode(url) { @Sendable image, error in completion(image.map { .success($0) } ?? .failure(error!)) }
        return CancelHandle { request.cancel() }
    }
    // end snippet
    return thumbnail
}

func readmeSharedQuickStart() async throws {
    // snippet: README.md
    let quotes = SharedSubscription(of: Quote.self, replay: .latest) { sink in
        let listener = try ticker.listen(topic: "quotes", onQuote: { sink.yield(Quote(copying: $0)) }, onEnd: { _ in sink.finish() })
        return StreamControl(cancel: CancelHandle { listener.cancel() })
    }
    for try await quote in quotes.subscribe(failingAbove: 500) { show(quote) }   // any number of tasks
    // end snippet
}
