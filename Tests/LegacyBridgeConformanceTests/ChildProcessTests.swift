import Foundation
@testable import LegacyBridgeConformance
import Testing

/// `runChild`, the `posix_spawn` launcher of the crash-isolated runner, the CLI's benchmarks and
/// these tests' CLI runs (it replaced Foundation's `Process`, whose `run()` crashes now and then on
/// Linux with Swift 6.3.1: swift-corelibs-foundation#5472).
@Suite("runChild: status, signals, output, environment, bound, and nothing of ours in the child")
struct ChildProcessTests {
    static func shell(
        _ script: String, bound: Duration = .seconds(60), environment: [String: String] = [:]
    ) async throws -> ChildOutcome {
        try await runChildOffThePool(
            executable: "/bin/sh", arguments: ["-c", script], bound: bound, environment: environment)
    }

    @Test("the exit status and both outputs come back; standard input is empty")
    func exitStatusAndOutputs() async throws {
        // `cat` reads standard input to its end: it returns at once only when that is /dev/null.
        let child = try await Self.shell("cat; echo out; echo err >&2; exit 3")
        #expect(child.exitStatus == 3)
        #expect(child.signal == nil)
        #expect(!child.timedOut)
        #expect(child.standardOutput == "out\n")
        #expect(child.standardError == "err\n")
    }

    @Test("a child killed by a signal reports the signal, not an exit status")
    func signalReported() async throws {
        let child = try await Self.shell("kill -TERM $$")
        #expect(child.signal == SIGTERM)
        #expect(child.exitStatus == nil)
        #expect(!child.timedOut)
    }

    @Test("a child still running at its bound is killed and reported as timed out")
    func boundKills() async throws {
        let child = try await Self.shell("echo started; exec sleep 600", bound: .milliseconds(300))
        #expect(child.timedOut)
        #expect(child.signal == SIGKILL)
        #expect(child.standardOutput == "started\n")
    }

    @Test("the environment given is added to this process's")
    func environmentAdded() async throws {
        let child = try await Self.shell(
            #"printf '%s|%s' "$LB_CHILD_TEST" "${PATH:+has-path}""#, environment: ["LB_CHILD_TEST": "a b=c"])
        #expect(child.standardOutput == "a b=c|has-path")
    }

    @Test("an executable that does not exist throws, naming it")
    func missingExecutableThrows() async {
        await #expect {
            _ = try await runChildOffThePool(
                executable: "/nonexistent/legacy-bridge-child", arguments: [], bound: .seconds(10))
        } throws: { error in
            "\(error)".contains("/nonexistent/legacy-bridge-child")
        }
    }

    #if os(Linux)
    @Test("a descriptor of this process, not marked close-on-exec, is not open in the child")
    func descriptorsStayHere() async throws {
        let descriptor = open("/dev/null", O_RDONLY)  // deliberately without O_CLOEXEC
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let child = try await Self.shell("test -e /proc/self/fd/\(descriptor) && echo open || echo closed")
        #expect(child.standardOutput == "closed\n")
        // The probe sees a descriptor that is open in the child.
        let inherited = try await Self.shell("exec 7</dev/null; test -e /proc/self/fd/7 && echo open || echo closed")
        #expect(inherited.standardOutput == "open\n")
    }

    @Test("a signal this process ignores is not ignored in the child")
    func signalDispositionsReset() async throws {
        // What an SDK that writes to sockets does. Left so: other tests of this process may run
        // such an SDK, and restoring the default under them would let a write kill the process.
        signal(SIGPIPE, SIG_IGN)
        let child = try await Self.shell("grep SigIgn /proc/self/status")
        let mask = child.standardOutput.split(separator: "\t").last.flatMap {
            UInt64($0.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16)
        }
        let ignored = try #require(mask)
        #expect(ignored & (1 << (UInt64(SIGPIPE) - 1)) == 0)
    }
    #endif
}
