// The one file that calls the C SDK (CLegacySDK).
//
// It is the only place with Unmanaged, raw pointers and @convention(c) trampolines. Everything
// above it speaks Swift values: SDKClient, SDKHandle, SDKConnection, FetchResponse,
// RawDownloadEvent, RawReply, LegacySDKError, SimulatedBehavior, SDKCounters.
//
// Context lifetime: every start passes one retained object (Unmanaged.passRetained) as the C
// context: an SDKContextBox, or the benchmarks' SDKBareRequest. A connection's callback set is
// retained with the library's SDKContext (checked in debug builds) and released by the SDK's
// release_context once, after the last callback made with that set. The SDK releases it exactly once,
// in its release_context callback, after the last callback it will ever make for the operation
// (repeated and late ones included). That callback is the only place the retain is given up; a
// start that fails gives it up at once (the SDK never will). C payloads are copied into Sendable
// Swift values inside the callbacks.

import CLegacySDK
import LegacyBridge

// MARK: - Swift values of C payloads

/// One stream event, copied out of the SDK's callback.
package struct RawDownloadEvent: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        /// `bytesDone` / `bytesTotal` so far.
        case progress
        /// `data` holds bytes `bytesDone ..< bytesDone + data.count` of the content.
        case data
        /// Terminal: `status` 0 = success, otherwise an error (`.cancelled` included).
        case end
    }

    package var kind: Kind
    /// Per-operation sequence number, in production order over every kind.
    package var sequence: UInt64
    package var bytesDone: UInt64
    package var bytesTotal: UInt64
    /// Data events only.
    package var data: [UInt8]
    /// End events only: the SDK status (0 = success).
    package var status: Int32
    /// End events with an error: the SDK's message; otherwise "".
    package var message: String
    /// The operation's number within its client.
    package var requestID: UInt64

    /// The failure of an end event, `nil` for a successful end or any other event.
    package var error: LegacySDKError? {
        guard kind == .end, status != 0 else { return nil }
        return LegacySDKError(rawValue: status, message: message)
    }
}

// MARK: - Context box and trampolines

/// What a start hands to the SDK as its context.
private final class SDKContextBox: Sendable {
    enum Callback: Sendable {
        case completion(@Sendable (Result<FetchResponse, LegacySDKError>) -> Void)
        case event(@Sendable (RawDownloadEvent) -> Void)
        /// Pull style: returns `true` to refuse the event and pause the stream.
        case pullEvent(@Sendable (RawDownloadEvent) -> Bool)
    }

    let callback: Callback
    let onRelease: (@Sendable () -> Void)?

    init(callback: Callback, onRelease: (@Sendable () -> Void)?) {
        self.callback = callback
        self.onRelease = onRelease
    }
}

/// A job posted to a client's loop thread: retained for the SDK, released by the job trampoline
/// (the SDK runs every accepted job exactly once) or at once when the post fails.
private final class SDKJobBox: Sendable {
    let job: @Sendable () -> Void
    init(_ job: @escaping @Sendable () -> Void) { self.job = job }
}

/// The session-token probe of a client (tests only).
private final class SDKProbeBox: Sendable {
    let probe: @Sendable () -> Void
    init(_ probe: @escaping @Sendable () -> Void) { self.probe = probe }
}

private func sdkCompletionTrampoline(
    _ context: UnsafeMutableRawPointer?, _ status: lsdk_status_t, _ response: UnsafePointer<lsdk_response_t>?
) {
    guard let context, let response else { return }
    let box = Unmanaged<SDKContextBox>.fromOpaque(context).takeUnretainedValue()
    guard case .completion(let onCompletion) = box.callback else { return }
    let payload = response.pointee
    let message = payload.message.map { String(cString: $0) } ?? ""
    if status == lsdk_status_t(LSDK_OK) {
        let body = payload.body.map { Array(UnsafeBufferPointer(start: $0, count: payload.body_length)) } ?? []
        onCompletion(
            .success(
                FetchResponse(
                    requestID: payload.request_id, attempt: Int(payload.attempt), body: body, message: message)))
    } else {
        onCompletion(.failure(LegacySDKError(rawValue: status, message: message)))
    }
}

/// Copies a C event (valid only during its callback) into a Swift value.
private func sdkRawEvent(_ payload: lsdk_event_t) -> RawDownloadEvent {
    let kind: RawDownloadEvent.Kind
    switch Int(payload.kind) {
    case LSDK_EVENT_PROGRESS: kind = .progress
    case LSDK_EVENT_DATA: kind = .data
    default: kind = .end
    }
    let data =
        kind == .data
        ? payload.data.map { Array(UnsafeBufferPointer(start: $0, count: payload.length)) } ?? []
        : []
    return RawDownloadEvent(
        kind: kind, sequence: payload.sequence, bytesDone: payload.bytes_done, bytesTotal: payload.bytes_total,
        data: data, status: payload.status, message: payload.message.map { String(cString: $0) } ?? "",
        requestID: payload.request_id)
}

private func sdkEventTrampoline(_ context: UnsafeMutableRawPointer?, _ event: UnsafePointer<lsdk_event_t>?) {
    guard let context, let event else { return }
    let box = Unmanaged<SDKContextBox>.fromOpaque(context).takeUnretainedValue()
    guard case .event(let onEvent) = box.callback else { return }
    onEvent(sdkRawEvent(event.pointee))
}

private func sdkPullEventTrampoline(
    _ context: UnsafeMutableRawPointer?, _ event: UnsafePointer<lsdk_event_t>?
) -> Int32 {
    guard let context, let event else { return Int32(LSDK_PULL_CONTINUE) }
    let box = Unmanaged<SDKContextBox>.fromOpaque(context).takeUnretainedValue()
    guard case .pullEvent(let onEvent) = box.callback else { return Int32(LSDK_PULL_CONTINUE) }
    return onEvent(sdkRawEvent(event.pointee)) ? Int32(LSDK_PULL_PAUSE) : Int32(LSDK_PULL_CONTINUE)
}

