import LegacyBridge

/// Your one-shot adapter over your SDK, as the conformance suite checks it: calls of your real
/// adapter function that the suite can make, what the adapter declares, and what the SDK counts.
///
/// The suite cannot invent calls that succeed, fail or hang on your SDK: you supply them, over
/// the real SDK or a test double of it, each taking the ``CallProbe`` it should pass to the
/// adapter. Every scenario that needs something the fixture does not give is reported as not
/// checked, with the reason, never as a failure.
///
/// ```swift
/// let fixture = OneShotFixture<[UInt8]>(
///     name: "load-contents",
///     succeeding: { probe in try await loadContents(path: "/etc/hostname", probe: probe) },
///     failing: { probe in try await loadContents(path: "/no/such/file", probe: probe) },
///     hanging: .init(start: { probe in try await loadContents(path: slowPipe, probe: probe) },
///                    release: { writeToSlowPipe() }))
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the calls:
/// - Each call runs where the suite calls it, on its isolation: a `@MainActor` caller's call runs
///   on the main actor. An adapter function that takes `isolation: isolated (any Actor)? =
///   #isolation` picks that up.
/// - `succeeding` succeeds and `failing` fails, each time the SDK is asked. A hanging call does not
///   complete before its `release` runs. The suite reports a fixture that breaks this as a usage
///   error.
/// - `release` makes every hanging call started so far complete, with a value or an error. The
///   suite may call it several times, and calls it at the end of each scenario that hangs.
public struct OneShotFixture<Value: Sendable>: Sendable {
    /// One call of your adapter, with the probe to pass to it.
    public typealias Call = nonisolated(nonsending) @Sendable (_ probe: CallProbe<Value>) async throws -> Value

    /// A call that does not complete until it is released.
    public struct HangingCall: Sendable {
        let start: Call
        let release: @Sendable () -> Void

        /// Creates a hanging call.
        ///
        /// - Parameters:
        ///   - start: Calls the adapter on an SDK request that does not complete by itself, for
        ///     example a lookup a loopback server holds, or a read from a pipe nobody writes to.
        ///   - release: Lets every such request started so far complete.
        public init(start: @escaping Call, release: @escaping @Sendable () -> Void) {
            self.start = start
            self.release = release
        }
    }

    /// One call of your adapter given a timeout, with the probe to pass to it.
    public typealias TimedCallBody =
        nonisolated(nonsending) @Sendable (_ probe: CallProbe<Value>, _ timeout: Duration) async throws -> Value

    /// A call given the adapter's own timeout, on an SDK request that does not complete by itself.
    public struct TimedCall: Sendable {
        let call: TimedCallBody

        /// Creates a timed call.
        ///
        /// - Parameter call: Calls the adapter with `timeout` as its timeout, on a request that
        ///   does not complete by itself; the hanging call's `release` lets it go.
        public init(_ call: @escaping TimedCallBody) {
            self.call = call
        }
    }

    /// The fixture's name, unique among the adapters of a run.
    public var name: String { common.name }
    /// What every fixture declares besides its calls.
    let common: FixtureCommon
    let succeeding: Call?
    let failing: Call?
    let hanging: HangingCall?
    let timingOut: TimedCall?
    /// What is wrong with a value of the succeeding call (nil: nothing), when the fixture says
    /// which value it must be.
    let checkValue: (@Sendable (Value) -> String?)?

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called: ``AdapterThreading/anyThread`` (the default), or
    ///     ``AdapterThreading/sdkThread(_:)`` for an SDK that must only be called from its own thread.
    ///   - succeeding: A call that succeeds.
    ///   - failing: A call the SDK fails.
    ///   - hanging: A call that does not complete until released: it makes cancellation in flight,
    ///     late callbacks and the caller's responsiveness checkable.
    ///   - timingOut: A call given the adapter's own timeout, on a request that does not complete.
    ///   - liveResources: How many SDK resources are live now: requests, handles, retained
    ///     contexts. It must come back to where it was once every call has ended.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far, if your SDK or
    ///     its test double counts them.
    ///   - requestCancellation: Whether the SDK can stop one request (the default,
    ///     ``SDKRequestCancellation/perRequest``), or cannot (``SDKRequestCancellation/none``: what
    ///     a request allocated comes back with its late reply).
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        succeeding: Call?,
        failing: Call? = nil,
        hanging: HangingCall? = nil,
        timingOut: TimedCall? = nil,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil,
        requestCancellation: SDKRequestCancellation = .perRequest
    ) {
        self.common = FixtureCommon(
            name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls,
            requestCancellation: requestCancellation)
        self.succeeding = succeeding
        self.failing = failing
        self.hanging = hanging
        self.timingOut = timingOut
        self.checkValue = nil
    }

    init(_ fixture: OneShotFixture, checkValue: @escaping @Sendable (Value) -> String?) {
        self.common = fixture.common
        self.succeeding = fixture.succeeding
        self.failing = fixture.failing
        self.hanging = fixture.hanging
        self.timingOut = fixture.timingOut
        self.checkValue = checkValue
    }

}

extension OneShotFixture where Value: Equatable {
    /// Creates a fixture whose succeeding call must return `expected`.
    ///
    /// Every scenario that makes the succeeding call then compares the caller's value with it, so
    /// an adapter that returns something other than what its SDK delivered is caught: a payload
    /// copied after the callback returned (the SDK had already reused or freed it), a wrong field,
    /// a handle or a default in place of the value.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called (see the other initializer).
    ///   - succeeding: A call that succeeds.
    ///   - expected: The value the SDK delivers for `succeeding`, each time.
    ///   - failing: A call the SDK fails.
    ///   - hanging: A call that does not complete until released.
    ///   - timingOut: A call given the adapter's own timeout, on a request that does not complete.
    ///   - liveResources: How many SDK resources are live now.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    ///   - requestCancellation: Whether the SDK can stop one request (see the other initializer).
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        succeeding: @escaping Call,
        expecting expected: Value,
        failing: Call? = nil,
        hanging: HangingCall? = nil,
        timingOut: TimedCall? = nil,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil,
        requestCancellation: SDKRequestCancellation = .perRequest
    ) {
        self.init(
            OneShotFixture(
                name: name, threading: threading, succeeding: succeeding, failing: failing, hanging: hanging,
                timingOut: timingOut, liveResources: liveResources, offThreadCalls: offThreadCalls,
                requestCancellation: requestCancellation),
            checkValue: { value in
                value == expected ? nil : "the caller got \(value), but the SDK delivered \(expected)"
            })
    }
}

/// Whether an SDK can stop one request, as a fixture declares it for the scenarios that cancel a
/// caller or let it time out.
public enum SDKRequestCancellation: Sendable, Hashable {
    /// The SDK has a cancel per request, and the adapter calls it when its caller leaves: what the
    /// request allocated comes back then, before the hanging request is released.
    case perRequest
    /// The SDK cannot withdraw a request once made (hiredis's commands, an MQTT publish, a query
    /// without a cancel call): the adapter lets its caller go at once, the request runs on, and
    /// what it allocated comes back with its late reply. The scenarios that cancel a caller then
    /// release the hanging request and require the resources back after its late reply, and do
    /// not ask for the SDK's cancel; callback-inside-cancel is not checked. For a blocking call: no
    /// interrupt ends it (libgit2's network calls). The cancelled caller must still be let go at
    /// once, and whether the call is interrupted is not checked.
    case none
}
