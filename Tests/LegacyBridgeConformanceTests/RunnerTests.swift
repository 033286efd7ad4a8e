import Foundation
import LegacyBridge
@testable import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// The crash-isolated runner's judgement of a child process, and its public entry point.
@Suite("ConformanceRunner: child results, sanitizer reports, exit statuses")
struct RunnerTests {
    static let passing = #"RESULT [{"detail":"","name":"synchronous-callback","summary":"s","verdict":"passed"}]"#
    static let tsanReport = """
        ==================
        WARNING: ThreadSanitizer: data race (pid=4242)
          Write of size 1 at 0x7b0c00000010 by thread T5:
            #0 closure #1 in PlainBoolGateAdapter.value(of:isolation:) Gallery.swift:312
          Previous read of size 1 at 0x7b0c00000010 by thread T4:
        SUMMARY: ThreadSanitizer: data race Gallery.swift:312 in closure #1 in PlainBoolGateAdapter.value(of:isolation:)
        ==================
        ThreadSanitizer: reported 1 warnings
        """

    static func interpret(
        status: Int32? = 0, signal: Int32? = nil, output: String = passing, errors: String = ""
    ) -> ScenarioResult {
        ConformanceRunner.interpret(
            ChildOutcome(
                exitStatus: status, signal: signal, timedOut: false, standardOutput: output, standardError: errors),
            name: "synchronous-callback", summary: "s", bound: .seconds(20))
    }

    @Test("a child that passed, exited 0 and printed no report passes")
    func cleanChildPasses() {
        #expect(Self.interpret().verdict == .passed)
    }

    @Test(
        "a child whose scenario passed but which printed a ThreadSanitizer report fails, showing the report's first lines"
    )
    func sanitizerReportFails() {
        let result = Self.interpret(status: 66, errors: Self.tsanReport)
        #expect(result.verdict == .failed)
        #expect(result.detail.contains("WARNING: ThreadSanitizer: data race"), "\(result.detail)")
        #expect(result.detail.contains("Write of size 1"), "\(result.detail)")
        #expect(result.detail.contains("SUMMARY: ThreadSanitizer"), "\(result.detail)")
        #expect(result.detail.contains("exit status 66"), "\(result.detail)")
        #expect(!result.detail.contains("=========="), "\(result.detail)")
    }

    @Test("a report fails the scenario even when the exit status was left at 0 (halt_on_error, exitcode=0)")
    func sanitizerReportWithStatusZeroFails() {
        #expect(Self.interpret(status: 0, errors: Self.tsanReport).verdict == .failed)
    }

    @Test("a child that exited non-zero after a passing scenario fails, with its first stderr lines")
    func nonZeroExitFails() {
        let result = Self.interpret(status: 3, errors: "something went wrong at exit\nsecond line\n")
        #expect(result.verdict == .failed)
        #expect(result.detail.contains("exited with status 3"), "\(result.detail)")
        #expect(result.detail.contains("something went wrong at exit"), "\(result.detail)")
    }

    @Test("a failing scenario keeps its own detail and gains the process's report")
    func failureKeepsItsDetail() {
        let output =
            #"RESULT [{"detail":"the first callback must decide","name":"synchronous-callback","summary":"s","verdict":"failed"}]"#
        let result = Self.interpret(status: 66, output: output, errors: Self.tsanReport)
        #expect(result.verdict == .failed)
        #expect(result.detail.hasPrefix("the first callback must decide"))
        #expect(result.detail.contains("ThreadSanitizer"))
    }

    @Test("a scenario's child is told apart from the parent, with the adapter it runs, by its command line")
    func scenarioProcessIsRecognised() {
        #expect(
            ConformanceRunner.scenarioProcessAdapter(in: [
                "/bin/prog", "--adapter", "resolve", "--run-scenario", "success", "--watchdog", "5",
            ]) == "resolve")
        #expect(ConformanceRunner.scenarioProcessAdapter(in: ["/bin/prog", "--adapter", "resolve"]) == nil)
        #expect(ConformanceRunner.scenarioProcessAdapter(in: ["/bin/prog", "--help"]) == nil)
        #expect(!ConformanceRunner.isScenarioProcess, "the test process is no scenario's child")
    }

    @Test("a child that died in the runtime's isolation check is a crash named for it, with the fix")
    func isolationTrapIsNamed() {
        let mangled =
            "$s18DocumentationTests25readSensorWithoutSendableyAA7ReadingVs5Int32VYaKF12LegacyBridge12CancelHandleVSgAG10CompletionVyADGXEfU_"
        let named = Self.interpret(
            status: nil, signal: SIGILL, output: "", errors: "\nISOLATION-TRAP \(mangled)\n")
        #expect(named.verdict == .crashed)
        #expect(named.detail.contains("in Swift's actor-isolation check"), "\(named.detail)")
        #expect(named.detail.contains("`{ @Sendable ... }`"), "\(named.detail)")
        #expect(named.detail.contains("readSensor"), "the checked function, demangled: \(named.detail)")
        #expect(!named.detail.contains("$s18"), "\(named.detail)")
        let unnamed = Self.interpret(status: nil, signal: SIGTRAP, output: "", errors: "ISOLATION-TRAP \n")
        #expect(unnamed.detail.contains("in Swift's actor-isolation check"), "\(unnamed.detail)")
        // Without the line, a signal is a plain crash.
        let plain = Self.interpret(status: nil, signal: SIGILL, output: "", errors: "Fatal error: boom")
        #expect(!plain.detail.contains("isolation"), "\(plain.detail)")
    }

    @Test("a child killed by a signal is a crash; one that printed no result is a crash too")
    func crashes() {
        #expect(
            Self.interpret(status: nil, signal: SIGILL, output: "", errors: "Fatal error: boom").verdict == .crashed)
        let silent = Self.interpret(status: 1, output: "", errors: "Fatal error: boom")
        #expect(silent.verdict == .crashed)
        #expect(silent.detail.contains("Fatal error: boom"))
    }

    @Test("the public runner checks a user's adapters in process, with the CLI's exit statuses")
    func publicRunnerStatuses() async {
        let good = ConformanceSubject.oneShot(WithCallbackAdapter())
        #expect(
            await ConformanceRunner.run(
                [good], arguments: ["--in-process", "--scenario", "synchronous-callback", "--json"]) == 0)
        let bad = ConformanceSubject.oneShot(FailureAsEmptySuccessAdapter())  // passed as if it were meant to work
        #expect(
            await ConformanceRunner.run([bad], arguments: ["--in-process", "--scenario", "failure-throws"]) == 1)
        #expect(await ConformanceRunner.run([good], arguments: ["--frobnicate"]) == 2)
        #expect(await ConformanceRunner.run([good, good], arguments: ["--list-adapters"]) == 2)
        #expect(await ConformanceRunner.run([good], arguments: ["--adapter", "nope"]) == 2)
    }
}
