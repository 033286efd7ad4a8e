import LegacyBridge
import LegacySimulator

/// The conformance suite: runs the one-shot, stream, blocking, thread-affine, keyed-request,
/// shared-subscription, latest-wins or coalesced-call contract against an adapter.
///
/// Each scenario drives a simulated legacy SDK in one hostile behaviour, on its own SDK client,
/// bounded by a watchdog, and reports pass/fail with a reason. Call it from your own tests:
/// ```swift
/// let report = await ConformanceSuite.run(MyAdapter())
/// #expect(report.failures.isEmpty, "\(report.rendered)")
/// ```
/// In-process runs cannot survive an adapter that traps (a double resume of a checked
/// continuation, a failed precondition) and cannot see sanitizer reports: run your adapters
/// crash-isolated with ``ConformanceRunner`` (a small executable of yours), the way
/// `legacy-bridge conformance` runs the package's own.
public enum ConformanceSuite {
    /// Runs every one-shot scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, burst size, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: OneShotAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every stream scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: StreamAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every blocking-call scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: BlockingAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every thread-affine scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: ThreadAffineAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every keyed-request scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: KeyedRequestAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every shared-subscription scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: SharedSubscriptionAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every latest-wins scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: LatestWinsAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every coalesced-call scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: CoalescedAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await ConformanceSubject(adapter, gallery: false).run(options: options)
    }

    /// Runs every scenario against your adapter over your SDK, as `fixture` makes it possible:
    /// a ``OneShotFixture``, ``StreamFixture``, ``BlockingFixture``, ``KeyedFixture``,
    /// ``SharedSubscriptionFixture``, ``LatestWinsFixture`` or ``CoalescedFixture``.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a
    /// failure: ``ConformanceReport/failures`` holds what the adapter got wrong.
    /// - Parameters:
    ///   - fixture: Calls of your adapter, what it declares, what its SDK counts.
    ///   - options: Watchdog bound, burst size, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run(
        _ fixture: some ConformanceFixture, options: ConformanceOptions = .init()
    ) async
        -> ConformanceReport
    {
        await fixture.conformanceSubject.run(options: options)
    }

    /// The scenarios of the real-adapter path for one kind of adapter (``OneShotFixture``,
    /// ``StreamFixture``, ``BlockingFixture``, ``KeyedFixture``, ``SharedSubscriptionFixture``,
    /// ``LatestWinsFixture``, ``CoalescedFixture``): names and one-line summaries, in run order.
    /// - Parameter kind: The kind of adapter; thread-affine adapters have no fixture (declare
    ///   ``AdapterThreading/sdkThread(_:)`` on the fixture of their kind instead).
    /// - Returns: `(name, summary)` pairs.
    public static func fixtureScenarios(for kind: AdapterKind) -> [(name: String, summary: String)] {
        switch kind {
        case .oneShot:
            return OneShotFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .stream:
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else { return [] }
            return StreamFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .blocking:
            return BlockingFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .keyed:
            return KeyedFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .shared:
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else { return [] }
            return SharedSubscriptionFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .latestWins:
            return LatestWinsFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .coalesced:
            return CoalescedFixtureScenarios<Int>.all.map { ($0.name, $0.summary) }
        case .threadAffine:
            return []
        }
    }

    /// The scenarios for one kind of adapter: names and one-line summaries, in run order.
    /// - Parameter kind: The kind of adapter.
    /// - Returns: `(name, summary)` pairs.
    public static func scenarios(for kind: AdapterKind) -> [(name: String, summary: String)] {
        switch kind {
        case .oneShot:
            return OneShotScenarios.all.map { ($0.name, $0.summary) }
        case .stream:
            return StreamScenarios<NeverStreamAdapter>.all.map { ($0.name, $0.summary) }
        case .threadAffine:
            return ThreadAffineScenarios.all.map { ($0.name, $0.summary) }
        case .blocking:
            return BlockingScenarios.all.map { ($0.name, $0.summary) }
        case .keyed:
            return KeyedScenarios.all.map { ($0.name, $0.summary) }
        case .shared:
            return SharedSubscriptionScenarios<NeverSharedAdapter>.all.map { ($0.name, $0.summary) }
        case .latestWins:
            return LatestWinsScenarios.all.map { ($0.name, $0.summary) }
        case .coalesced:
            return CoalescedScenarios.all.map { ($0.name, $0.summary) }
        }
    }
}

/// Stands in for an adapter type when only scenario names are needed.
struct NeverStreamAdapter: StreamAdapter {
    var name: String { "" }
    var summary: String { "" }
    func events(from source: LegacyEventSource) -> AsyncStream<LegacyEvent> {
        AsyncStream { $0.finish() }
    }
}
