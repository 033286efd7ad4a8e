import Foundation
import LegacyBridge
import ToolSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the conformance suite as a command-line program, each scenario in a child process.
///
/// Put your adapters in a small executable target and call ``main(_:)`` from it:
/// ```swift
/// // Sources/MyAdapterConformance/main.swift
/// import LegacyBridgeConformance
/// await ConformanceRunner.main([.oneShot(MyAdapter()), .stream(MyStreamAdapter())])
/// ```
/// `swift run MyAdapterConformance` then checks every adapter against every scenario. The program
/// re-runs itself once per scenario (with a hidden `--run-scenario` option), so an adapter that
/// traps, deadlocks or hangs fails that scenario and the run goes on; a scenario whose process
/// exits with a non-zero status or prints a sanitizer report fails too. Output, `--json` and exit
/// status are those of `legacy-bridge conformance`: 0 when every adapter met its expectation, 1
/// otherwise, 2 for bad usage. `--help` lists the options.
public enum ConformanceRunner {
    /// Runs the suite on `subjects` as this program's command line asks, then exits the process
    /// with the run's status.
    /// - Parameter subjects: The adapters to check (names must be unique).
    public static func main(_ subjects: [ConformanceSubject]) async -> Never {
        let status = await run(subjects, arguments: Array(CommandLine.arguments.dropFirst()))
        fflush(nil)
        exit(status)
    }

