import Foundation
import LegacyBridge
import LegacySimulator
import ToolSupport

/// `legacy-bridge demo`: one fetch per hostile behaviour, then one download per hostile stream
/// behaviour, each with what the caller got and what the SDK did.
enum DemoCommand {
    static let help = """
        USAGE: legacy-bridge demo

        Runs LegacyClient.fetch once in each hostile SDK behaviour, then
        LegacyClient.download once in each hostile stream behaviour. For each run it
        prints what the caller got and what the SDK did, from the SDK's own counters:
        its callbacks (and which of them were repeats, the cancellation's own callback,
        or came after the cancel), whether the cancel took effect, and whether the
        context the adapter handed over was released.

        Downloads show a progress bar that redraws in place on a terminal, and plain
        progress lines (every 25 %) otherwise. Lines fit the terminal's width.

        OPTIONS
          -h, --help   Print this text.
        """

    /// The options `demo` accepts (besides --help).
    static let valueOptions: Set<String> = []
    static let switchOptions: Set<String> = []

    struct FetchCase {
        var name: String
        var behavior: SimulatedBehavior
        var timeout: Duration?
        /// Cancel the calling task after this long.
        var cancelAfter: Duration?
    }

    static var fetchCases: [FetchCase] {
        [
            FetchCase(name: "well-behaved (worker thread)", behavior: .wellBehaved),
            FetchCase(name: "synchronous, before start returns", behavior: .synchronous),
            FetchCase(name: "fresh pthread per callback", behavior: .freshThread),
            FetchCase(name: "same success twice", behavior: .repeats([.success, .success])),
            FetchCase(name: "success then error", behavior: .repeats([.success, .failure])),
            FetchCase(name: "error then success", behavior: .repeats([.failure, .success])),
            FetchCase(name: "injected error", behavior: .failing(.remote, message: "simulated 503")),
            FetchCase(name: "never calls back + cancel", behavior: .neverCompletes, cancelAfter: .milliseconds(20)),
            FetchCase(name: "never calls back + timeout", behavior: .neverCompletes, timeout: .milliseconds(50)),
            FetchCase(
                name: "cancel calls back re-entrantly",
                behavior: .cancelCallsBackSynchronously.with { $0.outcomes = [] }, cancelAfter: .milliseconds(5)),
            FetchCase(
                name: "cancel calls back later",
                behavior: .neverCompletes.with { $0.cancelMode = .callbackAsynchronously },
                cancelAfter: .milliseconds(5)),
            FetchCase(
                name: "cancel is silent", behavior: .cancelSilently.with { $0.outcomes = [] },
                cancelAfter: .milliseconds(5)),
            FetchCase(
                name: "cancel is ignored", behavior: .cancelIgnored.with { $0.delayMicroseconds = 30_000 },
                cancelAfter: .milliseconds(5)),
            FetchCase(
                name: "late callback after cancel", behavior: .lateCallbackAfterCancel.with { $0.outcomes = [] },
                cancelAfter: .milliseconds(5)),
            FetchCase(name: "chaos (seed 7)", behavior: .chaos(seed: 7), timeout: .milliseconds(200), cancelAfter: nil),
        ]
    }

    struct DownloadCase {
        var name: String
        var behavior: SimulatedBehavior
        var totalBytes: Int
        /// Leave the loop after this many bytes.
        var stopAfter: Int?
        /// A slow consumer: this long per event.
        var consumerDelay: Duration?
    }

    static var downloadCases: [DownloadCase] {
        [
            DownloadCase(
                name: "well-behaved",
                behavior: .wellBehaved.with {
                    $0.chunkSize = 16_384; $0.intervalMicroseconds = 300
                }, totalBytes: 4 << 20),
            DownloadCase(
                name: "concurrent, out of order",
                behavior: .concurrentOutOfOrderStream.with {
                    $0.chunkSize = 16_384; $0.intervalMicroseconds = 300
                },
                totalBytes: 4 << 20),
            DownloadCase(
                name: "fresh pthread per event",
                behavior: .freshThread.with {
                    $0.chunkSize = 65_536; $0.intervalMicroseconds = 2_000
                }, totalBytes: 4 << 20),
            DownloadCase(
                name: "events after the terminal, terminal twice",
                behavior: .wellBehaved.with {
                    $0.chunkSize = 65_536
                    $0.eventsAfterTerminal = 3
                    $0.duplicateTerminal = true
                    $0.intervalMicroseconds = 1_000
                }, totalBytes: 2 << 20),
            DownloadCase(
                name: "fails midway",
                behavior: .failing(.remote, message: "connection reset").with {
                    $0.chunkSize = 65_536
                    $0.intervalMicroseconds = 1_000
                }, totalBytes: 2 << 20),
            DownloadCase(
                name: "consumer leaves at half",
                behavior: .wellBehaved.with {
                    $0.chunkSize = 16_384; $0.intervalMicroseconds = 300
                }, totalBytes: 4 << 20,
                stopAfter: 2 << 20),
            DownloadCase(
                name: "fast SDK, slow consumer (backpressure)", behavior: .wellBehaved.with { $0.chunkSize = 16_384 },
                totalBytes: 4 << 20, consumerDelay: .microseconds(500)),
            DownloadCase(
                name: "live source drops while paused",
                behavior: .liveStream.with {
                    $0.chunkSize = 16_384; $0.intervalMicroseconds = 250
                }, totalBytes: 4 << 20,
                consumerDelay: .milliseconds(2)),
        ]
    }

