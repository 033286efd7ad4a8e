import LegacyBridge

/// The library's shared-subscription adapter: one `SharedSubscription` over the listener, a
/// `CallbackStream` per consumer. The last consumer to leave cancels the listener, and the next
/// consumer starts it again.
package struct SharedSubscriptionLibraryAdapter: SharedSubscriptionAdapter {
    /// Creates the adapter.
    package init() {}
    /// `shared-subscription`.
    package var name: String { "shared-subscription" }
    /// One line describing the adapter.
    package var summary: String {
        "SharedSubscription over one SDK listener, a CallbackStream per consumer (the library's shared bridge)"
    }

    /// Shares `listener` through a `SharedSubscription`.
    /// - Parameter listener: The SDK listener.
    /// - Returns: A function that gives each consumer its stream.
    package func share(_ listener: LegacyListener) -> @Sendable () -> CallbackStream<LegacyEvent> {
        let shared = SharedSubscription(of: LegacyEvent.self, restart: .automatic) { sink in
            let control = try listener.start(
                onEvent: { event in sink.yield(event) },
                onEnd: { error in
                    if let error { sink.finish(throwing: error) } else { sink.finish() }
                })
            return StreamControl(cancel: CancelHandle(control.cancel), pause: control.pause, resume: control.resume)
        }
        return { shared.subscribe() }
    }
}
