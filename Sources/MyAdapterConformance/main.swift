// Sources/MyAdapterConformance/main.swift — an executable target of your package
import LegacyBridge
import LegacyBridgeConformance

/// Your one-shot call pattern, written against the suite's simulated operation.
struct MyFetchAdapter: OneShotAdapter {
    var name: String { "my-fetch" }
    var summary: String { "withCallback around the SDK's completion callback" }

    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

/// Your event-stream pattern, written against the suite's simulated source.
struct MyDownloadAdapter: StreamAdapter {
    var name: String { "my-download" }
    var summary: String { "CallbackStream with backpressure and reordering" }

    func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(
            buffering: .backpressure(low: source.lowWater, high: source.highWater),
            ordering: .sequenced(window: max(1, source.reorderWindow))
        ) { sink in
            let control = source.start(
                onEvent: { event in sink.yield(event, sequence: event.sequence) },
                onEnd: { error in
                    if let error { sink.finish(throwing: error) } else { sink.finish() }
                })
            // A source whose SDK must only be called from its own thread offers a scheduler for it.
            return StreamControl(
                scheduler: source.controlScheduler, cancel: CancelHandle(control.cancel), pause: control.pause,
                resume: control.resume)
        }
    }
}

// Every scenario runs in a child process (this program, re-run): a trap or a hang fails that
// scenario only. Exit status 0: both adapters passed everything; 1: something failed; 2: bad usage.
await ConformanceRunner.main([.oneShot(MyFetchAdapter()), .stream(MyDownloadAdapter())])
