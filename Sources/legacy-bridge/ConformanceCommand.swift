import Foundation
import LegacyBridge
import LegacySimulator
import LegacyBridgeConformance
import LegacyBridgeGallery
import ToolSupport

/// `legacy-bridge conformance`: the library's ``ConformanceRunner`` over this package's adapters —
/// the library's own and the bad-adapter gallery — each scenario in a child process.
enum ConformanceCommand {
    /// How the runner presents itself here: the children re-run `legacy-bridge conformance`.
    static let configuration = ConformanceRunner.Configuration(
        command: "legacy-bridge conformance", childArguments: ["conformance"],
        defaultSubjects: AdapterCatalog.library,
        defaultDescription: "the library's own adapters; all adds the bad-adapter gallery")

    static var help: String { ConformanceRunner.help(configuration) }

    /// The JSON shape of `--json` (also part of the quick check's JSON).
    typealias JSONReport = ConformanceEvaluation.JSONReport

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let status = await ConformanceRunner.run(AdapterCatalog.all, arguments: arguments, configuration: configuration)
        return ExitCode(rawValue: status) ?? .violation
    }

    /// Whether each adapter met its expectation: the library's pass, the gallery's are flagged.
    static func evaluate(_ reports: [(AdapterCatalog.Entry, ConformanceReport)]) -> ConformanceEvaluation {
        ConformanceEvaluation(reports)
    }
}
