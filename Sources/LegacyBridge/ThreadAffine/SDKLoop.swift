/// A thread of the library's own that runs an SDK's event loop, and runs posted jobs on it.
///
/// Loop-driven SDKs (GLib and GIO, libuv, libcurl's multi interface, c-ares, MQTT clients) do
/// their work inside a loop function and must only be called from the thread running it. An
/// `SDKLoop` owns that thread: it runs the SDK's loop there, and between iterations the jobs
/// posted from any thread, one at a time, in the order they were posted. From it come the
/// pieces the rest of the library takes:
/// - ``scheduler``, an ``SDKScheduler`` for one-shot calls, streams and ``StreamControl``,
/// - ``executor``, an ``SDKThreadExecutor`` that makes the loop thread an actor's executor,
/// - ``run(isolation:_:)``, which runs a closure there and returns its result.
///
/// ```swift
/// let context = g_main_context_new()
/// let loop = try SDKLoop(name: "gio", driver: .iterating(
///     runOnce: { _ = g_main_context_iteration(context, 1) },
///     wake: { g_main_context_wakeup(context) }))
/// ```
///
/// Contract:
/// - Jobs run exactly once, in posting order, on the loop thread, never inside ``post(_:)``.
/// - A post from another thread wakes the loop, and so does a post from the loop thread outside
///   the library's own run of posted jobs, from inside one of the SDK's callbacks for example. A
///   job posted by another posted job runs before the loop blocks again, with no wake.
/// - ``shutdown(isolation:)`` refuses new jobs with ``OffloadError/shutDown``, runs every job
///   accepted before it, stops the SDK's loop and returns once the thread has left. Releasing the
///   last reference to the loop does the same in the background. Nothing accepted is dropped.
/// - The loop thread is never blocked by the library: it only waits inside the SDK's own loop.
public final class SDKLoop: Sendable {
    /// How the SDK's loop is driven.
    public struct Driver: Sendable {
        let kind: SDKLoopDriverKind

        /// The library calls `runOnce` again and again, and runs posted jobs between two calls.
        ///
        /// - Parameters:
        ///   - runOnce: Runs one iteration of the SDK's loop: waits until the SDK has work or
        ///     `wake` is called, does the work, returns. For example
        ///     `g_main_context_iteration(context, 1)`, `uv_run(loop, UV_RUN_ONCE)`, or
        ///     `curl_multi_poll` followed by `curl_multi_perform`.
        ///   - wake: Makes a `runOnce` that waits return soon. It is called from any thread and
        ///     must be sticky: a wake made while `runOnce` is not waiting makes its next wait
        ///     return at once. For example `g_main_context_wakeup`, `uv_async_send`,
        ///     `curl_multi_wakeup`, or a byte written to a pipe the loop polls.
        /// - Returns: The driver.
        public static func iterating(
            runOnce: @escaping @Sendable () -> Void, wake: @escaping @Sendable () -> Void
        ) -> Driver {
            Driver(kind: .iterating(runOnce: runOnce, wake: wake))
        }

        /// The SDK's own loop function runs for the life of the host, and the SDK runs the
        /// library's jobs inside it, for an SDK that offers no single iteration.
        ///
        /// - Parameters:
        ///   - run: Runs the SDK's loop until `stop` is called, for example `g_main_loop_run`.
        ///   - schedule: Makes the SDK call `drain` soon, on its loop thread, inside `run`. It is
        ///     called from any thread. For example `g_main_context_invoke` or `uv_async_send`
        ///     whose callback calls `drain`.
        ///   - stop: Makes `run` return; called on the loop thread, inside a `drain`, once
        ///     shutdown has run every job. For example `g_main_loop_quit`.
        /// - Returns: The driver.
        public static func running(
            run: @escaping @Sendable () -> Void,
            schedule: @escaping @Sendable (_ drain: @escaping @Sendable () -> Void) -> Void,
            stop: @escaping @Sendable () -> Void
        ) -> Driver {
            Driver(kind: .running(run: run, schedule: schedule, stop: stop))
        }
    }

