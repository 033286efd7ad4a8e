import Foundation
import LegacyBridge

/// A real server (mosquitto, redis-server, postgres) on 127.0.0.1, on a free port, started and
/// stopped by a test.
///
/// Bounded in time twice over: it runs under `timeout(1)`, so it dies after `lifetime` seconds
/// whatever happens to the test process, and ``stop()`` kills it. ``pause()`` and ``resume()``
/// send SIGSTOP and SIGCONT to the server itself; ``kill()`` kills it mid-work. Blocking waits
/// happen on a thread of our own, never on the cooperative pool.
public final class ServerProcess: @unchecked Sendable {
    // @unchecked Sendable: every stored property is set in init and only read afterwards;
    // Process is thread-safe for isRunning, terminate and waitUntilExit.
    /// The port the server listens on, on 127.0.0.1.
    public let port: Int
    /// The server's own process id (below `timeout` and `runuser`).
    public let serverPID: pid_t
    /// The directory the server's files and its log live in; removed by ``stop()``.
    public let directory: URL
    private let process: Process
    private let logFile: URL
    private let stopped = LockedValue(false)

    private init(port: Int, serverPID: pid_t, process: Process, directory: URL, logFile: URL) {
        self.port = port
        self.serverPID = serverPID
        self.process = process
        self.directory = directory
        self.logFile = logFile
    }

