import Foundation
import LegacyBridge

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
///
/// The child is started with `posix_spawn`, not Foundation's `Process`: on Linux, `Process.run()`
/// of Swift 6.3.1 reads past the end of a buffer while it lists `/proc/self/fd`, and crashed one run
/// of our suite in a handful (swift-corelibs-foundation#5472, fixed after 6.3.1). The child gets
/// standard input from `/dev/null`, standard output and error in files of its own, the default
/// action for every signal, an empty signal mask, and no other descriptor of this process.
///
/// - Throws: ``ChildProcessUnavailable`` where the platform cannot start processes,
///   ``ChildProcessError`` when the output files cannot be made or the process cannot be started.
package func runChild(
    executable: String, arguments: [String], bound: Duration, environment: [String: String] = [:]
) throws -> ChildOutcome {
    #if os(Linux) || os(macOS)
    var childEnvironment = ProcessInfo.processInfo.environment
    for (key, value) in environment { childEnvironment[key] = value }

    let directory = FileManager.default.temporaryDirectory
    let token = UUID().uuidString
    let outPath = directory.appendingPathComponent("legacy-bridge-\(token).out").path
    let errPath = directory.appendingPathComponent("legacy-bridge-\(token).err").path
    let outFD = open(outPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    let errFD = open(errPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    defer {
        if outFD >= 0 { close(outFD) }
        if errFD >= 0 { close(errFD) }
        unlink(outPath)
        unlink(errPath)
    }
    guard outFD >= 0, errFD >= 0 else {
        throw ChildProcessError(step: "open an output file in \(directory.path)", code: errno)
    }

    let child = try spawnChild(
        executable: executable, arguments: arguments, environment: childEnvironment,
        standardOutput: outFD, standardError: errFD)
    let (status, timedOut) = child.wait(bound: bound)

    var outcome = ChildOutcome(
        exitStatus: nil, signal: nil, timedOut: timedOut, standardOutput: readAll(outFD),
        standardError: readAll(errFD))
    // The POSIX wait status, decoded as WIFEXITED / WEXITSTATUS / WTERMSIG do (macros Swift does
    // not import).
    if status & 0x7f == 0 {
        outcome.exitStatus = (status >> 8) & 0xff
    } else {
        outcome.signal = status & 0x7f
    }
    return outcome
    #else
    // Only macOS and Linux let a program start processes.
    throw ChildProcessUnavailable()
    #endif
}

/// Why ``runChild(executable:arguments:bound:environment:)`` could not start a child.
package struct ChildProcessError: Error, CustomStringConvertible {
    /// What was being done.
    package var step: String
    /// The `errno` value (or the status `posix_spawn` returned).
    package var code: Int32

    package init(step: String, code: Int32) {
        self.step = step
        self.code = code
    }

    package var description: String {
        "could not \(step): \(String(cString: strerror(code)))"
    }
}

#if os(Linux) || os(macOS)
/// A child started by ``spawnChild(executable:arguments:environment:standardOutput:standardError:)``.
/// Call ``wait(bound:)`` exactly once: it reaps the child.
package struct SpawnedChild: Sendable {
    package let pid: pid_t

    /// Whether the child has not exited yet (it is not reaped by asking).
    package var isRunning: Bool {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT | WNOHANG) != 0 {
            if errno != EINTR { return false }
        }
        #if canImport(Darwin)
        return info.si_pid == 0
        #else
        return info._sifields._sigchld.si_pid == 0
        #endif
    }

    /// Waits until the child exits, killing it (SIGKILL) at `bound`; returns its wait status and
    /// whether it was killed for the bound.
    ///
    /// The child is waited for without being reaped first (`WNOWAIT`), so its process id cannot
    /// be given to another process while the killer may still use it.
    package func wait(bound: Duration) -> (status: Int32, timedOut: Bool) {
        waitForExit(of: pid, bound: bound)
    }
}

/// Starts `executable` with exactly `environment`, standard input from `/dev/null`, and the
/// given descriptors as standard output and error; no other descriptor of this process reaches it.
package func spawnChild(
    executable: String, arguments: [String], environment: [String: String], standardOutput: Int32,
    standardError: Int32
) throws -> SpawnedChild {
    SpawnedChild(
        pid: try spawn(
            executable: executable, arguments: arguments, environment: environment,
            standardOutput: standardOutput, standardError: standardError))
}

/// Starts `executable`; returns its process id.
private func spawn(
    executable: String, arguments: [String], environment: [String: String], standardOutput: Int32,
    standardError: Int32
) throws -> pid_t {
    #if canImport(Darwin)
    var actions: posix_spawn_file_actions_t? = nil
    var attributes: posix_spawnattr_t? = nil
    #else
    var actions = posix_spawn_file_actions_t()
    var attributes = posix_spawnattr_t()
    #endif
    posix_spawn_file_actions_init(&actions)
    posix_spawnattr_init(&attributes)
    defer {
        posix_spawn_file_actions_destroy(&actions)
        posix_spawnattr_destroy(&attributes)
    }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, standardOutput, 1)
    posix_spawn_file_actions_adddup2(&actions, standardError, 2)

    // No other descriptor of this process reaches the child: an SDK's socket or a pipe of another
    // test would otherwise stay open for as long as the child runs.
    var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
    #if canImport(Darwin)
    flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
    #else
    _ = closeFromThree?(&actions, 3)
    #endif
    posix_spawnattr_setflags(&attributes, Int16(flags))
    // Signals this process ignores or blocks (an SDK that ignores SIGPIPE) are not the child's.
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    var defaults = sigset_t()
    sigfillset(&defaults)
    sigdelset(&defaults, SIGKILL)
    sigdelset(&defaults, SIGSTOP)
    posix_spawnattr_setsigdefault(&attributes, &defaults)

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid = pid_t()
    let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    guard status == 0 else { throw ChildProcessError(step: "start \(executable)", code: status) }
    return pid
}

#if !canImport(Darwin)
/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module
/// does not import; `nil` on an older C library, where only descriptors marked close-on-exec stay
/// out of the child.
private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let closeFromThree: CloseFrom? = {
    let name = "posix_spawn_file_actions_addclosefrom_np"
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
    return unsafeBitCast(symbol, to: CloseFrom.self)
}()
#endif

/// See ``SpawnedChild/wait(bound:)``.
private func waitForExit(of pid: pid_t, bound: Duration) -> (status: Int32, timedOut: Bool) {
    struct State {
        var exited = false
        var killed = false
    }
    let state = LockedValue(State())
    let killer = DispatchWorkItem {
        state.withLock { state in
            guard !state.exited else { return }
            state.killed = true
            kill(pid, SIGKILL)
        }
    }
    let (seconds, attoseconds) = bound.components
    let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds)), execute: killer)

    var info = siginfo_t()
    while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
    let timedOut = state.withLock { state in
        state.exited = true
        return state.killed
    }
    killer.cancel()
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status, timedOut)
}

/// Everything written to the file `descriptor` names, from its start, as UTF-8 text.
private func readAll(_ descriptor: Int32) -> String {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    var offset: off_t = 0
    while true {
        let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        bytes.append(contentsOf: chunk[0..<count])
        offset += off_t(count)
    }
    return String(decoding: bytes, as: UTF8.self)
}
#endif

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