private func sdkReleaseTrampoline(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let box = Unmanaged<SDKContextBox>.fromOpaque(context).takeRetainedValue()
    box.onRelease?()
}

private func sdkJobTrampoline(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<SDKJobBox>.fromOpaque(context).takeRetainedValue().job()
}

private func sdkProbeTrampoline(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<SDKProbeBox>.fromOpaque(context).takeUnretainedValue().probe()
}

// MARK: - Client

/// Owns one SDK client (`lsdk_client_t*`) and destroys it in deinit.
///
/// Contexts of operations do not retain the client. Destroying it (in deinit) cancels every
/// operation still in flight as its behaviour prescribes, makes the callbacks that prescribes and
/// releases every context before the SDK's threads are joined. If the last reference goes away on
/// one of the SDK's own threads (inside a callback), where the SDK refuses to destroy, the destroy
/// is handed to a thread of its own.
package final class SDKClient: @unchecked Sendable {
    // @unchecked Sendable: `raw` is immutable and only passed to SDK functions, which are
    // thread-safe, except the session-token setter, reached only through @LegacySDKActor.
    let raw: OpaquePointer
    private let probe: SDKProbeBox?

    /// Which threads may call a client (the SDK's `LSDK_AFFINITY_*`).
    ///
    /// Covered: starts, cancel, pause, resume, the session token and blocking calls. A covered
    /// call from another thread is counted in ``SDKCounters/affinityViolations`` and still
    /// performed. Not covered: ``SDKClient/post(_:)``, ``SDKClient/interrupt(key:)``, releasing
    /// handles, counters, and destroying the client.
    package enum Affinity: Int32, Sendable, Hashable, CaseIterable {
        /// Any thread may call.
        case any = 0
        /// Only the thread that created the client.
        case creator = 1
        /// Only the client's loop thread (the client needs one).
        case loop = 2
    }

    /// Whether the client runs a loop thread.
    package let hasLoopThread: Bool
    /// Which threads may call the client.
    package let affinity: Affinity

    /// Creates an SDK client with its worker pool. The calling thread becomes the client's
    /// creator (``Affinity/creator``).
    ///
    /// - Parameters:
    ///   - workerThreads: Pool threads, 1 ... 64.
    ///   - seed: Seed from which per-operation seeds are derived.
    ///   - loopThread: The client runs one dedicated loop thread: jobs posted with
    ///     ``post(_:)`` and callbacks of ``SimulatedBehavior/Delivery/loop`` operations run there.
    ///   - affinity: Which threads may call the client; ``Affinity/loop`` needs `loopThread`.
    ///   - sessionTokenProbe: Called (on the setter's thread) while the session-token setter is
    ///     entered; for tests that prove concurrent entry.
    /// - Throws: ``LegacySDKError/outOfRange`` for a worker count outside 1 ... 64 or a loop
    ///   affinity without a loop thread.
    package init(
        workerThreads: Int = 4, seed: UInt64 = 0, loopThread: Bool = false, affinity: Affinity = .any,
        sessionTokenProbe: (@Sendable () -> Void)? = nil
    ) throws(LegacySDKError) {
        var config = lsdk_client_config_t()
        lsdk_client_config_init(&config)
        config.worker_threads = UInt32(exactly: workerThreads) ?? .max
        config.seed = seed
        config.loop_thread = loopThread
        config.affinity = affinity.rawValue
        let probe = sessionTokenProbe.map(SDKProbeBox.init)
        if let probe {
            config.session_token_probe = sdkProbeTrampoline
            config.probe_context = Unmanaged.passUnretained(probe).toOpaque()
        }
        var client: OpaquePointer?
        let status = lsdk_client_create(&config, &client)
        guard status == lsdk_status_t(LSDK_OK), let client else { throw LegacySDKError(rawValue: status) }
        self.raw = client
        self.probe = probe
        self.hasLoopThread = loopThread
        self.affinity = affinity
    }

    /// Set once ``destroy()`` destroyed the client: deinit then has nothing to do.
    private let destroyed = LockedBox(false)

    /// Destroys the client now, as its deinit would: every operation is cancelled and releases its
    /// context, every SDK thread of the client ends, and later calls fail with
    /// ``LegacySDKError/clientDestroyed``. Blocks until done; for a scenario's end, so that an
    /// adapter that keeps the client (a leaked context) does not keep its threads running.
    ///
    /// - Returns: `false` when called on one of the client's own threads (the SDK refuses that)
    ///   or when the client was destroyed already.
    @discardableResult
    package func destroy() -> Bool {
        let first = destroyed.withLock { destroyed in
            defer { destroyed = true }
            return !destroyed
        }
        guard first else { return false }
        guard lsdk_client_destroy(raw) == lsdk_status_t(LSDK_OK) else {
            destroyed.withLock { $0 = false }  // refused on the client's own thread: deinit will try
            return false
        }
        return true
    }

    deinit {
        if destroyed.withLock({ $0 }) { return }
        let status = lsdk_client_destroy(raw)
        if status == lsdk_status_t(LSDK_ERR_WRONG_THREAD) {
            let pending = SDKPendingDestroy(raw: raw, probe: probe)
            // A thread of our own rather than Dispatch (the simulator imports neither Dispatch
            // nor Foundation, so the Apple-platform type check reaches it). If no thread can be
            // started, the client stays alive: destroying it here would be refused again.
            _ = startDetachedThread(name: "lsdk-destroy") { pending.destroy() }
        }
    }

    /// This client's counters (readable at any time).
    package var counters: SDKCounters {
        var out = lsdk_counters_t()
        let status = withExtendedLifetime(self) { lsdk_client_counters(raw, &out) }
        precondition(status == lsdk_status_t(LSDK_OK), "lsdk_client_counters failed: \(status)")
        return SDKCounters(out)
    }

    /// Runs `job` on the client's loop thread, after everything queued there before it (FIFO),
    /// never inside this call. Callable from any thread, the loop thread and SDK callbacks
    /// included. An accepted job runs exactly once: jobs still queued when the client is
    /// destroyed run before the destroy returns. `job` is released right after it ran, or at once
    /// when the post fails.
    ///
    /// - Parameter job: The work to run on the loop thread.
    /// - Throws: ``LegacySDKError/noLoopThread`` for a client without a loop thread;
    ///   ``LegacySDKError/clientDestroyed`` once the client's destroy finished its operations.
    package func post(_ job: @escaping @Sendable () -> Void) throws(LegacySDKError) {
        let context = Unmanaged.passRetained(SDKJobBox(job)).toOpaque()
        let status = withExtendedLifetime(self) { lsdk_client_post(raw, sdkJobTrampoline, context) }
        guard status == lsdk_status_t(LSDK_OK) else {
            // A refused job is never run: the retain is still ours.
            Unmanaged<SDKJobBox>.fromOpaque(context).release()
            throw LegacySDKError(rawValue: status)
        }
    }

    /// Whether the calling thread is this client's loop thread.
    package var isLoopThread: Bool {
        withExtendedLifetime(self) { lsdk_client_is_loop_thread(raw) }
    }

    /// A call that blocks the calling thread for `durationMicroseconds` (0 ... 60,000,000), like a
    /// connect or a synchronous query, then returns ``SDK/blockingResult(key:)``. Never call it on
    /// the cooperative pool: it really blocks. Covered by the client's affinity.
    ///
    /// - Parameters:
    ///   - key: Names the call for ``interrupt(key:)`` (keys need not be unique).
    ///   - durationMicroseconds: How long it blocks unless interrupted.
    /// - Returns: The call's result, derived from `key`.
    /// - Throws: ``LegacySDKError/interrupted`` when ``interrupt(key:)`` or the client's destruction
    ///   ended it early; ``LegacySDKError/outOfRange`` for a duration above 60 s;
    ///   ``LegacySDKError/clientDestroyed``.
    package func blockingCall(key: UInt64, durationMicroseconds: UInt32) throws(LegacySDKError) -> UInt64 {
        var result: UInt64 = 0
        let status = withExtendedLifetime(self) { lsdk_blocking_call(raw, key, durationMicroseconds, &result) }
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
        return result
    }

    /// Makes every call blocked in ``blockingCall(key:durationMicroseconds:)`` with `key` return at
    /// once with ``LegacySDKError/interrupted``. Callable from any thread (not covered by affinity).
    /// Not remembered: a call that has not started blocking yet is not affected.
    ///
    /// - Parameter key: The key of the calls to interrupt.
    /// - Returns: Whether a call was blocked with that key (`false`: nothing was changed).
    /// - Throws: ``LegacySDKError/clientDestroyed`` once the client's destroy began.
    @discardableResult
    package func interrupt(key: UInt64) throws(LegacySDKError) -> Bool {
        let status = withExtendedLifetime(self) { lsdk_interrupt(raw, key) }
        switch status {
        case lsdk_status_t(LSDK_OK): return true
        case lsdk_status_t(LSDK_ERR_NOT_BLOCKED): return false
        default: throw LegacySDKError(rawValue: status)
        }
    }

    /// Sets the session token. The SDK documents this call as not thread-safe; isolating it to
    /// ``LegacySDKActor`` serialises every call.
    ///
    /// - Parameter token: The token (at most 255 bytes are kept), or `nil` to clear it.
    /// - Throws: The SDK's error status, if it refuses the call.
    @LegacySDKActor
    func setSessionToken(_ token: String?) throws(LegacySDKError) {
        let status = withExtendedLifetime(self) {
            if let token {
                return token.withCString { lsdk_client_set_session_token(raw, $0) }
            }
            return lsdk_client_set_session_token(raw, nil)
        }
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
    }

    /// The session token, `nil` when none is set.
    package func sessionToken() throws(LegacySDKError) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let status = withExtendedLifetime(self) {
            buffer.withUnsafeMutableBufferPointer { lsdk_client_get_session_token(raw, $0.baseAddress, $0.count) }
        }
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
}

