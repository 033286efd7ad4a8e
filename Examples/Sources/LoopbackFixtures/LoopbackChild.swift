import Foundation
import LegacyBridge

/// A fixture could not be started.
public struct FixtureError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, and what to do about it.
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A python3 child process serving on 127.0.0.1, started and stopped by a test.
///
/// Bounded in time twice over: it runs under `timeout(1)`, so it dies after `lifetime` seconds
/// whatever happens to the test process; and it is stopped (SIGTERM, then awaited) by ``stop()``.
/// Every blocking wait (for the port line, for the exit) happens on a thread of our own, never on
/// the cooperative pool.
public final class LoopbackChild: @unchecked Sendable {
    // @unchecked Sendable: `process` and `input` are set in init and then only used by stop(),
    // which runs once (guarded by `stopped`); Process itself is thread-safe for terminate/wait.
    private let process: Process
    private let input: Pipe
    private let stopped = LockedValue(false)
    /// The first line the child printed (its ports).
    public let firstLine: String
    /// The directory the child's files and its log live in; removed by ``stop()``.
    public let directory: URL
    /// The child's standard error, where python's servers log every request.
    public let logFile: URL

    private init(process: Process, input: Pipe, firstLine: String, directory: URL, logFile: URL) {
        self.process = process
        self.input = input
        self.firstLine = firstLine
        self.directory = directory
        self.logFile = logFile
    }

    /// Starts `python3 -u <arguments>` in `directory` and waits (on a thread of our own, at most
    /// `startupBound` seconds) for its first line of output.
    ///
    /// - Parameters:
    ///   - arguments: The arguments after `python3 -u`.
    ///   - directory: The working directory (created by the caller); removed by ``stop()``.
    ///   - lifetime: Seconds after which `timeout(1)` kills the child whatever happens.
    ///   - startupBound: Seconds to wait for the first line.
    /// - Throws: ``FixtureError`` if python3 cannot be started or prints nothing in time.
    public static func launch(
        arguments: [String], directory: URL, lifetime: Int = 600, startupBound: Double = 60
    ) async throws -> LoopbackChild {
        try await onOwnThread {
            let logFile = directory.appendingPathComponent("child.log")
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["timeout", String(lifetime), "python3", "-u"] + arguments
            process.currentDirectoryURL = directory
            let output = Pipe()
            let input = Pipe()
            process.standardOutput = output
            process.standardInput = input
            process.standardError = try FileHandle(forWritingTo: logFile)
            do {
                // Unblocked, so that the child (and timeout(1)) can receive SIGTERM and SIGALRM.
                try withSignalsUnblocked { try process.run() }
            } catch {
                throw FixtureError("cannot start python3 (\(error)); install it: apt-get install python3")
            }
            let reader = output.fileHandleForReading
            let line = LockedValue<String?>(nil)
            let done = DispatchSemaphore(value: 0)
            spawnThread {
                var bytes: [UInt8] = []
                while true {
                    let chunk = reader.availableData
                    if chunk.isEmpty { break }
                    bytes += chunk
                    if let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                        line.withLock { $0 = String(decoding: bytes[..<newline], as: UTF8.self) }
                        break
                    }
                }
                done.signal()
            }
            if done.wait(timeout: .now() + startupBound) == .timedOut {
                process.terminate()
                done.wait()
            }
            guard let first = line.withLock({ $0 }) else {
                process.terminate()
                process.waitUntilExit()
                let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                throw FixtureError("python3 \(arguments.first ?? "") printed no port line; its log: \(log)")
            }
            return LoopbackChild(
                process: process, input: input, firstLine: first,
                directory: directory, logFile: logFile)
        }
    }

    /// Stops the child (closes its input, sends SIGTERM), waits for it on a thread of our own and
    /// removes its directory. Safe to call more than once.
    public func stop() async {
        guard
            stopped.withLock({ (done: inout Bool) -> Bool in
                defer { done = true }; return !done
            })
        else { return }
        let process = self.process
        let input = self.input
        let directory = self.directory
        _ = try? await onOwnThread {
            try? input.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// The child's log so far (python's servers write a line per request there).
    public func log() -> String {
        // Through FileHandle: String(contentsOf:) leaks its read buffer on this toolchain (LeakSanitizer).
        guard let handle = try? FileHandle(forReadingFrom: logFile) else { return "" }
        defer { try? handle.close() }
        return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
    }

    /// Whether the child is still running.
    public var isRunning: Bool { process.isRunning }
}

/// Runs `body` on a new thread of our own and returns its result: blocking waits in tests must
/// not hold a cooperative-pool thread.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedContinuation { continuation in
        spawnThread { continuation.resume(returning: Result(catching: body)) }
    }.get()
}

/// Starts a thread of our own that runs `body` and ends.
func spawnThread(_ body: @escaping @Sendable () -> Void) {
    Thread { body() }.start()
}

/// Runs `body` with no signal blocked on the calling thread, then restores the thread's mask.
///
/// A child process inherits the signal mask of the thread that starts it, and threads created from
/// the cooperative pool inherit the pool's mask, which blocks almost every signal: a child started
/// there ignores SIGTERM, and `timeout(1)` never receives its SIGALRM. Start children inside this.
func withSignalsUnblocked<T>(_ body: () throws -> T) rethrows -> T {
    var empty = sigset_t()
    var saved = sigset_t()
    sigemptyset(&empty)
    pthread_sigmask(SIG_SETMASK, &empty, &saved)
    defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
    return try body()
}

/// A new empty directory under the temporary directory.
func makeFixtureDirectory(_ prefix: String) throws -> URL {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}
