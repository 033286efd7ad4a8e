// State confined to one loop thread, in a box that can cross threads: the check that makes it safe
// runs at each access, instead of an `@unchecked Sendable` on every adapter class that the
// `@Sendable` closures of `watch`, `post` and streams capture.

/// A box for state that belongs to one SDK thread: the thread of an ``SDKLoop``, of an
/// ``SDKThreadExecutor``, or the SDK's own loop thread. It is `Sendable`, so the `@Sendable`
/// closures of ``SDKLoop/watch(_:for:_:)``, ``SDKLoop/post(_:)`` and ``CallbackStream`` can
/// capture it, and its value is read and changed only on that thread.
///
/// ```swift
/// let pending = LoopBound([UInt64: Request](), on: loop.scheduler)
/// try loop.post { pending.value[id] = request }          // on the loop thread
/// ```
///
/// Contract:
/// - ``value`` and ``withValue(_:)`` check at each access that the calling code runs on the
///   scheduler's thread. Anywhere else they stop the process with a message that names the box
///   and says what to do: post the access to the thread.
/// - The box may be created on any thread: the value is handed over to it.
/// - The value is released with the box, on whichever thread releases the box last.
///
/// It is the shape of swift-nio's `NIOLoopBoundBox`, for any thread an ``SDKScheduler``
/// can recognise.
public final class LoopBound<Value>: @unchecked Sendable {
    // @unchecked Sendable: `storage` is only touched while `isCurrent()` holds, that is on the
    // one thread the scheduler names, so no two threads ever touch it.
    private var storage: Value
    private let isCurrent: @Sendable () -> Bool

    /// Creates a box whose value only `scheduler`'s thread may use.
    ///
    /// - Parameters:
    ///   - value: The initial value, handed over to the box.
    ///   - scheduler: The thread the value belongs to: ``SDKLoop/scheduler``,
    ///     ``SDKThreadExecutor/scheduler``, or an ``SDKScheduler`` made with
    ///     ``SDKScheduler/init(post:isCurrent:)`` for an SDK's own thread. It must know its
    ///     thread.
    public init(_ value: sending Value, on scheduler: SDKScheduler) {
        precondition(
            scheduler.knowsCurrentThread,
            """
            LoopBound: the scheduler cannot tell its thread. Create it with \
            SDKScheduler(post:isCurrent:), or use an SDKLoop's or SDKThreadExecutor's scheduler
            """)
        self.storage = value
        self.isCurrent = { scheduler.isCurrent }
    }

    /// The value. Read and change it only on the scheduler's thread.
    public var value: Value {
        get {
            checkThread()
            return storage
        }
        set {
            checkThread()
            storage = newValue
        }
        _modify {
            checkThread()
            yield &storage
        }
    }

    /// Runs `body` with the value, in place, on the scheduler's thread.
    ///
    /// - Parameter body: Reads or changes the value.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw.
    public func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        checkThread()
        return try body(&storage)
    }

    /// Whether the calling code may use the value: it runs on the scheduler's thread.
    public var isAccessible: Bool { isCurrent() }

    private func checkThread() {
        precondition(
            isCurrent(),
            """
            LoopBound<\(Value.self)> was used off its thread. Use it only in code that runs there: a \
            descriptor or timer handler, a job posted with post(_:), or an actor on the loop's \
            executor. From anywhere else, post the access to that thread
            """)
    }
}
