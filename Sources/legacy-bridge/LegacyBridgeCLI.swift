import Foundation
import LegacyBridge
import LegacySimulator

/// Exit codes shared by every command.
enum ExitCode: Int32 {
    /// Everything ran and everything was clean.
    case clean = 0
    /// Something ran and found a violation, a failure, a hang or a crash.
    case violation = 1
    /// Bad usage: unknown command or flag, bad number.
    case usage = 2
}

let toolHelp = """
    legacy-bridge — check and measure adapters between legacy C callback SDKs and Swift Concurrency.

    USAGE
      legacy-bridge [--seconds S] [--json]   quick conformance of the library's adapters + a short stress
      legacy-bridge demo                      fetch and download once per hostile SDK behaviour
      legacy-bridge conformance [options]     run the conformance suite (see conformance --help)
      legacy-bridge stress [options]          randomised fetches and downloads (see stress --help)
      legacy-bridge bench [--json] [--quick]  benchmarks against baselines (build with -c release)
      legacy-bridge help                      this text

    Every command accepts --help. Exit status: 0 clean, 1 a violation was found, 2 bad usage.
    """

@main
struct LegacyBridgeCLI {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let command: String
        if let first = arguments.first, !first.hasPrefix("-") {
            command = first
            arguments.removeFirst()
        } else {
            command = ""
        }
        let code: ExitCode
        do {
            switch command {
            case "":
                code = try await DefaultCommand.run(arguments)
            case "demo":
                code = try await DemoCommand.run(arguments)
            case "conformance":
                code = try await ConformanceCommand.run(arguments)
            case "stress":
                code = try await StressCommand.run(arguments)
            case "bench":
                code = try await BenchCommand.run(arguments)
            case "help":
                print(toolHelp)
                code = .clean
            default:
                throw UsageError(message: "unknown command '\(command)'", command: "")
            }
        } catch let error as UsageError {
            Terminal.error("legacy-bridge\(error.command.isEmpty ? "" : " " + error.command): \(error.message)")
            Terminal.error("Run 'legacy-bridge \(error.command.isEmpty ? "" : error.command + " ")--help' for usage.")
            code = .usage
        } catch {
            Terminal.error("legacy-bridge: \(error)")
            code = .violation
        }
        exit(code.rawValue)
    }
}