    let core: SDKLoopCore
    /// The loop thread's name.
    public let name: String
    /// An executor on the loop thread: give it to an actor (`unownedExecutor`) whose methods
    /// call the SDK. It stays usable as long as this loop runs.
    public let executor: SDKThreadExecutor

    /// Starts the loop thread and the SDK's loop on it.
    ///
    /// Create the SDK's objects on the loop thread if the SDK requires it, with
    /// ``run(isolation:_:)``, before posting work that uses them.
    ///
    /// - Parameters:
    ///   - name: The thread's name, for debuggers and backtraces (cut to 15 bytes on Linux).
    ///   - driver: How to run the SDK's loop and wake it.
    /// - Throws: ``OffloadError/threadCreationFailed(code:)`` when the thread cannot be created.
    public convenience init(name: String = "sdk-loop", driver: Driver) throws(OffloadError) {
        try self.init(name: name, kind: driver.kind)
    }

    /// Starts a loop thread that waits on descriptors and timers, for a socket-driven SDK
    /// (libpq, hiredis, c-ares, libmosquitto, libcurl's multi-socket API).
    ///
    /// The thread waits on the descriptors given to ``watch(_:for:_:)``, the nearest timer of
    /// ``schedule(after:repeating:_:)`` and a wake pipe of its own, so that posted jobs interrupt
    /// the wait. It waits with `epoll` on Linux, `kqueue` on Apple platforms and `poll` elsewhere,
    /// under one contract. Each iteration runs a bounded batch of posted jobs, then waits (without
    /// blocking while jobs are queued), then runs the handlers of every ready descriptor (in the order they were watched),
    /// then the due timers (in deadline order). Every guarantee of a loop with a driver holds, and
    /// also:
    /// - Every ready descriptor's handler runs before the timers that fell due, however many are
    ///   ready. A burst of posted jobs is run in batches, with a look at the descriptors and
    ///   timers between two batches.
    /// - Readiness is level-triggered, as with `poll`: a handler that leaves data unread is called
    ///   again at the next wait. Change the interest when the SDK wants something else. For a
    ///   descriptor that only signals a change, give the watch the SDK's own readiness query
    ///   (``watch(_:for:readiness:_:)``).
    /// - A watch cancelled on the loop thread never reaches its handler again, even for readiness
    ///   already collected in the same iteration; the same holds for timers. When
    ///   ``DescriptorWatch/cancel(closingDescriptor:)`` returns, from any thread, the loop no
    ///   longer waits on the descriptor: closing it is safe.
    /// - Errors and hang-ups reach the handler whatever its interest; with `kqueue`, once the
    ///   interest holds readable or writable. A descriptor that is not
    ///   open is reported once as ``DescriptorEvents/invalid``; the watch then ends. Cancel a watch
    ///   before its descriptor is closed.
    /// - A number that comes to name a new file under a live watch (the SDK closed its socket and
    ///   opened another, as libpq does while it connects) is heard as the new file once the
    ///   watch's handler has returned or its interest was updated.
    /// - The cost of a wait does not grow with the number of descriptors watched (with `poll` it
    ///   does), nor with the number of timers armed.
    /// - A handler that throws ends its watch or timer, and the error goes to `onHandlerError`.
    ///   Without one, the process stops with a message that names the loop and the error.
    /// - Shutdown ends every watch and timer and releases their handlers once the thread has left.
    ///   It does not close the watched descriptors: they belong to the SDK.
    ///
    /// ```swift
    /// let loop = try SDKLoop(name: "redis")
    /// let watch = try loop.watch(socket, for: .readable) { events in
    ///     redisAsyncHandleRead(context)        // on the loop thread
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: The thread's name, for debuggers and backtraces (cut to 15 bytes on Linux).
    ///   - onHandlerError: Receives, on the loop thread, what a descriptor or timer handler threw.
    ///   - beforeWait: Runs on the loop thread before each wait, after the posted jobs. For an SDK
    ///     that says what it waits for only when asked (`mosquitto_want_write`, `ares_getsock`,
    ///     `PQflush`): update the watches' interest here.
    /// - Throws: ``DescriptorLoopError`` when the wake pipe, the wait set or the thread cannot be
    ///   created.
    public convenience init(
        name: String = "sdk-loop", onHandlerError: (@Sendable (any Error) -> Void)? = nil,
        beforeWait: (@Sendable () -> Void)? = nil
    ) throws(DescriptorLoopError) {
        try self.init(
            name: name, backend: .platformDefault, onHandlerError: onHandlerError, beforeWait: beforeWait)
    }

