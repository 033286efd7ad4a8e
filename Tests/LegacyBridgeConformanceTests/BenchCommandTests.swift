import Foundation
import Testing

/// `legacy-bridge bench`, run as a child process: the smoke run prints every figure, bad usage
/// exits 2. No figure is compared with anything: numbers belong to the benchmark, not to tests.
@Suite("bench command")
struct BenchCommandTests {
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
    ]

    @Test("bench --quick --json runs and prints every promised figure as a positive number")
    func quickJSONHasEveryFigure() async throws {
        let run = try await CLI.run(["bench", "--quick", "--json"], bound: 900)
        #expect(run.status == 0, "exit status \(run.status); stderr: \(run.errors)")
        let report = try JSONDecoder().decode(BenchJSON.self, from: Data(run.output.utf8))
        let sections = [
            "oneShot": report.oneShot, "workerThread": report.workerThread, "stream": report.stream,
            "memory": report.memory, "cancelLatency": report.cancelLatency, "offload": report.offload,
            "scale": report.scale,
        ]
        for (section, keys) in Self.promisedKeys.sorted(by: { $0.key < $1.key }) {
            let values = try #require(sections[section], "missing section \(section)")
            for key in keys {
                let value = try #require(values[key], "missing \(section).\(key)")
                #expect(value.isFinite && value > 0, "\(section).\(key) = \(value)")
            }
        }
        #expect(report.targets.contains { $0.pass != nil }, "no target carries a PASS/MISS verdict")
    }

    @Test("bench with an unknown flag exits 2 and names the flag")
    func unknownFlagIsBadUsage() async throws {
        let run = try await CLI.run(["bench", "--no-such-flag"])
        #expect(run.status == 2)
        #expect(run.errors.contains("--no-such-flag"), "stderr: \(run.errors)")
        #expect(run.output.isEmpty, "nothing is measured on bad usage: \(run.output.prefix(200))")
    }
}

/// The shape of `bench --json` the test relies on: every section is an object of numbers (a Bool
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
    var targets: [Target]
}
