/// Settings for a conformance run.
public struct ConformanceOptions: Sendable, Hashable {
    /// How long one scenario may take before it is reported as a hang.
    public var watchdog: Duration
    /// Operations in the one-shot burst scenario.
    public var burstSize: Int
    /// Seed for every random choice the scenarios make.
    public var seed: UInt64
    /// Run only scenarios with these names (`nil` runs all).
    public var only: Set<String>?

    /// The per-scenario bound when none is given: 5 s, or 30 s in a ThreadSanitizer build (it
    /// runs every scenario several times slower, and a 20,000-event stream scenario took over 5 s
    /// there while a test run kept both cores busy). A real hang is caught either way.
    public static var defaultWatchdog: Duration { threadSanitizerIsActive ? .seconds(30) : .seconds(5) }

    /// Creates options.
    /// - Parameters:
    ///   - watchdog: Per-scenario bound (default ``defaultWatchdog``: 5 s, 30 s in a
    ///     ThreadSanitizer build).
    ///   - burstSize: Operations in the burst scenario (default 500).
    ///   - seed: Seed for random choices (default 1).
    ///   - only: Scenario names to run, or `nil` for all.
    public init(
        watchdog: Duration = defaultWatchdog, burstSize: Int = 500, seed: UInt64 = 1, only: Set<String>? = nil
    ) {
        self.watchdog = watchdog
        self.burstSize = burstSize
        self.seed = seed
        self.only = only
    }
}