/// A destroy handed off from one of the SDK's own threads.
private struct SDKPendingDestroy: @unchecked Sendable {
    // @unchecked Sendable: the pointer is used once, by the one thread that destroys the client.
    let raw: OpaquePointer
    let probe: SDKProbeBox?

    func destroy() {
        _ = lsdk_client_destroy(raw)
        withExtendedLifetime(probe) {}
    }
}

// MARK: - Handle

/// One reference to an operation's handle, released exactly once, in deinit.
package final class SDKHandle: Sendable {
    let raw: lsdk_handle_t

    init(raw: lsdk_handle_t) { self.raw = raw }

    deinit {
        let status = lsdk_handle_release(raw)
        assert(status == lsdk_status_t(LSDK_OK), "lsdk_handle_release failed: \(status)")
    }

    /// Cancels the operation as its behaviour prescribes. Idempotent, thread-safe, callable from
    /// inside a callback of the same operation (a synchronous cancellation callback then runs
    /// re-entrantly, inside this call), harmless after the operation finished. With
    /// ``SimulatedBehavior/CancelMode/waits`` it blocks until no callback of the operation is
    /// running, and deadlocks (until the client is destroyed) when called from inside one.
    package func cancel() {
        let status = lsdk_cancel(raw)
        assert(status == lsdk_status_t(LSDK_OK), "lsdk_cancel failed: \(status)")
    }

    /// Pauses a stream (idempotent).
    ///
    /// - Throws: ``LegacySDKError/notAStream`` for a request.
    package func pause() throws(LegacySDKError) {
        let status = lsdk_pause(raw)
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
    }

    /// Resumes a paused stream (idempotent).
    ///
    /// - Throws: ``LegacySDKError/notAStream`` for a request.
    package func resume() throws(LegacySDKError) {
        let status = lsdk_resume(raw)
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
    }
}

