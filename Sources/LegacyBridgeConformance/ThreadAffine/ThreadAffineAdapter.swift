import LegacyBridge
import LegacySimulator

/// A simulated single-threaded SDK, as a thread-affine scenario hands it to an adapter.
///
/// It runs its own loop thread and must only be called from there, like libcurl's multi
/// interface, c-ares or a GUI toolkit: ``call(_:)``, ``start(_:)`` and the cancel function that
/// `start` returns count every call from another thread as a violation (and still do their job,
/// so a broken adapter is reported, not crashed). ``post(_:)`` is how other threads reach the
/// loop thread; it may be called from anywhere.
public struct LegacyAffineSDK: Sendable {
    let client: SDKClient
    let behavior: SimulatedBehavior
    let probe: AffineProbe

    /// Runs `work` on the SDK's loop thread, later (never inside this call), after everything
    /// posted before it. Callable from any thread.
    ///
    /// - Parameter work: The closure to run there.
    public func post(_ work: @escaping @Sendable () -> Void) {
        do {
            try client.post(work)
        } catch {
            probe.notePostRefused()
        }
    }

    /// Whether the calling thread is the SDK's loop thread.
    public var isSDKThread: Bool { client.isLoopThread }

    /// A quick synchronous SDK call; must be made on the SDK's thread.
    ///
    /// - Parameter number: Any number; the payload carries it back as its `requestID`.
    /// - Returns: A payload with `requestID == number` and `attempt == 1`.
    public func call(_ number: UInt64) -> LegacyPayload {
        _ = try? client.sessionToken()  // a covered call: counted when it comes from another thread
        probe.noteCall()
        return LegacyPayload(requestID: number, attempt: 1)
    }

    /// Starts a one-shot operation; must be made on the SDK's thread, and so must the returned
    /// cancel function. The callback comes from one of the SDK's threads.
    ///
    /// - Parameter callback: Called with the operation's outcomes.
    /// - Returns: The cancel function, or `nil` when the start failed (the callback then had the error).
    public func start(_ callback: @escaping @Sendable (Result<LegacyPayload, any Error>) -> Void) -> LegacyCancel? {
        let started = SDK.startRequest(
            client: client, request: FetchRequest(path: "/affine", responseSize: 8), behavior: behavior,
            onCompletion: { result in callback(result.map(LegacyPayload.init).mapError { $0 }) })
        switch started {
        case .success(let handle):
            return { handle.cancel() }
        case .failure(let error):
            callback(.failure(error))
            return nil
        }
    }
}

/// What an adapter of a thread-affine SDK gives its callers: calls that may come from any task,
/// any isolation, at the same time.
public protocol ThreadAffineSession: Sendable {
    /// Makes ``LegacyAffineSDK/call(_:)`` on the SDK's thread and returns its payload.
    ///
    /// - Parameter number: Passed on to the SDK.
    /// - Returns: The SDK's payload.
    /// - Throws: Whatever the adapter's bridging throws.
    func call(_ number: UInt64) async throws -> LegacyPayload

    /// Runs ``LegacyAffineSDK/start(_:)`` to its outcome, starting and cancelling on the SDK's thread.
    ///
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, or `CancellationError` when the calling task was cancelled.
    func value() async throws -> LegacyPayload
}

/// Something that wraps a thread-affine SDK so that Swift code can call it from anywhere.
///
/// Conform in a few lines with an actor on an `SDKThreadExecutor` over the SDK's post function:
/// ```swift
/// struct MyAdapter: ThreadAffineAdapter {
///     var name: String { "mine" }
///     var summary: String { "an actor on the SDK's loop" }
///     func open(_ sdk: LegacyAffineSDK) async throws -> any ThreadAffineSession { MySession(sdk) }
/// }
/// ```
public protocol ThreadAffineAdapter: Sendable {
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Wraps `sdk`; the scenario then calls the session from many tasks at once.
    ///
    /// - Parameter sdk: The thread-affine SDK.
    /// - Returns: The session.
    /// - Throws: When the adapter cannot set itself up.
    func open(_ sdk: LegacyAffineSDK) async throws -> any ThreadAffineSession
}

/// Counts what the SDK side of a thread-affine scenario saw.
final class AffineProbe: Sendable {
    private struct State {
        var calls = 0
        var refusedPosts = 0
    }
    private let state = LockedBox(State())

    func noteCall() { state.withLock { $0.calls += 1 } }
    func notePostRefused() { state.withLock { $0.refusedPosts += 1 } }
    var calls: Int { state.withLock { $0.calls } }
    var refusedPosts: Int { state.withLock { $0.refusedPosts } }
}
