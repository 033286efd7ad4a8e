/// A serial executor that runs everything on one thread: for SDKs that must only be called from
/// the thread that created them, or from their own loop thread.
///
/// Give an actor this executor and every one of its methods runs on that thread, so the SDK is
/// only ever called from there, by construction:
///
/// ```swift
/// actor Camera {
///     private let executor: SDKThreadExecutor       // the actor keeps its executor alive
///     private let device: OpaquePointer
///     nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
///
///     init() async throws {
///         let executor = try SDKThreadExecutor(name: "camera")
///         self.executor = executor
///         self.device = try await executor.run { try cam_open() }   // created on that thread
///     }
///
///     func exposure() -> Double { cam_exposure(device) }             // called on that thread
/// }
/// ```
///
/// An SDK callback that arrives on the executor's thread (the SDK calls back from inside a call
/// the actor made, or from its loop thread when the executor wraps that loop) can enter the
/// actor synchronously, without a hop: `camera.assumeIsolated { $0.handle(event) }`. The check
/// succeeds on the executor's thread (this type implements `isIsolatingCurrentContext()` and
/// `checkIsolated()`), and stops the process with a clear message anywhere else; test
/// ``isCurrentThread`` first if the thread is not certain.
///
/// Two kinds:
/// - ``init(name:)`` owns a dedicated pthread. Jobs and posted closures run one at a time in the
///   order they arrive. The thread ends after the last reference to the executor is released and
///   everything already queued has run; releasing never blocks.
/// - ``init(name:scheduler:)`` runs on a thread the SDK gives, through an ``SDKScheduler`` that
///   posts to the SDK's loop and tells whether the calling code runs on it.
///
/// ``execute(_:)`` posts a plain closure to the same thread, in order with the actor's jobs, and
/// ``scheduler`` describes the thread for ``StreamControl`` and the rest of the library.
public final class SDKThreadExecutor: SerialExecutor, Sendable {
    private enum Backend: Sendable {
        case dedicated(OffloadPoolCore)
        case scheduler(SDKScheduler)
    }

    private let backend: Backend
    /// The executor's name (its thread's name, for the dedicated kind).
    public let name: String

    /// Creates an executor with its own dedicated thread.
    ///
    /// - Parameter name: The thread's name, for debuggers and backtraces (cut to 15 bytes on Linux).
    /// - Throws: ``OffloadError/threadCreationFailed(code:)`` when the thread cannot be created.
    public init(name: String = "sdk-thread") throws(OffloadError) {
        let core = OffloadPoolCore(name: name, width: 1, queueLimit: .max)
        try core.start()
        self.backend = .dedicated(core)
        self.name = name
    }

    /// Creates an executor that runs on a thread the SDK owns, through a scheduler that posts to it.
    ///
    /// The scheduler's `post` must keep accepting jobs for as long as any actor uses this
    /// executor: a job it refuses stops the process with a message, since the runtime's job
    /// cannot be dropped.
    ///
    /// - Parameters:
    ///   - name: A name for messages.
    ///   - scheduler: Posts to the SDK's thread. It must be created with
    ///     ``SDKScheduler/init(post:isCurrent:)``: an executor has to know its thread, and a
    ///     scheduler that cannot tell stops the process with a message.
    public init(name: String = "sdk-loop", scheduler: SDKScheduler) {
        precondition(
            scheduler.knowsCurrentThread,
            "SDKThreadExecutor '\(name)': the scheduler must tell whether code runs on the SDK's thread. "
                + "Create it with SDKScheduler(post:isCurrent:).")
        self.backend = .scheduler(scheduler)
        self.name = name
    }

    deinit {
        if case .dedicated(let core) = self.backend {
            core.beginShutdown(.drain, waiter: nil)
        }
    }

