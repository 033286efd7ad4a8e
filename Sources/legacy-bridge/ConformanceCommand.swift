import Foundation
import LegacyBridge
import LegacySimulator
import LegacyBridgeConformance

/// `legacy-bridge conformance`: runs the conformance suite, each scenario in a child process.
enum ConformanceCommand {
    static let help = """
        USAGE: legacy-bridge conformance [--adapter NAME|all] [--scenario NAME[,NAME...]]
                                         [--list-adapters] [--list-scenarios] [--json]
                                         [--in-process] [--watchdog S] [--seed X]

        Runs the adapter conformance suite. Each scenario runs in a child process (this executable,
        re-executed), so an adapter that traps or deadlocks is reported as that scenario's failure
        and the suite goes on.

        OPTIONS
          --adapter NAME|all  Which adapters: one name, or all (library + bad-adapter gallery).
                              Default: the library's own adapters.
          --scenario NAMES    Run only these scenarios (comma-separated names).
          --list-adapters     Print one adapter per line (name, a space, a one-line description).
          --list-scenarios    Print one scenario per line (kind, name, a one-line description).
          --json              Print the report as JSON.
          --in-process        Run scenarios in this process (no crash isolation; faster).
          --watchdog S        Seconds a scenario may take before it counts as a hang (default 5).
          --seed X            Seed for the scenarios' random choices (default 1).

        EXIT STATUS
          0  every library adapter passed and every gallery adapter was flagged by at least one of
             the scenarios its documentation names; 1 otherwise; 2 bad usage.
        """

    /// The JSON shape of `--json`.
    struct JSONReport: Codable {
        struct Scenario: Codable {
            var name: String
            var passed: Bool
            var verdict: String
            var detail: String
        }
        struct Adapter: Codable {
            var name: String
            var kind: String
            var gallery: Bool
            var passed: Int
            var failed: Int
            /// Library adapters: all passed. Gallery adapters: flagged by a documented scenario.
            var expectationMet: Bool
            var scenarios: [Scenario]
        }
        var adapters: [Adapter]
    }

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let parsed = try ParsedArguments(
            command: "conformance", arguments: arguments,
            valueOptions: ["adapter", "scenario", "watchdog", "seed", "run-scenario", "burst"],
            switchOptions: ["list-adapters", "list-scenarios", "json", "in-process"])
        if parsed.wantsHelp {
            print(help)
            return .clean
        }
        if parsed.flag("list-adapters") {
            for entry in AdapterCatalog.all { print("\(entry.name) \(entry.summary)") }
            return .clean
        }
        if parsed.flag("list-scenarios") {
            for kind in AdapterKind.allCases {
                for scenario in ConformanceSuite.scenarios(for: kind) { print("\(kind.rawValue) \(scenario.name) \(scenario.summary)") }
            }
            return .clean
        }
        var options = ConformanceOptions()
        options.watchdog = .milliseconds(Int64(try parsed.seconds("watchdog", default: 5, in: 0.1...600) * 1000))
        options.seed = try parsed.unsigned("seed", default: 1)
        options.burstSize = try parsed.integer("burst", default: 500, in: 1...100_000)

        let entries: [AdapterCatalog.Entry]
        switch parsed.string("adapter") {
        case nil: entries = AdapterCatalog.library
        case "all": entries = AdapterCatalog.all
        case let name?:
            guard let entry = AdapterCatalog.entry(named: name) else {
                throw UsageError(message: "unknown adapter '\(name)' (see --list-adapters)", command: "conformance")
            }
            entries = [entry]
        }
        if let list = parsed.string("scenario") {
            let names = Set(list.split(separator: ",").map { String($0) })
            let known = Set(entries.flatMap(\.scenarioNames))
            if let unknown = names.subtracting(known).sorted().first {
                throw UsageError(message: "unknown scenario '\(unknown)' for the chosen adapters (see --list-scenarios)", command: "conformance")
            }
            options.only = names
        }

        if let scenario = parsed.string("run-scenario") {
            // Child mode: one scenario of one adapter, result as one JSON line.
            guard entries.count == 1, let entry = entries.first else {
                throw UsageError(message: "--run-scenario needs --adapter NAME", command: "conformance")
            }
            guard entry.scenarioNames.contains(scenario) else {
                throw UsageError(message: "adapter '\(entry.name)' has no scenario '\(scenario)'", command: "conformance")
            }
            options.only = [scenario]
            let report = await entry.run(options: options)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let line = String(decoding: try encoder.encode(report.results), as: UTF8.self)
            print("RESULT \(line)")
            return .clean
        }