    /// Starts a server and waits until it accepts connections on 127.0.0.1.
    ///
    /// - Parameters:
    ///   - name: The server's process name (`/proc/<pid>/comm`), e.g. "redis-server".
    ///   - executables: Where to look for it; the first that exists is run, else `name` on PATH.
    ///   - install: What to install if it is missing, for the error message.
    ///   - user: Run it as this user when the tests run as root (postgres refuses root). The
    ///     directory is given to that user.
    ///   - lifetime: Seconds after which `timeout(1)` kills it whatever happens.
    ///   - isReady: Whether the server, once it accepts connections, is ready for clients (given
    ///     its log so far); nil if accepting is enough. PostgreSQL accepts before it is ready.
    ///   - arguments: Its arguments, given the port and a new empty directory of its own. Runs on
    ///     a thread of our own: it may run other programs first (see ``run(_:as:in:)``).
    /// - Throws: ``FixtureError`` if it cannot be started or does not listen within 60 seconds.
    public static func start(
        name: String, executables: [String], install: String, user: String? = nil, lifetime: Int = 600,
        isReady: (@Sendable (_ log: String) -> Bool)? = nil,
        arguments: @escaping @Sendable (_ port: Int, _ directory: URL) throws -> [String]
    ) async throws -> ServerProcess {
        try await onOwnThread {
            let directory = try makeFixtureDirectory(name)
            let runAs = getuid() == 0 ? user : nil
            if let runAs { try run(["chown", runAs, directory.path]) }
            let port = try freeLoopbackPort()
            let executable =
                executables.first { FileManager.default.isExecutableFile(atPath: $0) } ?? name
            let serverArguments = try arguments(port, directory)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments =
                (runAs.map { ["runuser", "-u", $0, "--"] } ?? [])
                + ["timeout", "-s", "KILL", String(lifetime), executable] + serverArguments
            process.currentDirectoryURL = directory
            process.standardOutput = FileHandle.nullDevice
            let logFile = directory.appendingPathComponent("server.log")
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: logFile)
            do {
                try withSignalsUnblocked { try process.run() }
            } catch {
                throw FixtureError("cannot start \(name) (\(error)); install it: apt-get install \(install)")
            }
            // A sleep here only bounds the wait for something that must happen.
            let deadline = Date().addingTimeInterval(60)
            var server: pid_t?
            while Date() < deadline {
                if server == nil { server = descendant(of: process.processIdentifier, named: name) }
                if server != nil, canConnect(port: port), isReady?(readLog(logFile)) ?? true { break }
                guard process.isRunning else { break }
                usleep(2000)
            }
            guard let server, canConnect(port: port), isReady?(readLog(logFile)) ?? true else {
                process.terminate()
                process.waitUntilExit()
                let log = readLog(logFile)
                throw FixtureError(
                    "\(name) did not listen on 127.0.0.1:\(port) in time (install it: apt-get install \(install)); its log: \(log)")
            }
            return ServerProcess(
                port: port, serverPID: server, process: process, directory: directory, logFile: logFile)
        }
    }

    /// Runs a program to completion (on the calling thread), as `user` when the tests run as root.
    ///
    /// - Throws: ``FixtureError`` if it cannot be run or exits with a failure.
    public static func run(_ arguments: [String], as user: String? = nil, in directory: URL? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let runAs = getuid() == 0 ? user : nil
        process.arguments = (runAs.map { ["runuser", "-u", $0, "--"] } ?? []) + arguments
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        do {
            try withSignalsUnblocked { try process.run() }
        } catch {
            throw FixtureError("cannot run \(arguments.joined(separator: " ")): \(error)")
        }
        let output = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw FixtureError(
                "\(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(String(decoding: output, as: UTF8.self))")
        }
    }

    /// Freezes the server (SIGSTOP): it reads and answers nothing until ``resume()``.
    public func pause() { Foundation.kill(serverPID, SIGSTOP) }

    /// Lets a paused server run again (SIGCONT).
    public func resume() { Foundation.kill(serverPID, SIGCONT) }

    /// Freezes the server and waits until the kernel reports it stopped (state T in /proc).
    ///
    /// The wait runs on a thread of our own and ignores the task's cancellation: a conformance
    /// scenario may cancel the caller before its call starts, and the server must be frozen all
    /// the same (a cancelled `Task.sleep` would turn a polling wait into a 30-second spin).
    public func pauseAndWait() async throws {
        pause()
        let pid = serverPID
        let stopped = try await onOwnThread { () -> Bool in
            let deadline = ContinuousClock.now + .seconds(30)
            while !Self.isStopped(pid) {
                if ContinuousClock.now >= deadline { return false }
                usleep(500)
            }
            return true
        }
        guard stopped else { throw FixtureError("server (pid \(pid)) did not stop after SIGSTOP") }
    }

    private static func isStopped(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
    }

    /// Kills the server at once (SIGKILL), as a crash would: its clients see the connection drop.
    public func kill() {
        Foundation.kill(serverPID, SIGKILL)
        Foundation.kill(serverPID, SIGCONT)
    }

    /// The server's log so far.
    public func log() -> String {
        readLog(logFile)
    }

    /// Kills the server (a paused one too), waits for it on a thread of our own and removes its
    /// directory. Safe to call more than once.
    public func stop() async {
        guard
            stopped.withLock({ (done: inout Bool) -> Bool in
                defer { done = true }; return !done
            })
        else { return }
        let (process, directory, pid) = (self.process, self.directory, serverPID)
        _ = try? await onOwnThread {
            Foundation.kill(pid, SIGKILL)
            Foundation.kill(pid, SIGCONT)
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

/// A log file's text (through FileHandle: String(contentsOf:) leaks its buffer on this toolchain).
private func readLog(_ file: URL) -> String {
    guard let handle = try? FileHandle(forReadingFrom: file) else { return "" }
    defer { try? handle.close() }
    return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
}

/// A port on 127.0.0.1 that nothing listens on now: bound to port 0, read back, closed.
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FixtureError("socket() failed: errno \(errno)") }
    defer { close(fd) }
    var address = loopback(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw FixtureError("cannot bind 127.0.0.1:0: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

private func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
}

/// Whether something accepts TCP connections on 127.0.0.1:`port` (a loopback connect never waits).
private func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = loopback(port: UInt16(port))
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// The first process named `name` (its /proc comm) among the first children of `pid`, going down.
private func descendant(of pid: pid_t, named name: String) -> pid_t? {
    var current = pid
    for _ in 0..<4 {
        guard
            let text = try? String(contentsOfFile: "/proc/\(current)/task/\(current)/children", encoding: .utf8),
            let child = text.split(separator: " ").first.flatMap({ pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
        else { return nil }
        let comm = (try? String(contentsOfFile: "/proc/\(child)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // comm holds at most 15 bytes.
        if comm == String(name.prefix(15)) { return child }
        current = child
    }
    return nil
}
