// What both executables (legacy-bridge and legacy-bridge-bench) do the same way: their exit codes,
// and how an error becomes a message on standard error and an exit status.

import Foundation

/// Exit codes shared by every command.
package enum ExitCode: Int32 {
    /// Everything ran and everything was clean.
    case clean = 0
    /// Something ran and found a violation, a failure, a hang or a crash.
    case violation = 1
    /// Bad usage: unknown command or flag, bad number.
    case usage = 2
}

/// Runs a tool's body, reports what it threw on standard error and exits with its code.
///
/// - A ``UsageError`` prints `<tool> <command>: <message>` and the command to run for its usage,
///   then exits with ``ExitCode/usage``. An error of `help` itself points at the tool's help.
/// - Any other error prints `<tool>: <error>` and exits with ``ExitCode/violation``.
///
/// - Parameters:
///   - tool: The executable's name, as a user types it.
///   - isolation: The caller's actor (the main actor, from `main`); `body` runs there.
///   - body: The command: parses its arguments, runs, returns the exit code.
package func runTool(
    named tool: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> ExitCode
) async -> Never {
    let code: ExitCode
    do {
        code = try await body()
    } catch let error as UsageError {
        let command = error.command.isEmpty ? "" : " " + error.command
        Terminal.error("\(tool)\(command): \(error.message)")
        Terminal.error("Run '\(tool)\(error.command == "help" ? "" : command) --help' for usage.")
        code = .usage
    } catch {
        Terminal.error("\(tool): \(error)")
        code = .violation
    }
    exit(code.rawValue)
}
