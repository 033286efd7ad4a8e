import Foundation
import LegacyBridgeConformance
import Testing

@Suite("legacy-bridge CLI: crash isolation, gallery detection, exit codes and JSON")
struct CLITests {
    @Test("every gallery adapter is flagged, crash-isolated, by each scenario its documentation names")
    func galleryFlagged() async throws {
        for entry in AdapterCatalog.all where entry.isGallery {
            let run = try await CLI.run([
                "conformance", "--adapter", entry.name, "--scenario", entry.flaggedBy.joined(separator: ","),
                "--watchdog", "2", "--json",
            ])
            #expect(run.status == 0, "\(entry.name): \(run.errors)")
            let adapters = run.json?["adapters"] as? [[String: Any]]
            let adapter = try #require(adapters?.first, "\(entry.name): no JSON report in \(run.output)")
            #expect(adapter["name"] as? String == entry.name)
            #expect(adapter["gallery"] as? Bool == true)
            #expect(adapter["expectationMet"] as? Bool == true)
            let scenarios = try #require(adapter["scenarios"] as? [[String: Any]])
            #expect(Set(scenarios.compactMap { $0["name"] as? String }) == Set(entry.flaggedBy))
            for scenario in scenarios {
                #expect(scenario["passed"] as? Bool == false, "\(entry.name) was not flagged by \(scenario["name"] ?? "?")")
                #expect((scenario["detail"] as? String)?.isEmpty == false)
            }
        }
    }

    @Test("a trapping adapter is reported as a crash with the signal and the runtime's message")
    func crashIsReported() async throws {
        let run = try await CLI.run(["conformance", "--adapter", "naive-continuation", "--scenario", "repeated-callback-success-then-error", "--json"])
        #expect(run.status == 0)
        let adapter = try #require((run.json?["adapters"] as? [[String: Any]])?.first)
        let scenario = try #require((adapter["scenarios"] as? [[String: Any]])?.first)
        #expect(scenario["verdict"] as? String == "crashed")
        let detail = scenario["detail"] as? String ?? ""
        #expect(detail.contains("SIG"))
        #expect(detail.contains("CONTINUATION MISUSE"))
    }

    @Test("conformance JSON has the documented keys, and a library adapter passes in child processes")
    func conformanceJSONKeys() async throws {
        let run = try await CLI.run(["conformance", "--adapter", "with-callback", "--scenario", "synchronous-callback,reentrant-cancel", "--watchdog", "60", "--json"])
        #expect(run.status == 0, "\(run.errors)")
        let adapter = try #require((run.json?["adapters"] as? [[String: Any]])?.first)
        for key in ["name", "kind", "gallery", "passed", "failed", "scenarios"] { #expect(adapter[key] != nil, "missing \(key)") }
        #expect(adapter["kind"] as? String == "oneShot")
        #expect(adapter["passed"] as? Int == 2)
        #expect(adapter["failed"] as? Int == 0)
        let scenario = try #require((adapter["scenarios"] as? [[String: Any]])?.first)
        for key in ["name", "passed", "detail"] { #expect(scenario[key] != nil, "missing \(key)") }
    }

    @Test("--list-adapters prints one adapter per line: its name, a space, a description")
    func listAdapters() async throws {
        let run = try await CLI.run(["conformance", "--list-adapters"])
        #expect(run.status == 0)
        let lines = run.output.split(separator: "\n")
        #expect(lines.count == AdapterCatalog.all.count)
        for (line, entry) in zip(lines, AdapterCatalog.all) {
            #expect(line == "\(entry.name) \(entry.summary)")
        }
    }

    @Test("stress --json runs clean and prints the documented keys")
    func stressJSON() async throws {
        let run = try await CLI.run(["stress", "--ops", "500", "--concurrency", "16", "--seed", "3", "--json"])
        #expect(run.status == 0, "\(run.output)\n\(run.errors)")
        let json = try #require(run.json, "\(run.output)")
        for key in ["seed", "ops", "seconds", "opsPerSecond", "outcomes", "sdk", "violations"] { #expect(json[key] != nil, "missing \(key)") }
        let outcomes = try #require(json["outcomes"] as? [String: Any])
        for key in ["success", "failure", "cancelled", "timedOut"] { #expect(outcomes[key] is Int, "missing outcomes.\(key)") }
        let sdk = try #require(json["sdk"] as? [String: Any])
        for key in ["syncCallbacks", "workerCallbacks", "freshThreadCallbacks", "repeatedCallbacks", "callbacksAfterCancel",
                    "reentrantCancelCallbacks", "contextsCreated", "contextsReleased", "handlesOutstanding", "streamEvents"] {
            #expect(sdk[key] is Int, "missing sdk.\(key)")
        }
        let violations = try #require(json["violations"] as? [String: Int])
        for key in ["doubleResume", "hangs", "leakedContexts", "leakedGates", "eventsAfterTerminal", "outOfOrder"] {
            #expect(violations[key] == 0, "violations.\(key) = \(violations[key].map(String.init) ?? "missing")")
        }
        #expect(json["ops"] as? Int == 500)
        #expect(json["seed"] as? Int == 3)
    }

    @Test("bad usage exits 2 with a message", arguments: [
        ["bogus"], ["stress", "--ops", "x"], ["stress", "--ops", "0"], ["stress", "--frobnicate"],
        ["stress", "--seconds", "-1"], ["conformance", "--adapter", "nope"], ["conformance", "--scenario", "nope"],
        ["conformance", "--watchdog"], ["demo", "extra"],
    ])
    func badUsage(arguments: [String]) async throws {
        let run = try await CLI.run(arguments)
        #expect(run.status == 2, "\(arguments): \(run.status)")
        #expect(!run.errors.isEmpty)
        #expect(run.errors.contains("--help"))
    }

    @Test("--help works on every command", arguments: [[], ["demo"], ["conformance"], ["stress"], ["bench"]])
    func help(command: [String]) async throws {
        let run = try await CLI.run(command + ["--help"])
        #expect(run.status == 0)
        #expect(run.output.contains("USAGE"))
    }
}
