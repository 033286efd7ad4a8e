import Foundation
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

@Suite("legacy-bridge CLI: crash isolation, gallery detection, exit codes and JSON")
struct CLITests {
    @Test("a trapping adapter is reported as a crash with the signal and the runtime's message")
    func crashIsReported() async throws {
        let run = try await CLI.run([
            "conformance", "--adapter", "naive-continuation", "--scenario", "repeated-callback-success-then-error",
            "--json",
        ])
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
        let run = try await CLI.run([
            "conformance", "--adapter", "with-callback", "--scenario", "synchronous-callback,callback-inside-cancel",
            "--watchdog", "60", "--json",
        ])
        #expect(run.status == 0, "\(run.errors)")
        let adapter = try #require((run.json?["adapters"] as? [[String: Any]])?.first)
        for key in ["name", "kind", "gallery", "passed", "failed", "expected", "expectationMet", "scenarios"] {
            #expect(adapter[key] != nil, "missing \(key)")
        }
        #expect(adapter["kind"] as? String == "oneShot")
        #expect(adapter["expected"] as? String == "pass")
        #expect(adapter["passed"] as? Int == 2)
        #expect(adapter["failed"] as? Int == 0)
        let scenario = try #require((adapter["scenarios"] as? [[String: Any]])?.first)
        for key in ["name", "passed", "detail"] { #expect(scenario[key] != nil, "missing \(key)") }
    }

    @Test("piped, each scenario's line is printed as soon as it ends, while later scenarios still run")
    func pipedOutputStreams() async throws {
        // The second scenario hangs for the whole watchdog (3 s) with this adapter; the first
        // scenario's line must reach the pipe before the program ends.
        let lines = try await CLI.runStreaming([
            "conformance", "--adapter", "no-cancellation-handler",
            "--scenario", "synchronous-callback,cancel-in-flight", "--watchdog", "3",
        ])
        let first = try #require(lines.first { $0.text.contains("synchronous-callback") }, "\(lines.map(\.text))")
        #expect(first.text.hasPrefix("  ok   synchronous-callback"))
        #expect(first.processWasRunning, "the line arrived only when the program ended")
        let hang = try #require(
            lines.first { $0.text.contains("HANG cancel-in-flight") }, "\(lines.map(\.text))")
        #expect(hang.processWasRunning)
    }

