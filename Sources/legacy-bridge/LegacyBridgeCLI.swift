import Foundation
import LegacyBridge
import LegacySimulator
import ToolSupport

/// The top-level help: `legacy-bridge help`, `legacy-bridge --help` and `legacy-bridge help help`
/// all print it. It is also the help of the quick check (the command with no name).
let toolHelp = """
    legacy-bridge: check adapters between legacy C callback SDKs and Swift
    Concurrency.

    USAGE: legacy-bridge [COMMAND] [OPTIONS]

    COMMANDS
      (none)          The quick check: the conformance suite on the library's own
                      adapters (in process), then a short stress run; one summary.
      demo            One fetch and one download per hostile SDK behaviour, with
                      what the SDK did.
      conformance     The conformance suite, each scenario in a child process.
      stress          Randomised fetches and downloads; checks every invariant.
      help [COMMAND]  This text, or COMMAND's help (the same as COMMAND --help).

    OPTIONS OF THE QUICK CHECK
      --seconds S     Length of the stress part, in seconds (default 3).
      --seed X        Seed for every random choice (default 1).
      --json          Print {"conformance": …, "stress": …, "clean": true|false}.
      -h, --help      Print this text.

    The benchmarks are an executable of their own:
      swift run -c release legacy-bridge-bench --help

    Help, demo, stress and the quick check fit the terminal's width (when output is
    not a terminal: $COLUMNS, or 80). Exit status: 0 clean, 1 a violation was
    found, 2 bad usage.
    """

/// One command: its name on the command line (empty for the quick check), its help, its body.
struct Command: Sendable {
    var name: String
    var help: @Sendable () -> String
    var run: @Sendable ([String]) async throws -> ExitCode
}

@main
struct LegacyBridgeCLI {
    /// Every command, in the order the top-level help lists them.
    static let commands: [Command] = [
        Command(name: "", help: { toolHelp }, run: { try await DefaultCommand.run($0) }),
        Command(name: "demo", help: { DemoCommand.help }, run: { try await DemoCommand.run($0) }),
        Command(name: "conformance", help: { ConformanceCommand.help }, run: { try await ConformanceCommand.run($0) }),
        Command(name: "stress", help: { StressCommand.help }, run: { try await StressCommand.run($0) }),
    ]

    /// Commands that moved out of this tool, each with the one line it now prints on standard
    /// error before exiting with ``ExitCode/usage``: a script that still calls it fails clearly
    /// instead of going on as if it had run.
    static let movedCommands: [String: String] = [
        "bench": "legacy-bridge: bench has moved: swift run -c release legacy-bridge-bench"
    ]

    /// The command called `name`, if any.
    static func command(named name: String) -> Command? {
        commands.first { $0.name == name }
    }

    /// Whether `arguments` ask for help: `--help` or `-h` anywhere among them.
    static func asksForHelp(_ arguments: [String]) -> Bool {
        arguments.contains("--help") || arguments.contains("-h")
    }

    /// The help `help <command>` and `<command> --help` both print (one source, so they match).
    /// - Throws: `UsageError` for an unknown command.
    static func helpText(for name: String) throws(UsageError) -> String {
        if name == "help" { return toolHelp }
        guard let command = command(named: name) else {
            throw UsageError(message: "no help for unknown command '\(name)'", command: "help")
        }
        return command.help()
    }

    static func main() async {
        await runTool(named: "legacy-bridge") {
            var arguments = Array(CommandLine.arguments.dropFirst())
            let name: String
            if let first = arguments.first, !first.hasPrefix("-") {
                name = first
                arguments.removeFirst()
            } else {
                name = ""
            }
            if name == "help", arguments.count > 1 {
                throw UsageError(message: "help takes at most one command, not \(arguments.count)", command: "help")
            }
            // A moved command answers the same whether it is run, asked for --help or named by help.
            if let moved = movedCommands[name == "help" ? arguments.first ?? "" : name] {
                Terminal.error(moved)
                return .usage
            }
            if name == "help" {
                let topic = arguments.first.map { asksForHelp([$0]) ? "help" : $0 } ?? "help"
                Terminal.write(try helpText(for: topic))
                return .clean
            }
            guard let command = command(named: name) else {
                throw UsageError(message: "unknown command '\(name)' (see legacy-bridge help)", command: "")
            }
            if asksForHelp(arguments) {
                Terminal.write(try helpText(for: name))
                return .clean
            }
            return try await command.run(arguments)
        }
    }
}
