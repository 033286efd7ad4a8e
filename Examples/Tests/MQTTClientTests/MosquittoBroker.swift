import Foundation
import LegacyBridge

/// A private mosquitto broker on 127.0.0.1, on a free port, started and stopped by a test.
///
/// Bounded in time twice over: it runs under `timeout(1)`, so it dies after `lifetime` seconds
/// whatever happens to the test process, and ``stop()`` kills it. ``pause()`` and ``resume()``
/// send SIGSTOP and SIGCONT to the broker itself: a paused broker holds every acknowledgement.
/// Blocking waits happen on a thread of our own, never on the cooperative pool.
final class MosquittoBroker: @unchecked Sendable {
    // @unchecked Sendable: every stored property is set in init and only read afterwards;
    // Process is thread-safe for isRunning, terminate and waitUntilExit.
    let port: Int
    /// The broker's own process id (the child of `timeout`).
    let brokerPID: pid_t
    private let process: Process
    private let directory: URL
    private let stopped = LockedValue(false)

    private init(port: Int, brokerPID: pid_t, process: Process, directory: URL) {
        self.port = port
        self.brokerPID = brokerPID
        self.process = process
        self.directory = directory
    }

    /// Starts `mosquitto` with a listener on 127.0.0.1 only and anonymous clients allowed, and
    /// waits until it accepts connections.
    static func start(lifetime: Int = 600) async throws -> MosquittoBroker {
        try await onOwnThread {
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("mosquitto-\(UUID().uuidString)", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let port = try freeLoopbackPort()
            let configuration = directory.appendingPathComponent("mosquitto.conf")
            try "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\n"
                .write(to: configuration, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // /usr/sbin is not on every user's PATH.
            let broker =
                ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/opt/homebrew/sbin/mosquitto"]
                .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "mosquitto"
            process.arguments = ["timeout", "-s", "KILL", String(lifetime), broker, "-c", configuration.path]
            process.standardOutput = FileHandle.nullDevice
            let log = directory.appendingPathComponent("broker.log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: log)
            do {
                try withSignalsUnblocked { try process.run() }
            } catch {
                throw BrokerError("cannot start mosquitto (\(error)); install it: apt-get install mosquitto")
            }
            // A sleep here only bounds the wait for something that must happen.
            let deadline = Date().addingTimeInterval(30)
            var child: pid_t?
            while Date() < deadline {
                if child == nil { child = childOf(process.processIdentifier) }
                if child != nil, canConnect(port: port) { break }
                guard process.isRunning else { break }
                usleep(2000)
            }
            guard let child, canConnect(port: port) else {
                process.terminate()
                process.waitUntilExit()
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw BrokerError("mosquitto did not listen on 127.0.0.1:\(port) in time; its log: \(text)")
            }
            return MosquittoBroker(port: port, brokerPID: child, process: process, directory: directory)
        }
    }

    /// Freezes the broker (SIGSTOP): it reads and acknowledges nothing until ``resume()``.
    func pause() { kill(brokerPID, SIGSTOP) }

    /// Freezes the broker and waits until the kernel reports it stopped (state T in /proc).
    func pauseAndWait() async throws {
        pause()
        let pid = brokerPID
        guard await eventually(bound: 30, { Self.isStopped(pid) }) else {
            throw BrokerError("mosquitto (pid \(pid)) did not stop after SIGSTOP")
        }
    }

    private static func isStopped(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
    }

    /// Lets a paused broker run again (SIGCONT).
    func resume() { kill(brokerPID, SIGCONT) }

    /// Kills the broker (a paused one too), waits for it on a thread of our own and removes its
    /// directory. Safe to call more than once.
    func stop() async {
        guard
            stopped.withLock({ (done: inout Bool) -> Bool in
                defer { done = true }; return !done
            })
        else { return }
        let (process, directory, pid) = (self.process, self.directory, brokerPID)
        _ = try? await onOwnThread {
            kill(pid, SIGKILL)
            kill(pid, SIGCONT)
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

struct BrokerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A port on 127.0.0.1 that nothing listens on now: bound to port 0, read back, closed.
private func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BrokerError("socket() failed: errno \(errno)") }
    defer { close(fd) }
    var address = loopback(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw BrokerError("cannot bind 127.0.0.1:0: errno \(errno)") }
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

/// The first child of `pid`, from /proc.
private func childOf(_ pid: pid_t) -> pid_t? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8) else {
        return nil
    }
    return text.split(separator: " ").first.flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
}

/// Runs `body` on a new thread of our own and returns its result: blocking waits in tests must
/// not hold a cooperative-pool thread.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: Result(catching: body)) }.start()
    }.get()
}

/// Runs `body` with no signal blocked on the calling thread: a child inherits the mask of the
/// thread that starts it, and `timeout(1)` must receive its SIGALRM.
private func withSignalsUnblocked<T>(_ body: () throws -> T) rethrows -> T {
    var empty = sigset_t()
    var saved = sigset_t()
    sigemptyset(&empty)
    pthread_sigmask(SIG_SETMASK, &empty, &saved)
    defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
    return try body()
}

/// Polls `condition` every millisecond or so until it holds or `seconds` pass: a sleep here only
/// bounds the wait for something that must happen.
func eventually(bound seconds: Int = 120, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