    /// A descriptor loop on a chosen backend: the tests run the loop's contract on each one the
    /// platform has, and the benchmarks compare them.
    package convenience init(
        name: String = "sdk-loop", backend: DescriptorBackend, onHandlerError: (@Sendable (any Error) -> Void)? = nil,
        beforeWait: (@Sendable () -> Void)? = nil
    ) throws(DescriptorLoopError) {
        let poller = try DescriptorPoller(
            loopName: name, backend: backend, onHandlerError: onHandlerError, beforeWait: beforeWait)
        do {
            try self.init(name: name, kind: .descriptors(poller))
        } catch {
            switch error {
            case .threadCreationFailed(let code): throw .threadCreationFailed(code: code)
            default: preconditionFailure("SDKLoop: starting a thread failed with \(error)")
            }
        }
    }

    init(name: String, kind: SDKLoopDriverKind) throws(OffloadError) {
        let core = SDKLoopCore(name: name, driver: kind)
        try core.start()
        self.core = core
        self.name = name
        self.executor = SDKThreadExecutor(name: name, scheduler: Self.scheduler(of: core))
    }

    /// Watches a descriptor: `handler` runs on the loop thread whenever the descriptor is ready for
    /// `interest`, or has an error or hang-up to report.
    ///
    /// Only for a loop made with ``init(name:onHandlerError:beforeWait:)``. Call it from any thread; a watch
    /// made on another thread is part of the next wait (the loop is woken).
    ///
    /// - Parameters:
    ///   - descriptor: An open descriptor, not watched by this loop already. Set it non-blocking
    ///     if handlers read or write until `EAGAIN`.
    ///   - interest: ``DescriptorEvents/readable``, ``DescriptorEvents/writable``, both, or
    ///     neither (errors and hang-ups only).
    ///   - handler: Receives what the descriptor is ready for. It runs on the loop thread.
    /// - Returns: The watch, to change its interest or cancel it.
    /// - Throws: ``OffloadError/shutDown`` once shutdown has begun; the handler then never runs.
    @discardableResult
    public func watch(
        _ descriptor: Int32, for interest: DescriptorEvents,
        _ handler: @escaping @Sendable (DescriptorEvents) throws -> Void
    ) throws(OffloadError) -> DescriptorWatch {
        try watch(descriptor, interest, readiness: nil, "watch(_:for:_:)", handler)
    }

