// The seam a one-shot adapter leaves in its callback path for the conformance suite. In
// production a probe is `.off` and every wrapper hands back what it was given; under the suite
// it watches the call and makes the SDK hostile in ways a real SDK rarely is on a test machine.
// It lives in the core so that shipped adapters take it without linking the suite.

/// A seam in a one-shot adapter's callback path, through which the conformance suite watches a
/// call to your real SDK and makes it misbehave.
///
/// Give your adapter a `probe` parameter that defaults to ``off`` and pass every SDK call through
/// it: the code that starts the call, the function the SDK's callback reports through, and the
/// SDK's cancel function. In production nothing changes: each wrapper returns what it was given.
///
/// ```swift
/// func loadContents(path: String, probe: CallProbe<[UInt8]> = .off) async throws -> [UInt8] {
///     try await withCallback { completion in
///         try probe.start {
///             let deliver = probe.callback { completion($0) }
///             let request = try sdk.load(path) { bytes, error in
///                 deliver(error.map { .failure($0) } ?? .success(bytes))
///             }
///             return CancelHandle { probe.cancel { request.cancel() } }
///         }
///     }
/// }
/// ```
///
/// Contract:
/// - Wrap the code that makes the SDK call, where it runs: inside `withCallback`'s `start`, or
///   inside the job the adapter posts to the SDK's thread.
/// - Wrap the function the SDK's callback reports through, once per call, before the SDK can call
///   back, and hand the wrapped one on.
/// - Run the SDK's cancel through ``cancel(_:)`` where the adapter makes it. An adapter that posts
///   its cancel to the SDK's thread makes it inside the posted job.
/// - A probe belongs to one call. The suite gives each call a fresh one.
public struct CallProbe<Value: Sendable>: Sendable {
    let hooks: (any CallProbeHooks<Value>)?

    /// A probe the suite drives.
    ///
    /// - Parameter hooks: What each wrapper reports to and asks of the suite.
    package init(hooks: any CallProbeHooks<Value>) {
        self.hooks = hooks
    }

    private init() {
        self.hooks = nil
    }

    /// The probe of production code: every wrapper returns what it was given.
    public static var off: CallProbe<Value> { CallProbe() }

    /// Runs the code that starts the SDK call.
    ///
    /// - Parameter body: Starts the call; it runs once, here, on this thread.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func start<Returned>(_ body: () throws -> Returned) rethrows -> Returned {
        guard let hooks else { return try body() }
        hooks.startBegins()
        let result: Returned
        do {
            result = try body()
        } catch {
            hooks.startEnded(threw: true)
            throw error
        }
        hooks.startEnded(threw: false)
        return result
    }

    /// Wraps the function the SDK's callback reports the call's result through.
    ///
    /// - Parameter deliver: Reports one result, for example a `Completion` or a continuation's resume.
    /// - Returns: The function to call from the SDK's callback instead of `deliver`.
    public func callback(
        _ deliver: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) -> @Sendable (Result<Value, any Error>) -> Void {
        guard let hooks else { return deliver }
        return hooks.wrapCallback(deliver)
    }

    /// Runs the code that calls the SDK's cancel.
    ///
    /// - Parameter body: Calls the SDK's cancel; it runs once, here, on this thread.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func cancel<Returned>(_ body: () throws -> Returned) rethrows -> Returned {
        guard let hooks else { return try body() }
        hooks.cancelBegins()
        defer { hooks.cancelEnded() }
        return try body()
    }
}

/// What a ``CallProbe`` reports to the conformance suite and asks of it.
package protocol CallProbeHooks<Value>: AnyObject, Sendable {
    associatedtype Value: Sendable
    /// The adapter is about to start the SDK call.
    func startBegins()
    /// The code that starts the SDK call returned, or threw.
    func startEnded(threw: Bool)
    /// The adapter hands the SDK's callback `deliver`; the suite returns what the callback calls.
    func wrapCallback(
        _ deliver: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) -> @Sendable (Result<Value, any Error>) -> Void
    /// The adapter is about to call the SDK's cancel.
    func cancelBegins()
    /// The SDK's cancel returned, or threw.
    func cancelEnded()
}