    @Test("a one-scenario run of a gallery adapter says what 'expected' means, whichever scenario it is")
    func oneScenarioOfAGalleryAdapter() async throws {
        let unrelated = try await CLI.run([
            "conformance", "--adapter", "semaphore-wait", "--scenario", "synchronous-callback",
        ])
        #expect(unrelated.status == 0, "\(unrelated.output)")
        #expect(unrelated.output.contains("not checked"), "\(unrelated.output)")
        #expect(
            unrelated.output.contains("expected to be flagged by caller-not-blocked, none of which ran"),
            "\(unrelated.output)")
        let flagging = try await CLI.run([
            "conformance", "--adapter", "semaphore-wait", "--scenario", "caller-not-blocked", "--json",
        ])
        #expect(flagging.status == 0, "\(flagging.output)")
        let adapter = try #require((flagging.json?["adapters"] as? [[String: Any]])?.first)
        #expect(adapter["expected"] as? String == "flagged")
        #expect(adapter["expectationMet"] as? Bool == true)
        let text = try await CLI.run(["conformance", "--adapter", "semaphore-wait", "--scenario", "caller-not-blocked"])
        #expect(
            text.output.contains("wrong on purpose and flagged by caller-not-blocked, as expected"), "\(text.output)")
    }

    @Test(
        "--adapter takes a comma-separated list, runs each named adapter once in that order, and names every unknown one"
    )
    func adapterList() async throws {
        let run = try await CLI.run([
            "conformance", "--adapter", "with-callback-context,with-callback,with-callback-context",
            "--scenario", "synchronous-callback", "--json",
        ])
        #expect(run.status == 0, "\(run.errors)")
        let adapters = try #require(run.json?["adapters"] as? [[String: Any]], "\(run.output)")
        #expect(adapters.compactMap { $0["name"] as? String } == ["with-callback-context", "with-callback"])
        #expect(adapters.allSatisfy { $0["expectationMet"] as? Bool == true }, "\(adapters)")

        let unknown = try await CLI.run(["conformance", "--adapter", "with-callback,nope,zzz"])
        #expect(unknown.status == 2)
        #expect(unknown.errors.contains("unknown adapters 'nope', 'zzz' (see --list-adapters)"), "\(unknown.errors)")
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
        for key in ["seed", "ops", "seconds", "opsPerSecond", "outcomes", "sdk", "violations"] {
            #expect(json[key] != nil, "missing \(key)")
        }
        let outcomes = try #require(json["outcomes"] as? [String: Any])
        for key in ["success", "failure", "cancelled", "timedOut"] {
            #expect(outcomes[key] is Int, "missing outcomes.\(key)")
        }
        let sdk = try #require(json["sdk"] as? [String: Any])
        for key in [
            "syncCallbacks", "workerCallbacks", "freshThreadCallbacks", "repeatedCallbacks", "callbacksAfterCancel",
            "reentrantCancelCallbacks", "contextsCreated", "contextsReleased", "handlesOutstanding", "streamEvents",
        ] {
            #expect(sdk[key] is Int, "missing sdk.\(key)")
        }
        let violations = try #require(json["violations"] as? [String: Int])
        for key in [
            "doubleResume", "hangs", "leakedContexts", "leakedGates", "eventsAfterTerminal", "outOfOrder",
            "foreignResults",
        ] {
            #expect(violations[key] == 0, "violations.\(key) = \(violations[key].map(String.init) ?? "missing")")
        }
        #expect(json["ops"] as? Int == 500)
        #expect(json["seed"] as? Int == 3)
    }

    @Test(
        "bad usage exits 2 with a message",
        arguments: [
            ["bogus"], ["stress", "--ops", "x"], ["stress", "--ops", "0"], ["stress", "--frobnicate"],
            ["stress", "--seconds", "-1"], ["conformance", "--adapter", "nope"], ["conformance", "--adapter", ","],
            ["conformance", "--scenario", "nope"],
            ["conformance", "--watchdog"], ["demo", "extra"],
        ])
    func badUsage(arguments: [String]) async throws {
        let run = try await CLI.run(arguments)
        #expect(run.status == 2, "\(arguments): \(run.status)")
        #expect(!run.errors.isEmpty)
        #expect(run.errors.contains("--help"))
    }

    @Test("--help works on every command", arguments: [[], ["demo"], ["conformance"], ["stress"]])
    func help(command: [String]) async throws {
        let run = try await CLI.run(command + ["--help"])
        #expect(run.status == 0)
        #expect(run.output.contains("USAGE"))
    }

    @Test(
        "bench, which moved to legacy-bridge-bench, fails with one line that says what to run",
        arguments: [["bench"], ["bench", "--quick", "--json"], ["bench", "--help"], ["help", "bench"]])
    func benchPointsAtItsExecutable(arguments: [String]) async throws {
        let run = try await CLI.run(arguments)
        #expect(run.status == 2, "\(arguments): \(run.status)")
        #expect(run.output.isEmpty, "\(arguments): \(run.output.prefix(200))")
        #expect(
            run.errors == "legacy-bridge: bench has moved: swift run -c release legacy-bridge-bench\n",
            "\(arguments): \(run.errors)")
    }

    @Test("the top-level help lists no bench command and says where the benchmarks are")
    func helpPointsAtTheBenchmarks() async throws {
        let run = try await CLI.run(["--help"], environment: ["COLUMNS": "80"])
        #expect(run.status == 0)
        #expect(!run.output.split(separator: "\n").contains { $0.hasPrefix("  bench") }, "\(run.output)")
        #expect(run.output.contains("swift run -c release legacy-bridge-bench --help"), "\(run.output)")
    }
}
