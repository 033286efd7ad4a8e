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
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every stream scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: StreamAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every blocking-call scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: BlockingAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every thread-affine scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: ThreadAffineAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every keyed-request scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: KeyedRequestAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every shared-subscription scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: SharedSubscriptionAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every latest-wins scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: LatestWinsAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// Runs every coalesced-call scenario against `adapter`.
    /// - Parameters:
    ///   - adapter: The adapter to check.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Adapter: CoalescedAdapter>(
        _ adapter: Adapter, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(adapter, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(OneShotAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: OneShotAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            OneShotScenarios.all, on: adapter as any OneShotAdapter, name: adapter.name, kind: .oneShot,
            options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(StreamAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: StreamAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            StreamScenarios<Adapter>.all, on: adapter, name: adapter.name, kind: .stream, options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(BlockingAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: BlockingAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            BlockingScenarios.all, on: adapter as any BlockingAdapter, name: adapter.name, kind: .blocking,
            options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(ThreadAffineAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: ThreadAffineAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            ThreadAffineScenarios.all, on: adapter as any ThreadAffineAdapter, name: adapter.name, kind: .threadAffine,
            options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(KeyedRequestAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: KeyedRequestAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            KeyedScenarios.all, on: adapter as any KeyedRequestAdapter, name: adapter.name, kind: .keyed,
            options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(SharedSubscriptionAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: SharedSubscriptionAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            SharedSubscriptionScenarios<Adapter>.all, on: adapter, name: adapter.name, kind: .shared, options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(LatestWinsAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: LatestWinsAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            LatestWinsScenarios.all, on: adapter as any LatestWinsAdapter, name: adapter.name, kind: .latestWins,
            options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// ``run(_:options:)-(CoalescedAdapter,_)``, calling `onResult` as each scenario ends.
    package static func run<Adapter: CoalescedAdapter>(
        _ adapter: Adapter, options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            CoalescedScenarios.all, on: adapter as any CoalescedAdapter, name: adapter.name, kind: .coalesced,
            options: options,
            onResult: onResult, makeContext: LabContext.make)
    }

    /// Runs every one-shot scenario against your adapter over your SDK, as `fixture` makes it possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a
    /// failure: ``ConformanceReport/failures`` holds what the adapter got wrong.
    /// - Parameters:
    ///   - fixture: Calls of your adapter, what it declares, what its SDK counts.
    ///   - options: Watchdog bound, burst size, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Value: Sendable>(
        _ fixture: OneShotFixture<Value>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(OneShotFixture<Value>,_)``, calling `onResult` as each scenario ends.
    package static func run<Value: Sendable>(
        _ fixture: OneShotFixture<Value>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            OneShotFixtureScenarios<Value>.all, on: fixture, name: fixture.name, kind: .oneShot, options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
    }

    /// Runs every stream scenario against your adapter over your SDK, as `fixture` makes it possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a failure.
    /// - Parameters:
    ///   - fixture: Subscriptions of your adapter, what it declares, what its SDK counts.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func run<Element: Sendable>(
        _ fixture: StreamFixture<Element>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(StreamFixture<Element>,_)``, calling `onResult` as each scenario ends.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    package static func run<Element: Sendable>(
        _ fixture: StreamFixture<Element>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            StreamFixtureScenarios<Element>.all, on: fixture, name: fixture.name, kind: .stream, options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
    }

    /// Runs every blocking-call scenario against your adapter over your SDK, as `fixture` makes it
    /// possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a failure.
    /// - Parameters:
    ///   - fixture: Calls of your adapter, what it declares, what its SDK counts.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Value: Sendable>(
        _ fixture: BlockingFixture<Value>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(BlockingFixture<Value>,_)``, calling `onResult` as each scenario ends.
    package static func run<Value: Sendable>(
        _ fixture: BlockingFixture<Value>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            BlockingFixtureScenarios<Value>.all, on: fixture, name: fixture.name, kind: .blocking, options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
    }

    /// Runs every keyed-request scenario against your adapter over your SDK, as `fixture` makes it
    /// possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a failure.
    /// - Parameters:
    ///   - fixture: Requests of your adapter by id, how to make the SDK answer them, what it counts.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Value: Sendable>(
        _ fixture: KeyedFixture<Value>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(KeyedFixture<Value>,_)``, calling `onResult` as each scenario ends.
    package static func run<Value: Sendable>(
        _ fixture: KeyedFixture<Value>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            KeyedFixtureScenarios<Value>.all, on: fixture, name: fixture.name, kind: .keyed, options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
    }

    /// Runs every shared-subscription scenario against your adapter over your SDK, as `fixture`
    /// makes it possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason.
    /// - Parameters:
    ///   - fixture: Consumers of your adapter, how to make the SDK deliver, how to count listeners.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func run<Element: Sendable>(
        _ fixture: SharedSubscriptionFixture<Element>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(SharedSubscriptionFixture<Element>,_)``, calling `onResult` as each
    /// scenario ends.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    package static func run<Element: Sendable>(
        _ fixture: SharedSubscriptionFixture<Element>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            SharedSubscriptionFixtureScenarios<Element>.all, on: fixture, name: fixture.name, kind: .shared,
            options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
    }

    /// Runs every latest-wins scenario against your adapter over your SDK, as `fixture` makes it
    /// possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a failure.
    /// - Parameters:
    ///   - fixture: Calls of your adapter by key, how to make the SDK answer them, what it counts.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Value: Sendable>(
        _ fixture: LatestWinsFixture<Value>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(LatestWinsFixture<Value>,_)``, calling `onResult` as each scenario ends.
    package static func run<Value: Sendable>(
        _ fixture: LatestWinsFixture<Value>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            LatestWinsFixtureScenarios<Value>.all, on: fixture, name: fixture.name, kind: .latestWins, options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
    }

    /// Runs every coalesced-call scenario against your adapter over your SDK, as `fixture` makes it
    /// possible.
    ///
    /// Scenarios the fixture does not make possible are reported as not checked, with the reason;
    /// a fixture that contradicts its own declaration gets a usage error. Neither counts as a failure.
    /// - Parameters:
    ///   - fixture: Calls of your adapter by key, how to make the SDK answer them, what it counts.
    ///   - options: Watchdog bound, seed, scenario filter.
    /// - Returns: One result per scenario.
    public static func run<Value: Sendable>(
        _ fixture: CoalescedFixture<Value>, options: ConformanceOptions = .init()
    ) async -> ConformanceReport {
        await run(fixture, options: options, onResult: nil)
    }

    /// ``run(_:options:)-(CoalescedFixture<Value>,_)``, calling `onResult` as each scenario ends.
    package static func run<Value: Sendable>(
        _ fixture: CoalescedFixture<Value>, options: ConformanceOptions,
        onResult: (@Sendable (ScenarioResult) -> Void)?
    ) async -> ConformanceReport {
        await report(
            CoalescedFixtureScenarios<Value>.all, on: fixture, name: fixture.name, kind: .coalesced, options: options,
            onResult: onResult, makeContext: FixtureContext.maker(fixture.common))
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

    /// Runs `scenarios` against `subject` in the one run loop, as a report.
    private static func report<Subject: Sendable, Context: ScenarioContext>(
        _ scenarios: [Scenario<Subject, Context>], on subject: Subject, name: String, kind: AdapterKind,
        options: ConformanceOptions, onResult: (@Sendable (ScenarioResult) -> Void)?,
        makeContext: @escaping @Sendable (ScenarioSetup) throws -> Context
    ) async -> ConformanceReport {
        let results = await runScenarios(
            scenarios, on: subject, options: options, onResult: onResult, makeContext: makeContext)
        return ConformanceReport(adapter: name, kind: kind, results: results)
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
