// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

/// A message copied out of the SDK's callback.
nonisolated struct Message: Sendable {
    init(copying raw: UnsafeRawPointer?) {}
}

/// A subscription of a loop-bound messaging SDK; every call on its loop thread.
nonisolated final class TopicSubscription: Sendable {
    func cancel() {}
    func pause() {}
    func resume() {}
}

/// The loop-bound messaging SDK's client.
nonisolated final class TopicClient: Sendable {
    func subscribe(_ topic: String, onMessage: @escaping @Sendable (UnsafeRawPointer?) -> Void) -> TopicSubscription {
        TopicSubscription()
    }
}

/// The snippet is one expression: the body of a function that returns it.
func guidePostedStartStream(client: TopicClient, topic: String, loop: SDKLoop) -> CallbackStream<Message> {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/EventStreams.md
    CallbackStream(of: Message.self, buffering: .backpressure(low: 16, high: 64),
                   scheduler: loop.scheduler) { sink in        // runs on the loop thread
        let subscription = client.subscribe(topic) { sink.yield(Message(copying: $0)) }
        return StreamControl(cancel: CancelHandle { subscription.cancel() },   // on the loop thread
                             pause: { subscription.pause() }, resume: { subscription.resume() })
    }
    // end snippet
}
