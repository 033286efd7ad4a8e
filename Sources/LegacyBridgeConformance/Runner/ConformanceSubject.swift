import LegacyBridge
import LegacySimulator

/// One adapter for the conformance suite to check, of any kind, with what is expected of it.
///
/// Make one of your own adapters with ``oneShot(_:)``, ``stream(_:)``, ``blocking(_:)`` or
/// ``threadAffine(_:)`` and hand a list of them to
/// ``ConformanceRunner/main(_:)``: each is expected to pass every scenario. (The package's own
/// bad-adapter gallery uses the same type, expecting each of its adapters to be flagged.)
public struct ConformanceSubject: Sendable {
    /// The adapter's name.
    public let name: String
    /// One line describing it.
    public let summary: String
    /// One-shot, stream, blocking or thread-affine.
    public let kind: AdapterKind
    /// `true` for adapters that are wrong on purpose (the gallery): they are expected to be flagged.
    package let isGallery: Bool
    /// The scenarios that must flag it (empty for adapters expected to pass).
    package let flaggedBy: [String]
    /// Its mistake is a data race, which only a ThreadSanitizer build of the runner can see.
    package let flaggedOnlyUnderThreadSanitizer: Bool
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

    private init(
        name: String, summary: String, kind: AdapterKind, gallery: Bool, flaggedBy: [String],
        onlyUnderThreadSanitizer: Bool,
        runner:
            @escaping @Sendable (ConformanceOptions, (@Sendable (ScenarioResult) -> Void)?) async
            -> ConformanceReport
    ) {
        self.name = name
        self.summary = summary
        self.kind = kind
        self.isGallery = gallery
        self.flaggedBy = flaggedBy
        self.flaggedOnlyUnderThreadSanitizer = onlyUnderThreadSanitizer
        self.runner = runner
    }

    package init<Adapter: BlockingAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnderThreadSanitizer: Bool = false
    ) {
        self.init(
            name: adapter.name, summary: adapter.summary, kind: .blocking, gallery: gallery, flaggedBy: flaggedBy,
            onlyUnderThreadSanitizer: onlyUnderThreadSanitizer,
            runner: { await ConformanceSuite.run(adapter, options: $0, onResult: $1) })
    }

    package init<Adapter: ThreadAffineAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnderThreadSanitizer: Bool = false
    ) {
        self.init(
            name: adapter.name, summary: adapter.summary, kind: .threadAffine, gallery: gallery, flaggedBy: flaggedBy,
            onlyUnderThreadSanitizer: onlyUnderThreadSanitizer,
            runner: { await ConformanceSuite.run(adapter, options: $0, onResult: $1) })
    }

    package init<Adapter: OneShotAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnderThreadSanitizer: Bool = false
    ) {
        self.init(
            name: adapter.name, summary: adapter.summary, kind: .oneShot, gallery: gallery, flaggedBy: flaggedBy,
            onlyUnderThreadSanitizer: onlyUnderThreadSanitizer,
            runner: { await ConformanceSuite.run(adapter, options: $0, onResult: $1) })
    }

    package init<Adapter: StreamAdapter>(
        _ adapter: Adapter, gallery: Bool, flaggedBy: [String] = [], onlyUnderThreadSanitizer: Bool = false
    ) {
        self.init(
            name: adapter.name, summary: adapter.summary, kind: .stream, gallery: gallery, flaggedBy: flaggedBy,
            onlyUnderThreadSanitizer: onlyUnderThreadSanitizer,
            runner: { await ConformanceSuite.run(adapter, options: $0, onResult: $1) })
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
        ConformanceSuite.scenarios(for: kind).map(\.name)
    }
}
