import LegacyBridge

/// The library's stream adapter: a `CallbackStream` with backpressure at the source's water marks
/// and reordering within its window; the consumer's termination cancels the source; every control
/// call runs through the source's `controlScheduler` when its SDK has one.
package struct CallbackStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    package init() {}
    /// `callback-stream`.
    package var name: String { "callback-stream" }
    /// One line describing the adapter.
    package var summary: String { "CallbackStream with backpressure and reordering (the library's stream bridge)" }

    /// Wraps `source` in a `CallbackStream`.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    package func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(
            buffering: source.waterMarkBuffering, ordering: source.windowOrdering
        ) { sink in
            let control = source.start(feeding: sink)
            return StreamControl(
                scheduler: source.controlScheduler, cancel: CancelHandle(control.cancel), pause: control.pause,
                resume: control.resume)
        }
    }
}

extension LegacyEventSource {
    /// The library adapter's buffering for this source: backpressure at its water marks.
    package var waterMarkBuffering: StreamBuffering { .backpressure(low: lowWater, high: highWater) }

    /// The library adapter's ordering for this source: reordering within its window.
    package var windowOrdering: StreamOrdering { .sequenced(window: max(1, reorderWindow)) }

    /// Starts the source into `sink` the way the library's adapter does: each event yielded at its
    /// sequence number (or, with `sequenced: false`, as it arrives), the source's end finishing the
    /// stream. Gallery adapters that differ elsewhere start their source with this.
    package func start(feeding sink: EventSink<LegacyEvent>, sequenced: Bool = true) -> LegacySourceControl {
        start(
            onEvent: { event in
                if sequenced { sink.yield(event, sequence: event.sequence) } else { sink.yield(event) }
            },
            onEnd: { error in
                if let error { sink.finish(throwing: error) } else { sink.finish() }
            })
    }
}
