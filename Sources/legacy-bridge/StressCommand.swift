import Foundation
import LegacyBridgeConformance

/// `legacy-bridge stress`: randomised fetches and downloads with cancellations and timeouts.
enum StressCommand {
    static let help = """
        USAGE: legacy-bridge stress [--ops N] [--concurrency C] [--seconds S] [--seed X] [--json]

        Runs N operations against the simulated SDK, C at a time: fetches and downloads in chaos
        behaviours drawn from the seed (synchronous, worker and fresh-thread callbacks, repeats,
        never-completing operations, every cancel mode, late callbacks, out-of-order streams), with
        random cancellations, timeouts and consumers that leave early. Prints what the SDK did and
        the violations found, which must all be 0. Built to run under ThreadSanitizer too
        (swift build --sanitize=thread).

        OPTIONS
          --ops N           Operations to run (default 20000).
          --concurrency C   Operations in flight at once (default 64).
          --seconds S       Stop starting new operations after S seconds (default 60).
          --seed X          Seed for every random choice (default 1).
          --json            Print the summary as JSON.

        EXIT STATUS
          0 no violation; 1 a violation (double resume, hang, leaked context or gate, event after
          the terminal, out-of-order delivery); 2 bad usage.
        """

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let parsed = try ParsedArguments(
            command: "stress", arguments: arguments,
            valueOptions: ["ops", "concurrency", "seconds", "seed"], switchOptions: ["json"])
        if parsed.wantsHelp {
            print(help)
            return .clean
        }
        let json = parsed.flag("json")
        let plan = StressPlan(
            operations: try parsed.integer("ops", default: 20_000, in: 1...100_000_000),
            concurrency: try parsed.integer("concurrency", default: 64, in: 1...100_000),
            seconds: try parsed.seconds("seconds", default: 60, in: 0.01...86_400),
            seed: try parsed.unsigned("seed", default: 1),
            showProgress: !json && Terminal.isInteractive)
        let summary = try await StressRunner.run(plan)
        print(json ? jsonString(summary) : summary.rendered)
        return summary.isClean ? .clean : .violation
    }
}

/// `legacy-bridge` with no command: the library's adapters through the conformance suite, then a
/// short stress; one summary; exit 0 only if everything is clean.
enum DefaultCommand {
    static let help = """
        USAGE: legacy-bridge [--seconds S] [--seed X] [--json]

        The quick check: runs the conformance suite against the library's own adapters (in process)
        and a short stress run, then prints a summary. Exit status 0 only if everything is clean.

        OPTIONS
          --seconds S   Length of the stress part (default 3).
          --seed X      Seed (default 1).
          --json        Print {"conformance": ..., "stress": ..., "clean": true|false}.
        """

    struct JSONSummary: Encodable {
        var conformance: ConformanceCommand.JSONReport
        var stress: StressSummary
        var clean: Bool
    }

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let parsed = try ParsedArguments(
            command: "", arguments: arguments, valueOptions: ["seconds", "seed"], switchOptions: ["json"])
        if parsed.wantsHelp {
            print(toolHelp)
            print("")
            print(help)
            return .clean
        }
        let json = parsed.flag("json")
        let seconds = try parsed.seconds("seconds", default: 3, in: 0.1...3_600)
        let seed = try parsed.unsigned("seed", default: 1)

        if !json { print("legacy-bridge: conformance of the library's adapters, then \(seconds) s of stress\n") }
        var reports: [(AdapterCatalog.Entry, ConformanceReport)] = []
        var options = ConformanceOptions()
        options.seed = seed
        options.burstSize = 300
        for entry in AdapterCatalog.library {
            let report = await entry.run(options: options)
            reports.append((entry, report))
            if !json { print(report.rendered) }
        }
        let conformance = ConformanceCommand.evaluate(reports)
        if !json { print("") }
        let summary = try await StressRunner.run(StressPlan(
            operations: 1_000_000, concurrency: 64, seconds: seconds, seed: seed,
            showProgress: !json && Terminal.isInteractive))
        let clean = conformance.clean && summary.isClean
        if json {
            print(jsonString(JSONSummary(conformance: conformance.json, stress: summary, clean: clean)))
        } else {
            print(summary.rendered)
            print("")
            print(clean ? "summary: CLEAN — every library adapter passed every scenario; the stress found no violation"
                        : "summary: NOT CLEAN — see the failures above")
        }
        return clean ? .clean : .violation
    }
}
