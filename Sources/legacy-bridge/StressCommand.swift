import Foundation
import LegacyBridgeConformance
import LegacyBridgeGallery
import ToolSupport

/// `legacy-bridge stress`: randomised fetches and downloads with cancellations and timeouts.
enum StressCommand {
    static let help = """
        USAGE: legacy-bridge stress [--ops N] [--concurrency C] [--seconds S]
                                    [--seed X] [--json]

        Runs N operations against the simulated SDK, C at a time: fetches and
        downloads (85/15) in chaos behaviours drawn from the seed (synchronous, worker
        and fresh-thread callbacks, repeats, never-completing operations, every cancel
        mode, late callbacks, out-of-order streams), with random cancellations,
        timeouts and consumers that leave early. Prints what the SDK did and the
        violations found, which must all be 0. Built to run under ThreadSanitizer too
        (swift build --sanitize=thread).

        A download whose task is cancelled before it asks for its first element never
        starts, so the SDK sees fewer operations (and creates fewer contexts) than ran;
        the summary says how many.

        OPTIONS
          --ops N           Operations to run (default 20000).
          --concurrency C   Operations in flight at once (default 64).
          --seconds S       Stop starting new operations after S seconds (default 60).
          --seed X          Seed for every random choice (default 1).
          --json            Print the summary as JSON (no progress lines).
          -h, --help        Print this text.

        EXIT STATUS
          0 no violation; 1 a violation (double resume, hang, leaked context or gate,
          event after the terminal, out-of-order delivery); 2 bad usage.
        """

    static let valueOptions: Set<String> = ["ops", "concurrency", "seconds", "seed"]
    static let switchOptions: Set<String> = ["json"]

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let parsed = try ParsedArguments(
            command: "stress", arguments: arguments, valueOptions: valueOptions, switchOptions: switchOptions)
        let json = parsed.flag("json")
        let plan = StressPlan(
            operations: try parsed.integer("ops", default: 20_000, in: 1...100_000_000),
            concurrency: try parsed.integer("concurrency", default: 64, in: 1...100_000),
            seconds: try parsed.seconds("seconds", default: 60, in: 0.01...86_400),
            seed: try parsed.unsigned("seed", default: 1),
            progress: .forOutput(json: json))
        let summary = try await StressRunner.run(plan)
        if json {
            print(jsonString(summary))
        } else {
            Terminal.write(lines: summary.lines(width: Terminal.width))
        }
        return summary.isClean ? .clean : .violation
    }
}

/// `legacy-bridge` with no command: the library's adapters through the conformance suite, then a
/// short stress; one summary; exit 0 only if everything is clean. Its help is the top-level help.
enum DefaultCommand {
    static let valueOptions: Set<String> = ["seconds", "seed"]
    static let switchOptions: Set<String> = ["json"]

    struct JSONSummary: Encodable {
        var conformance: ConformanceCommand.JSONReport
        var stress: StressSummary
        var clean: Bool
    }

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let parsed = try ParsedArguments(
            command: "", arguments: arguments, valueOptions: valueOptions, switchOptions: switchOptions)
        let json = parsed.flag("json")
        let seconds = try parsed.seconds("seconds", default: 3, in: 0.1...3_600)
        let seed = try parsed.unsigned("seed", default: 1)

        if !json {
            Terminal.write(
                lines: TextLayout.wrap(
                    "legacy-bridge: the conformance suite on the library's own adapters, then \(seconds) s of stress",
                    width: Terminal.width))
            print("")
        }
        var reports: [(AdapterCatalog.Entry, ConformanceReport)] = []
        var options = ConformanceOptions()
        options.seed = seed
        options.burstSize = 300
        for entry in AdapterCatalog.library {
            let report = await entry.run(options: options)
            reports.append((entry, report))
            if !json { Terminal.write(lines: ConformanceText.lines(report, width: Terminal.width)) }
        }
        let conformance = ConformanceCommand.evaluate(reports)
        if !json { print("") }
        let summary = try await StressRunner.run(
            StressPlan(
                operations: 1_000_000, concurrency: 64, seconds: seconds, seed: seed,
                progress: .forOutput(json: json)))
        let clean = conformance.clean && summary.isClean
        if json {
            print(jsonString(JSONSummary(conformance: conformance.json, stress: summary, clean: clean)))
        } else {
            Terminal.write(lines: summary.lines(width: Terminal.width))
            print("")
            Terminal.write(
                lines: TextLayout.wrap(
                    clean
                        ? "summary: CLEAN. Every library adapter passed every scenario; the stress found no violation."
                        : "summary: NOT CLEAN. See the failures above.",
                    width: Terminal.width, hangingIndent: "  "))
        }
        return clean ? .clean : .violation
    }
}