// MARK: - Operations and conversions

package enum SDK {
    /// Starts a one-shot request.
    ///
    /// `onCompletion` may be called several times (repeats, cancellation, late callbacks, as the
    /// behaviour says), on any thread, possibly before this returns (synchronous delivery) or
    /// re-entrantly inside ``SDKHandle/cancel()``, possibly concurrently with itself.
    /// `onRelease` is called exactly once after a successful start, after the last `onCompletion`
    /// call; the closures are released right after it. Neither is called when the start fails.
    ///
    /// - Returns: The operation's handle, or the SDK's error (no callback will come).
    package static func startRequest(
        client: SDKClient, request: FetchRequest, behavior: SimulatedBehavior,
        onCompletion: @escaping @Sendable (Result<FetchResponse, LegacySDKError>) -> Void,
        onRelease: (@Sendable () -> Void)? = nil
    ) -> Result<SDKHandle, LegacySDKError> {
        let box = SDKContextBox(callback: .completion(onCompletion), onRelease: onRelease)
        let context = Unmanaged.passRetained(box).toOpaque()
        var handle: lsdk_handle_t = 0
        let status = withExtendedLifetime(client) {
            withCBehavior(behavior) { cBehavior in
                request.path.withCString { path in
                    var cRequest = lsdk_request_t(
                        path: path, response_size: UInt32(exactly: request.responseSize) ?? .max)
                    return lsdk_request_start(
                        client.raw, &cRequest, cBehavior, sdkCompletionTrampoline, context,
                        sdkReleaseTrampoline, &handle)
                }
            }
        }
        return finishStart(status: status, context: context, handle: handle)
    }

    /// Starts a streaming download.
    ///
    /// `onEvent` receives data and progress events and, unless the behaviour says otherwise, one
    /// end event; on any thread, possibly before this returns, re-entrantly inside
    /// ``SDKHandle/cancel()``, and concurrently with itself (out of order) when the behaviour's
    /// stream concurrency is above 1. `onRelease` is called exactly once after a successful start,
    /// after the last `onEvent` call. Neither is called when the start fails.
    ///
    /// - Returns: The operation's handle, or the SDK's error (no callback will come).
    package static func startDownload(
        client: SDKClient, request: DownloadRequest, behavior: SimulatedBehavior,
        onEvent: @escaping @Sendable (RawDownloadEvent) -> Void,
        onRelease: (@Sendable () -> Void)? = nil
    ) -> Result<SDKHandle, LegacySDKError> {
        let box = SDKContextBox(callback: .event(onEvent), onRelease: onRelease)
        let context = Unmanaged.passRetained(box).toOpaque()
        var handle: lsdk_handle_t = 0
        let status = withExtendedLifetime(client) {
            withCBehavior(behavior) { cBehavior in
                request.path.withCString { path in
                    var cRequest = lsdk_download_request_t(
                        path: path, total_bytes: UInt64(exactly: request.totalBytes) ?? .max)
                    return lsdk_download_start(
                        client.raw, &cRequest, cBehavior, sdkEventTrampoline, context, sdkReleaseTrampoline,
                        &handle)
                }
            }
        }
        return finishStart(status: status, context: context, handle: handle)
    }

    /// Starts a pull-style download, like libcurl's write callback that can answer "pause".
    ///
    /// Same as ``startDownload(client:request:behavior:onEvent:onRelease:)``, except that `onEvent`
    /// answers whether it took the event: `true` refuses it, and the stream pauses; the same event
    /// (same sequence number, same data) comes again as the first one after
    /// ``SDKHandle/resume()``. The answer is ignored for the end event, for the late callback after a
    /// cancel and once the stream is cancelled. ``SDKHandle/pause()`` keeps working.
    ///
    /// - Returns: The operation's handle, or the SDK's error (no callback will come).
    package static func startPullDownload(
        client: SDKClient, request: DownloadRequest, behavior: SimulatedBehavior,
        onEvent: @escaping @Sendable (RawDownloadEvent) -> Bool,
        onRelease: (@Sendable () -> Void)? = nil
    ) -> Result<SDKHandle, LegacySDKError> {
        let box = SDKContextBox(callback: .pullEvent(onEvent), onRelease: onRelease)
        let context = Unmanaged.passRetained(box).toOpaque()
        var handle: lsdk_handle_t = 0
        let status = withExtendedLifetime(client) {
            withCBehavior(behavior) { cBehavior in
                request.path.withCString { path in
                    var cRequest = lsdk_download_request_t(
                        path: path, total_bytes: UInt64(exactly: request.totalBytes) ?? .max)
                    return lsdk_download_start_pull(
                        client.raw, &cRequest, cBehavior, sdkPullEventTrampoline, context, sdkReleaseTrampoline,
                        &handle)
                }
            }
        }
        return finishStart(status: status, context: context, handle: handle)
    }

    private static func finishStart(
        status: lsdk_status_t, context: UnsafeMutableRawPointer, handle: lsdk_handle_t
    ) -> Result<SDKHandle, LegacySDKError> {
        guard status == lsdk_status_t(LSDK_OK) else {
            // The SDK keeps no reference after a failed start: the context is still ours.
            Unmanaged<SDKContextBox>.fromOpaque(context).release()
            return .failure(LegacySDKError(rawValue: status))
        }
        return .success(SDKHandle(raw: handle))
    }

    /// What a blocking call with `key` returns when it completes (the SDK's `lsdk_blocking_result`).
    package static func blockingResult(key: UInt64) -> UInt64 { lsdk_blocking_result(key) }

    /// The byte at `offset` of the content of request `requestID` (for verifying data).
    package static func contentByte(requestID: UInt64, offset: UInt64) -> UInt8 {
        lsdk_content_byte(requestID, offset)
    }

    /// The SDK's static description of a status.
    static func statusString(_ status: Int32) -> String {
        String(cString: lsdk_status_string(status))
    }

    static func processWideCounters() -> SDKCounters {
        var out = lsdk_counters_t()
        lsdk_global_counters(&out)
        return SDKCounters(out)
    }

    static func defaultBehavior() -> SimulatedBehavior {
        var behavior = lsdk_behavior_t()
        lsdk_behavior_init(&behavior)
        return SimulatedBehavior(behavior)
    }

    static func chaosBehavior(seed: UInt64) -> SimulatedBehavior {
        var behavior = lsdk_behavior_t()
        lsdk_behavior_init_chaos(&behavior, seed)
        return SimulatedBehavior(behavior)
    }

    /// Calls `body` with the C form of `behavior` (valid only during the call). Values are passed
    /// as they are, so the SDK validates them; an outcome list longer than the SDK's maximum keeps
    /// its length as the completion count (and the start fails with OUT_OF_RANGE).
    static func withCBehavior<R>(_ behavior: SimulatedBehavior, _ body: (UnsafePointer<lsdk_behavior_t>) -> R) -> R {
        var c = lsdk_behavior_t()
        lsdk_behavior_init(&c)
        c.delivery = behavior.delivery.rawValue
        c.delay_us = behavior.delayMicroseconds
        c.jitter_us = behavior.jitterMicroseconds
        c.completion_count = UInt32(clamping: behavior.outcomes.count)
        withUnsafeMutableBytes(of: &c.outcomes) { raw in
            let slots = raw.bindMemory(to: Int32.self)
            for (index, outcome) in behavior.outcomes.prefix(slots.count).enumerated() {
                slots[index] = outcome.rawValue
            }
        }
        c.cancel_mode = behavior.cancelMode.rawValue
        c.late_callback_after_cancel = behavior.lateCallbackAfterCancel
        c.chunk_size = behavior.chunkSize
        c.progress_every = behavior.progressEvery
        c.interval_us = behavior.intervalMicroseconds
        c.stream_concurrency = behavior.streamConcurrency
        c.stream_end = behavior.streamEnd.rawValue
        c.duplicate_terminal = behavior.duplicateTerminal
        c.events_after_terminal = behavior.eventsAfterTerminal
        c.pause_mode = behavior.pauseMode.rawValue
        c.error_status = behavior.errorStatus.rawValue
        c.seed = behavior.seed
        c.first_sequence = behavior.firstSequence
        c.sequence_bits = behavior.sequenceBits
        c.sequence_jump_at = behavior.sequenceJumpAt
        c.sequence_jump = behavior.sequenceJump
        c.sequence_corrupt_at = behavior.sequenceCorruptAt
        c.sequence_corrupt_value = behavior.sequenceCorruptValue
        guard let message = behavior.errorMessage else {
            c.error_message = nil
            return body(&c)
        }
        return message.withCString { cMessage in
            c.error_message = cMessage
            return body(&c)
        }
    }
}

