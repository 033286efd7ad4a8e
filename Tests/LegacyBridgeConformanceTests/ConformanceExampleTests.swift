import Foundation
import Testing

/// The crash-isolated example of the article "Checking a pattern over the simulated SDK" is a real
/// target of this package: it must stay identical to the article's text, and do what it says.
@Suite("docs: the crash-isolated conformance example compiles, matches its article and passes")
struct ConformanceExampleTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let article = "Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingAPattern.md"

    /// The body of the article's fenced Swift block that starts with `firstLine`.
    static func articleBlock(startingWith firstLine: String) throws -> String? {
        let text = try String(contentsOf: root.appendingPathComponent(article), encoding: .utf8)
        for block in text.components(separatedBy: "```swift\n").dropFirst() {
            guard let end = block.range(of: "```") else { continue }
            let body = String(block[..<end.lowerBound])
            if body.hasPrefix(firstLine) { return body }
        }
        return nil
    }

    @Test("the article's main.swift is byte for byte Sources/MyAdapterConformance/main.swift")
    func articleMatchesTheCompiledCopy() throws {
        let compiled = try String(
            contentsOf: Self.root.appendingPathComponent("Sources/MyAdapterConformance/main.swift"), encoding: .utf8)
        let firstLine = try #require(compiled.split(separator: "\n").first.map(String.init))
        let block = try #require(
            try Self.articleBlock(startingWith: firstLine),
            "no ```swift block in \(Self.article) starts with \(firstLine)")
        #expect(
            block == compiled,
            "\(Self.article) and Sources/MyAdapterConformance/main.swift differ: copy one onto the other")
    }

    @Test("the example checks both adapters, crash-isolated, and exits 0 with the CLI's JSON")
    func examplePasses() async throws {
        let watchdog = "\(testWatchdog.components.seconds)"
        let run = try await CLI.run(["--json", "--watchdog", watchdog], executableName: "MyAdapterConformance")
        #expect(run.status == 0, "\(run.output)\n\(run.errors)")
        let adapters = try #require(run.json?["adapters"] as? [[String: Any]], "\(run.output)")
        #expect(adapters.compactMap { $0["name"] as? String } == ["my-fetch", "my-download"])
        for adapter in adapters {
            #expect(adapter["failed"] as? Int == 0, "\(adapter)")
            #expect(adapter["expected"] as? String == "pass")
            #expect((adapter["passed"] as? Int ?? 0) > 0)
        }
    }

    @Test(
        "the real-adapter example checks its adapter over its SDK, crash-isolated: it passes, exits 0, and says what it could not check"
    )
    func realAdapterExamplePasses() async throws {
        let watchdog = "\(testWatchdog.components.seconds)"
        let run = try await CLI.run(["--json", "--watchdog", watchdog], executableName: "MyRealAdapterConformance")
        #expect(run.status == 0, "\(run.output)\n\(run.errors)")
        let adapters = try #require(run.json?["adapters"] as? [[String: Any]], "\(run.output)")
        let adapter = try #require(adapters.first)
        #expect(adapter["name"] as? String == "load-contents")
        #expect(adapter["failed"] as? Int == 0, "\(adapter)")
        #expect(adapter["usageErrors"] as? Int == 0, "\(adapter)")
        let scenarios = try #require(adapter["scenarios"] as? [[String: Any]])
        let skipped = scenarios.filter { $0["verdict"] as? String == "notChecked" }.compactMap { $0["name"] as? String }
        // The fixture gives no timed call, and its SDK may be called from any thread.
        #expect(
            skipped == ["timeout", "thread-affinity", "sdk-thread-not-held", "loop-watches-released"], "\(scenarios)")
    }

    @Test("the example's bad usage exits 2 naming --help, and --help lists the options")
    func exampleUsage() async throws {
        let bad = try await CLI.run(["--adapter", "nope"], executableName: "MyAdapterConformance")
        #expect(bad.status == 2)
        #expect(bad.errors.contains("unknown adapter 'nope'"))
        #expect(bad.errors.contains("--help"))
        let help = try await CLI.run(["--help"], executableName: "MyAdapterConformance")
        #expect(help.status == 0)
        for option in [
            "--adapter", "--scenario", "--json", "--watchdog", "--seed", "--in-process", "--burst", "--flagging-only",
        ] {
            #expect(help.output.contains(option), "\(option)")
        }
    }
}
