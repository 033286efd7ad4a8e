import Foundation
import LegacyBridgeConformance
import Testing

/// The watchdog of every conformance run in these tests: 60 s, or 300 s under ThreadSanitizer,
/// where the whole test run keeps both cores and the cooperative pool busy for minutes and a slow
/// scenario (a slow consumer) can wait that long without anything being stuck. These tests check
/// verdicts, not hang detection; a real hang still fails, later.
let testWatchdog: Duration = threadSanitizerIsActive ? .seconds(300) : .seconds(60)

/// The watchdog of the in-process runs that must flag a broken adapter: such a run often waits
/// its whole patience (60% of the watchdog) for something the adapter never does, so a long
/// watchdog makes the test long. The other 40% must cover the scenario's own steps on a loaded
/// machine: with 10 s, three such runs were reported hung in one of ten runs beside two busy
/// processes (`under-load.sh`), so 20 s, and 45 s under ThreadSanitizer.
let flaggingWatchdog: Duration = threadSanitizerIsActive ? .seconds(45) : .seconds(20)

/// Runs the built `legacy-bridge` executable (it sits next to the test bundle) and captures its
/// output and exit status.
struct CLIRun {
    var status: Int32
    var output: String
    var errors: String

    /// The JSON object printed on standard output.
    var json: [String: Any]? {
        guard let data = output.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

enum CLI {
    static var executable: URL { executable(named: "legacy-bridge") }

    /// An executable of this package, next to the test bundle.
    static func executable(named name: String) -> URL {
        let me =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: me).deletingLastPathComponent()
        // On Darwin the test bundle's binary sits inside Foo.xctest/Contents/MacOS.
        while directory.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) {
            directory = directory.deletingLastPathComponent()
        }
        return directory.appendingPathComponent(name)
    }

    /// Runs the CLI with `arguments` (and `environment` added to this process's); stops the child
    /// after `bound` seconds.
    ///
    /// The waiting happens on a thread of its own, never on the cooperative pool (on Linux Dispatch's
    /// global threads are the pool): a test that blocked a pool thread for the seconds a child runs
    /// would starve every other test running beside it.
    static func run(
        _ arguments: [String], bound: TimeInterval = 300, executableName: String = "legacy-bridge",
        environment: [String: String] = [:], slots: ChildSlots = .shared
    ) async throws -> CLIRun {
        try await slots.holding {
            try await withCheckedThrowingContinuation { continuation in
                onDedicatedThread("cli test child") {
                    continuation.resume(
                        with: Result {
                            try runBlocking(
                                arguments, bound: bound, executable: executable(named: executableName),
                                environment: environment)
                        })
                }
            }
        }
    }

    /// The child runs through the conformance runner's `runChild` (`posix_spawn`): Foundation's
    /// `Process.run()` of Swift 6.3.1 crashed one plain run of this suite in five under load
    /// (swift-corelibs-foundation#5472).
    private static func runBlocking(
        _ arguments: [String], bound: TimeInterval, executable: URL, environment extra: [String: String]
    ) throws -> CLIRun {
        var environment = extra
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        let child = try runChild(
            executable: executable.path, arguments: arguments, bound: .milliseconds(Int(bound * 1000)),
            environment: environment)
        return CLIRun(
            status: child.exitStatus ?? child.signal ?? -1, output: child.standardOutput,
            errors: child.standardError)
    }
}

