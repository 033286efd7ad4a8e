import LegacyBridge

extension LegacyClient {
    /// The reorder window of a download: exactly the behaviour's stream concurrency.
    ///
    /// The SDK promises that when the event numbered `s` arrives, every event up to
    /// `s - streamConcurrency` has arrived or was dropped. A live stream drops events while paused,
    /// and those numbers never come; with a wider window the stream would hold the events
    /// delivered after such a gap until enough further events arrive, and forever once the source
    /// goes silent. With this window a missing number is given up exactly when the SDK's promise
    /// says it can no longer arrive. (An invalid concurrency makes the SDK reject the start; the
    /// clamp to 1 ... 8, the SDK's range, only keeps the window valid until then.)
    static func downloadReorderWindow(for behavior: SimulatedBehavior) -> Int {
        Int(min(max(behavior.streamConcurrency, 1), 8))
    }

    /// Streams one download from the simulated SDK.
    ///
    /// Built on ``CallbackStream`` the way you would wrap your own SDK: each iterator starts its
    /// own download; events from concurrent SDK threads are put back in sequence order (progress
    /// never goes backwards; events the SDK dropped while paused leave gaps that are skipped as
    /// soon as they can no longer be filled); the SDK's pause and resume back the `.backpressure`
    /// policy; leaving the loop, dropping the iterator or cancelling the consuming task cancels
    /// the SDK download (and resumes it if backpressure had paused it, so a download whose cancel
    /// the SDK ignores runs to its end instead of staying parked in the SDK). Success finishes
    /// the stream; an SDK error is thrown as ``LegacySDKError``. The C context and the SDK handle
    /// are released exactly once on every path.
    ///
    /// - Parameters:
    ///   - request: What to download.
    ///   - behavior: How the simulated SDK misbehaves for this download.
    ///   - buffering: How events wait for the consumer (default: pause the SDK at 64 buffered
    ///     events, resume below 16).
    /// - Returns: A cold stream of progress and data events.
    public func download(
        _ request: DownloadRequest,
        behavior: SimulatedBehavior = .wellBehaved,
        buffering: StreamBuffering = .backpressure(low: 16, high: 64)
    ) -> CallbackStream<DownloadEvent> {
        let sdk = self.sdk
        return CallbackStream(
            buffering: buffering,
            ordering: .sequenced(window: Self.downloadReorderWindow(for: behavior))
        ) { sink in
            let started = SDK.startDownload(
                client: sdk, request: request, behavior: behavior,
                onEvent: { event in
                    switch event.kind {
                    case .progress:
                        sink.yield(
                            .progress(bytesDone: event.bytesDone, totalBytes: event.bytesTotal),
                            sequence: event.sequence)
                    case .data:
                        sink.yield(.data(offset: event.bytesDone, bytes: event.data), sequence: event.sequence)
                    case .end:
                        if let error = event.error { sink.finish(throwing: error) } else { sink.finish() }
                    }
                })
            switch started {
            case .success(let handle):
                return StreamControl(
                    cancel: {
                        handle.cancel()
                        // An SDK may ignore the cancel; a download that backpressure paused would
                        // then stay parked forever (nothing resumes it once the consumer is gone)
                        // and the SDK would never release it. Resuming lets it run to its end;
                        // after a cancel that took effect, resume starts nothing.
                        try? handle.resume()
                    },
                    pause: { try? handle.pause() },
                    resume: { try? handle.resume() })
            case .failure(let error):
                throw error
            }
        }
    }
}
