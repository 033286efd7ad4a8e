@testable import legacy_bridge
import LegacyBridgeConformance
import LegacySimulator
import Testing
import ToolSupport

/// The CLI's text layout, driven at given widths (no terminal involved): every line it builds
/// fits, and the pieces stay aligned.
@Suite("CLI layout: every line fits the width it is given")
struct CLILayoutTests {
    static let widths = [80, 200]

    /// Words a long, realistic outcome can contain: an SDK error with its message.
    static let longError =
        "threw LegacySDKError: the remote end refused the request (7): "
        + "simulated remote failure with a message long enough to need several lines at any width, "
        + "and a path /a/very/long/path/without/any/spaces/that/must/still/be/cut/somewhere/to/fit"

    private func expectFits(
        _ lines: [String], width: Int, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for line in lines {
            #expect(
                TextLayout.columns(line) <= width, "\(what) at \(width): \(TextLayout.columns(line)) columns: \(line)",
                sourceLocation: sourceLocation)
        }
    }

    @Test("wrap keeps every word, in order, and no line is wider than asked, at every width from 20 to 200")
    func wrapKeepsWords() {
        let text = Self.longError + " " + String(repeating: "word ", count: 40)
        for width in 20...200 {
            let lines = TextLayout.wrap(text, width: width, indent: "  ", hangingIndent: "      ")
            expectFits(lines, width: width, "wrap")
            #expect(lines.first?.hasPrefix("  ") == true)
            #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("      ") })
            // Words cut to fit come back whole when their pieces are joined.
            let rejoined = lines.map { $0.trimmingLeadingSpaces() }.joined(separator: " ")
            let squeezed = rejoined.filter { $0 != " " }
            #expect(squeezed == text.filter { $0 != " " }, "at \(width)")
        }
    }

    @Test("demo rows fit at 80 and 200 columns, outcomes start in one column, details sit under SDK:")
    func demoRowsFit() {
        let fetchCounters: [(SDKCounters, SimulatedBehavior.CancelMode)] = [
            (counters { $0.callbacksWorker = 1 }, .callbackAsynchronously),
            (
                counters {
                    $0.callbacksSync = 2; $0.callbacksWorker = 3; $0.callbacksFreshThread = 4;
                    $0.callbacksReentrantCancel = 1
                    $0.cancels = 1; $0.callbacksRepeated = 8; $0.callbacksAfterCancel = 2
                }, .callbackSynchronously
            ),
            (
                counters {
                    $0.cancels = 1; $0.contextsCreated = 1
                }, .silent
            ),
        ]
        for width in Self.widths {
            let names = DemoCommand.fetchCases.map(\.name)
            let labelWidth = DemoCommand.labelWidth(for: names, width: width)
            var outcomeColumns = Set<Int>()
            for (index, name) in names.enumerated() {
                let (c, mode) = fetchCounters[index % fetchCounters.count]
                let outcome = index % 2 == 0 ? Self.longError : "returned the value of callback #1"
                let row = DemoCommand.Row(
                    name: name, outcome: outcome, details: [DemoCommand.fetchActivity(c, cancelMode: mode)])
                let lines = row.lines(labelWidth: labelWidth, width: width)
                expectFits(lines, width: width, "fetch row '\(name)'")
                let first = lines[0]
                let outcomeStart = first.range(of: String(outcome.prefix(10)))
                #expect(outcomeStart != nil, "\(first)")
                if let outcomeStart {
                    outcomeColumns.insert(first.distance(from: first.startIndex, to: outcomeStart.lowerBound))
                }
                let sdkLine = lines.firstIndex { $0.hasPrefix("      SDK: ") }
                #expect(sdkLine != nil, "\(lines)")
                if let sdkLine {
                    #expect(
                        lines[(sdkLine + 1)...].allSatisfy {
                            $0.hasPrefix("           ") && !$0.hasPrefix("            ")
                        }, "\(lines)")
                }
            }
            #expect(outcomeColumns.count == 1, "outcomes start at columns \(outcomeColumns.sorted()) at width \(width)")

            let downloadNames = DemoCommand.downloadCases.map(\.name)
            let downloadLabel = DemoCommand.labelWidth(for: downloadNames, width: width)
            for name in downloadNames {
                var c = SDKCounters()
                c.streamEvents = 513; c.streamPauses = 7; c.streamResumes = 6; c.streamEventsDroppedPaused = 1_000_000
                c.streamEventsAfterTerminal = 4; c.cancels = 1; c.contextsCreated = 1
                let outcome = DemoCommand.downloadOutcome(
                    ending: Self.longError, received: 1_179_648, totalBytes: 4_194_304, inOrder: false, gaps: 12)
                let row = DemoCommand.Row(name: name, outcome: outcome, details: [DemoCommand.downloadActivity(c)])
                expectFits(row.lines(labelWidth: downloadLabel, width: width), width: width, "download row '\(name)'")
            }
            expectFits(
                TextLayout.wrap(DemoCommand.downloadTitle, width: width, hangingIndent: "  "), width: width, "title")
        }
    }

    @Test("the stress summary fits at 80 and 200 columns, with the largest numbers it can show")
    func stressSummaryFits() {
        var summary = StressSummary(seed: .max, ops: 100_000_000, seconds: 86_400, opsPerSecond: 12_345_678)
        summary.fetches = 85_000_000
        summary.downloads = 15_000_000
        summary.outcomes = .init(success: 99_999_999, failure: 99_999_999, cancelled: 99_999_999, timedOut: 99_999_999)
        summary.sdk.contextsCreated = 99_999_990
        summary.sdk.syncCallbacks = .max
        summary.violations.hangs = 99_999
        for width in Self.widths {
            let lines = summary.lines(width: width)
            expectFits(lines, width: width, "stress summary")
            let words = lines.joined(separator: " ").split(separator: " ").joined(separator: " ")
            #expect(words.contains("10 operations never reached the SDK"))
        }
    }

    @Test("a conformance report fits at 80 and 200 columns, for every scenario and a long failure detail")
    func conformanceReportFits() {
        for kind in [AdapterKind.oneShot, .stream] {
            let results = ConformanceSuite.scenarios(for: kind).enumerated().map { index, scenario in
                ScenarioResult(
                    name: scenario.name, summary: scenario.summary, verdict: index % 2 == 0 ? .passed : .crashed,
                    detail: Self.longError)
            }
            let report = ConformanceReport(adapter: "an-adapter-with-a-rather-long-name", kind: kind, results: results)
            for width in Self.widths {
                let lines = ConformanceText.lines(report, width: width)
                expectFits(lines, width: width, "conformance report")
                #expect(lines.count > results.count)
            }
        }
    }

    @Test("a progress bar leaves the last column free at every width from 20 to 200, whatever its label")
    func progressBarFits() {
        let labels = [
            "stress", "  " + (DemoCommand.downloadCases.map(\.name).max { $0.count < $1.count } ?? ""),
            String(repeating: "x", count: 300),
        ]
        for width in 20...200 {
            for label in labels {
                for fraction in [-1, 0, 0.5, 1, 2, .nan] {
                    let line = TextLayout.progressLine(
                        label: label, fraction: fraction, suffix: "12,345 ops", width: width)
                    #expect(TextLayout.columns(line) <= width - 1, "width \(width): \(line)")
                    #expect(line.contains("%"), "width \(width): \(line)")
                }
            }
        }
        #expect(
            TextLayout.progressLine(label: "stress", fraction: 0.5, width: 80).contains(
                "[###############...............]  50%"))
    }

    @Test("help fits at 80 and 200 columns; this CLI's own help is written within 80 columns and printed as written")
    func helpFits() throws {
        for command in LegacyBridgeCLI.commands {
            for width in Self.widths {
                expectFits(TextLayout.fit(command.help(), width: width), width: width, "help of '\(command.name)'")
            }
        }
        for own in [toolHelp, DemoCommand.help, StressCommand.help] {
            #expect(
                TextLayout.fit(own, width: 80)
                    == own.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
        }
    }

    @Test("the width is the terminal's, else COLUMNS, else 80")
    func widthRule() {
        #expect(Terminal.columns(terminal: 132, environment: ["COLUMNS": "100"]) == 132)
        #expect(Terminal.columns(terminal: nil, environment: ["COLUMNS": "100"]) == 100)
        #expect(Terminal.columns(terminal: 0, environment: ["COLUMNS": "100"]) == 100)
        #expect(Terminal.columns(terminal: nil, environment: ["COLUMNS": "wide"]) == 80)
        #expect(Terminal.columns(terminal: nil, environment: [:]) == 80)
        #expect(Terminal.columns(terminal: 5, environment: [:]) == TextLayout.minimumWidth)
    }

    @Test("demo rows count every callback the same way and say which one is the cancellation's")
    func demoCountsCallbacksConsistently() {
        // "never calls back + cancel": the cancellation's callback comes from a worker.
        let later = DemoCommand.fetchActivity(
            counters {
                $0.callbacksWorker = 1; $0.cancels = 1
            }, cancelMode: .callbackAsynchronously)
        #expect(later == "SDK: cancelled; 1 callback on a worker thread: the cancellation's; context released")
        // "cancel calls back re-entrantly": the same callback, inside cancel, is counted the same way.
        let inside = DemoCommand.fetchActivity(
            counters {
                $0.callbacksReentrantCancel = 1; $0.cancels = 1
            }, cancelMode: .callbackSynchronously)
        #expect(inside == "SDK: cancelled; 1 callback inside cancel: the cancellation's; context released")
        // A late callback after the cancellation's is named once, as "after the cancel".
        let late = DemoCommand.fetchActivity(
            counters {
                $0.callbacksWorker = 2; $0.cancels = 1; $0.callbacksRepeated = 1; $0.callbacksAfterCancel = 1
            },
            cancelMode: .callbackAsynchronously)
        #expect(
            late
                == "SDK: cancelled; 2 callbacks on a worker thread: the cancellation's, 1 after the cancel; context released"
        )
        let silent = DemoCommand.fetchActivity(counters { $0.cancels = 1 }, cancelMode: .silent)
        #expect(silent == "SDK: cancelled; no callback; context released")
        #expect(TextLayout.counted(1, "gap") == "1 gap" && TextLayout.counted(2, "gap") == "2 gaps")
    }

    @Test("every option a command's parser accepts is in that command's help")
    func everyAcceptedOptionIsInTheHelp() async throws {
        var checked: [String: [String]] = [:]
        // The conformance command is parsed by the conformance runner, which owns its options and help.
        for command in LegacyBridgeCLI.commands where command.name != "conformance" {
            do {
                _ = try await command.run(["--no-such-option-for-this-test"])
                Issue.record("'\(command.name)' accepted an unknown option")
            } catch let error as UsageError {
                let help = command.help()
                for option in error.acceptedOptions {
                    #expect(
                        help.contains("--\(option)"),
                        "'legacy-bridge \(command.name)' accepts --\(option), but its help does not mention it")
                }
                checked[command.name] = error.acceptedOptions
            }
        }
        // The check saw the parsers' real option lists (not empty lists that pass trivially).
        #expect(checked["stress"] == ["concurrency", "json", "ops", "seconds", "seed"])
        #expect(checked[""] == ["json", "seconds", "seed"])
        #expect(checked["demo"] == [])
    }

    private func counters(_ body: (inout SDKCounters) -> Void) -> SDKCounters {
        var counters = SDKCounters()
        body(&counters)
        return counters
    }
}

extension String {
    fileprivate func trimmingLeadingSpaces() -> String { String(drop { $0 == " " }) }
}