// MARK: - Replies matched by id

/// One reply of an ``SDKConnection``, copied out of the SDK's callback.
package struct RawReply: Sendable, Hashable {
    /// The id the reply names.
    package var id: UInt64
    /// 0 for a success; otherwise the failure's status (`.cancelled` and `.disconnected` for the
    /// SDK's reports).
    package var status: Int32
    /// The request's number within its client; 0 for a reply to an id that was not pending.
    package var requestID: UInt64
    /// Numbers the request's callbacks from 1: duplicates, reports and late replies count on.
    package var attempt: Int
    /// The body of a success.
    package var body: [UInt8]
    /// The request's path for a success, the error's message otherwise.
    package var message: String

    /// The reply as the outcome of a fetch.
    package var result: Result<FetchResponse, LegacySDKError> {
        guard status == 0 else { return .failure(LegacySDKError(rawValue: status, message: message)) }
        return .success(FetchResponse(requestID: requestID, attempt: attempt, body: body, message: message))
    }
}

/// The callbacks of an ``SDKConnection``: one set is installed at a time, and the SDK releases
/// each set once, after the last callback it made with it.
package struct SDKReplyHandlers: Sendable {
    /// Every reply of the connection, on any thread, possibly inside a send, a cancel, a disconnect
    /// or a destroy, possibly concurrently with itself.
    package var onReply: @Sendable (RawReply) -> Void
    /// Once per disconnect, after its synchronous reports: whether the SDK disconnected by itself,
    /// and how many pending requests it dropped.
    package var onDisconnect: (@Sendable (_ spontaneous: Bool, _ dropped: UInt64) -> Void)?
    /// Once, after the last callback of this set.
    package var onRelease: (@Sendable () -> Void)?

    /// Creates a set of callbacks.
    package init(
        onReply: @escaping @Sendable (RawReply) -> Void,
        onDisconnect: (@Sendable (_ spontaneous: Bool, _ dropped: UInt64) -> Void)? = nil,
        onRelease: (@Sendable () -> Void)? = nil
    ) {
        self.onReply = onReply
        self.onDisconnect = onDisconnect
        self.onRelease = onRelease
    }
}

private func sdkReplyTrampoline(
    _ context: UnsafeMutableRawPointer?, _ id: UInt64, _ status: lsdk_status_t,
    _ response: UnsafePointer<lsdk_response_t>?
) {
    guard let response else { return }
    let handlers = SDKContext.value(of: context, as: SDKReplyHandlers.self)
    let payload = response.pointee
    let body = payload.body.map { Array(UnsafeBufferPointer(start: $0, count: payload.body_length)) } ?? []
    handlers.onReply(
        RawReply(
            id: id, status: status, requestID: payload.request_id, attempt: Int(payload.attempt), body: body,
            message: payload.message.map { String(cString: $0) } ?? ""))
}

private func sdkDisconnectTrampoline(_ context: UnsafeMutableRawPointer?, _ spontaneous: Bool, _ dropped: UInt64) {
    SDKContext.value(of: context, as: SDKReplyHandlers.self).onDisconnect?(spontaneous, dropped)
}