/// How many children of the CLI the tests of this process run at once: two per core, since many
/// children mostly wait (a hung scenario sits out its watchdog, a sanitizer child its slow start).
///
/// Without a bound, Swift Testing starts every argument of a parameterized test together: the
/// gallery's proof alone started 44 children on two cores, each got a twentieth of a core, and a
/// scenario that needs a quarter of a second of CPU (20,000 events through a slow consumer) ran
/// past its 3 s watchdog and was reported as hung. Slots queue in arrival order; the child's own
/// bound starts when it starts, not while it waits for a slot.
///
/// The gallery's flagging runs have slots of their own, four per core: they mostly wait (the
/// 4-seed proof of the whole gallery alone: 40 s of wall time, the machine 72% idle: watchdogs of
/// hung scenarios, and the patience a leak check gives resources to come back), so sharing two
/// slots per core with the CPU-heavy children made them the run's long pole, and three per core
/// still left it ending last.
actor ChildSlots {
    static let shared = ChildSlots(count: 2 * ProcessInfo.processInfo.activeProcessorCount)
    static let flagging = ChildSlots(count: 4 * ProcessInfo.processInfo.activeProcessorCount)

    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { free = max(1, count) }

    /// Runs `body` once a slot is free, and frees the slot when it returns or throws.
    func holding<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if free > 0 {
            free -= 1
        } else {
            await withCheckedContinuation { waiting.append($0) }
        }
        defer {
            if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}

/// One line a child printed, and whether the child was still running when it arrived.
struct StreamedLine: Sendable {
    var text: String
    var processWasRunning: Bool
}

extension CLI {
    /// Runs the CLI with `arguments`, reading standard output line by line as it arrives.
    static func runStreaming(_ arguments: [String], bound: TimeInterval = 300) async throws -> [StreamedLine] {
        try await ChildSlots.shared.holding {
            try await withCheckedThrowingContinuation { continuation in
                onDedicatedThread("cli test child") {
                    continuation.resume(with: Result { try runStreamingBlocking(arguments, bound: bound) })
                }
            }
        }
    }

    private static func runStreamingBlocking(_ arguments: [String], bound: TimeInterval) throws -> [StreamedLine] {
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw ChildProcessError(step: "make a pipe", code: errno) }
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { close(readEnd) }
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        let discard = open("/dev/null", O_WRONLY | O_CLOEXEC)
        let child: SpawnedChild
        do {
            defer {
                close(writeEnd)
                close(discard)
            }
            child = try spawnChild(
                executable: executable.path, arguments: arguments, environment: environment,
                standardOutput: writeEnd, standardError: discard)
        }
        // The waiter kills the child at the bound, which ends the pipe and so the reading below.
        let exited = DispatchSemaphore(value: 0)
        onDedicatedThread("cli test waiter") {
            _ = child.wait(bound: .milliseconds(Int(bound * 1000)))
            exited.signal()
        }
        var lines: [StreamedLine] = []
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            let running = child.isRunning
            pending.append(contentsOf: chunk[0..<count])
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(
                    StreamedLine(text: String(decoding: pending[..<newline], as: UTF8.self), processWasRunning: running)
                )
                pending.removeSubrange(...newline)
            }
        }
        exited.wait()
        return lines
    }
}

/// What one scenario of a conformance run reported, from the CLI's JSON.
struct ReportedScenario {
    var name: String
    var verdict: String
    var detail: String
}

extension CLI {
    /// Runs gallery adapter `name` crash-isolated on `seed`, with only the scenarios that must flag
    /// it, and checks what every such run must show: exit 0, "flagged" expected and met, and a
    /// result for each of those scenarios. Returns the scenarios' results, for the caller to check
    /// each one's verdict and reason.
    static func runFlaggingScenarios(
        of name: String, flaggedBy: [String], seed: UInt64, watchdog: String
    ) async throws -> [ReportedScenario] {
        let run = try await run(
            [
                "conformance", "--adapter", name, "--scenario", flaggedBy.joined(separator: ","),
                "--watchdog", watchdog, "--seed", String(seed), "--json",
            ], slots: .flagging)
        #expect(run.status == 0, "\(name) seed \(seed): \(run.errors)")
        let adapter = try #require(
            (run.json?["adapters"] as? [[String: Any]])?.first, "\(name) seed \(seed): no JSON in \(run.output)")
        #expect(adapter["expected"] as? String == "flagged")
        #expect(adapter["expectationMet"] as? Bool == true, "\(name) seed \(seed)")
        let scenarios = try #require(adapter["scenarios"] as? [[String: Any]]).map {
            ReportedScenario(
                name: $0["name"] as? String ?? "?", verdict: $0["verdict"] as? String ?? "",
                detail: $0["detail"] as? String ?? "")
        }
        #expect(Set(scenarios.map(\.name)) == Set(flaggedBy), "\(name) seed \(seed)")
        return scenarios
    }
}
