import LegacyBridge

/// Your stream adapter over your SDK, as the conformance suite checks it: subscriptions of your
/// real adapter function that the suite can make, what the adapter declares, and what the SDK counts.
///
/// You supply subscriptions over the real SDK or a test double of it, each taking the
/// ``StreamProbe`` it should pass to the adapter. Every scenario that needs something the fixture
/// does not give is reported as not checked, with the reason, never as a failure.
///
/// ```swift
/// let fixture = StreamFixture<[UInt8]>(
///     name: "download",
///     threading: .sdkThread(loop.scheduler),
///     finite: { probe in loop.download(url: small, probe: probe) },
///     failing: { probe in loop.download(url: missing, probe: probe) },
///     endless: .init(start: { probe in loop.download(url: huge, probe: probe) }, release: {}),
///     bound: .backpressure(high: 64))
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the subscriptions:
/// - `finite` ends normally (after `finiteCount` events, when that is given); `failing` ends
///   with an error; an endless stream delivers events until its consumer leaves or `release` runs.
///   The suite reports a fixture that breaks this as a usage error.
/// - Each subscription is made where the suite makes it, on its isolation.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
public struct StreamFixture<Element: Sendable>: Sendable {
    /// One subscription of your adapter, with the probe to pass to it.
    public typealias Subscribe =
        nonisolated(nonsending) @Sendable (_ probe: StreamProbe<Element>) async throws -> any AsyncSequence<
            Element, any Error
        >

    /// A subscription that delivers events until its consumer leaves, or until it is released.
    public struct EndlessStream: Sendable {
        let start: Subscribe
        let release: @Sendable () -> Void

        /// Creates an endless stream.
        ///
        /// - Parameters:
        ///   - start: Subscribes to something that keeps delivering events, faster than a stalled
        ///     consumer takes them: a ticking source, a large download.
        ///   - release: Ends every such subscription started so far; may do nothing when the
        ///     subscriptions end on their own once their consumer left.
        public init(start: @escaping Subscribe, release: @escaping @Sendable () -> Void) {
            self.start = start
            self.release = release
        }
    }

    /// How the adapter buffers events its consumer has not taken yet, as it declares it.
    public struct Bound: Sendable, Hashable {
        enum Kind: Sendable, Hashable {
            case unbounded
            case backpressure(high: Int)
            case dropping(limit: Int)
        }

        let kind: Kind

        /// Every event is kept: memory grows while the consumer is slower than the SDK.
        public static var unbounded: Bound { Bound(kind: .unbounded) }

        /// The adapter stops the SDK (pause, or a yield's answer) when `high` events wait, and
        /// lets it go on once the consumer caught up. Nothing is lost.
        ///
        /// - Parameter high: The most events that wait before the SDK is stopped.
        /// - Returns: The declaration.
        public static func backpressure(high: Int) -> Bound {
            precondition(high >= 1, "StreamFixture.Bound.backpressure(high: \(high)): high must be at least 1")
            return Bound(kind: .backpressure(high: high))
        }

        /// The adapter keeps at most `limit` waiting events and drops others.
        ///
        /// - Parameter limit: The most events that wait.
        /// - Returns: The declaration.
        public static func dropping(limit: Int) -> Bound {
            precondition(limit >= 1, "StreamFixture.Bound.dropping(limit: \(limit)): limit must be at least 1")
            return Bound(kind: .dropping(limit: limit))
        }
    }

    /// The fixture's name, unique among the adapters of a run.
    public var name: String { common.name }
    /// What every fixture declares besides its calls.
    let common: FixtureCommon
    let finite: Subscribe?
    let finiteCount: Int?
    let failing: Subscribe?
    let endless: EndlessStream?
    let ordered: (@Sendable (Element) -> UInt64)?
    let bound: Bound

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the SDK must be called: ``AdapterThreading/anyThread`` (the default), or
    ///     ``AdapterThreading/sdkThread(_:)``.
    ///   - finite: A subscription that delivers a known number of events, then ends normally.
    ///   - finiteCount: How many events `finite` delivers, when that is fixed; `nil` for a
    ///     stream whose events vary, such as the chunks of a download. Either way the consumer must
    ///     get the events the probe saw the SDK deliver before its end.
    ///   - failing: A subscription that ends with an error.
    ///   - endless: A subscription that delivers until its consumer leaves: it makes leaving
    ///     early and a stalled consumer checkable.
    ///   - ordered: The sequence number of an event, for an adapter that delivers events in
    ///     sequence without gaps or repeats; the suite then checks that order.
    ///   - bound: How the adapter buffers for a slow consumer.
    ///   - liveResources: How many SDK resources are live now; it must come back to where it was.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        finite: Subscribe?,
        finiteCount: Int? = nil,
        failing: Subscribe? = nil,
        endless: EndlessStream? = nil,
        ordered: (@Sendable (Element) -> UInt64)? = nil,
        bound: Bound = .unbounded,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil
    ) {
        self.common = FixtureCommon(
            name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls)
        self.finite = finite
        self.finiteCount = finiteCount
        self.failing = failing
        self.endless = endless
        self.ordered = ordered
        self.bound = bound
    }

}
