import Foundation
import Testing

/// `legacy-bridge bench`, run as a child process: the smoke run prints every figure, bad usage
/// exits 2. No figure is compared with anything: numbers belong to the benchmark, not to tests.
@Suite("bench command")
struct BenchCommandTests {
    /// Every key the JSON output promises, as paths, each with a number.
    private static let promisedKeys: [String: [String]] = [
        "oneShot": ["floorNs", "referenceGateNs", "bridgeNs", "referenceGateMainActorNs", "bridgeMainActorNs"],
        "workerThread": ["floorNs", "bridgeNs", "fetchNs"],
        "stream": ["asyncStreamEventsPerSec", "callbackStreamEventsPerSec", "backpressureEventsPerSec"],
        "memory": ["bareBytesPerPending", "bridgeBytesPerPending"],
        "cancelLatency": ["p50Ns", "p99Ns"],
    ]

    @Test("bench --quick --json runs and prints every promised figure as a positive number")
    func quickJSONHasEveryFigure() throws {
        let run = try BenchProcess.run(["bench", "--quick", "--json"])
        #expect(run.status == 0, "exit status \(run.status); stderr: \(run.errors)")
        let report = try JSONDecoder().decode(BenchJSON.self, from: Data(run.output.utf8))
        let sections = [
            "oneShot": report.oneShot, "workerThread": report.workerThread, "stream": report.stream,
            "memory": report.memory, "cancelLatency": report.cancelLatency,
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
    func unknownFlagIsBadUsage() throws {
        let run = try BenchProcess.run(["bench", "--no-such-flag"])
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
    var targets: [Target]
}

/// Runs the built `legacy-bridge` executable, which sits next to the test bundle.
private enum BenchProcess {
    struct Outcome {
        var status: Int32
        var output: String
        var errors: String
    }

    static var executable: URL {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: me).deletingLastPathComponent()
        // On Darwin the bundle's binary sits inside Foo.xctest/Contents/MacOS.
        while directory.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) {
            directory = directory.deletingLastPathComponent()
        }
        return directory.appendingPathComponent("legacy-bridge")
    }

    /// Runs the executable with `arguments`; kills it after `bound` (a hang bound, not a timing check).
    static func run(_ arguments: [String], bound: TimeInterval = 900) throws -> Outcome {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        let finished = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in finished.signal() }
        try process.run()
        // Read both pipes while the child runs, so it never blocks on a full pipe.
        let collected = Collected()
        let readers = DispatchGroup()
        DispatchQueue.global().async(group: readers) { collected.setOutput(output.fileHandleForReading.readDataToEndOfFile()) }
        DispatchQueue.global().async(group: readers) { collected.setErrors(errors.fileHandleForReading.readDataToEndOfFile()) }
        if finished.wait(timeout: .now() + bound) == .timedOut {
            process.terminate()
            finished.wait()
            Issue.record("legacy-bridge \(arguments.joined(separator: " ")) still ran after \(Int(bound)) s and was stopped")
        }
        readers.wait()
        return Outcome(
            status: process.terminationStatus,
            output: String(decoding: collected.output, as: UTF8.self),
            errors: String(decoding: collected.errors, as: UTF8.self))
    }

    /// What the two reader threads read, handed over under a lock.
    final class Collected: @unchecked Sendable {
        // @unchecked Sendable: both fields are only touched while `lock` is held.
        private let lock = NSLock()
        private var storedOutput = Data()
        private var storedErrors = Data()
        func setOutput(_ data: Data) { lock.withLock { storedOutput = data } }
        func setErrors(_ data: Data) { lock.withLock { storedErrors = data } }
        var output: Data { lock.withLock { storedOutput } }
        var errors: Data { lock.withLock { storedErrors } }
    }
}
