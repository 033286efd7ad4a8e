import Foundation

/// Everything `legacy-bridge-bench` measured; `--json` prints it (keys sorted). Sections that
/// did not run (`--only`) keep their zero values.
struct BenchReport: Encodable {
    struct OneShot: Encodable {
        var floorNs = 0.0
        var referenceGateNs = 0.0
        var bridgeNs = 0.0
        var referenceGateMainActorNs = 0.0
        var bridgeMainActorNs = 0.0
        var floorMainActorNs = 0.0
        var rounds = 0
    }

    struct WorkerThread: Encodable {
        var floorNs = 0.0
        var bridgeNs = 0.0
        var fetchNs = 0.0
        /// A bare continuation resumed through the C SDK's worker: the floor under `fetchNs`.
        var sdkFloorNs = 0.0
        var rounds = 0
    }

    struct Stream: Encodable {
        var asyncStreamEventsPerSec = 0.0
        var callbackStreamEventsPerSec = 0.0
        var backpressureEventsPerSec = 0.0
        /// The producer loop alone, yielding into a counter.
        var producerOnlyEventsPerSec = 0.0
        /// Most elements held at once by the backpressure stream, in the worst round.
        var backpressurePeakBuffered = 0
        /// The same, in the median round.
        var backpressurePeakBufferedMedian = 0.0
        /// Elements the backpressure stream accepted while a pause was due, worst round.
        var backpressureAcceptedWhilePaused = 0
        var backpressurePeakLimit = 0
        var backpressureLow = 0
        var backpressureHigh = 0
        var backpressurePauses = 0.0
        var callbackStreamPeakBuffered = 0
        /// The hand-written locked channel (mutex + array swap), single sends: the ceiling of a
        /// lock-based hand-off.
        var lockedChannelEventsPerSec = 0.0
        /// The same channel fed in batches.
        var lockedChannelBatchedEventsPerSec = 0.0
        /// The same channel, single sends, with the spinning (adaptive) mutex CallbackStream uses.
        var lockedChannelSpinningEventsPerSec = 0.0
        /// CallbackStream `.unbounded` fed with `yield(contentsOf:)`, `batchSize` per call.
        var batchedEventsPerSec = 0.0
        /// CallbackStream `.backpressure(batchedBackpressureLow, batchedBackpressureHigh)` fed with
        /// `yield(contentsOf:)`.
        var batchedBackpressureEventsPerSec = 0.0
        /// Its single-yield partner (the same watermarks), from the same rounds.
        var singleBackpressureEventsPerSec = 0.0
        /// The batched pair's watermarks: `backpressureLow`/`High` counted in batches.
        var batchedBackpressureLow = 0
        var batchedBackpressureHigh = 0
        /// CallbackStream `.backpressure(backpressureLow, backpressureHigh)` fed with
        /// `yield(contentsOf:)`: a pause every few batches, bound by thread wake-ups.
        var batchedNarrowBackpressureEventsPerSec = 0.0
        /// Median over rounds of the mean time a paused producer took to run again after `resume`.
        var producerWakeUpNs = 0.0
        var batchSize = 0
        /// The backpressure stream with a producer that ignores the yields' answers and stops only
        /// when `pause` is called: what it overshoots while a pause is on its way.
        var pushStylePeakBufferedMedian = 0.0
        var pushStylePeakBufferedWorst = 0
        var events = 0
        var rounds = 0
    }

    struct Memory: Encodable {
        var bareBytesPerPending = 0.0
        var bridgeBytesPerPending = 0.0
        var operations = 0
        var rounds = 0
    }

    struct CancelLatency: Encodable {
        var p50Ns = 0.0
        var p99Ns = 0.0
        var samples = 0
    }

    struct Offload: Encodable {
        var floorNs = 0.0
        var offloadNs = 0.0
        var executorFloorNs = 0.0
        var executorNs = 0.0
        var burstMs = 0.0
        var idealMs = 0.0
        /// The same blocks on plain pthreads, no pool: the ideal with what a block really takes.
        var plainThreadsMs = 0.0
        /// Longest time a new task waited to start while the burst ran.
        var poolDelayMaxNs = 0.0
        var burstCalls = 0
        var burstThreads = 0
        var burstProbes = 0
        var rounds = 0
        var burstRounds = 0
    }

    /// A ratio (or a bound) with its limit: `pass` is nil for information only.
    struct Check: Encodable {
        var name: String
        var value: Double
        /// "<=" or ">=" (empty for information).
        var comparison: String
        var limit: Double
        var pass: Bool?
    }

    var oneShot = OneShot()
    var workerThread = WorkerThread()
    var stream = Stream()
    var memory = Memory()
    var cancelLatency = CancelLatency()
    var offload = Offload()
    var scale = BenchScaleReport()
    var keyed = BenchKeyedReport()
    var shared = BenchSharedReport()
    var superseding = BenchSupersedingReport()
    var loop = BenchLoopReport()
    var targets: [Check] = []
    var quick: Bool
    var debugBuild: Bool

    init(quick: Bool, debugBuild: Bool) {
        self.quick = quick
        self.debugBuild = debugBuild
    }

    mutating func addTarget(_ name: String, value: Double, atMost limit: Double) {
        targets.append(
            Check(name: name, value: Self.finite(value), comparison: "<=", limit: limit, pass: value <= limit))
    }

    mutating func addTarget(_ name: String, value: Double, atLeast limit: Double) {
        targets.append(
            Check(name: name, value: Self.finite(value), comparison: ">=", limit: limit, pass: value >= limit))
    }

    mutating func addInformation(_ name: String, value: Double) {
        targets.append(Check(name: name, value: Self.finite(value), comparison: "", limit: 0, pass: nil))
    }

    /// JSON cannot hold NaN or infinity.
    private static func finite(_ value: Double) -> Double { value.isFinite ? value : 0 }

    /// The targets as lines: PASS/MISS, the ratio, the limit.
    var renderedTargets: String {
        var lines = ["targets (ratio = median of per-round ratios)"]
        for check in targets {
            let verdict: String
            switch check.pass {
            case true?: verdict = "PASS"
            case false?: verdict = "MISS"
            case nil: verdict = "info"
            }
            let value = check.value >= 100 ? String(format: "%.0f", check.value) : String(format: "%.2f", check.value)
            let limit = check.pass == nil ? "" : " (target \(check.comparison) \(String(format: "%g", check.limit)))"
            // A name too long for its column gets a line of its own (cutting it could hide the
            // very parameter that tells two targets apart).
            let column = 64
            let name: String
            if check.name.count > column {
                name = check.name + "\n" + String(repeating: " ", count: 8 + column)
            } else {
                name = check.name.padding(toLength: column, withPad: " ", startingAt: 0)
            }
            lines.append("  \(verdict)  \(name) \(value)\(limit)")
        }
        if debugBuild {
            lines.append("\nwarning: debug build — the figures above are meaningless; build with -c release")
        }
        return lines.joined(separator: "\n")
    }
}