    /// Watches a descriptor that only says "go look": the SDK keeps its own readiness, and its
    /// descriptor becomes readable when that readiness may have changed. ZeroMQ's `ZMQ_FD` with
    /// `ZMQ_EVENTS`, and SDK queues that signal through an eventfd, are of this kind.
    ///
    /// The loop asks `readiness` for what the SDK is ready for, as GLib asks a source's
    /// `prepare` and `check`:
    /// - before each wait, so after every handler, timer and batch of posted jobs. An SDK that
    ///   reports ready is dispatched without a wait that blocks. A send that took the
    ///   descriptor's signal is therefore never missed, and no adapter keeps a list of drains.
    /// - after each wait in which the descriptor signalled: the handler runs only when the SDK
    ///   says it is ready.
    ///
    /// `handler` receives what `readiness` reported, narrowed to `interest`, with the errors
    /// and hang-ups of the descriptor itself. Like any watch it is called again at the next
    /// iteration while the SDK stays ready, so a handler may take one message per call.
    /// The descriptor is waited on for readable only, whatever `interest` says.
    ///
    /// ```swift
    /// let watch = try loop.watch(queue.signal, for: .readable, readiness: { queue.events() }) { events in
    ///     while let message = queue.receive() { deliver(message) }   // on the loop thread
    /// }
    /// ```
    ///
    /// Only for a loop made with ``init(name:onHandlerError:beforeWait:)``. Call it from any thread.
    ///
    /// - Parameters:
    ///   - descriptor: The SDK's signal descriptor, open and not watched by this loop already.
    ///   - interest: What the handler wants of the SDK: ``DescriptorEvents/readable``,
    ///     ``DescriptorEvents/writable``, both, or neither.
    ///   - readiness: The SDK's own readiness, asked on the loop thread, for example
    ///     `ZMQ_EVENTS` turned into ``DescriptorEvents``. Keep it cheap: it is asked at every
    ///     iteration. It, or the handler, must take the descriptor's signal, as `ZMQ_EVENTS`
    ///     does, or reading the eventfd does. A signal left pending makes every wait return at
    ///     once.
    ///   - handler: Receives what the SDK is ready for. It runs on the loop thread.
    /// - Returns: The watch, to change its interest, ask for a ``DescriptorWatch/recheck()``
    ///   or cancel it.
    /// - Throws: ``OffloadError/shutDown`` once shutdown has begun; the handler then never runs.
    @discardableResult
    public func watch(
        _ descriptor: Int32, for interest: DescriptorEvents,
        readiness: @escaping @Sendable () -> DescriptorEvents,
        _ handler: @escaping @Sendable (DescriptorEvents) throws -> Void
    ) throws(OffloadError) -> DescriptorWatch {
        try watch(descriptor, interest, readiness: readiness, "watch(_:for:readiness:_:)", handler)
    }

    private func watch(
        _ descriptor: Int32, _ interest: DescriptorEvents, readiness: (@Sendable () -> DescriptorEvents)?,
        _ method: String, _ handler: @escaping @Sendable (DescriptorEvents) throws -> Void
    ) throws(OffloadError) -> DescriptorWatch {
        let poller = requirePoller(method)
        precondition(descriptor >= 0, "SDKLoop.watch: \(descriptor) is not a descriptor")
        precondition(
            DescriptorEvents.interests.isSuperset(of: interest),
            "SDKLoop.watch: an interest holds only .readable and .writable, not \(interest)")
        guard core.acceptsJobs,
            let id = poller.add(descriptor: descriptor, interest: interest, readiness: readiness, handler: handler)
        else { throw .shutDown }
        if !core.isCurrent { poller.wake() }
        return DescriptorWatch(descriptor: descriptor, id: id, core: core, poller: poller)
    }

    /// Runs `handler` on the loop thread once `delay` has passed, and then every `period` if one
    /// is given.
    ///
    /// Only for a loop made with ``init(name:onHandlerError:beforeWait:)``. Call it from any thread. A
    /// repeating timer that falls behind by more than a period skips what it missed.
    ///
    /// - Parameters:
    ///   - delay: Time until the first run, on the continuous clock; zero or less means the next
    ///     iteration.
    ///   - period: The time between runs of a repeating timer, more than zero; nil (the default)
    ///     runs once.
    ///   - handler: The work; it runs on the loop thread.
    /// - Returns: The timer, to cancel it.
    /// - Throws: ``OffloadError/shutDown`` once shutdown has begun; the handler then never runs.
    @discardableResult
    public func schedule(
        after delay: Duration, repeating period: Duration? = nil, _ handler: @escaping @Sendable () throws -> Void
    ) throws(OffloadError) -> LoopTimer {
        let poller = requirePoller("schedule(after:repeating:_:)")
        if let period {
            precondition(
                period > .zero, "SDKLoop.schedule: a repeating timer's period must be more than zero, not \(period)")
        }
        let deadline = ContinuousClock.now.advanced(by: max(delay, .zero))
        guard core.acceptsJobs, let id = poller.add(timerAt: deadline, period: period, handler: handler)
        else { throw .shutDown }
        if !core.isCurrent { poller.wake() }
        return LoopTimer(id: id, poller: poller)
    }