    /// Builds the subjects only when the command line needs them, then runs as ``main(_:)`` does.
    ///
    /// `--help` and bad usage of `--help` print without building anything, and a child process
    /// can build only what its adapter needs: ask ``scenarioProcessAdapter`` which one that is.
    /// Start servers, connections and pools inside `makeSubjects` (or lazily, inside the calls),
    /// not before it. A `makeSubjects` that throws ends the run with status 1 and its error.
    /// - Parameter makeSubjects: Builds the adapters to check (names must be unique).
    public static func main(building makeSubjects: () async throws -> [ConformanceSubject]) async -> Never {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") {
            await main([])
        }
        let subjects: [ConformanceSubject]
        do {
            subjects = try await makeSubjects()
        } catch {
            let program =
                CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "conformance"
            FileHandle.standardError.write(Data("\(program): could not build the adapters to check: \(error)\n".utf8))
            exit(1)
        }
        await main(subjects)
    }

    /// Whether this process is a scenario's child: the crash-isolated runner re-runs the program
    /// once per scenario, with the hidden `--run-scenario` option, to run one scenario of one
    /// adapter (``scenarioProcessAdapter``).
    public static var isScenarioProcess: Bool { CommandLine.arguments.contains("--run-scenario") }

    /// The name of the adapter a scenario's child runs, or `nil` in any other process. A program
    /// whose fixtures need servers or connections can set up only that adapter's.
    public static var scenarioProcessAdapter: String? { scenarioProcessAdapter(in: CommandLine.arguments) }

    /// The adapter named by a scenario child's command line, or `nil` for any other command line.
    package static func scenarioProcessAdapter(in arguments: [String]) -> String? {
        guard arguments.contains("--run-scenario"), let index = arguments.firstIndex(of: "--adapter"),
            index + 1 < arguments.count
        else { return nil }
        return arguments[index + 1]
    }

    /// Runs the suite on `subjects` as `arguments` ask, printing the report, and returns the exit
    /// status; it does not exit. Child processes re-run this executable with the same
    /// `subjects`, so call it with the same list in every run of the program.
    /// - Parameters:
    ///   - subjects: The adapters to check (names must be unique).
    ///   - arguments: The command-line arguments, without the program's name.
    /// - Returns: 0 when every adapter met its expectation, 1 otherwise, 2 for bad usage.
    public static func run(_ subjects: [ConformanceSubject], arguments: [String]) async -> Int32 {
        let program = CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "conformance"
        return await run(
            subjects, arguments: arguments,
            configuration: Configuration(
                command: program, childArguments: [], defaultSubjects: subjects,
                defaultDescription: "every adapter"))
    }

    /// How a program presents the runner.
    package struct Configuration: Sendable {
        /// How the program is invoked, for usage messages (`legacy-bridge conformance`).
        package var command: String
        /// Arguments that select the runner when the program re-runs itself (`["conformance"]`).
        package var childArguments: [String]
        /// The adapters checked when no `--adapter` is given.
        package var defaultSubjects: [ConformanceSubject]
        /// Says which those are, for the help text.
        package var defaultDescription: String

        package init(
            command: String, childArguments: [String], defaultSubjects: [ConformanceSubject], defaultDescription: String
        ) {
            self.command = command
            self.childArguments = childArguments
            self.defaultSubjects = defaultSubjects
            self.defaultDescription = defaultDescription
        }
    }

    /// The help text.
    package static func help(_ configuration: Configuration) -> String {
        """
        USAGE: \(configuration.command) [--adapter NAME[,NAME...]|all]
               [--scenario NAME[,NAME...]] [--flagging-only] [--list-adapters]
               [--list-scenarios] [--json] [--in-process] [--watchdog S] [--seed X]
               [--burst N]

        Runs the adapter conformance suite. Each scenario runs in a child process (this executable,
        re-run), so an adapter that traps or deadlocks fails that scenario and the suite goes on.
        On iOS, tvOS, watchOS and visionOS, which cannot start processes, scenarios run in this
        process, and the runner says so.
        A scenario also fails when its process exits with a non-zero status or prints a sanitizer
        report (build with --sanitize=thread to catch data races, with --sanitize=address to
        catch a C context used after the SDK released it). Each scenario's result is printed as
        soon as it ends.

        OPTIONS
          --adapter NAMES|all Which adapters (comma-separated names), or all. Default:
                              \(configuration.defaultDescription).
          --scenario NAMES    Run only these scenarios (comma-separated names).
          --flagging-only     Run gallery adapters (wrong on purpose) only on the scenarios that
                              must flag them; adapters that must work still run every scenario.
          --list-adapters     Print one adapter per line (name, a space, a one-line description).
          --list-scenarios    Print one scenario per line (kind, name, a one-line description).
          --json              Print the report as JSON (and nothing else on standard output).
          --in-process        Run scenarios in this process (faster; no crash isolation).
          --watchdog S        Seconds a scenario may take before it counts as a hang (default 5;
                              30 in a ThreadSanitizer build).
          --seed X            Seed for the scenarios' random choices (default 1).
          --burst N           Operations in the burst scenario (default 500).

        EXPECTED
          An adapter that must work is expected to pass every scenario that ran. A gallery
          adapter (wrong on purpose) is expected to be flagged by each scenario its documentation
          names, among those that ran; if none of them ran (--scenario chose others), or its
          mistake needs a sanitizer this build does not have (ThreadSanitizer, AddressSanitizer),
          it is not checked.

        EXIT STATUS
          0  every adapter checked met its expectation; 1 otherwise; 2 bad usage.
        """
    }

    /// Runs the runner's command line: parses, runs, prints, returns the exit status.
    package static func run(
        _ subjects: [ConformanceSubject], arguments: [String], configuration: Configuration
    ) async -> Int32 {
        let out = RunnerOutput()
        do {
            return try await runParsed(subjects, arguments: arguments, configuration: configuration, out: out)
        } catch let usage as UsageError {
            out.error("\(configuration.command): \(usage.message)")
            out.error("Run '\(configuration.command) --help' for usage.")
            return 2
        } catch {
            out.error("\(configuration.command): \(error)")
            return 1
        }
    }

    private static func runParsed(
        _ subjects: [ConformanceSubject], arguments: [String], configuration: Configuration, out: RunnerOutput
    ) async throws -> Int32 {
        let parsed = try ParsedArguments(
            command: configuration.command, arguments: arguments, valueOptions: runnerValueOptions,
            switchOptions: runnerSwitchOptions)
        if parsed.wantsHelp {
            out.line(help(configuration))
            return 0
        }
        var seen = Set<String>()
        for subject in subjects where !seen.insert(subject.name).inserted {
            throw usage("two adapters are named '\(subject.name)'; names must be unique")
        }
        if parsed.flag("list-adapters") {
            for subject in subjects { out.line("\(subject.name) \(subject.summary)") }
            return 0
        }
        if parsed.flag("list-scenarios") {
            for kind in AdapterKind.allCases {
                for scenario in ConformanceSuite.scenarios(for: kind) {
                    out.line("\(kind.rawValue) \(scenario.name) \(scenario.summary)")
                }
            }
            // The real-adapter path: scenarios of fixtures over your own SDK.
            for kind in AdapterKind.allCases {
                for scenario in ConformanceSuite.fixtureScenarios(for: kind) {
                    out.line("\(kind.rawValue)-fixture \(scenario.name) \(scenario.summary)")
                }
            }
            return 0
        }
        var options = ConformanceOptions()
        if parsed.string("watchdog") != nil {  // otherwise the options' default (TSan-aware)
            options.watchdog = .milliseconds(Int64(try parsed.seconds("watchdog", default: 5, in: 0.1...600) * 1000))
        }
        options.seed = try parsed.unsigned("seed", default: 1)
        options.burstSize = try parsed.integer("burst", default: 500, in: 1...100_000)

        let chosen =
            try parsed.string("adapter").map { try adapters(named: $0, in: subjects) } ?? configuration.defaultSubjects
        if let list = parsed.string("scenario") {
            let names = Set(list.split(separator: ",").map { String($0) })
            let known = Set(chosen.flatMap(\.scenarioNames))
            if let unknown = names.subtracting(known).sorted().first {
                throw usage(
                    "unknown scenario '\(unknown)' for the chosen adapters (see --list-scenarios)")
            }
            options.only = names
        }

        if let scenario = parsed.string("run-scenario") {
            // Child mode: one scenario of one adapter, its result as one JSON line.
            guard parsed.string("adapter") != nil, chosen.count == 1, let subject = chosen.first else {
                throw usage("--run-scenario needs --adapter NAME")
            }
            guard subject.scenarioNames.contains(scenario) else {
                throw usage("adapter '\(subject.name)' has no scenario '\(scenario)'")
            }
            options.only = [scenario]
            installIsolationTrapReporter()
            let report = await subject.run(options: options)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            out.line("RESULT " + String(decoding: try encoder.encode(report.results), as: UTF8.self))
            return 0
        }

        let json = parsed.flag("json")
        let isolated = crashIsolationIsAvailable && !parsed.flag("in-process")
        if !crashIsolationIsAvailable && !parsed.flag("in-process") {
            // Said on standard error, so that --json output stays a single document.
            out.error(
                "note: this platform cannot start processes, so every scenario runs in this process "
                    + "(as with --in-process): an adapter that traps stops the run, and one that deadlocks "
                    + "is reported as hung by the watchdog but keeps its threads.")
        }
        var reports: [(ConformanceSubject, ConformanceReport)] = []
        let flaggingOnly = parsed.flag("flagging-only")
        for subject in chosen {
            var options = options
            if flaggingOnly && subject.isGallery {
                options.only = Set(subject.flaggedBy).intersection(options.only ?? Set(subject.scenarioNames))
            }
            if !json { out.line(subjectHeader(subject)) }
            let onResult: @Sendable (ScenarioResult) -> Void = { result in
                if !json { out.line(result.renderedLines) }
            }
            let report =
                isolated
                ? await runIsolated(
                    subject, options: options, configuration: configuration, out: json ? nil : out, onResult: onResult)
                : await subject.run(options: options, onResult: onResult)
            reports.append((subject, report))
            if !json { out.line(ConformanceEvaluation.verdict(subject, report).line) }
        }
        let evaluation = ConformanceEvaluation(reports)
        out.line(json ? jsonString(evaluation.json) : evaluation.summaryLine)
        return evaluation.clean ? 0 : 1
    }

    /// The adapters `--adapter` names: comma-separated names, each once, in the order given; or
    /// `all`, every adapter.
    /// - Throws: A usage error naming every unknown adapter, or when the list names none.
    static func adapters(named list: String, in subjects: [ConformanceSubject]) throws -> [ConformanceSubject] {
        var seen = Set<String>()
        let names = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && seen.insert($0).inserted }
        guard !names.isEmpty else {
            throw usage("--adapter needs adapter names (comma-separated) or all")
        }
        if names.contains("all") { return subjects }
        let unknown = names.filter { name in !subjects.contains { $0.name == name } }
        guard unknown.isEmpty else {
            let quoted = unknown.map { "'\($0)'" }.joined(separator: ", ")
            throw usage(
                "unknown adapter\(unknown.count == 1 ? "" : "s") \(quoted) (see --list-adapters)")
        }
        return names.compactMap { name in subjects.first { $0.name == name } }
    }

    private static func subjectHeader(_ subject: ConformanceSubject) -> String {
        let expectation: String
        if subject.isGallery {
            expectation =
                "wrong on purpose, expected to be flagged by \(subject.flaggedBy.joined(separator: ", "))\(subject.flaggedOnlyUnder.map { " under \($0.name)" } ?? "")"
        } else {
            expectation = "expected to pass every scenario"
        }
        return "\(subject.name) (\(subject.kind.rawValue); \(expectation))"
    }

    /// Runs each selected scenario of `subject` in a child process and collects the results.
    package static func runIsolated(
        _ subject: ConformanceSubject, options: ConformanceOptions, configuration: Configuration,
        out: RunnerOutput?, onResult: @Sendable (ScenarioResult) -> Void
    ) async -> ConformanceReport {
        let executable = currentExecutablePath()
        let summaries = subject.scenarioSummaries
        let names = subject.scenarioNames.filter { options.only?.contains($0) ?? true }
        let watchdogSeconds =
            Double(options.watchdog.components.seconds) + Double(options.watchdog.components.attoseconds) / 1e18
        var results: [ScenarioResult] = []
        for (index, name) in names.enumerated() {
            out?.status("  ... \(name) (\(index + 1)/\(names.count))")
            let summary = summaries[name] ?? ""
            let arguments =
                configuration.childArguments + [
                    "--adapter", subject.name, "--run-scenario", name,
                    "--seed", String(options.seed), "--watchdog", String(watchdogSeconds), "--burst",
                    String(options.burstSize),
                ]
            let bound = options.watchdog + .seconds(15)
            let result: ScenarioResult
            do {
                // No backtracer in the child: a crash is reported at once, with the runtime's message first.
                let child = try await runChildOffThePool(
                    executable: executable, arguments: arguments, bound: bound,
                    environment: ["SWIFT_BACKTRACE": "enable=no"])
                result = interpret(child, name: name, summary: summary, bound: bound)
            } catch {
                result = ScenarioResult(
                    name: name, summary: summary, verdict: .failed,
                    detail: "could not start the child process: \(error)")
            }
            out?.clearStatus()
            onResult(result)
            results.append(result)
        }
        return ConformanceReport(adapter: subject.name, kind: subject.kind, results: results)
    }

    /// The report of a child that died in Swift's runtime isolation check.
    package static func isolationTrapDiagnosis(checked: String, signal: String) -> String {
        let culprit = checked.isEmpty ? "" : " (in `\(checked)`)"
        return "crashed with \(signal) in Swift's actor-isolation check: a callback isolated to an actor\(culprit) "
            + "was called from the SDK's thread. In a module that is MainActor by default, a closure written in "
            + "main-actor code is isolated to the main actor: write the callbacks you hand the SDK as "
            + "`{ @Sendable ... }` or as `nonisolated` functions, and mark the types they use `nonisolated` "
            + "(see \"App targets that are MainActor by default\" in the LegacyBridge guide)"
    }

    /// What a scenario's child process amounted to: its own result, unless the process crashed,
    /// hung, exited with a non-zero status or printed a sanitizer report — each of which fails it.
    package static func interpret(
        _ child: ChildOutcome, name: String, summary: String, bound: Duration
    ) -> ScenarioResult {
        if child.timedOut {
            return ScenarioResult(
                name: name, summary: summary, verdict: .hung,
                detail: "the scenario's process did not finish within \(bound) and was killed")
        }
        // What the lab said a sanitizer's report would mean from some point on (see `announceWatch`),
        // quoted after such a report.
        let watching =
            child.sanitizerReport == nil
            ? ""
            : child.standardError.split(separator: "\n").last { $0.hasPrefix(watchLinePrefix) }
                .map { ". Before it: \($0.dropFirst(watchLinePrefix.count))" } ?? ""
        if child.signal != nil, child.sanitizerReport == nil, let checked = child.isolationTrap {
            return ScenarioResult(
                name: name, summary: summary, verdict: .crashed,
                detail: Self.isolationTrapDiagnosis(checked: checked, signal: child.signalDescription))
        }
        if child.signal != nil {
            let lines = child.sanitizerReport ?? child.firstErrorLines(3)
            return ScenarioResult(
                name: name, summary: summary, verdict: .crashed,
                detail: "crashed with \(child.signalDescription)\(lines.isEmpty ? "" : ": \(lines)")\(watching)")
        }
        let resultLine = child.standardOutput.split(separator: "\n").last { $0.hasPrefix("RESULT ") }
        guard let resultLine,
            let decoded = try? JSONDecoder().decode([ScenarioResult].self, from: Data(resultLine.dropFirst(7).utf8)),
            var result = decoded.first
        else {
            let lines = child.sanitizerReport ?? child.firstErrorLines(3)
            return ScenarioResult(
                name: name, summary: summary, verdict: .crashed,
                detail:
                    "exited with status \(child.exitStatus ?? -1) without a result\(lines.isEmpty ? "" : ": \(lines)")\(watching)"
            )
        }
        var problem: String?
        if let report = child.sanitizerReport {
            problem =
                "its process printed a sanitizer report (exit status \(child.exitStatus ?? -1)): \(report)\(watching)"
        } else if let status = child.exitStatus, status != 0 {
            let lines = child.firstErrorLines(3)
            problem = "its process exited with status \(status)\(lines.isEmpty ? "" : ": \(lines)")"
        }
        if let problem {
            switch result.verdict {
            case .passed:
                result.detail = "the scenario's checks passed, but \(problem)"
            case .notChecked, .usageError:
                result.detail = "\(problem) (\(result.detail))"
            case .failed, .hung, .crashed:
                result.detail = "\(result.detail); and \(problem)"
            }
            if !result.isFailure { result.verdict = .failed }
        }
        return result
    }
}

