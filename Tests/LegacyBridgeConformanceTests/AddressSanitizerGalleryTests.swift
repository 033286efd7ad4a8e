import Foundation
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// A C context used after the SDK released it is a use of freed memory: only AddressSanitizer sees
/// it every time. In an AddressSanitizer build the suite frees the context at the SDK's release,
/// and `context-unused-after-release` waits for the adapter's late work inside the scenario. CI
/// runs this suite in its AddressSanitizer step; elsewhere the scenario says what it could not see.
@Suite(
    "A C context used after the SDK's release: flagged on every seed under AddressSanitizer, reported as unchecked elsewhere"
)
struct AddressSanitizerGalleryTests {
    static let seeds: [UInt64] = [1, 2, 3, 4]
    static let scenario = "context-unused-after-release"

    /// What the flagging scenario's detail must show, per adapter.
    static let evidence: [String: String] = [
        "context-used-after-release": "ERROR: AddressSanitizer"
    ]

    @Test(
        "flagged on every seed, by AddressSanitizer's report inside the scenario",
        .enabled(if: addressSanitizerIsActive, "needs an AddressSanitizer build (CI's AddressSanitizer step)"),
        arguments: AdapterCatalog.all.filter { $0.isGallery && $0.flaggedOnlyUnder == .address }.map(\.name))
    func flaggedOnEverySeed(adapter name: String) async throws {
        let entry = try #require(AdapterCatalog.entry(named: name))
        let evidence = try #require(Self.evidence[name])
        for seed in Self.seeds {
            let scenarios = try await CLI.runFlaggingScenarios(
                of: name, flaggedBy: entry.flaggedBy, seed: seed, watchdog: "3")
            for scenario in scenarios {
                #expect(
                    ["crashed", "failed"].contains(scenario.verdict),
                    "\(name) seed \(seed): \(scenario.verdict): \(scenario.detail)")
                #expect(scenario.detail.contains(evidence), "\(name) seed \(seed): \(scenario.detail)")
            }
        }
    }

    @Test(
        "the library's adapters pass the context scenarios on every seed with the suite's guards given up at each release",
        .enabled(if: addressSanitizerIsActive, "needs an AddressSanitizer build (CI's AddressSanitizer step)"))
    func libraryAdaptersPass() async throws {
        for name in ["with-callback-context", "with-callback"] {
            for seed in Self.seeds {
                let run = try await CLI.run([
                    "conformance", "--adapter", name, "--scenario", "\(Self.scenario),context-released-once",
                    "--watchdog", "3", "--seed", String(seed), "--json",
                ])
                #expect(run.status == 0, "\(name) seed \(seed): \(run.errors)")
                let adapter = try #require((run.json?["adapters"] as? [[String: Any]])?.first, "\(run.output)")
                let scenarios = try #require(adapter["scenarios"] as? [[String: Any]])
                #expect(scenarios.count == 2)
                for scenario in scenarios {
                    #expect(
                        scenario["verdict"] as? String == "passed",
                        "\(name) seed \(seed) \(scenario["name"] ?? "?"): \(scenario["detail"] ?? "")")
                }
            }
        }
    }

    @Test(
        "without AddressSanitizer the scenario says what it cannot see, and the gallery adapter counts as unchecked",
        .disabled(if: addressSanitizerIsActive, "the AddressSanitizer tests above check the real verdict"))
    func notSeenWithoutAddressSanitizer() async throws {
        let run = try await CLI.run([
            "conformance", "--adapter", "context-used-after-release,with-callback-context", "--scenario", Self.scenario,
            "--watchdog", "3", "--json",
        ])
        #expect(run.status == 0, "\(run.errors)")
        let adapters = try #require(run.json?["adapters"] as? [[String: Any]], "\(run.output)")
        #expect(adapters.map { $0["expected"] as? String } == ["unchecked", "pass"])
        for adapter in adapters {
            #expect(adapter["expectationMet"] as? Bool == true)
            let scenario = try #require((adapter["scenarios"] as? [[String: Any]])?.first)
            #expect(scenario["verdict"] as? String == "passed")
            #expect((scenario["detail"] as? String ?? "").contains("only an AddressSanitizer build sees"))
        }
    }
}
