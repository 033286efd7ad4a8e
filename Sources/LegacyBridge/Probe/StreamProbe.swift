// The seam a stream adapter leaves in its SDK's callback path for the conformance suite: `.off` in
// production, where every wrapper hands back what it was given.

/// A seam in a stream adapter's callback path, through which the conformance suite watches a
/// subscription to your real SDK and makes it misbehave.
///
/// Give the function that returns your stream a `probe` parameter that defaults to ``off``, and
/// pass the SDK's start, its event and end callbacks and its controls through it. In production
/// nothing changes: each wrapper returns what it was given.
///
/// ```swift
/// func changes(of path: String, probe: StreamProbe<Change> = .off) -> CallbackStream<Change> {
///     CallbackStream { sink in
///         let yield = probe.event { change in sink.yield(change) }
///         let end = probe.end { error in if let error { sink.finish(throwing: error) } else { sink.finish() } }
///         let monitor = try probe.start { try sdk.watch(path, onChange: yield, onEnd: end) }
///         return StreamControl(cancel: CancelHandle { probe.cancel { monitor.cancel() } })
///     }
/// }
/// ```
///
/// Contract:
/// - Run the code that starts the SDK's subscription through the probe where it runs, and its
///   cancel, pause and resume where the adapter makes them (inside a job posted to the SDK's
///   thread, when that is where they run).
/// - Wrap the functions the SDK's event and end callbacks call, once per subscription, before the
///   SDK can call them.
/// - A probe belongs to one subscription. The suite gives each a fresh one.
public struct StreamProbe<Element: Sendable>: Sendable {
    let hooks: (any StreamProbeHooks<Element>)?

    /// A probe the suite drives.
    ///
    /// - Parameter hooks: What each wrapper reports to and asks of the suite.
    package init(hooks: any StreamProbeHooks<Element>) {
        self.hooks = hooks
    }

    private init() {
        self.hooks = nil
    }

    /// The probe of production code: every wrapper returns what it was given.
    public static var off: StreamProbe<Element> { StreamProbe() }

    /// Runs the code that starts the SDK's subscription.
    ///
    /// - Parameter body: Starts the subscription; it runs once, here, on this thread.
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

    /// Wraps the function the SDK's event callback hands each event to.
    ///
    /// - Parameter yield: Passes one event on, for example to an `EventSink`; what it returns
    ///   goes back to the caller unchanged.
    /// - Returns: The function to call from the SDK's event callback instead of `yield`.
    public func event<Outcome>(
        _ yield: @escaping @Sendable (Element) -> Outcome
    ) -> @Sendable (Element) -> Outcome {
        guard let hooks else { return yield }
        return hooks.wrapEvent(yield)
    }

    /// Wraps the function that reports the end of the subscription: `nil` when it ended normally,
    /// or the error that ended it.
    ///
    /// - Parameter finish: Ends the stream, for example `EventSink.finish`.
    /// - Returns: The function to call from the SDK's end callback instead of `finish`.
    public func end(_ finish: @escaping @Sendable ((any Error)?) -> Void) -> @Sendable ((any Error)?) -> Void {
        guard let hooks else { return finish }
        return hooks.wrapEnd(finish)
    }

    /// Runs the code that calls the SDK's cancel.
    ///
    /// - Parameter body: Stops the subscription; it runs once, here, on this thread.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func cancel<Returned>(_ body: () throws -> Returned) rethrows -> Returned {
        try control(.cancel, body)
    }

    /// Runs the code that calls the SDK's pause.
    ///
    /// - Parameter body: Asks the SDK to stop delivering for now; it runs once, here.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func pause<Returned>(_ body: () throws -> Returned) rethrows -> Returned {
        try control(.pause, body)
    }

    /// Runs the code that calls the SDK's resume.
    ///
    /// - Parameter body: Lets a paused SDK deliver again; it runs once, here.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func resume<Returned>(_ body: () throws -> Returned) rethrows -> Returned {
        try control(.resume, body)
    }

    private func control<Returned>(_ control: StreamProbeControl, _ body: () throws -> Returned) rethrows -> Returned {
        guard let hooks else { return try body() }
        hooks.controlBegins(control)
        defer { hooks.controlEnded(control) }
        return try body()
    }
}

/// The control calls a ``StreamProbe`` wraps.
package enum StreamProbeControl: Sendable, Hashable {
    case cancel
    case pause
    case resume
}

/// What a ``StreamProbe`` reports to the conformance suite and asks of it.
package protocol StreamProbeHooks<Element>: AnyObject, Sendable {
    associatedtype Element: Sendable
    /// The adapter is about to start the subscription.
    func startBegins()
    /// The code that starts the subscription returned, or threw.
    func startEnded(threw: Bool)
    /// The suite returns what the SDK's event callback calls instead of `yield`.
    func wrapEvent<Outcome>(_ yield: @escaping @Sendable (Element) -> Outcome) -> @Sendable (Element) -> Outcome
    /// The suite returns what the SDK's end callback calls instead of `finish`.
    func wrapEnd(_ finish: @escaping @Sendable ((any Error)?) -> Void) -> @Sendable ((any Error)?) -> Void
    /// The adapter is about to call the SDK's control function.
    func controlBegins(_ control: StreamProbeControl)
    /// The SDK's control function returned, or threw.
    func controlEnded(_ control: StreamProbeControl)
}
