import LegacyBridge
import LegacySimulator

/// One adapter for the conformance suite to check, of any kind, with what is expected of it.
///
/// Make one of your real adapters over its SDK with ``oneShot(_:)-(OneShotFixture<Value>)``,
/// ``stream(_:)-(StreamFixture<Element>)``, ``blocking(_:)-(BlockingFixture<Value>)``,
/// ``keyed(_:)-(KeyedFixture<Value>)``, ``shared(_:)-(SharedSubscriptionFixture<Element>)``,
/// ``latestWins(_:)-(LatestWinsFixture<Value>)`` or ``coalesced(_:)-(CoalescedFixture<Value>)``, or
/// one of your patterns over the simulated SDK with ``oneShot(_:)-(Adapter)``,
/// ``stream(_:)-(Adapter)``, ``blocking(_:)-(Adapter)``, ``threadAffine(_:)``,
/// ``keyed(_:)-(Adapter)``, ``shared(_:)-(Adapter)``, ``latestWins(_:)-(Adapter)`` or
/// ``coalesced(_:)-(Adapter)``, and hand a list
/// of them to ``ConformanceRunner/main(_:)``: each is expected to pass every scenario it can run.
/// (The package's own bad-adapter gallery uses the same type, expecting each of its adapters to be
/// flagged.)
public struct ConformanceSubject: Sendable {
    /// The adapter's name.
    public let name: String
    /// One line describing it.
    public let summary: String
    /// One-shot, stream, blocking, thread-affine, keyed, shared, latest-wins or coalesced.
    public let kind: AdapterKind
    /// `true` for adapters that are wrong on purpose (the gallery): they are expected to be flagged.
    package let isGallery: Bool
    /// The scenarios that must flag it (empty for adapters expected to pass).
    package let flaggedBy: [String]
    /// The sanitizer its mistake needs to be seen (a data race, a use of freed memory), if any: in
    /// other builds of the runner it is not checked.
    package let flaggedOnlyUnder: Sanitizer?
    /// The scenarios that apply, in run order.
    private let scenarios: [ScenarioInfo]
    private let runner: @Sendable (ConformanceOptions, (@Sendable (ScenarioResult) -> Void)?) async -> ConformanceReport

    /// An adapter of yours that bridges a one-shot operation; expected to pass every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func oneShot<Adapter: OneShotAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that bridges an event stream; expected to pass every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func stream<Adapter: StreamAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that runs a blocking SDK call off the cooperative pool; expected to pass
    /// every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func blocking<Adapter: BlockingAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that wraps an SDK which must only be called from its own thread;
    /// expected to pass every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func threadAffine<Adapter: ThreadAffineAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that turns requests answered through one global reply callback into
    /// async calls; expected to pass every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func keyed<Adapter: KeyedRequestAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that lets many consumers follow one SDK listener; expected to pass
    /// every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func shared<Adapter: SharedSubscriptionAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that lets a new call supersede the one in flight; expected to pass every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func latestWins<Adapter: LatestWinsAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// An adapter of yours that lets concurrent callers with the same key share one SDK call; expected to pass every scenario.
    /// - Parameter adapter: The adapter.
    /// - Returns: The subject.
    public static func coalesced<Adapter: CoalescedAdapter>(_ adapter: Adapter) -> ConformanceSubject {
        ConformanceSubject(adapter, gallery: false)
    }

