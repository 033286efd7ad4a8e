/// Where an SDK must be called: a function that runs a job later on the thread, queue or event
/// loop the SDK requires, and optionally a way to tell whether the calling code already runs there.
///
/// Single-threaded SDKs (libcurl's multi interface, c-ares channels, GLib main contexts, most GUI
/// and device SDKs) must only be called from their own thread. One scheduler describes that thread
/// for every part of the library that calls the SDK:
/// - ``StreamControl``'s `pause`, `resume` and `cancel` calls, and a stream's `start` with
///   ``CallbackStream/init(of:buffering:ordering:scheduler:_:)``,
/// - `start` and the cancel handle of ``withCallback(isolation:timeout:scheduler:onDiscard:_:)``,
/// - an ``SDKThreadExecutor`` that makes the thread an actor's executor.
///
/// ```swift
/// let scheduler = SDKScheduler(post: { job in loop.post(job) }, isCurrent: { loop.isCurrent })
/// StreamControl(scheduler: scheduler, cancel: CancelHandle { transfer.remove() })
/// ```
///
/// Contract for the `post` function:
/// - It runs `job` exactly once, later, on the SDK's thread, in the order of posting.
/// - It never runs `job` before it returns, and never blocks: it is called from any thread,
///   including a producer's thread inside a yield and the task runtime's cancellation handler.
/// - It throws when the job cannot run any more (the loop was shut down). The job is then dropped
///   and the library treats the call as impossible; what that means is documented where a
///   scheduler is taken.
public struct SDKScheduler: Sendable {
    @usableFromInline let enqueue: @Sendable (_ job: @escaping @Sendable () -> Void) throws -> Void
    @usableFromInline let currentCheck: (@Sendable () -> Bool)?

    /// Creates a scheduler from a function that runs a job later on the SDK's thread, for an
    /// SDK whose thread cannot be told from others.
    ///
    /// - Parameter post: Queues `job` to run on the SDK's thread, per the contract above.
    public init(_ post: @escaping @Sendable (_ job: @escaping @Sendable () -> Void) throws -> Void) {
        self.enqueue = post
        self.currentCheck = nil
    }

    /// Creates a scheduler from a function that runs a job later on the SDK's thread and a
    /// function that tells whether the calling code runs there.
    ///
    /// - Parameters:
    ///   - post: Queues `job` to run on the SDK's thread, per the contract above.
    ///   - isCurrent: Whether the calling code runs on the SDK's thread. Needed by
    ///     ``SDKThreadExecutor``, and lets callers already on the thread skip a hop.
    public init(
        post: @escaping @Sendable (_ job: @escaping @Sendable () -> Void) throws -> Void,
        isCurrent: @escaping @Sendable () -> Bool
    ) {
        self.enqueue = post
        self.currentCheck = isCurrent
    }

    /// Queues `job` to run on the SDK's thread.
    ///
    /// - Parameter job: The work, for example an SDK call.
    /// - Throws: What the scheduler's `post` function throws; `job` then never runs.
    public func post(_ job: @escaping @Sendable () -> Void) throws {
        try enqueue(job)
    }

    /// Whether the calling code runs on the SDK's thread; `false` when the scheduler cannot tell.
    public var isCurrent: Bool {
        currentCheck?() ?? false
    }

    /// Whether the scheduler can tell its thread: it was created with `isCurrent`.
    public var knowsCurrentThread: Bool {
        currentCheck != nil
    }
}

extension CancelHandle {
    /// This handle, or, given a scheduler, a handle that posts this one's call through it (the
    /// keyed, latest-wins and coalesced primitives take a scheduler for the SDK calls they make).
    /// A post the scheduler refuses is dropped: the SDK's loop is gone, and the call with it.
    @usableFromInline
    func posted(through scheduler: SDKScheduler?) -> CancelHandle {
        guard let scheduler else { return self }
        let cancel = self.cancel
        return CancelHandle { try? scheduler.post(cancel) }
    }
}
