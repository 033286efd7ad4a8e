import LegacyBridge
import LegacySimulator

/// The library's one-shot adapter: `withCallback` around the raw callback, the cancel function
/// becoming the gate's `CancelHandle`, the caller's timeout and isolation passed on.
public struct WithCallbackAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `with-callback`.
    public var name: String { "with-callback" }
    /// One line describing the adapter.
    public var summary: String { "withCallback around the closure callback (the library's one-shot bridge)" }

    /// Bridges `operation` with `withCallback`.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

/// The library's one-shot adapter over a C-style start with an owned context: the context holds
/// the `Completion`, is retained for the SDK and released only in the SDK's release callback.
public struct WithCallbackContextAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `with-callback-context`.
    public var name: String { "with-callback-context" }
    /// One line describing the adapter.
    public var summary: String {
        "withCallback over the C-style start: context retained for the SDK, released in its release callback"
    }

    private final class Context: Sendable {
        let completion: Completion<LegacyPayload>
        init(_ completion: Completion<LegacyPayload>) { self.completion = completion }
    }

    /// Bridges `operation` with `withCallback` and an SDK-owned context.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            let context = Unmanaged<AnyObject>.passRetained(Context(completion))
            let cancel = operation.start(
                context: context,
                callback: { context, result in
                    (context.takeUnretainedValue() as! Context).completion(result)
                },
                release: { context in context.release() })
            return cancel.map(CancelHandle.init)
        }
    }
}

/// The library's stream adapter: a `CallbackStream` with backpressure at the source's water marks
/// and reordering within its window; the consumer's termination cancels the source; every control
/// call runs through the source's `controlScheduler` when its SDK has one.
public struct CallbackStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `callback-stream`.
    public var name: String { "callback-stream" }
    /// One line describing the adapter.
    public var summary: String { "CallbackStream with backpressure and reordering (the library's stream bridge)" }

    /// Wraps `source` in a `CallbackStream`.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(
            buffering: source.waterMarkBuffering, ordering: source.windowOrdering
        ) { sink in
            let control = source.start(feeding: sink)
            return StreamControl(
                scheduler: source.controlScheduler, cancel: control.cancel, pause: control.pause,
                resume: control.resume)
        }
    }
}

extension LegacyEventSource {
    /// The library adapter's buffering for this source: backpressure at its water marks.
    var waterMarkBuffering: StreamBuffering { .backpressure(low: lowWater, high: highWater) }

    /// The library adapter's ordering for this source: reordering within its window.
    var windowOrdering: StreamOrdering { .sequenced(window: max(1, reorderWindow)) }

    /// Starts the source into `sink` the way the library's adapter does: each event yielded at its
    /// sequence number (or, with `sequenced: false`, as it arrives), the source's end finishing the
    /// stream. Gallery adapters that differ elsewhere start their source with this.
    func start(feeding sink: EventSink<LegacyEvent>, sequenced: Bool = true) -> LegacySourceControl {
        start(
            onEvent: { event in
                if sequenced { sink.yield(event, sequence: event.sequence) } else { sink.yield(event) }
            },
            onEnd: { error in
                if let error { sink.finish(throwing: error) } else { sink.finish() }
            })
    }
}
