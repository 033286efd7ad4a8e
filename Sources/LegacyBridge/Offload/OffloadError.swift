/// Why an ``OffloadPool``, an ``SDKThreadExecutor`` or an ``SDKLoop`` could not be created, or
/// refused work.
///
/// Work that is refused never runs, and nothing of it is kept: the error is all that happens.
public enum OffloadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The thread count is outside `1 ... OffloadPool.maximumThreads` (a zero-width pool could
    /// never run anything).
    case invalidThreadCount(Int)
    /// The queue limit is negative.
    case invalidQueueLimit(Int)
    /// Every thread is busy and `limit` jobs already wait: the pool's documented bound. Retry
    /// later, slow the caller down, or create the pool with a larger `queueLimit`.
    case queueFull(limit: Int)
    /// The pool or loop was shut down: it takes no new work. A pool shut down with
    /// `.rejectQueued` also refuses the work that was still waiting.
    case shutDown
    /// The system refused to create a thread (`pthread_create` returned `code`, e.g. `EAGAIN`).
    case threadCreationFailed(code: Int32)

    /// A readable message, e.g. "offload queue full (limit 1024 waiting jobs)".
    public var description: String {
        switch self {
        case .invalidThreadCount(let count):
            return "invalid offload thread count \(count) (must be 1 ... \(OffloadPool.maximumThreads))"
        case .invalidQueueLimit(let limit):
            return "invalid offload queue limit \(limit) (must be 0 or more)"
        case .queueFull(let limit):
            return "offload queue full (limit \(limit) waiting jobs)"
        case .shutDown:
            return "shut down: no new work is accepted"
        case .threadCreationFailed(let code):
            return "could not create an offload thread (pthread_create returned \(code))"
        }
    }
}