    /// Your one-shot adapter over its SDK, through a fixture; expected to pass every scenario the
    /// fixture makes possible.
    /// - Parameter fixture: Calls of your adapter, what it declares, what its SDK counts.
    /// - Returns: The subject.
    public static func oneShot<Value: Sendable>(_ fixture: OneShotFixture<Value>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    /// Your stream adapter over its SDK, through a fixture; expected to pass every scenario the
    /// fixture makes possible.
    /// - Parameter fixture: Subscriptions of your adapter, what it declares, what its SDK counts.
    /// - Returns: The subject.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func stream<Element: Sendable>(_ fixture: StreamFixture<Element>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    /// Your keyed-request adapter over its SDK, through a fixture; expected to pass every scenario
    /// the fixture makes possible.
    /// - Parameter fixture: Requests of your adapter by id, how to make its SDK answer them.
    /// - Returns: The subject.
    public static func keyed<Value: Sendable>(_ fixture: KeyedFixture<Value>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    /// Your shared-subscription adapter over its SDK, through a fixture; expected to pass every
    /// scenario the fixture makes possible.
    /// - Parameter fixture: Consumers of your adapter, how to make its SDK deliver, its listeners.
    /// - Returns: The subject.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    public static func shared<Element: Sendable>(_ fixture: SharedSubscriptionFixture<Element>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    /// Your latest-wins adapter over its SDK, through a fixture; expected to pass every scenario
    /// the fixture makes possible.
    /// - Parameter fixture: Calls of your adapter by key, how to make its SDK answer them.
    /// - Returns: The subject.
    public static func latestWins<Value: Sendable>(_ fixture: LatestWinsFixture<Value>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    /// Your coalesced-call adapter over its SDK, through a fixture; expected to pass every scenario
    /// the fixture makes possible.
    /// - Parameter fixture: Calls of your adapter by key, how to make its SDK answer them.
    /// - Returns: The subject.
    public static func coalesced<Value: Sendable>(_ fixture: CoalescedFixture<Value>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    /// Your blocking-call adapter over its SDK, through a fixture; expected to pass every scenario
    /// the fixture makes possible.
    /// - Parameter fixture: Calls of your adapter, what it declares, what its SDK counts.
    /// - Returns: The subject.
    public static func blocking<Value: Sendable>(_ fixture: BlockingFixture<Value>) -> ConformanceSubject {
        fixture.conformanceSubject
    }

    private init(
        name: String, summary: String, kind: AdapterKind, gallery: Bool, flaggedBy: [String],
        onlyUnder sanitizer: Sanitizer?, scenarios: [ScenarioInfo],
        runner:
            @escaping @Sendable (ConformanceOptions, (@Sendable (ScenarioResult) -> Void)?) async
            -> ConformanceReport
    ) {
        self.name = name
        self.summary = summary
        self.kind = kind
        self.isGallery = gallery
        self.flaggedBy = flaggedBy
        self.flaggedOnlyUnder = sanitizer
        self.scenarios = scenarios
        self.runner = runner
    }

    /// `scenarios` run against `subject` in the one run loop, each on a context from `makeContext`.
    init<Subject: Sendable, Context: ScenarioContext>(
        _ subject: Subject, name: String, summary: String, kind: AdapterKind, gallery: Bool = false,
        flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil, scenarios: [Scenario<Subject, Context>],
        makeContext: @escaping @Sendable (ScenarioSetup) throws -> Context
    ) {
        self.init(
            name: name, summary: summary, kind: kind, gallery: gallery, flaggedBy: flaggedBy, onlyUnder: sanitizer,
            scenarios: scenarios.map { ScenarioInfo(name: $0.name, summary: $0.summary) },
            runner: { options, onResult in
                let results = await runScenarios(
                    scenarios, on: subject, options: options, onResult: onResult, makeContext: makeContext)
                return ConformanceReport(adapter: name, kind: kind, results: results)
            })
    }

    /// A fixture of the suite's own kinds, checked over the user's SDK.
    init<Fixture: Sendable>(
        fixture: Fixture, name: String, kind: AdapterKind, summary: String, common: FixtureCommon,
        scenarios: [Scenario<Fixture, FixtureContext>]
    ) {
        self.init(
            fixture, name: name, summary: summary, kind: kind, scenarios: scenarios,
            makeContext: FixtureContext.maker(common))
    }

    /// `fixture`, with what is expected of it: to pass, or (`gallery`) to be flagged by `flaggedBy`.
    package init(
        _ fixture: some ConformanceFixture, gallery: Bool, summary: String? = nil, flaggedBy: [String] = [],
        onlyUnder sanitizer: Sanitizer? = nil
    ) {
        let subject = fixture.conformanceSubject
        self.init(
            name: subject.name, summary: summary ?? subject.summary, kind: subject.kind, gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: subject.scenarios, runner: subject.runner)
    }

    package init<Adapter: OneShotAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter as any OneShotAdapter, name: adapter.name, summary: adapter.summary, kind: .oneShot,
            gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: OneShotScenarios.all, makeContext: LabContext.make)
    }

    package init<Adapter: StreamAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter, name: adapter.name, summary: adapter.summary, kind: .stream, gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: StreamScenarios<Adapter>.all,
            makeContext: LabContext.make)
    }

    package init<Adapter: BlockingAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter as any BlockingAdapter, name: adapter.name, summary: adapter.summary, kind: .blocking,
            gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: BlockingScenarios.all, makeContext: LabContext.make)
    }

    package init<Adapter: ThreadAffineAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter as any ThreadAffineAdapter, name: adapter.name, summary: adapter.summary, kind: .threadAffine,
            gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: ThreadAffineScenarios.all,
            makeContext: LabContext.make)
    }

    package init<Adapter: KeyedRequestAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter as any KeyedRequestAdapter, name: adapter.name, summary: adapter.summary, kind: .keyed,
            gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: KeyedScenarios.all, makeContext: LabContext.make)
    }

    package init<Adapter: SharedSubscriptionAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter, name: adapter.name, summary: adapter.summary, kind: .shared, gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: SharedSubscriptionScenarios<Adapter>.all,
            makeContext: LabContext.make)
    }

    package init<Adapter: LatestWinsAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter as any LatestWinsAdapter, name: adapter.name, summary: adapter.summary, kind: .latestWins,
            gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: LatestWinsScenarios.all, makeContext: LabContext.make
        )
    }

    package init<Adapter: CoalescedAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnder sanitizer: Sanitizer? = nil
    ) {
        self.init(
            adapter as any CoalescedAdapter, name: adapter.name, summary: adapter.summary, kind: .coalesced,
            gallery: gallery,
            flaggedBy: flaggedBy, onlyUnder: sanitizer, scenarios: CoalescedScenarios.all, makeContext: LabContext.make)
    }

    /// Runs the suite (or the scenarios `options.only` names) against this adapter, in process.
    /// - Parameter options: Watchdog bound, burst size, seed, scenario filter.
    /// - Returns: The report.
    public func run(options: ConformanceOptions = .init()) async -> ConformanceReport {
        await runner(options, nil)
    }

    /// The same, calling `onResult` as each scenario ends.
    package func run(
        options: ConformanceOptions, onResult: @escaping @Sendable (ScenarioResult) -> Void
    ) async -> ConformanceReport {
        await runner(options, onResult)
    }

    /// The names of the scenarios that apply to this adapter, in run order.
    public var scenarioNames: [String] {
        scenarios.map(\.name)
    }

    /// The one-line summary of each scenario that applies, by name.
    package var scenarioSummaries: [String: String] {
        Dictionary(scenarios.map { ($0.name, $0.summary) }, uniquingKeysWith: { first, _ in first })
    }
}

/// A scenario's name and what it checks.
private struct ScenarioInfo: Sendable {
    var name: String
    var summary: String
}
