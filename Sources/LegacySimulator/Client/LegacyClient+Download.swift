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
    /// On a client with a loop thread (``Configuration/loopThread``) the download follows the
    /// stream's threading contract the way a wrapper of libcurl's multi interface must: it is
    /// started on the loop thread, and the stream gets an `SDKScheduler` that posts every
    /// `pause`, `resume` and `cancel` there, so the SDK is never called from another thread (a
    /// start error is then thrown by the stream's first `next()`). When the behaviour also
    /// delivers on the loop (``SimulatedBehavior/Delivery/loop``), the download is pull-style,
    /// like a curl write callback: once a yield answers `.stopProducing`, the event callback
    /// refuses the next event (the SDK pauses and delivers that event again after the resume), and
    /// the stream's `resume`, running on the same thread, lets it go on; no `pause` call is made.
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
        if sdk.hasLoopThread {
            return loopDownload(request, behavior: behavior, buffering: buffering)
        }
        return CallbackStream(
            buffering: buffering,
            ordering: .sequenced(window: Self.downloadReorderWindow(for: behavior))
        ) { sink in
            let started = SDK.startDownload(
                client: sdk, request: request, behavior: behavior,
                onEvent: { event in _ = LoopDownload.pass(event, to: sink) })
            switch started {
            case .success(let handle):
                return StreamControl(
                    cancel: CancelHandle {
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

    /// ``download(_:behavior:buffering:)`` on a client with a loop thread: every SDK call (start,
    /// pause, resume, cancel) is made on the loop thread.
    private func loopDownload(
        _ request: DownloadRequest, behavior: SimulatedBehavior, buffering: StreamBuffering
    ) -> CallbackStream<DownloadEvent> {
        let sdk = self.sdk
        let pullStyle = behavior.delivery == .loop
        return CallbackStream(
            buffering: buffering,
            ordering: .sequenced(window: Self.downloadReorderWindow(for: behavior))
        ) { sink in
            try LoopDownload(sdk: sdk, request: request, behavior: behavior, pullStyle: pullStyle).start(sink)
        }
    }
}

/// One download on a client's loop thread. Every method runs on the loop thread (the start job and
/// the stream's control jobs are posted there, FIFO, so `start` runs before any control call), and
/// so do the event callbacks of a pull-style download.
private final class LoopDownload: Sendable {
    private struct State {
        var handle: SDKHandle?
        /// Pull style: a yield answered `.stopProducing`; the next event is refused.
        var stopped = false
    }

    private let sdk: SDKClient
    private let request: DownloadRequest
    private let behavior: SimulatedBehavior
    private let pullStyle: Bool
    // Only touched on the loop thread; the lock makes that checkable rather than assumed.
    private let state = LockedBox(State())

    init(sdk: SDKClient, request: DownloadRequest, behavior: SimulatedBehavior, pullStyle: Bool) {
        self.sdk = sdk
        self.request = request
        self.behavior = behavior
        self.pullStyle = pullStyle
    }

    /// Passes one SDK event to the sink; returns the yield's answer (`.enqueued` for the end).
    static func pass(_ event: RawDownloadEvent, to sink: EventSink<DownloadEvent>) -> YieldOutcome {
        switch event.kind {
        case .progress:
            return sink.yield(
                .progress(bytesDone: event.bytesDone, totalBytes: event.bytesTotal), sequence: event.sequence)
        case .data:
            return sink.yield(.data(offset: event.bytesDone, bytes: event.data), sequence: event.sequence)
        case .end:
            if let error = event.error { sink.finish(throwing: error) } else { sink.finish() }
            return .enqueued
        }
    }

    /// Posts the start to the loop thread and returns the stream's control, whose scheduler posts
    /// every call there too.
    func start(_ sink: EventSink<DownloadEvent>) throws(LegacySDKError) -> StreamControl {
        // A live client with a loop thread accepts every post, and the stream's jobs keep `sdk`
        // alive, so a refused post (the client is being destroyed, which cancels the download
        // itself) only happens when nothing is left to do.
        try sdk.post { self.run(sink) }
        let sdk = self.sdk
        let scheduler = SDKScheduler { job in
            do { try sdk.post(job) } catch {}
        }
        let pause: (@Sendable () -> Void)?
        if pullStyle { pause = nil } else { pause = { self.pause() } }
        return StreamControl(
            scheduler: scheduler, cancel: CancelHandle { self.cancel() }, pause: pause, resume: { self.resume() })
    }

    /// Starts the SDK download (on the loop thread).
    private func run(_ sink: EventSink<DownloadEvent>) {
        let started: Result<SDKHandle, LegacySDKError>
        if pullStyle {
            let state = self.state
            started = SDK.startPullDownload(
                client: sdk, request: request, behavior: behavior,
                onEvent: { event in
                    // Refused: the SDK pauses and delivers this event again after `resume`.
                    if event.kind != .end, state.withLock({ $0.stopped }) { return true }
                    if Self.pass(event, to: sink) == .stopProducing { state.withLock { $0.stopped = true } }
                    return false
                })
        } else {
            started = SDK.startDownload(
                client: sdk, request: request, behavior: behavior, onEvent: { _ = Self.pass($0, to: sink) })
        }
        switch started {
        case .success(let handle): state.withLock { $0.handle = handle }
        case .failure(let error): sink.finish(throwing: error)
        }
    }

    func cancel() {
        guard let handle = state.withLock({ $0.handle }) else { return }
        handle.cancel()
        // As for a download without a loop: a cancel the SDK ignores must not leave it parked.
        state.withLock { $0.stopped = false }
        try? handle.resume()
    }

    func pause() {
        try? state.withLock { $0.handle }?.pause()
    }

    func resume() {
        let handle = state.withLock { state -> SDKHandle? in
            state.stopped = false
            return state.handle
        }
        try? handle?.resume()
    }
}