private func sdkReplyReleaseTrampoline(_ context: UnsafeMutableRawPointer?) {
    SDKContext.take(context, as: SDKReplyHandlers.self).onRelease?()
}

extension SDKReplyHandlers {
    /// The C form of the set; its context holds one retain, given up by the SDK's release (or by
    /// ``dropRefused(_:)`` when the SDK refused the set).
    fileprivate func retainedCallbacks() -> lsdk_rpc_callbacks_t {
        lsdk_rpc_callbacks_t(
            on_reply: sdkReplyTrampoline, on_disconnect: sdkDisconnectTrampoline,
            context: SDKContext.retain(self), release_context: sdkReplyReleaseTrampoline)
    }

    fileprivate static func dropRefused(_ callbacks: lsdk_rpc_callbacks_t) {
        SDKContext.release(callbacks.context, as: SDKReplyHandlers.self)
    }
}

/// Owns one RPC connection (`lsdk_rpc_t*`) of an ``SDKClient``: one reply callback for every
/// request, requests named by ids. Destroyed in deinit (or by ``destroy()``); the connection keeps
/// its client alive.
package final class SDKConnection: Sendable {
    /// How a disconnect reports the requests it drops (the SDK's `LSDK_DISCONNECT_*`).
    package enum DisconnectReport: Int32, Sendable, Hashable, CaseIterable {
        /// Each gets a `.disconnected` reply inside the disconnect, before `onDisconnect`.
        case synchronous = 0
        /// Each gets a `.disconnected` reply later, from a worker.
        case asynchronous = 1
        /// None is answered; only `onDisconnect` tells.
        case silent = 2
    }

    private let raw: RawConnection
    /// The client whose threads deliver the replies.
    package let client: SDKClient

    /// Creates a connection on `client`.
    ///
    /// - Parameters:
    ///   - client: The SDK client.
    ///   - idBits: Width of the ids, 8 ... 64.
    ///   - disconnectReport: How disconnects report dropped requests.
    ///   - unknownRepliesPerMille: After each reply, the chance of one for an id that is not pending.
    ///   - spontaneousDisconnectsPerMille: Each send's chance to cause a disconnect shortly after.
    ///   - seed: Seed of the connection's draws; 0 derives it from the client's seed.
    ///   - handlers: The callbacks, or `nil` to install them later (replies are discarded meanwhile).
    /// - Throws: ``LegacySDKError/outOfRange`` for a value out of its range,
    ///   ``LegacySDKError/clientDestroyed``.
    package init(
        client: SDKClient, idBits: Int = 32, disconnectReport: DisconnectReport = .synchronous,
        unknownRepliesPerMille: Int = 0, spontaneousDisconnectsPerMille: Int = 0, seed: UInt64 = 0,
        handlers: SDKReplyHandlers?
    ) throws(LegacySDKError) {
        var config = lsdk_rpc_config_t()
        lsdk_rpc_config_init(&config)
        config.id_bits = UInt32(clamping: idBits)
        config.disconnect_report = disconnectReport.rawValue
        config.unknown_reply_per_mille = UInt32(clamping: unknownRepliesPerMille)
        config.disconnect_per_mille = UInt32(clamping: spontaneousDisconnectsPerMille)
        config.seed = seed
        var callbacks = handlers?.retainedCallbacks()
        var made: OpaquePointer?
        let status = withExtendedLifetime(client) {
            if callbacks != nil { return lsdk_rpc_create(client.raw, &config, &callbacks!, &made) }
            return lsdk_rpc_create(client.raw, &config, nil, &made)
        }
        guard status == lsdk_status_t(LSDK_OK), let made else {
            if let callbacks { SDKReplyHandlers.dropRefused(callbacks) }
            throw LegacySDKError(rawValue: status)
        }
        self.raw = RawConnection(made)
        self.client = client
    }

    deinit {
        // Refused when it was destroyed already, explicitly or by its client's destroy.
        _ = lsdk_rpc_destroy(raw.pointer)
    }

    /// Installs `handlers` in place of the current set (the SDK releases the old one once its
    /// running callbacks returned).
    ///
    /// - Parameter handlers: The new callbacks, or `nil` for none.
    /// - Throws: ``LegacySDKError/clientDestroyed`` once the connection is destroyed.
    package func setHandlers(_ handlers: SDKReplyHandlers?) throws(LegacySDKError) {
        var callbacks = handlers?.retainedCallbacks()
        let status =
            callbacks != nil
            ? lsdk_rpc_set_callbacks(raw.pointer, &callbacks!) : lsdk_rpc_set_callbacks(raw.pointer, nil)
        guard status == lsdk_status_t(LSDK_OK) else {
            if let callbacks { SDKReplyHandlers.dropRefused(callbacks) }
            throw LegacySDKError(rawValue: status)
        }
    }

    /// Sends a request. Its replies come through the handlers, possibly before this returns (then
    /// before an SDK-assigned id is known here).
    ///
    /// - Parameters:
    ///   - request: What to send.
    ///   - behavior: How the SDK answers it (`outcomes` empty: never; several: duplicates).
    ///   - id: The caller's id (register it before calling: its reply may come first), or `nil` for
    ///     one the SDK assigns.
    /// - Returns: The request's id, or the SDK's error (no reply will come): `.duplicateID` for a
    ///   chosen id still pending, `.outOfRange` for an id above the connection's id width or an
    ///   invalid behaviour, `.resources` when every id is pending, `.clientDestroyed`.
    package func send(
        _ request: FetchRequest, behavior: SimulatedBehavior, id: UInt64?
    ) -> Result<UInt64, LegacySDKError> {
        var out: UInt64 = 0
        let status = withExtendedLifetime(self) {
            SDK.withCBehavior(behavior) { cBehavior in
                request.path.withCString { path in
                    var cRequest = lsdk_request_t(
                        path: path, response_size: UInt32(exactly: request.responseSize) ?? .max)
                    return lsdk_rpc_send(raw.pointer, &cRequest, cBehavior, id ?? 0, &out)
                }
            }
        }
        guard status == lsdk_status_t(LSDK_OK) else { return .failure(LegacySDKError(rawValue: status)) }
        return .success(out)
    }

    /// Cancels the pending request with `id` as its behaviour's cancel mode says.
    ///
    /// - Parameter id: The request's id.
    /// - Returns: Whether a request with that id was pending (`false`: nothing was changed).
    /// - Throws: ``LegacySDKError/clientDestroyed`` once the connection is destroyed.
    @discardableResult
    package func cancel(id: UInt64) throws(LegacySDKError) -> Bool {
        let status = withExtendedLifetime(self) { lsdk_rpc_cancel(raw.pointer, id) }
        switch status {
        case lsdk_status_t(LSDK_OK): return true
        case lsdk_status_t(LSDK_ERR_UNKNOWN_ID): return false
        default: throw LegacySDKError(rawValue: status)
        }
    }

    /// Drops every pending request (reported as configured), then calls `onDisconnect`, on this
    /// thread. Later sends work as before.
    ///
    /// - Throws: ``LegacySDKError/clientDestroyed`` once the connection is destroyed.
    package func disconnect() throws(LegacySDKError) {
        let status = withExtendedLifetime(self) { lsdk_rpc_disconnect(raw.pointer) }
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
    }

    /// Destroys the connection now: it disconnects, refuses every later call, and its handlers are
    /// released after their last callback (late replies may still come after this returns).
    ///
    /// - Throws: ``LegacySDKError/clientDestroyed`` when it was destroyed already.
    package func destroy() throws(LegacySDKError) {
        let status = withExtendedLifetime(self) { lsdk_rpc_destroy(raw.pointer) }
        guard status == lsdk_status_t(LSDK_OK) else { throw LegacySDKError(rawValue: status) }
    }
}

