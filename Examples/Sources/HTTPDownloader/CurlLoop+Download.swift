import LegacyBridge

extension CurlLoop {
    /// Downloads `url` as a stream of the response body's chunks, in order, with backpressure.
    ///
    /// The stream is cold: the transfer starts when an iterator asks for its first chunk, and each
    /// iterator runs a transfer of its own. Chunks are what libcurl's write callback receives (at
    /// most 16 KiB each by default), copied out of libcurl's buffer.
    ///
    /// ```swift
    /// let loop = try CurlLoop()
    /// var size = 0
    /// for try await chunk in loop.download(url: "http://127.0.0.1:8000/big.bin") {
    ///     size += chunk.count
    /// }
    /// ```
    ///
    /// How it meets the stream's threading contract (see `StreamControl`):
    /// - Every `curl_*` call is made on the loop thread: the transfer is started by a posted job,
    ///   and the stream's control calls run on the loop thread too (its `SDKScheduler` posts
    ///   to the loop).
    /// - Pausing is pull-style. The write callback yields its chunk; when the answer says stop
    ///   (`YieldOutcome.shouldStop`), the transfer is marked stopped, and the *next* write
    ///   callback answers `CURL_WRITEFUNC_PAUSE` before taking anything (libcurl keeps those bytes
    ///   and delivers them again after the resume), so no chunk is yielded twice and none is
    ///   lost. The stream's `resume` clears the mark and calls `curl_easy_pause(CURLPAUSE_CONT)`.
    ///   The mark is set inside a callback and cleared by a job, both on the loop thread, so a
    ///   resume can never overtake the stop it answers (a resume run on the consumer's thread
    ///   could clear the mark before the callback sets it, and the transfer would stay paused).
    /// - The stream's `cancel` (loop left, iterator dropped, task cancelled,
    ///   `CallbackStream.stop()`) removes and frees the transfer on the loop thread; nothing is
    ///   delivered after it.
    ///
    /// - Parameters:
    ///   - url: An `http` or `https` URL.
    ///   - buffering: How chunks wait for the consumer. The default,
    ///     `.backpressure(low: 16, high: 64)`, holds at most 64 chunks (1 MiB); with `.unbounded`
    ///     a consumer slower than the network buffers the whole body.
    ///   - probe: The conformance suite's probe; leave the default, `.off`, which changes nothing.
    /// - Returns: The body's chunks. The stream finishes when libcurl has received the whole
    ///   body. It throws ``HTTPStatusError`` if the server answered with a status of 400 or more,
    ///   a ``CurlError`` if libcurl failed the transfer (``CurlError/couldNotConnect``,
    ///   ``CurlError/partialFile``, …), ``CurlError/aborted`` if the loop shut down first, and
    ///   `CancellationError` if the consuming task was cancelled.
    public func download(
        url: String, buffering: StreamBuffering = .backpressure(low: 16, high: 64), probe: StreamProbe<[UInt8]> = .off
    ) -> CallbackStream<[UInt8]> {
        CallbackStream(of: [UInt8].self, buffering: buffering) { [self] sink in
            let download = Download(id: makeTransferID(), sink: sink, probe: probe)
            guard postToDriver({ driver in probe.start { download.start(url: url, on: driver) } }) else {
                throw CurlError.aborted
            }
            return StreamControl(
                scheduler: scheduler,
                cancel: CancelHandle { probe.cancel { download.cancel() } },
                resume: { probe.resume { download.resume() } })
        }
    }
}

/// One download: the bridge between a transfer's callbacks and its stream's sink.
///
/// `@unchecked Sendable`: every property is read and written on the loop thread only. `start`
/// runs in a job posted to the loop; the handlers run inside libcurl's callbacks or between
/// libcurl calls on that thread; `resume` and `cancel` run in jobs the stream posts through its
/// `SDKScheduler` to the same loop, after the start job (jobs run in posting order, and the
/// stream makes no control call before `start` has posted and returned).
final class Download: @unchecked Sendable {
    private let id: TransferID
    /// The sink's yield and finish, through the conformance probe (`.off`: unchanged).
    private let yield: @Sendable ([UInt8]) -> YieldOutcome
    private let finish: @Sendable ((any Error)?) -> Void
    /// The driver running the transfer; nil before `start` and after the transfer ended.
    private var driver: CurlDriver?
    /// Set when a yield answered "stop": the next write callback answers `CURL_WRITEFUNC_PAUSE`.
    private var stopped = false

    init(id: TransferID, sink: EventSink<[UInt8]>, probe: StreamProbe<[UInt8]> = .off) {
        self.id = id
        self.yield = probe.event { bytes in sink.yield(bytes) }
        self.finish = probe.end { error in
            if let error { sink.finish(throwing: error) } else { sink.finish() }
        }
    }

    /// Starts the transfer (loop thread).
    func start(url: String, on driver: CurlDriver) {
        self.driver = driver
        let handlers = TransferHandlers(
            shouldPause: { [self] in stopped },
            onData: { [self] bytes in
                if yield(bytes).shouldStop {
                    stopped = true
                }
            },
            onEnd: { [self] end in ended(end) })
        driver.start(id: id, url: url, handlers: handlers)
    }

    /// The stream drained to its low watermark (loop thread): take bytes again, starting with the
    /// ones libcurl kept when it was paused.
    func resume() {
        stopped = false
        driver?.resume(id: id)
    }

    /// The consumer stopped (loop thread): remove and free the transfer.
    func cancel() {
        driver?.cancel(id: id)
    }

    /// The transfer ended and its handle is freed (loop thread): end the stream. After a cancel
    /// the stream has already terminated and ignores this.
    private func ended(_ end: TransferEnd) {
        driver = nil
        switch end {
        case .completed(let status) where status >= 400:
            // Not reached while the driver sets CURLOPT_FAILONERROR (libcurl then reports
            // .httpError before the body); kept so that an error page is never a success.
            finish(HTTPStatusError(status: status))
        case .completed:
            finish(nil)
        case .httpError(let status):
            finish(HTTPStatusError(status: status))
        case .failed(let error):
            finish(error)
        case .cancelled:
            finish(CurlError.aborted)
        }
    }
}
