// The seam a blocking-call adapter leaves around its SDK call for the conformance suite: `.off` in
// production, where both wrappers hand back what they were given.

/// A seam around a blocking SDK call, through which the conformance suite watches where and when
/// your real SDK is called and interrupted.
///
/// Give your adapter a `probe` parameter that defaults to ``off``, run the blocking call through
/// ``body(_:)`` and the SDK's interrupt through ``cancel(_:)``:
///
/// ```swift
/// func count(_ sql: String, probe: BlockingProbe = .off) async throws -> Int {
///     let interrupt = QueryInterrupt()  // remembered, and only this query's connection
///     return try await pool.run(cancel: CancelHandle { probe.cancel { interrupt.request() } }) {
///         try probe.body { try Connection.forCurrentThread().scalar(sql, interrupt: interrupt) }
///     }
/// }
/// ```
///
/// Contract:
/// - ``body(_:)`` runs the blocking call where the adapter runs it, and returns what it returns.
/// - Run the interrupt through ``cancel(_:)`` where the adapter makes it.
/// - A probe belongs to one call. The suite gives each call a fresh one.
public struct BlockingProbe: Sendable {
    let hooks: (any BlockingProbeHooks)?

    /// A probe the suite drives.
    ///
    /// - Parameter hooks: What each wrapper reports to the suite.
    package init(hooks: any BlockingProbeHooks) {
        self.hooks = hooks
    }

    private init() {
        self.hooks = nil
    }

    /// The probe of production code: both wrappers return what they were given.
    public static var off: BlockingProbe { BlockingProbe() }

    /// Makes the blocking SDK call.
    ///
    /// - Parameter call: The blocking call; it runs once, here, on this thread.
    /// - Returns: What `call` returns.
    /// - Throws: What `call` throws.
    public func body<Returned>(_ call: () throws -> Returned) rethrows -> Returned {
        guard let hooks else { return try call() }
        hooks.bodyBegins()
        let result: Returned
        do {
            result = try call()
        } catch {
            hooks.bodyEnded(threw: true)
            throw error
        }
        hooks.bodyEnded(threw: false)
        return result
    }

    /// Runs the code that calls the SDK's interrupt.
    ///
    /// - Parameter body: Makes a blocked call return early; it runs once, here, on this thread.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func cancel<Returned>(_ body: () throws -> Returned) rethrows -> Returned {
        guard let hooks else { return try body() }
        hooks.cancelBegins()
        defer { hooks.cancelEnded() }
        return try body()
    }
}

/// What a ``BlockingProbe`` reports to the conformance suite.
package protocol BlockingProbeHooks: AnyObject, Sendable {
    /// The blocking call is about to be made.
    func bodyBegins()
    /// The blocking call returned, or threw.
    func bodyEnded(threw: Bool)
    /// The adapter is about to call the SDK's interrupt.
    func cancelBegins()
    /// The SDK's interrupt returned, or threw.
    func cancelEnded()
}