    /// Runs `job` on the executor's thread, after everything enqueued before it.
    ///
    /// The `UnownedJob` entry point is the one every supported OS version has: `ExecutorJob`
    /// needs macOS 14 and iOS 17, and the runtime reaches this method through it where it exists.
    ///
    /// - Parameter job: The job the runtime hands over.
    public func enqueue(_ job: UnownedJob) {
        let executor = self.asUnownedSerialExecutor()
        switch self.backend {
        case .dedicated(let core):
            if case .failure(let error) = core.submit(.job(job, executor), interruptible: false) {
                // Unreachable while the executor exists: it only stops once released.
                preconditionFailure(
                    "SDKThreadExecutor '\(self.name)' refused a job (\(error)). Keep the executor alive, "
                        + "for example in a stored property of the actor, as long as any actor uses it.")
            }
        case .scheduler(let scheduler):
            do {
                try scheduler.post { job.runSynchronously(on: executor) }
            } catch {
                preconditionFailure(
                    "SDKThreadExecutor '\(self.name)': its scheduler refused a job (\(error)). Keep the SDK's "
                        + "loop running as long as any actor uses this executor.")
            }
        }
    }

    /// This executor, unowned, for an actor's `unownedExecutor`.
    ///
    /// - Returns: The unowned reference the runtime uses.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Whether the calling code runs on the executor's thread: what `assumeIsolated` asks when the
    /// runtime does not already know (code that the SDK called on that thread).
    ///
    /// - Returns: `true` on the executor's thread, `false` elsewhere.
    public func isIsolatingCurrentContext() -> Bool? {
        self.isCurrentThread
    }

    /// Stops the process unless the calling code runs on the executor's thread.
    public func checkIsolated() {
        precondition(
            self.isCurrentThread,
            "SDKThreadExecutor '\(self.name)': not on the executor's thread. Hop onto the actor with "
                + "await, or check isCurrentThread before assumeIsolated.")
    }

    /// Whether the calling code runs on the executor's thread.
    public var isCurrentThread: Bool {
        switch self.backend {
        case .dedicated(let core): return core.isCurrentThread
        case .scheduler(let scheduler): return scheduler.isCurrent
        }
    }

    /// Posts a closure to the executor's thread; it runs once, after everything enqueued before it.
    ///
    /// Nothing waits for it; it never fails (the dedicated thread's queue has no bound).
    ///
    /// - Parameter work: The closure, for example an SDK call that must be made on that thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        switch self.backend {
        case .dedicated(let core):
            if case .failure(let error) = core.submit(.closure(work), interruptible: false) {
                preconditionFailure("SDKThreadExecutor '\(self.name)' refused a closure (\(error))")
            }
        case .scheduler(let scheduler):
            do {
                try scheduler.post(work)
            } catch {
                preconditionFailure(
                    "SDKThreadExecutor '\(self.name)': its scheduler refused a closure (\(error)). Keep the "
                        + "SDK's loop running as long as the executor is used.")
            }
        }
    }

    /// This executor's thread as an ``SDKScheduler``: posts with ``execute(_:)``, and knows
    /// ``isCurrentThread``. Give it to ``StreamControl`` so that control calls run here too.
    public var scheduler: SDKScheduler {
        SDKScheduler(post: { [self] job in self.execute(job) }, isCurrent: { [self] in self.isCurrentThread })
    }

    /// The core of the dedicated kind (tests).
    var dedicatedCore: OffloadPoolCore? {
        if case .dedicated(let core) = self.backend { return core }
        return nil
    }

    /// Runs a closure on the executor's thread and returns its result, for work outside an actor
    /// (creating the SDK object on the thread that must own it, for example).
    ///
    /// It is not cancellable: keep `body` short. The caller resumes on its own isolation.
    ///
    /// - Parameters:
    ///   - isolation: The caller's isolation; leave the default.
    ///   - body: The work; it runs once, on the executor's thread.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw.
    public func run<Value: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: sending @escaping () throws -> Value
    ) async throws -> Value {
        let body = OffloadBody(body)
        return try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
            self.execute {
                continuation.resume(with: Result { try body.closure() })
            }
        }
    }
}
