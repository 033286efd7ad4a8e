import Foundation
import LegacyBridgeConformance
@testable import legacy_bridge
import Testing

/// The built executable, run as a user would: help routing, and output that fits the width it
/// was given (standard output is a pipe here, so the width comes from COLUMNS).
@Suite("legacy-bridge CLI: help routing and output width")
struct CLIHelpAndWidthTests {
    @Test("help <command> prints exactly what <command> --help prints, for every command")
    func helpMatchesDashDashHelp() async throws {
        #expect(LegacyBridgeCLI.commands.map(\.name) == ["", "demo", "conformance", "stress"])
        for command in LegacyBridgeCLI.commands {
            let viaHelp = try await CLI.run(command.name.isEmpty ? ["help"] : ["help", command.name])
            let viaFlag = try await CLI.run((command.name.isEmpty ? [] : [command.name]) + ["--help"])
            let viaShortFlag = try await CLI.run((command.name.isEmpty ? [] : [command.name]) + ["-h"])
            #expect(viaHelp.status == 0 && viaFlag.status == 0 && viaShortFlag.status == 0, "'\(command.name)'")
            #expect(viaHelp.output.contains("USAGE"), "'\(command.name)': \(viaHelp.output)")
            #expect(viaHelp.output == viaFlag.output, "help \(command.name) differs from \(command.name) --help")
            #expect(viaShortFlag.output == viaFlag.output, "\(command.name) -h differs from \(command.name) --help")
        }
        let helpHelp = try await CLI.run(["help", "help"])
        let top = try await CLI.run(["help"])
        #expect(helpHelp.output == top.output)
    }

    @Test(
        "help of an unknown command, or of two commands, is bad usage",
        arguments: [["help", "nope"], ["help", "demo", "stress"]])
    func helpBadUsage(arguments: [String]) async throws {
        let run = try await CLI.run(arguments)
        #expect(run.status == 2)
        #expect(run.errors.contains("--help"), "\(run.errors)")
        #expect(run.output.isEmpty)
    }

    @Test("help is printed within the width, at 80 and 200 columns", arguments: [80, 200])
    func helpWithinWidth(columns: Int) async throws {
        for command in LegacyBridgeCLI.commands {
            let run = try await CLI.run(
                ["help"] + (command.name.isEmpty ? [] : [command.name]), environment: ["COLUMNS": String(columns)])
            #expect(run.status == 0)
            expectFits(run.output, columns: columns, "help \(command.name)")
        }
    }

    /// Under `swift test --sanitize=thread` the child is a ThreadSanitizer build too, and there the
    /// demo's slow download consumers hit, in about 1 run in 8, the runtime's false positive in
    /// the continuation hand-off (`withUnsafeContinuation` vs `UnsafeContinuation.resume`,
    /// swiftlang/swift#57803) that the package's suppression file names; the child gets that file.
    @Test("demo, piped at 80 columns: every line fits, every case is reported, progress is plain lines")
    func demoPipedAt80() async throws {
        let run = try await CLI.run(["demo"], environment: ["COLUMNS": "80"].merging(tsanSuppressions) { $1 })
        #expect(run.status == 0, "\(run.errors)")
        expectFits(run.output, columns: 80, "demo")
        for name in DemoCommand.fetchCases.map(\.name) + DemoCommand.downloadCases.map(\.name) {
            #expect(run.output.contains("  \(name)  ") || run.output.contains("  \(name)\n"), "no row for '\(name)'")
        }
        #expect(!run.output.contains("\r") && !run.output.contains("\u{1B}"), "a progress bar was drawn on a pipe")
        #expect(run.output.contains("  well-behaved: 25%\n"))
        #expect(
            run.output.split(separator: "\n").filter { $0.contains("context NOT released") }.isEmpty, "\(run.output)")
    }

    @Test("the quick check, piped at 80 columns: every line fits and it ends clean")
    func quickCheckPipedAt80() async throws {
        let run = try await CLI.run(["--seconds", "0.5"], environment: ["COLUMNS": "80"])
        #expect(run.status == 0, "\(run.output)\n\(run.errors)")
        expectFits(run.output, columns: 80, "quick check")
        #expect(run.output.contains("summary: CLEAN"))
        #expect(!run.output.contains("\r") && !run.output.contains("\u{1B}"), "a progress bar was drawn on a pipe")
    }

    private func expectFits(
        _ output: String, columns: Int, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count > 3, "\(what): too little output to check", sourceLocation: sourceLocation)
        for line in lines where line.count > columns {
            Issue.record(
                "\(what): a line of \(line.count) columns at \(columns): \(line)", sourceLocation: sourceLocation)
        }
    }
}

/// For a child of a ThreadSanitizer build: `TSAN_OPTIONS` naming the package's suppression file
/// (`.ci/tsan-suppressions.txt`), unless this process's options already name one; empty otherwise.
let tsanSuppressions: [String: String] = {
    let existing = ProcessInfo.processInfo.environment["TSAN_OPTIONS"] ?? ""
    guard threadSanitizerIsActive, !existing.contains("suppressions=") else { return [:] }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let file = root.appendingPathComponent(".ci/tsan-suppressions.txt").path
    return ["TSAN_OPTIONS": "suppressions=\(file)" + (existing.isEmpty ? "" : " \(existing)")]
}()