    static let fetchTitle = "fetch: one request per hostile behaviour"
    static let downloadTitle =
        "download: one stream per hostile behaviour, buffering .backpressure(low: 16, high: 64)"

    static func run(_ arguments: [String]) async throws -> ExitCode {
        _ = try ParsedArguments(
            command: "demo", arguments: arguments, valueOptions: valueOptions, switchOptions: switchOptions)
        let fetchLabel = labelWidth(for: fetchCases.map(\.name), width: Terminal.width)
        Terminal.write(lines: TextLayout.wrap(fetchTitle, width: Terminal.width, hangingIndent: "  "))
        for item in fetchCases {
            let row = try await runFetch(item)
            Terminal.write(lines: row.lines(labelWidth: fetchLabel, width: Terminal.width))
        }
        print("")
        let downloadLabel = labelWidth(for: downloadCases.map(\.name), width: Terminal.width)
        Terminal.write(lines: TextLayout.wrap(downloadTitle, width: Terminal.width, hangingIndent: "  "))
        for item in downloadCases {
            let row = try await runDownload(item)
            Terminal.write(lines: row.lines(labelWidth: downloadLabel, width: Terminal.width))
        }
        return .clean
    }

    // MARK: - What one run printed

    /// One run's report: the case, what the caller got, and lines about what happened.
    struct Row {
        var name: String
        var outcome: String
        /// Each is laid out as its own paragraph under the row, e.g. `SDK: ...`.
        var details: [String]

        /// The row at `width`: the name in a column `labelWidth` wide, the outcome beside it,
        /// then each detail indented by 6, continued under its text after its `Label: `.
        func lines(labelWidth: Int, width: Int) -> [String] {
            var lines = TextLayout.labelled(name, outcome, labelWidth: labelWidth, width: width)
            for detail in details {
                let labelEnd =
                    detail.firstIndex(of: ":").map { detail.distance(from: detail.startIndex, to: $0) + 2 } ?? 0
                let hanging = String(repeating: " ", count: 6 + (labelEnd <= 12 ? labelEnd : 0))
                lines += TextLayout.wrap(detail, width: width, indent: "      ", hangingIndent: hanging)
            }
            return lines
        }
    }

    /// The label column for `names`: as wide as the longest name, but leaving at least 30
    /// columns for the outcome (longer names then stand on a line of their own).
    static func labelWidth(for names: [String], width: Int) -> Int {
        let longest = names.map { TextLayout.columns($0) }.max() ?? 0
        return max(8, min(longest, width - 2 - 2 - 30))
    }

    /// What a caller sees of an error: its type, and its description when that says more.
    static func describe(_ error: any Error) -> String {
        let type = String(describing: Swift.type(of: error))
        let text = String(describing: error)
        return text == type || text == "\(type)()" ? "threw \(type)" : "threw \(type): \(text)"
    }

    /// What the SDK did during one fetch, in words. Each demo fetch uses a client of its own, so
    /// the counters are that one operation's.
    ///
    /// The counters cannot tell the cancellation's own callback from the others; the behaviour
    /// can: a cancel that took effect in a calling-back mode makes exactly one.
    static func fetchActivity(_ c: SDKCounters, cancelMode: SimulatedBehavior.CancelMode) -> String {
        let kinds: [(UInt64, String)] = [
            (c.callbacksSync, "on the caller's thread inside start"),
            (c.callbacksWorker, "on a worker thread"),
            (c.callbacksFreshThread, "on a fresh thread"),
            (c.callbacksReentrantCancel, "inside cancel"),
        ].filter { $0.0 > 0 }
        let total = kinds.reduce(0) { $0 + $1.0 }
        var callbacks: String
        switch kinds.count {
        case 0: callbacks = "no callback"
        case 1: callbacks = "\(TextLayout.counted(total, "callback")) \(kinds[0].1)"
        default:
            callbacks =
                "\(TextLayout.counted(total, "callback")) ("
                + kinds.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + ")"
        }
        let callsBack = cancelMode == .callbackSynchronously || cancelMode == .callbackAsynchronously
        let cancellation = c.cancels > 0 && callsBack ? min(c.cancels, total) : 0
        // A completion after the cancellation's own is both "repeated" and "after the cancel";
        // it is named once, as the latter.
        let repeated = c.callbacksRepeated - (cancellation > 0 ? min(c.callbacksAfterCancel, c.callbacksRepeated) : 0)
        var roles: [String] = []
        if cancellation > 0 {
            roles.append(cancellation == 1 ? "the cancellation's" : "\(cancellation) the cancellation's")
        }
        if repeated > 0 { roles.append("\(repeated) repeated") }
        if c.callbacksAfterCancel > 0 { roles.append("\(c.callbacksAfterCancel) after the cancel") }
        if !roles.isEmpty { callbacks += ": " + roles.joined(separator: ", ") }

        var parts: [String] = []
        if c.cancels > 0 { parts.append(cancelMode == .ignored ? "cancel ignored" : "cancelled") }
        parts.append(callbacks)
        parts.append(c.contextsReleased == c.contextsCreated ? "context released" : "context NOT released")
        return "SDK: " + parts.joined(separator: "; ")
    }