        let isolated = !parsed.flag("in-process")
        let json = parsed.flag("json")
        var reports: [(AdapterCatalog.Entry, ConformanceReport)] = []
        for entry in entries {
            let report = isolated
                ? runIsolated(entry, options: options, showProgress: !json && Terminal.isInteractive)
                : await entry.run(options: options)
            reports.append((entry, report))
            if !json { print(report.rendered) }
        }
        let outcome = evaluate(reports)
        if json {
            print(jsonString(outcome.json))
        } else {
            print(outcome.summaryLine)
        }
        return outcome.clean ? .clean : .violation
    }

    struct Evaluation {
        var json: JSONReport
        var clean: Bool
        var summaryLine: String
    }

    /// Whether each adapter met its expectation: the library's pass, the gallery's are flagged.
    static func evaluate(_ reports: [(AdapterCatalog.Entry, ConformanceReport)]) -> Evaluation {
        var adapters: [JSONReport.Adapter] = []
        var unmet: [String] = []
        for (entry, report) in reports {
            let failedNames = Set(report.failures.map(\.name))
            let met = entry.isGallery ? !failedNames.isDisjoint(with: entry.flaggedBy) : failedNames.isEmpty
            if !met { unmet.append(entry.name) }
            adapters.append(JSONReport.Adapter(
                name: entry.name, kind: entry.kind.rawValue, gallery: entry.isGallery,
                passed: report.passedCount, failed: report.failures.count, expectationMet: met,
                scenarios: report.results.map {
                    JSONReport.Scenario(name: $0.name, passed: $0.passed, verdict: $0.verdict.rawValue, detail: $0.detail)
                }))
        }
        let line = unmet.isEmpty
            ? "conformance: \(reports.count) adapter(s) as expected (library adapters pass, gallery adapters flagged)"
            : "conformance: NOT as expected for: \(unmet.joined(separator: ", "))"
        return Evaluation(json: JSONReport(adapters: adapters), clean: unmet.isEmpty, summaryLine: line)
    }

    /// Runs each scenario of `entry` in a child process and collects the results.
    static func runIsolated(_ entry: AdapterCatalog.Entry, options: ConformanceOptions, showProgress: Bool) -> ConformanceReport {
        let executable = currentExecutablePath()
        let summaries = Dictionary(uniqueKeysWithValues: ConformanceSuite.scenarios(for: entry.kind).map { ($0.name, $0.summary) })
        let names = entry.scenarioNames.filter { options.only?.contains($0) ?? true }
        var results: [ScenarioResult] = []
        for (index, name) in names.enumerated() {
            if showProgress {
                Terminal.progressBar(label: entry.name, fraction: Double(index) / Double(names.count), suffix: name)
            }
            let summary = summaries[name] ?? ""
            let watchdogSeconds = Double(options.watchdog.components.seconds) + Double(options.watchdog.components.attoseconds) / 1e18
            let arguments = [
                "conformance", "--adapter", entry.name, "--run-scenario", name,
                "--seed", String(options.seed), "--watchdog", String(watchdogSeconds), "--burst", String(options.burstSize),
            ]
            let bound = options.watchdog + .seconds(15)
            do {
                // No backtracer in the child: a crash is reported at once, with the runtime's message first.
                let child = try runChild(executable: executable, arguments: arguments, bound: bound, environment: ["SWIFT_BACKTRACE": "enable=no"])
                results.append(interpret(child, name: name, summary: summary, bound: bound))
            } catch {
                results.append(ScenarioResult(name: name, summary: summary, verdict: .failed, detail: "could not start the child process: \(error)"))
            }
        }
        if showProgress { Terminal.endProgress() }
        return ConformanceReport(adapter: entry.name, kind: entry.kind, results: results)
    }

    static func interpret(_ child: ChildOutcome, name: String, summary: String, bound: Duration) -> ScenarioResult {
        if child.timedOut {
            return ScenarioResult(name: name, summary: summary, verdict: .hung, detail: "the scenario's process did not finish within \(bound) and was killed")
        }
        if child.signal != nil {
            let lines = child.firstErrorLines(3)
            return ScenarioResult(name: name, summary: summary, verdict: .crashed, detail: "crashed with \(child.signalDescription)\(lines.isEmpty ? "" : ": \(lines)")")
        }
        let resultLine = child.standardOutput.split(separator: "\n").last { $0.hasPrefix("RESULT ") }
        if let resultLine, let decoded = try? JSONDecoder().decode([ScenarioResult].self, from: Data(resultLine.dropFirst(7).utf8)), let first = decoded.first {
            return first
        }
        let lines = child.firstErrorLines(3)
        return ScenarioResult(name: name, summary: summary, verdict: .crashed, detail: "exited with status \(child.exitStatus ?? -1) without a result\(lines.isEmpty ? "" : ": \(lines)")")
    }
}