/// An `lsdk_rpc_t*`: the SDK's connection functions are thread-safe and a connection pointer
/// stays valid for the whole process (destroyed ones are tombstones), so it may cross threads.
private struct RawConnection: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

extension SDK {
    /// Starts a listener on `topic`: data events of `behavior.chunkSize` bytes, then an end event
    /// after `eventCount` of them (0: endless) as the behaviour's stream end says.
    ///
    /// The client has at most one listener per topic: a start on a taken topic fails with
    /// ``LegacySDKError/alreadyListening``. `onEvent` is called as for
    /// ``startDownload(client:request:behavior:onEvent:onRelease:)``; with synchronous delivery an
    /// endless listener delivers inside this call until a callback pauses or cancels it.
    ///
    /// - Returns: The listener's handle (cancel, pause, resume), or the SDK's error (no callback
    ///   will come).
    package static func startListener(
        client: SDKClient, topic: UInt64, eventCount: UInt64, behavior: SimulatedBehavior,
        onEvent: @escaping @Sendable (RawDownloadEvent) -> Void,
        onRelease: (@Sendable () -> Void)? = nil
    ) -> Result<SDKHandle, LegacySDKError> {
        let box = SDKContextBox(callback: .event(onEvent), onRelease: onRelease)
        let context = Unmanaged.passRetained(box).toOpaque()
        var handle: lsdk_handle_t = 0
        let status = withExtendedLifetime(client) {
            withCBehavior(behavior) { cBehavior in
                var request = lsdk_listen_request_t(topic: topic, event_count: eventCount)
                return lsdk_listen_start(
                    client.raw, &request, cBehavior, sdkEventTrampoline, context, sdkReleaseTrampoline, &handle)
            }
        }
        return finishStart(status: status, context: context, handle: handle)
    }
}

// MARK: - Bare round trip

/// One request of ``SDK/startBareRequest(client:path:_:resuming:)``: the continuation its
/// completion resumes, and whether the SDK has released it.
package final class SDKBareRequest: @unchecked Sendable {
    // @unchecked Sendable: `continuation` is written before the request goes to the SDK (whose
    // start orders that write before the worker's read) and read once, by the completion.
    fileprivate var continuation: UnsafeContinuation<UInt64, Never>?
    // A lock, not `Atomic`: the simulator builds on every Apple floor (Atomic needs macOS 15, iOS 18).
    private let released = LockedBox(false)

    package init() {}

    /// Whether the SDK has released the request: its completion has returned and no callback of
    /// the request will come.
    package var isReleased: Bool { released.withLock { $0 } }

    fileprivate func markReleased() { released.withLock { $0 = true } }
}

private func sdkBareCompletionTrampoline(
    _ context: UnsafeMutableRawPointer?, _ status: lsdk_status_t, _ response: UnsafePointer<lsdk_response_t>?
) {
    guard let context, let response else { return }
    let request = Unmanaged<SDKBareRequest>.fromOpaque(context).takeUnretainedValue()
    request.continuation?.resume(returning: response.pointee.request_id)
}

private func sdkBareReleaseTrampoline(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<SDKBareRequest>.fromOpaque(context).takeRetainedValue().markReleased()
}

