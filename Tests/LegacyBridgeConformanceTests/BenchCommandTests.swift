import Foundation
@testable import legacy_bridge_bench
import Testing
import ToolSupport

/// `legacy-bridge-bench`, run as a child process: the smoke run prints every figure, bad usage
/// exits 2. No figure is compared with anything: numbers belong to the benchmark, not to tests.
@Suite("legacy-bridge-bench")
struct BenchCommandTests {
    /// Runs the built `legacy-bridge-bench` with `arguments`.
    private func bench(
        _ arguments: [String], bound: TimeInterval = 300, environment: [String: String] = [:]
    ) async throws -> CLIRun {
        try await CLI.run(arguments, bound: bound, executableName: "legacy-bridge-bench", environment: environment)
    }

    /// Every key the JSON output promises, as paths, each with a number.
    private static let promisedKeys: [String: [String]] = [
        "oneShot": [
            "floorNs", "referenceGateNs", "bridgeNs", "referenceGateMainActorNs", "bridgeMainActorNs",
            "floorMainActorNs",
        ],
        "workerThread": ["floorNs", "bridgeNs", "fetchNs"],
        "stream": [
            "asyncStreamEventsPerSec", "callbackStreamEventsPerSec", "backpressureEventsPerSec",
            "lockedChannelEventsPerSec",
            "batchedEventsPerSec", "batchedBackpressureEventsPerSec", "singleBackpressureEventsPerSec",
            "batchedNarrowBackpressureEventsPerSec",
        ],
        "memory": ["bareBytesPerPending", "bridgeBytesPerPending"],
        "cancelLatency": ["p50Ns", "p99Ns"],
        "offload": [
            "floorNs", "offloadNs", "executorFloorNs", "executorNs", "burstMs", "idealMs", "plainThreadsMs",
            "poolDelayMaxNs",
        ],
        "scale": [
            "timeoutsMs", "sleepsMs", "cancelAllCallersBackMs", "cancelAllHandlesDoneMs", "streamConsumersBackMs",
            "streamCancelsDoneMs", "peakLibraryThreads", "threadLimit", "bareBytesPerPending", "bridgeBytesPerPending",
        ],
        "superseding": [
            "latestNs", "latestIdiomNs", "coalescedNs", "coalescedIdiomNs", "coalescedSharing", "coalescedIdiomSharing",
        ],
        "loop": ["roundTripNs", "idiomRoundTripNs", "roundTrip1000Ns", "idiomRoundTrip1000Ns", "roundTripTimersNs"],
    ]

    // --smoke: every section runs the code --quick runs, at a tenth of its sizes (in this debug
    // build --quick took 23 s of CPU; CI runs --quick in release).
    @Test("--smoke --json runs and prints every promised figure as a positive number")
    func smokeJSONHasEveryFigure() async throws {
        let run = try await bench(["--smoke", "--json"], bound: 900)
        #expect(run.status == 0, "exit status \(run.status); stderr: \(run.errors)")
        let report = try JSONDecoder().decode(BenchJSON.self, from: Data(run.output.utf8))
        let sections = [
            "oneShot": report.oneShot, "workerThread": report.workerThread, "stream": report.stream,
            "memory": report.memory, "cancelLatency": report.cancelLatency, "offload": report.offload,
            "scale": report.scale, "superseding": report.superseding, "loop": report.loop,
        ]
        for (section, keys) in Self.promisedKeys.sorted(by: { $0.key < $1.key }) {
            let values = try #require(sections[section], "missing section \(section)")
            for key in keys {
                let value = try #require(values[key], "missing \(section).\(key)")
                #expect(value.isFinite && value > 0, "\(section).\(key) = \(value)")
            }
        }
        #expect(report.targets.contains { $0.pass != nil }, "no target carries a PASS/MISS verdict")
        // Each newer primitive is judged against the idiom users would otherwise keep.
        for idiom in ["hand-written table", "hand-written broadcaster", "stored Task", "[Key: Task]"] {
            #expect(report.targets.contains { $0.name.contains(idiom) && $0.pass != nil }, "no target against \(idiom)")
        }
    }

    @Test("an unknown flag exits 2 and names the flag")
    func unknownFlagIsBadUsage() async throws {
        let run = try await bench(["--no-such-flag"])
        #expect(run.status == 2)
        #expect(run.errors.contains("--no-such-flag"), "stderr: \(run.errors)")
        #expect(run.errors.contains("legacy-bridge-bench --help"), "stderr: \(run.errors)")
        #expect(run.output.isEmpty, "nothing is measured on bad usage: \(run.output.prefix(200))")
    }

    @Test(
        "bad values exit 2 with a message and measure nothing",
        arguments: [
            ["--only", "nope"], ["--operations", "5"], ["--memory-probe", "nope"], ["help"], ["--quick", "--smoke"],
        ])
    func badValuesAreBadUsage(arguments: [String]) async throws {
        let run = try await bench(arguments)
        #expect(run.status == 2, "\(arguments): \(run.status)")
        #expect(run.errors.contains("--help"), "\(arguments): \(run.errors)")
        #expect(run.output.isEmpty, "\(arguments): \(run.output.prefix(200))")
    }

    @Test("--help and -h print the same usage, every line within 80 and within 200 columns")
    func helpFitsTheWidth() async throws {
        for columns in [80, 200] {
            let long = try await bench(["--help"], environment: ["COLUMNS": String(columns)])
            let short = try await bench(["-h"], environment: ["COLUMNS": String(columns)])
            #expect(long.status == 0 && short.status == 0)
            #expect(long.output.hasPrefix("USAGE: legacy-bridge-bench"), "\(long.output.prefix(200))")
            #expect(long.output == short.output, "-h differs from --help at \(columns) columns")
            for line in long.output.split(separator: "\n") where line.count > columns {
                Issue.record("a help line of \(line.count) columns at \(columns): \(line)")
            }
        }
    }

    @Test("every option the parser accepts is in the help")
    func everyAcceptedOptionIsInTheHelp() async throws {
        do {
            _ = try await BenchCommand.run(["--no-such-option-for-this-test"])
            Issue.record("legacy-bridge-bench accepted an unknown option")
        } catch let error as UsageError {
            for option in error.acceptedOptions {
                #expect(
                    BenchCommand.help.contains("--\(option)"),
                    "legacy-bridge-bench accepts --\(option), but its help does not mention it")
            }
            // The check saw the parser's real option list (not an empty list that passes trivially).
            #expect(error.acceptedOptions == ["json", "memory-probe", "only", "operations", "quick", "smoke"])
        }
    }
}

/// The shape of `legacy-bridge-bench --json` the test relies on: every section is an object of numbers (a Bool
/// or a string where a figure belongs fails the decoding).
private struct BenchJSON: Decodable {
    struct Target: Decodable {
        var name: String
        var pass: Bool?
    }

    var oneShot: [String: Double]
    var workerThread: [String: Double]
    var stream: [String: Double]
    var memory: [String: Double]
    var cancelLatency: [String: Double]
    var offload: [String: Double]
    var scale: [String: Double]
    var superseding: [String: Double]
    var loop: [String: Double]
    var targets: [Target]
}