    private func requirePoller(_ method: String) -> DescriptorPoller {
        guard let poller = core.poller else {
            preconditionFailure(
                """
                SDKLoop '\(name)'.\(method): this loop runs the SDK's own loop (it was made with a \
                driver). Create it with SDKLoop(name:) to watch descriptors and timers.
                """)
        }
        return poller
    }

    /// Releasing the loop shuts it down in the background: jobs already accepted still run.
    deinit {
        core.requestShutdown(waiter: nil)
    }

    /// Posts a job to the loop thread.
    ///
    /// - Parameter job: The work, for example an SDK call; it runs once, after every job posted
    ///   before it.
    /// - Throws: ``OffloadError/shutDown`` once shutdown has begun; the job then never runs.
    public func post(_ job: @escaping @Sendable () -> Void) throws(OffloadError) {
        try core.post(job)
    }

    /// Whether the calling code runs on the loop thread.
    public var isCurrent: Bool { core.isCurrent }

    /// The loop thread as an ``SDKScheduler``: it posts with ``post(_:)`` and knows ``isCurrent``.
    public var scheduler: SDKScheduler { Self.scheduler(of: core) }

    /// What a loop made with ``init(name:onHandlerError:beforeWait:)`` holds now.
    ///
    /// A watch or a timer that outlives the request it served is a leak, and a watch ended by
    /// ``DescriptorEvents/invalid`` means a descriptor was closed (or its number replaced) under a
    /// live watch: close a watched descriptor with ``DescriptorWatch/cancel(closingDescriptor:)``,
    /// which ends the watch first. The conformance suite reads these for an adapter declared
    /// `.sdkLoop(loop)`. All zero for a loop that runs the SDK's own loop (made with a driver).
    public struct Statistics: Sendable, Hashable {
        /// Live watches.
        public var watches: Int
        /// Armed timers, repeating ones included.
        public var timers: Int
        /// Watches the loop ended since it started because their descriptor was not open: each was
        /// reported to its handler as ``DescriptorEvents/invalid``.
        public var watchesEndedInvalid: Int
    }

    /// Whether the loop waits on descriptors and timers itself (made with
    /// ``init(name:onHandlerError:beforeWait:)``), rather than running the SDK's own loop.
    package var watchesDescriptors: Bool { core.poller != nil }

    /// What the loop holds now; see ``Statistics``. Read it from any thread.
    public var statistics: Statistics {
        guard let counts = core.poller?.counts else { return Statistics(watches: 0, timers: 0, watchesEndedInvalid: 0) }
        return Statistics(watches: counts.watches, timers: counts.timers, watchesEndedInvalid: counts.invalidEnds)
    }

    /// Runs `body` on the loop thread and returns its result.
    ///
    /// It is not cancellable: keep `body` short. The caller resumes on its own isolation.
    ///
    /// - Parameters:
    ///   - isolation: The caller's isolation; leave the default.
    ///   - body: The work; it runs once, on the loop thread.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw, or ``OffloadError/shutDown`` if the loop no longer accepts jobs.
    public func run<Value: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: sending @escaping () throws -> Value
    ) async throws -> Value {
        let body = OffloadBody(body)
        let core = self.core
        return try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
            do {
                try core.post { continuation.resume(with: Result { try body.closure() }) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Stops the loop: refuses new jobs, runs the ones already accepted, stops the SDK's loop,
    /// and returns once the thread has left. Calling it again is harmless.
    ///
    /// - Parameter isolation: The caller's isolation; leave the default.
    public func shutdown(isolation: isolated (any Actor)? = #isolation) async {
        let core = self.core
        await withUnsafeContinuation(isolation: isolation) { (continuation: UnsafeContinuation<Void, Never>) in
            core.requestShutdown(waiter: continuation)
        }
    }

    private static func scheduler(of core: SDKLoopCore) -> SDKScheduler {
        SDKScheduler(post: { job in try core.post(job) }, isCurrent: { core.isCurrent })
    }
}