extension SDK {
    /// Starts one request with the SDK's default behaviour whose completion resumes `continuation`
    /// with the request's number: the C round trip with nothing of the library around it, the
    /// floor the benchmarks measure ``LegacyClient/fetch(_:behavior:timeout:isolation:)`` against.
    ///
    /// - The completion comes once, from one of the SDK's workers, and copies nothing but the
    ///   request's number.
    /// - No handle is kept: the request cannot be cancelled.
    /// - `request` is released by the SDK after the completion returned (``SDKBareRequest/isReleased``).
    ///
    /// - Parameters:
    ///   - client: The client whose workers complete the request.
    ///   - path: The request's path.
    ///   - request: A fresh request, started once.
    ///   - continuation: Resumed with the request's number.
    /// - Precondition: The SDK accepts the start. It refuses only a destroyed client.
    package static func startBareRequest(
        client: SDKClient, path: String, _ request: SDKBareRequest,
        resuming continuation: UnsafeContinuation<UInt64, Never>
    ) {
        precondition(request.continuation == nil, "SDK.startBareRequest: start each SDKBareRequest once")
        request.continuation = continuation
        let context = Unmanaged.passRetained(request).toOpaque()
        let status = withExtendedLifetime(client) {
            path.withCString { cPath in
                var cRequest = lsdk_request_t(path: cPath, response_size: 0)
                return lsdk_request_start(
                    client.raw, &cRequest, nil, sdkBareCompletionTrampoline, context, sdkBareReleaseTrampoline, nil)
            }
        }
        guard status == lsdk_status_t(LSDK_OK) else {
            // The SDK keeps no reference after a failed start: the retain is still ours.
            Unmanaged<SDKBareRequest>.fromOpaque(context).release()
            preconditionFailure("SDK.startBareRequest: the SDK refused the start: \(statusString(status))")
        }
    }
}

extension SimulatedBehavior {
    /// The Swift form of a C behaviour (error_message is copied).
    init(_ c: lsdk_behavior_t) {
        let count = min(Int(c.completion_count), Int(LSDK_MAX_COMPLETIONS))
        let outcomes = withUnsafeBytes(of: c.outcomes) { raw in
            raw.bindMemory(to: Int32.self).prefix(count).map { Outcome(rawValue: $0) ?? .failure }
        }
        self.init(
            delivery: Delivery(rawValue: c.delivery) ?? .worker,
            delayMicroseconds: c.delay_us,
            jitterMicroseconds: c.jitter_us,
            outcomes: outcomes,
            cancelMode: CancelMode(rawValue: c.cancel_mode) ?? .callbackAsynchronously,
            lateCallbackAfterCancel: c.late_callback_after_cancel,
            chunkSize: c.chunk_size,
            progressEvery: c.progress_every,
            intervalMicroseconds: c.interval_us,
            streamConcurrency: c.stream_concurrency,
            streamEnd: StreamEnd(rawValue: c.stream_end) ?? .success,
            duplicateTerminal: c.duplicate_terminal,
            eventsAfterTerminal: c.events_after_terminal,
            pauseMode: PauseMode(rawValue: c.pause_mode) ?? .stops,
            errorStatus: LegacySDKError(rawValue: c.error_status),
            errorMessage: c.error_message.map { String(cString: $0) },
            seed: c.seed)
        firstSequence = c.first_sequence
        sequenceBits = c.sequence_bits
        sequenceJumpAt = c.sequence_jump_at
        sequenceJump = c.sequence_jump
        sequenceCorruptAt = c.sequence_corrupt_at
        sequenceCorruptValue = c.sequence_corrupt_value
    }
}

extension SDKCounters {
    init(_ c: lsdk_counters_t) {
        self.init()
        operationsStarted = c.operations_started
        operationsFinished = c.operations_finished
        callbacksSync = c.callbacks_sync
        callbacksWorker = c.callbacks_worker
        callbacksFreshThread = c.callbacks_fresh_thread
        callbacksRepeated = c.callbacks_repeated
        callbacksAfterCancel = c.callbacks_after_cancel
        callbacksReentrantCancel = c.callbacks_reentrant_cancel
        cancels = c.cancels
        streamEvents = c.stream_events
        streamEventsDroppedPaused = c.stream_events_dropped_paused
        streamEventsAfterTerminal = c.stream_events_after_terminal
        streamPauses = c.stream_pauses
        streamResumes = c.stream_resumes
        contextsCreated = c.contexts_created
        contextsReleased = c.contexts_released
        handlesCreated = c.handles_created
        handlesReleased = c.handles_released
        handlesOutstanding = c.handles_outstanding
        threadsCreated = c.threads_created
        badCalls = c.bad_calls
        callbacksLoop = c.callbacks_loop
        loopJobs = c.loop_jobs
        affinityViolations = c.affinity_violations
        cancelsInsideCallback = c.cancels_inside_callback
        cancelDeadlocks = c.cancel_deadlocks
        streamPausesByCallback = c.stream_pauses_by_callback
        blockingCalls = c.blocking_calls
        blockingCallsInterrupted = c.blocking_calls_interrupted
        blockingInFlight = c.blocking_in_flight
        blockingInFlightPeak = c.blocking_in_flight_peak
        rpcConnectionsCreated = c.rpc_connections_created
        rpcConnectionsFinished = c.rpc_connections_finished
        rpcRequestsSent = c.rpc_requests_sent
        rpcRequestsSettled = c.rpc_requests_settled
        rpcRequestsFinished = c.rpc_requests_finished
        rpcRequestsPending = c.rpc_requests_pending
        rpcRequestsLive = c.rpc_requests_live
        rpcReplies = c.rpc_replies
        rpcRepliesOutOfOrder = c.rpc_replies_out_of_order
        rpcRepliesDuplicate = c.rpc_replies_duplicate
        rpcRepliesUnknownID = c.rpc_replies_unknown_id
        rpcRepliesAfterDisconnect = c.rpc_replies_after_disconnect
        rpcRepliesAfterCancel = c.rpc_replies_after_cancel
        rpcRepliesDiscarded = c.rpc_replies_discarded
        rpcCancels = c.rpc_cancels
        rpcDisconnects = c.rpc_disconnects
        rpcDisconnectsSpontaneous = c.rpc_disconnects_spontaneous
        rpcDroppedAtDisconnect = c.rpc_dropped_at_disconnect
        listenerStarts = c.listener_starts
        listenerFinished = c.listener_finished
        listenerLive = c.listener_live
        listenerStops = c.listener_stops
        listenerEnds = c.listener_ends
        listenerBusy = c.listener_busy
        listenerEvents = c.listener_events
        listenerEventsWhilePaused = c.listener_events_while_paused
        listenerPauses = c.listener_pauses
        listenerResumes = c.listener_resumes
    }
}
