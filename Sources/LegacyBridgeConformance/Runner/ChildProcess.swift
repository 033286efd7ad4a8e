import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Child processes: how the conformance runner (and the CLI's benchmarks) re-run this executable
// for isolation. `package` so the CLI shares this one implementation.

/// How a child process ended.
package struct ChildOutcome: Sendable {
    /// Exit status when it exited normally.
    package var exitStatus: Int32?
    /// The signal that killed it, when one did.
    package var signal: Int32?
    /// Whether the parent killed it for running past its bound.
    package var timedOut: Bool
    package var standardOutput: String
    package var standardError: String

    package init(exitStatus: Int32?, signal: Int32?, timedOut: Bool, standardOutput: String, standardError: String) {
        self.exitStatus = exitStatus
        self.signal = signal
        self.timedOut = timedOut
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    /// "SIGILL (illegal instruction)"-style name of the signal.
    package var signalDescription: String {
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
    package func firstErrorLines(_ count: Int) -> String {
        standardError.split(separator: "\n", omittingEmptySubsequences: true)
            .filter {
                !$0.allSatisfy { $0 == "=" || $0 == " " } && !$0.hasPrefix(watchLinePrefix)
                    && !$0.hasPrefix(isolationTrapLinePrefix)
            }
            .prefix(count)
            .joined(separator: " | ")
    }

    /// When the process died in Swift's runtime isolation check (see IsolationTrap.swift): the
    /// demangled name of the function that was checked, or "" when the loader did not know it.
    /// `nil` for any other end.
    package var isolationTrap: String? {
        guard
            let line = standardError.split(separator: "\n").last(where: { $0.hasPrefix(isolationTrapLinePrefix) })
        else { return nil }
        let symbol = line.dropFirst(isolationTrapLinePrefix.count).trimmingCharacters(in: .whitespaces)
        return symbol.isEmpty ? "" : demangledSymbol(symbol)
    }

    /// The start of a sanitizer report (ThreadSanitizer, AddressSanitizer, LeakSanitizer,
    /// UndefinedBehaviorSanitizer) in standard error — its first lines and its SUMMARY line — or
    /// `nil` when there is none.
    package var sanitizerReport: String? {
        let lines = standardError.split(separator: "\n", omittingEmptySubsequences: true)
            .filter { !$0.allSatisfy { $0 == "=" || $0 == " " } }
        let markers = ["WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"]
        guard let start = lines.firstIndex(where: { line in markers.contains { line.contains($0) } }) else {
            return nil
        }
        var shown = Array(lines[start...].prefix(3)).map { $0.trimmingCharacters(in: .whitespaces) }
        if let summary = lines[start...].first(where: { $0.hasPrefix("SUMMARY:") }), !shown.contains(String(summary)) {
            shown.append(String(summary))
        }
        return shown.joined(separator: " | ")
    }
}

/// The path of the running executable, so a program can re-execute itself for crash isolation.
package func currentExecutablePath() -> String {
    #if os(Linux)
    if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        return resolved
    }
    #endif
    return Bundle.main.executablePath ?? CommandLine.arguments[0]
}

/// Whether this platform can start child processes, which crash isolation needs: Linux and macOS
/// can; iOS, tvOS, watchOS and visionOS apps cannot, so the runner runs scenarios in-process there.
#if os(Linux) || os(macOS)
package let crashIsolationIsAvailable = true
#else
package let crashIsolationIsAvailable = false
#endif

/// Thrown by ``runChild(executable:arguments:bound:environment:)`` where the platform cannot
/// start processes (iOS, tvOS, watchOS, visionOS; see `crashIsolationIsAvailable`).
package struct ChildProcessUnavailable: Error, CustomStringConvertible {
    package var description: String { "this platform cannot start child processes" }
}

/// Runs `executable` with `arguments`, waits at most `bound`, and captures its output.
/// A child still running at the bound is killed (SIGKILL) and reported as timed out.
/// - Throws: ``ChildProcessUnavailable`` where the platform cannot start processes, or what
///   starting the process threw.
package func runChild(
    executable: String, arguments: [String], bound: Duration, environment: [String: String] = [:]
) throws -> ChildOutcome {
    #if os(Linux) || os(macOS)
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
    let deadline =
        DispatchTime.now()
        + .nanoseconds(Int(bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000))
    if finished.wait(timeout: deadline) == .timedOut {
        timedOut = true
        kill(process.processIdentifier, SIGKILL)
        finished.wait()
    }
    try? outHandle.close()
    try? errHandle.close()

    let output = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
    let errors = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
    var outcome = ChildOutcome(
        exitStatus: nil, signal: nil, timedOut: timedOut, standardOutput: output, standardError: errors)
    switch process.terminationReason {
    case .exit: outcome.exitStatus = process.terminationStatus
    case .uncaughtSignal: outcome.signal = process.terminationStatus
    @unknown default: outcome.exitStatus = process.terminationStatus
    }
    return outcome
    #else
    // Foundation's Process exists only where apps may start processes.
    throw ChildProcessUnavailable()
    #endif
}

/// ``runChild(executable:arguments:bound:environment:)`` on a thread of its own, so the waiting
/// never blocks a thread of the cooperative pool (on Linux, Dispatch's global threads are the pool).
package func runChildOffThePool(
    executable: String, arguments: [String], bound: Duration, environment: [String: String] = [:]
) async throws -> ChildOutcome {
    try await withCheckedThrowingContinuation { continuation in
        onDedicatedThread("conformance child") {
            continuation.resume(
                with: Result {
                    try runChild(executable: executable, arguments: arguments, bound: bound, environment: environment)
                })
        }
    }
}

/// Whether this process runs with ThreadSanitizer (its runtime is linked in).
package let threadSanitizerIsActive: Bool = sanitizerRuntimeLinked("__tsan_init")

/// Whether this process runs with AddressSanitizer (its runtime is linked in).
package let addressSanitizerIsActive: Bool = sanitizerRuntimeLinked("__asan_init")

private func sanitizerRuntimeLinked(_ symbol: String) -> Bool {
    guard let process = dlopen(nil, RTLD_NOW) else { return false }
    return dlsym(process, symbol) != nil
}

/// A sanitizer that a gallery adapter's mistake needs before anything can see it.
package enum Sanitizer: Sendable {
    /// ThreadSanitizer: the mistake is a data race.
    case thread
    /// AddressSanitizer: the mistake is a use of freed memory.
    case address

    /// Whether this process was built with it.
    package var isActive: Bool {
        switch self {
        case .thread: return threadSanitizerIsActive
        case .address: return addressSanitizerIsActive
        }
    }

    /// Its name, for messages.
    package var name: String {
        switch self {
        case .thread: return "ThreadSanitizer"
        case .address: return "AddressSanitizer"
        }
    }

    /// The kind of mistake only it sees, for messages.
    package var mistake: String {
        switch self {
        case .thread: return "a data race"
        case .address: return "a use of freed memory"
        }
    }

    /// The `swift build` flag that builds with it.
    package var buildFlag: String {
        switch self {
        case .thread: return "--sanitize=thread"
        case .address: return "--sanitize=address"
        }
    }
}