    /// What the SDK did during one download, in words.
    static func downloadActivity(_ c: SDKCounters) -> String {
        var parts = [
            TextLayout.counted(c.streamEvents, "event"), TextLayout.counted(c.streamPauses, "pause"),
            TextLayout.counted(c.streamResumes, "resume"),
        ]
        if c.streamEventsDroppedPaused > 0 {
            parts.append("\(TextLayout.grouped(c.streamEventsDroppedPaused)) dropped while paused")
        }
        if c.streamEventsAfterTerminal > 0 {
            parts.append("\(TextLayout.grouped(c.streamEventsAfterTerminal)) after its end (ignored by the stream)")
        }
        var text = "SDK: " + parts.joined(separator: ", ")
        if c.cancels > 0 { text += "; cancelled" }
        text += c.contextsReleased == c.contextsCreated ? "; context released" : "; context NOT released"
        return text
    }

    /// What the consumer of a download got.
    static func downloadOutcome(
        ending: String, received: Int, totalBytes: Int, inOrder: Bool, gaps: Int
    ) -> String {
        var text = ending + (ending == "finished" ? ": " : ending.hasPrefix("threw") ? "; got " : " after ")
        text +=
            received == totalBytes
            ? "\(TextLayout.grouped(received)) bytes"
            : "\(TextLayout.grouped(received)) of \(TextLayout.grouped(totalBytes)) bytes"
        text += inOrder ? ", in order" : ", OUT OF ORDER"
        if gaps > 0 { text += ", \(TextLayout.counted(gaps, "gap")) where the SDK dropped events" }
        return text
    }

    // MARK: - Running

    private static func runFetch(_ item: FetchCase) async throws -> Row {
        let client = try LegacyClient()
        let task = Task { () -> String in
            do {
                let response = try await client.fetch(
                    FetchRequest(path: "/demo", responseSize: 64), behavior: item.behavior, timeout: item.timeout)
                return "returned the value of callback #\(response.attempt)"
            } catch {
                return describe(error)
            }
        }
        if let cancelAfter = item.cancelAfter {
            try? await Task.sleep(for: cancelAfter)
            task.cancel()
        }
        let outcome = await task.value
        // Wait (bounded) until the SDK is done with the operation so its counters are complete.
        _ = await eventuallyTrue(within: .seconds(2)) {
            let counters = client.counters
            return counters.contextsReleased == counters.contextsCreated
        }
        return Row(
            name: item.name, outcome: outcome,
            details: [fetchActivity(client.counters, cancelMode: item.behavior.cancelMode)])
    }

    private static func runDownload(_ item: DownloadCase) async throws -> Row {
        let client = try LegacyClient()
        var received = 0
        var inOrder = true
        var gaps = 0
        var nextOffset: UInt64 = 0
        var ending = "finished"
        var lastReported = -1
        let interactive = Terminal.isInteractive
        func report(_ percent: Int) {
            if interactive {
                Terminal.progressBar(label: "  " + item.name, fraction: Double(percent) / 100)
            } else if percent / 25 > lastReported {
                lastReported = percent / 25
                Terminal.write(
                    lines: TextLayout.wrap(
                        "\(item.name): \(percent)%", width: Terminal.width, indent: "  ", hangingIndent: "    "))
            }
        }
        report(0)
        do {
            let request = DownloadRequest(path: "/demo", totalBytes: item.totalBytes)
            for try await event in client.download(request, behavior: item.behavior) {
                guard case .data(let offset, let bytes) = event else { continue }
                if offset < nextOffset { inOrder = false }
                if offset > nextOffset { gaps += 1 }
                nextOffset = offset + UInt64(bytes.count)
                received += bytes.count
                report(item.totalBytes == 0 ? 100 : received * 100 / item.totalBytes)
                if let delay = item.consumerDelay { try await Task.sleep(for: delay) }
                if let stopAfter = item.stopAfter, received >= stopAfter {
                    ending = "left the loop"
                    break
                }
            }
        } catch {
            ending = describe(error)
        }
        if interactive { Terminal.endProgress() }
        _ = await eventuallyTrue(within: .seconds(2)) {
            let counters = client.counters
            return counters.contextsReleased == counters.contextsCreated
        }
        return Row(
            name: item.name,
            outcome: downloadOutcome(
                ending: ending, received: received, totalBytes: item.totalBytes, inOrder: inOrder, gaps: gaps),
            details: [downloadActivity(client.counters)])
    }
}
