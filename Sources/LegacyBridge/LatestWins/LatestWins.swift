/// One-shot calls where a new call supersedes the one in flight: search as you type, reloading a
/// screen, the latest position of a slider.
///
/// Each ``run(isolation:timeout:_:)`` is a ``withCallback(isolation:timeout:onDiscard:_:)`` call
/// with a revision number. Starting a run cancels the previous one through its ``CancelHandle``,
/// and when a run comes back it commits only if it is still the newest:
///
/// ```swift
/// let search = LatestWins<[Hit]>()
///
/// func queryChanged(_ text: String) async {
///     do {
///         hits = try await search.run(timeout: .seconds(2)) { completion in
///             let query = index.search(text) { completion($0) }
///             return CancelHandle { query.cancel() }
///         }
///     } catch is SupersededError {
///         // a newer query runs: leave the screen to it
///     } catch {
///         show(error)
///     }
/// }
/// ```
///
/// Contract:
/// - Starting a run supersedes the previous one. If that run's outcome is still open, it is
///   cancelled: its cancel handle is called once, as a cancellation of its task would call it.
///   If it has not made its SDK call yet, it never makes it.
/// - A superseded run's caller throws ``SupersededError``, whatever its outcome was: a value that
///   arrived before or after it was superseded is never returned, and goes to `onDiscard` once.
/// - The revision check happens when the caller resumes, on its own isolation. Call `run` from one
///   actor, for example the main actor, and the check and your use of the value are one step: no
///   newer run can begin in between.
/// - Otherwise a run behaves as ``withCallback(isolation:timeout:onDiscard:_:)``: the first of
///   its completion, its timeout and its task's cancellation decides, and the other outcomes of
///   that function apply to the newest run.
/// - Runs may come from any task or thread. The newest is the one whose `run` began last.
public final class LatestWins<Value: Sendable>: Sendable {
    @usableFromInline let storage: LatestWinsStorage<Value>

    /// Creates a latest-wins sequence of runs.
    ///
    /// - Parameters:
    ///   - scheduler: Where the runs' cancel handles must run, for an SDK that must be called from
    ///     its own thread. Nil runs them where a one-shot gate runs its handle. A cancel the
    ///     scheduler refuses is not made.
    ///   - onDiscard: Receives each success value that no caller returned, exactly once: a value
    ///     that lost against its run's timeout or cancellation, and the value of a superseded run.
    public init(scheduler: SDKScheduler? = nil, onDiscard: (@Sendable (Value) -> Void)? = nil) {
        self.storage = LatestWinsStorage(scheduler: scheduler, onDiscard: onDiscard)
    }

    /// Starts a run that supersedes the current one, and awaits its result.
    ///
    /// `start` receives a ``Completion`` to hand to the SDK and returns how to cancel the call, as
    /// with ``withCallback(isolation:timeout:onDiscard:_:)``. It runs synchronously, on the caller,
    /// after the previous run was told to stop.
    ///
    /// - Parameters:
    ///   - isolation: The caller's isolation; leave the default.
    ///   - timeout: How long to wait for this run's outcome; nil (the default) waits forever.
    ///   - start: Starts the SDK call with the given completion and returns how to cancel it.
    /// - Returns: The run's value, if the run is still the newest when it comes back.
    /// - Throws: ``SupersededError`` if a newer run began or ``cancel()`` ran before this run came
    ///   back. Otherwise the call's error, the error `start` threw, `CancellationError`, or
    ///   ``BridgeTimeoutError``.
    @inlinable @inline(__always)
    public func run(
        isolation: isolated (any Actor)? = #isolation,
        timeout: Duration? = nil,
        _ start: (Completion<Value>) throws -> CancelHandle?
    ) async throws -> Value {
        let storage = self.storage
        let revision = storage.begin()
        let result: Result<Value, any Error>
        do {
            result = .success(
                try await withCallback(isolation: isolation, timeout: timeout, onDiscard: storage.onDiscard) {
                    completion in
                    // Superseded before its SDK call: the call is never made.
                    guard storage.register(revision, completion: completion) else { throw SupersededError() }
                    return try start(completion)?.posted(through: storage.scheduler)
                })
        } catch {
            result = .failure(error)
        }
        if storage.end(revision) {
            return try result.get()
        }
        // A newer run began: only the newest may commit.
        if case .success(let value) = result { storage.onDiscard?(value) }
        throw SupersededError()
    }

    /// Supersedes the current run without starting another, for example when the search field is
    /// cleared. Its caller throws ``SupersededError`` and its call is cancelled through its handle.
    public func cancel() {
        storage.cancelCurrent()
    }

    /// Counters of a ``LatestWins``.
    public struct Statistics: Sendable, Hashable {
        /// Runs started.
        public var runs: Int
        /// Runs whose caller threw ``SupersededError``.
        public var superseded: Int
    }

    /// The counters, read atomically.
    public var statistics: Statistics {
        storage.statistics
    }
}

/// The error a ``LatestWins`` run throws when a newer run began, or ``LatestWins/cancel()`` ran,
/// before it came back.
public struct SupersededError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Creates the error.
    public init() {}

    /// "superseded by a newer run".
    public var description: String {
        "superseded by a newer run"
    }
}
