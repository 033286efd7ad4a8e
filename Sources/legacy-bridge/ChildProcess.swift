import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a child process ended.
struct ChildOutcome {
    /// Exit status when it exited normally.
    var exitStatus: Int32?
    /// The signal that killed it, when one did.
    var signal: Int32?
    /// Whether the parent killed it for running past its bound.
    var timedOut: Bool
    var standardOutput: String
    var standardError: String

    /// "SIGILL (illegal instruction)"-style name of the signal.
    var signalDescription: String {
        guard let signal else { return "" }
        let name: String
        switch signal {
        case SIGILL: name = "SIGILL"
        case SIGTRAP: name = "SIGTRAP"
        case SIGABRT: name = "SIGABRT"
        case SIGSEGV: name = "SIGSEGV"
        case SIGBUS: name = "SIGBUS"
        case SIGKILL: name = "SIGKILL"
        case SIGTERM: name = "SIGTERM"
        case SIGFPE: name = "SIGFPE"
        default: name = "signal \(signal)"
        }
        if let text = strsignal(signal) { return "\(name) (\(String(cString: text).lowercased()))" }
        return name
    }

    /// The first `count` non-empty lines of standard error, for crash reports.
    func firstErrorLines(_ count: Int) -> String {
        standardError.split(separator: "\n", omittingEmptySubsequences: true)
            .prefix(count)
            .joined(separator: " | ")
    }
}

/// The path of the running executable, so the CLI can re-execute itself for crash isolation.
func currentExecutablePath() -> String {
    #if os(Linux)
    if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        return resolved
    }
    #endif
    return Bundle.main.executablePath ?? CommandLine.arguments[0]
}

/// Runs `executable` with `arguments`, waits at most `bound`, and captures its output.
/// A child still running at the bound is killed (SIGKILL) and reported as timed out.
func runChild(executable: String, arguments: [String], bound: Duration, environment: [String: String] = [:]) throws -> ChildOutcome {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var childEnvironment = ProcessInfo.processInfo.environment
    for (key, value) in environment { childEnvironment[key] = value }
    process.environment = childEnvironment

    let directory = FileManager.default.temporaryDirectory
    let token = UUID().uuidString
    let outURL = directory.appendingPathComponent("legacy-bridge-\(token).out")
    let errURL = directory.appendingPathComponent("legacy-bridge-\(token).err")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    defer {
        try? FileManager.default.removeItem(at: outURL)
        try? FileManager.default.removeItem(at: errURL)
    }
    let outHandle = try FileHandle(forWritingTo: outURL)
    let errHandle = try FileHandle(forWritingTo: errURL)
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = FileHandle.nullDevice

    let finished = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in finished.signal() }
    try process.run()
    var timedOut = false
    let deadline = DispatchTime.now() + .nanoseconds(Int(bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000))
    if finished.wait(timeout: deadline) == .timedOut {
        timedOut = true
        kill(process.processIdentifier, SIGKILL)
        finished.wait()
    }
    try? outHandle.close()
    try? errHandle.close()

    let output = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
    let errors = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
    var outcome = ChildOutcome(exitStatus: nil, signal: nil, timedOut: timedOut, standardOutput: output, standardError: errors)
    switch process.terminationReason {
    case .exit: outcome.exitStatus = process.terminationStatus
    case .uncaughtSignal: outcome.signal = process.terminationStatus
    @unknown default: outcome.exitStatus = process.terminationStatus
    }
    return outcome
}
