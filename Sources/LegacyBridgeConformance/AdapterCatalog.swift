import LegacyBridge
import LegacySimulator

/// Every adapter this package ships: the library's own and the bad-adapter gallery.
///
/// The `legacy-bridge conformance` command runs entries by name; tests use it to check that the
/// library's adapters pass and every gallery adapter is flagged.
public enum AdapterCatalog {
    /// One adapter, type-erased for running by name.
    public struct Entry: Sendable {
        /// The adapter's name.
        public let name: String
        /// One line describing it.
        public let summary: String
        /// One-shot or stream.
        public let kind: AdapterKind
        /// `true` for adapters that are wrong on purpose.
        public let isGallery: Bool
        /// The scenarios its documentation says must flag it (empty for the library's own).
        public let flaggedBy: [String]
        private let runner: @Sendable (ConformanceOptions) async -> ConformanceReport

        init<Adapter: OneShotAdapter>(_ adapter: Adapter, gallery: Bool, flaggedBy: [String] = []) {
            name = adapter.name
            summary = adapter.summary
            kind = .oneShot
            isGallery = gallery
            self.flaggedBy = flaggedBy
            runner = { await ConformanceSuite.run(adapter, options: $0) }
        }

        init<Adapter: StreamAdapter>(_ adapter: Adapter, gallery: Bool, flaggedBy: [String] = []) {
            name = adapter.name
            summary = adapter.summary
            kind = .stream
            isGallery = gallery
            self.flaggedBy = flaggedBy
            runner = { await ConformanceSuite.run(adapter, options: $0) }
        }

        init<Adapter: BlockingAdapter>(_ adapter: Adapter, gallery: Bool, flaggedBy: [String] = []) {
            name = adapter.name
            summary = adapter.summary
            kind = .blocking
            isGallery = gallery
            self.flaggedBy = flaggedBy
            runner = { await ConformanceSuite.run(adapter, options: $0) }
        }

        init<Adapter: ThreadAffineAdapter>(_ adapter: Adapter, gallery: Bool, flaggedBy: [String] = []) {
            name = adapter.name
            summary = adapter.summary
            kind = .threadAffine
            isGallery = gallery
            self.flaggedBy = flaggedBy
            runner = { await ConformanceSuite.run(adapter, options: $0) }
        }

        /// Runs the suite (or the scenarios `options.only` names) against this adapter, in process.
        /// - Parameter options: Watchdog bound, burst size, seed, scenario filter.
        /// - Returns: The report.
        public func run(options: ConformanceOptions = .init()) async -> ConformanceReport {
            await runner(options)
        }

        /// The names of the scenarios that apply to this adapter, in run order.
        public var scenarioNames: [String] {
            ConformanceSuite.scenarios(for: kind).map(\.name)
        }
    }

    /// Every adapter, library first, then the gallery.
    public static let all: [Entry] = [
        Entry(WithCallbackAdapter(), gallery: false),
        Entry(WithCallbackContextAdapter(), gallery: false),
        Entry(CallbackStreamAdapter(), gallery: false),
        Entry(SDKThreadExecutorAdapter(), gallery: false),
        Entry(OffloadPoolAdapter(), gallery: false),
        Entry(NaiveContinuationAdapter(), gallery: true,
              flaggedBy: ["repeated-callback-same-outcome", "repeated-callback-success-then-error", "repeated-callback-error-then-success", "never-calls-back-then-cancel"]),
        Entry(LockHeldGateAdapter(), gallery: true, flaggedBy: ["reentrant-cancel"]),
        Entry(NoCancellationHandlerAdapter(), gallery: true,
              flaggedBy: ["cancel-before-handle", "never-calls-back-then-cancel", "timeout-silent-operation"]),
        Entry(EarlyContextReleaseAdapter(), gallery: true, flaggedBy: ["context-released-once"]),
        Entry(AsyncStreamNoTerminationAdapter(), gallery: true,
              flaggedBy: ["consumer-cancel-stops-producer", "break-stops-producer"]),
        Entry(UnboundedAsyncStreamAdapter(), gallery: true, flaggedBy: ["slow-consumer-backpressure"]),
        Entry(NoReorderingStreamAdapter(), gallery: true, flaggedBy: ["out-of-order-restored"]),
        Entry(DispatchSemaphoreBlockingAdapter(), gallery: true,
              flaggedBy: ["blocking-leaves-pool-free", "blocking-cancel-interrupts"]),
        Entry(PlainActorAffineAdapter(), gallery: true,
              flaggedBy: ["thread-affine-calls-on-sdk-thread", "thread-affine-cancel-on-sdk-thread"]),
    ]

    /// The library's own adapters (the ones that must pass).
    public static var library: [Entry] { all.filter { !$0.isGallery } }

    /// The adapter called `name`, if any.
    /// - Parameter name: An adapter name.
    /// - Returns: Its entry, or `nil`.
    public static func entry(named name: String) -> Entry? {
        all.first { $0.name == name }
    }
}
