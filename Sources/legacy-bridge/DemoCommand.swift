import Foundation
import LegacyBridge
import LegacySimulator

/// `legacy-bridge demo`: one fetch per hostile behaviour, then one download per hostile stream
/// behaviour, each with a line saying what the SDK did.
enum DemoCommand {
    static let help = """
        USAGE: legacy-bridge demo

        Runs LegacyClient.fetch once in each hostile SDK behaviour and LegacyClient.download once in
        each hostile stream behaviour, and prints one line per run: the behaviour, the outcome, and
        what the SDK did (from its counters). Downloads show a live progress bar on a terminal and
        plain progress lines otherwise.
        """

    private struct FetchCase {
        var name: String
        var behavior: SimulatedBehavior
        var timeout: Duration?
        /// Cancel the calling task after this long.
        var cancelAfter: Duration?
    }

    private static var fetchCases: [FetchCase] {
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
            FetchCase(name: "cancel calls back re-entrantly", behavior: .cancelCallsBackSynchronously.with { $0.outcomes = [] }, cancelAfter: .milliseconds(5)),
            FetchCase(name: "cancel calls back later", behavior: .neverCompletes.with { $0.cancelMode = .callbackAsynchronously }, cancelAfter: .milliseconds(5)),
            FetchCase(name: "cancel is silent", behavior: .cancelSilently.with { $0.outcomes = [] }, cancelAfter: .milliseconds(5)),
            FetchCase(name: "cancel is ignored", behavior: .cancelIgnored.with { $0.delayMicroseconds = 30_000 }, cancelAfter: .milliseconds(5)),
            FetchCase(name: "late callback after cancel", behavior: .lateCallbackAfterCancel.with { $0.outcomes = [] }, cancelAfter: .milliseconds(5)),
            FetchCase(name: "chaos (seed 7)", behavior: .chaos(seed: 7), timeout: .milliseconds(200), cancelAfter: nil),
        ]
    }

    private struct DownloadCase {
        var name: String
        var behavior: SimulatedBehavior
        var totalBytes: Int
        /// Leave the loop after this many bytes.
        var stopAfter: Int?
        /// A slow consumer: this long per event.
        var consumerDelay: Duration?
    }

    private static var downloadCases: [DownloadCase] {
        [
            DownloadCase(name: "well-behaved", behavior: .wellBehaved.with { $0.chunkSize = 16_384; $0.intervalMicroseconds = 300 }, totalBytes: 4 << 20),
            DownloadCase(name: "concurrent, out of order", behavior: .concurrentOutOfOrderStream.with { $0.chunkSize = 16_384; $0.intervalMicroseconds = 300 }, totalBytes: 4 << 20),
            DownloadCase(name: "fresh pthread per event", behavior: .freshThread.with { $0.chunkSize = 65_536; $0.intervalMicroseconds = 2_000 }, totalBytes: 4 << 20),
            DownloadCase(name: "events after the terminal, terminal twice", behavior: .wellBehaved.with { $0.chunkSize = 65_536; $0.eventsAfterTerminal = 3; $0.duplicateTerminal = true; $0.intervalMicroseconds = 1_000 }, totalBytes: 2 << 20),
            DownloadCase(name: "fails midway", behavior: .failing(.remote, message: "connection reset").with { $0.chunkSize = 65_536; $0.intervalMicroseconds = 1_000 }, totalBytes: 2 << 20),
            DownloadCase(name: "consumer leaves at half", behavior: .wellBehaved.with { $0.chunkSize = 16_384; $0.intervalMicroseconds = 300 }, totalBytes: 4 << 20, stopAfter: 2 << 20),
            DownloadCase(name: "fast SDK, slow consumer (backpressure)", behavior: .wellBehaved.with { $0.chunkSize = 16_384 }, totalBytes: 4 << 20, consumerDelay: .microseconds(500)),
            DownloadCase(name: "live source drops while paused", behavior: .liveStream.with { $0.chunkSize = 16_384; $0.intervalMicroseconds = 100 }, totalBytes: 4 << 20, consumerDelay: .microseconds(500)),
        ]
    }

    static func run(_ arguments: [String]) async throws -> ExitCode {
        let parsed = try ParsedArguments(command: "demo", arguments: arguments, valueOptions: [], switchOptions: [])
        if parsed.wantsHelp {
            print(help)
            return .clean
        }
        print("fetch — one request per hostile behaviour:")
        for item in fetchCases { print(try await runFetch(item)) }
        print("")
        print("download — one stream per hostile behaviour (backpressure 16/64):")
        for item in downloadCases { print(try await runDownload(item)) }
        return .clean
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    private static func runFetch(_ item: FetchCase) async throws -> String {
        let client = try LegacyClient()
        let task = Task { () -> String in
            do {
                let response = try await client.fetch(FetchRequest(path: "/demo", responseSize: 64), behavior: item.behavior, timeout: item.timeout)
                return "value from callback #\(response.attempt)"
            } catch {
                return "\(type(of: error)): \(error)"
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
        let c = client.counters
        var did: [String] = []
        let total = c.callbacksSync + c.callbacksWorker + c.callbacksFreshThread
        did.append("\(total) callback\(total == 1 ? "" : "s") (sync \(c.callbacksSync), worker \(c.callbacksWorker), fresh thread \(c.callbacksFreshThread))")
        if c.callbacksRepeated > 0 { did.append("\(c.callbacksRepeated) repeated") }
        if c.cancels > 0 { did.append("cancelled") }
        if c.callbacksReentrantCancel > 0 { did.append("\(c.callbacksReentrantCancel) inside cancel") }
        if c.callbacksAfterCancel > 0 { did.append("\(c.callbacksAfterCancel) after cancel") }
        did.append(c.contextsReleased == c.contextsCreated ? "context released" : "context NOT released")
        return "  \(pad(item.name, 36)) -> \(pad(outcome, 44)) SDK: \(did.joined(separator: ", "))"
    }

    private static func runDownload(_ item: DownloadCase) async throws -> String {
        let client = try LegacyClient()
        var received = 0
        var inOrder = true
        var gaps = 0
        var nextOffset: UInt64 = 0
        var outcome = "finished"
        var lastReported = -1
        do {
            for try await event in client.download(DownloadRequest(path: "/demo", totalBytes: item.totalBytes), behavior: item.behavior) {
                guard case .data(let offset, let bytes) = event else { continue }
                if offset < nextOffset { inOrder = false }
                if offset > nextOffset { gaps += 1 }
                nextOffset = offset + UInt64(bytes.count)
                received += bytes.count
                let percent = item.totalBytes == 0 ? 100 : received * 100 / item.totalBytes
                if Terminal.isInteractive {
                    Terminal.progressBar(label: "  \(pad(item.name, 40))", fraction: Double(percent) / 100)
                } else if percent / 25 > lastReported {
                    lastReported = percent / 25
                    print("  \(item.name): \(percent)%")
                }
                if let delay = item.consumerDelay { try await Task.sleep(for: delay) }
                if let stopAfter = item.stopAfter, received >= stopAfter {
                    outcome = "left the loop"
                    break
                }
            }
        } catch {
            outcome = "\(type(of: error)): \(error)"
        }
        if Terminal.isInteractive { Terminal.endProgress() }
        _ = await eventuallyTrue(within: .seconds(2)) {
            let counters = client.counters
            return counters.contextsReleased == counters.contextsCreated
        }
        let c = client.counters
        let detail = "SDK: \(c.streamEvents) events, \(c.streamPauses) pauses / \(c.streamResumes) resumes, \(c.streamEventsDroppedPaused) dropped while paused, \(c.streamEventsAfterTerminal) after terminal, \(c.cancels) cancel; \(c.contextsReleased == c.contextsCreated ? "context released" : "context NOT released")"
        return "  \(pad(item.name, 40)) -> \(pad(outcome, 30)) \(received) bytes \(inOrder ? "in order" : "OUT OF ORDER")\(gaps > 0 ? " (\(gaps) gaps: dropped while paused)" : ""); \(detail)"
    }
}