/// Whether each adapter met its expectation, and how to say so.
package struct ConformanceEvaluation: Sendable {
    /// The JSON shape of `--json`.
    package struct JSONReport: Codable, Sendable {
        package struct Scenario: Codable, Sendable {
            package var name: String
            package var passed: Bool
            package var verdict: String
            package var detail: String
        }
        package struct Adapter: Codable, Sendable {
            package var name: String
            package var kind: String
            package var gallery: Bool
            package var passed: Int
            package var failed: Int
            /// Scenarios that could not run with what the fixture provides (not failures).
            package var notChecked: Int
            /// Scenarios whose fixture contradicted its own declaration (not failures of the adapter).
            package var usageErrors: Int
            /// "pass" (must pass every scenario that ran), "flagged" (a gallery adapter, flagged by
            /// each documented scenario that ran) or "unchecked" (none of those ran, or they need
            /// a ThreadSanitizer build).
            package var expected: String
            /// The expectation was met ("unchecked" counts as met: nothing to hold against it).
            package var expectationMet: Bool
            package var scenarios: [Scenario]
        }
        package var adapters: [Adapter]
    }

    /// One adapter's standing.
    package struct Verdict: Sendable {
        package var expected: String
        package var met: Bool
        package var line: String
    }

    package var json: JSONReport
    package var clean: Bool
    package private(set) var summaryLine: String

    /// The standing of one adapter after its run.
    package static func verdict(_ subject: ConformanceSubject, _ report: ConformanceReport) -> Verdict {
        let counts = report.counts
        let failed = Set(report.failures.map(\.name))
        guard subject.isGallery else {
            let met = failed.isEmpty
            return Verdict(
                expected: "pass", met: met,
                line:
                    "\(subject.name): \(counts)\(met ? ", as expected" : " — NOT as expected: it must pass every scenario")"
            )
        }
        let ran = Set(report.results.map(\.name))
        let relevant = subject.flaggedBy.filter(ran.contains)
        if let sanitizer = subject.flaggedOnlyUnder, !sanitizer.isActive {
            return Verdict(
                expected: "unchecked", met: true,
                line:
                    "\(subject.name): \(counts); not checked: its mistake is \(sanitizer.mistake), flagged by \(subject.flaggedBy.joined(separator: ", ")) only in a \(sanitizer.name) build (swift build \(sanitizer.buildFlag))"
            )
        }
        guard !relevant.isEmpty else {
            return Verdict(
                expected: "unchecked", met: true,
                line:
                    "\(subject.name): \(counts); not checked: this adapter is wrong on purpose and expected to be flagged by \(subject.flaggedBy.joined(separator: ", ")), none of which ran"
            )
        }
        let missed = relevant.filter { !failed.contains($0) }
        if missed.isEmpty {
            return Verdict(
                expected: "flagged", met: true,
                line:
                    "\(subject.name): \(counts); wrong on purpose and flagged by \(relevant.joined(separator: ", ")), as expected"
            )
        }
        return Verdict(
            expected: "flagged", met: false,
            line:
                "\(subject.name): \(counts) — NOT as expected: it is wrong on purpose, yet \(missed.joined(separator: ", ")) did not flag it"
        )
    }

    package init(_ reports: [(ConformanceSubject, ConformanceReport)]) {
        var adapters: [JSONReport.Adapter] = []
        var unmet: [String] = []
        var unchecked = 0
        for (subject, report) in reports {
            let verdict = Self.verdict(subject, report)
            if !verdict.met { unmet.append(subject.name) }
            if verdict.expected == "unchecked" { unchecked += 1 }
            adapters.append(
                JSONReport.Adapter(
                    name: subject.name, kind: subject.kind.rawValue, gallery: subject.isGallery,
                    passed: report.passedCount, failed: report.failures.count,
                    notChecked: report.notChecked.count, usageErrors: report.usageErrors.count,
                    expected: verdict.expected,
                    expectationMet: verdict.met,
                    scenarios: report.results.map {
                        JSONReport.Scenario(
                            name: $0.name, passed: $0.passed, verdict: $0.verdict.rawValue, detail: $0.detail)
                    }))
        }
        json = JSONReport(adapters: adapters)
        clean = unmet.isEmpty
        if unmet.isEmpty && unchecked == reports.count && !reports.isEmpty {
            summaryLine =
                "conformance: nothing to compare — every adapter here is wrong on purpose, and no scenario that must flag it ran (see above); exit status 0"
        } else if unmet.isEmpty {
            let checked = reports.count - unchecked
            summaryLine =
                "conformance: as expected for \(checked) adapter(s)\(unchecked > 0 ? " (\(unchecked) not checked, see above)" : "") — those that must work passed every scenario that ran; those wrong on purpose were flagged by their documented scenarios"
        } else {
            summaryLine =
                "conformance: NOT as expected for: \(unmet.joined(separator: ", ")) — expected: an adapter that must work passes every scenario that ran; one wrong on purpose is flagged by each documented scenario that ran"
        }
        let misused = reports.filter { !$0.1.usageErrors.isEmpty }.map(\.0.name)
        if !misused.isEmpty {
            summaryLine +=
                "; USAGE ERRORS (not counted against the adapter): the fixture of \(misused.joined(separator: ", ")) contradicts its own declaration, see above"
        }
    }
}

extension ScenarioResult {
    /// `  ok   name: summary`, with a `-> detail` line under a failure.
    var renderedLines: String {
        let mark: String
        switch verdict {
        case .passed: mark = "ok  "
        case .failed: mark = "FAIL"
        case .hung: mark = "HANG"
        case .crashed: mark = "CRASH"
        case .notChecked: mark = "SKIP"
        case .usageError: mark = "USAGE"
        }
        var line = "  \(mark) \(name): \(summary)"
        if !detail.isEmpty && !passed { line += "\n        -> \(detail)" }
        return line
    }
}

/// The runner's output: lines flushed as they are printed (so a pipe sees each scenario as it
/// ends), and on a terminal one status line redrawn in place while a child runs.
package final class RunnerOutput: Sendable {
    private let isTerminal = Terminal.isInteractive
    private let statusShown = LockedBox(false)

    package init() {}

    package func line(_ text: String) {
        clearStatus()
        print(text)
        fflush(nil)
    }

    package func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Shows `text` as the transient status line (terminals only), cut to the terminal's width.
    func status(_ text: String) {
        guard isTerminal else { return }
        let shown = TextLayout.truncate(text, to: Terminal.width - 1)
        print("\r\u{1B}[2K\(shown)", terminator: "")
        fflush(nil)
        statusShown.withLock { $0 = true }
    }

    func clearStatus() {
        guard isTerminal,
            statusShown.withLock({ shown in
                defer { shown = false }; return shown
            })
        else { return }
        print("\r\u{1B}[2K", terminator: "")
        fflush(nil)
    }
}

/// The runner's options (``ParsedArguments`` parses them: `--name value`, `--name=value`,
/// switches, `--help`/`-h`).
private let runnerValueOptions: Set<String> = ["adapter", "scenario", "watchdog", "seed", "burst", "run-scenario"]
private let runnerSwitchOptions: Set<String> = [
    "list-adapters", "list-scenarios", "json", "in-process", "flagging-only",
]

/// A usage mistake of the runner: reported with the command's `--help` hint, exit status 2.
private func usage(_ message: String) -> UsageError {
    UsageError(message: message, command: "")
}
