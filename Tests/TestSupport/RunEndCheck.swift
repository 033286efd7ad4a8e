// The end of every test process checks that no test left anything running: no simulated SDK client,
// no SDK thread, and no library thread (a pool, loop or executor nobody shut down) beyond the few
// the process keeps by design. RunEndHook.c calls this at exit; a leftover fails the run, by name.

import CLegacySDK
import LegacyBridge
import RunEndHook

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Library threads a test process keeps on purpose, as their names show (cut to 15 bytes): a
/// thread whose name starts with one of these is not a leftover.
let processWideThreads: [(prefix: String, owner: String)] = [
    ("lbridge-job", "the library's job threads, parked for later work (BridgeThreads)"),
    ("lbridge-timer", "the library's timer thread"),
    ("conformance-", "the conformance OffloadPoolAdapter's static pool"),
    ("gallery-retry-", "the gallery's static retry pool"),
    ("loop-sdk querie", "LoopSDKClient's static query pool"),
    ("loop-sdk-shared", "LoopSDKClient.shared's loop"),
    ("mailbox-sdk", "MailboxClient.shared's loop, and the gallery's mailbox-sdk-* clients' loops"),
    ("socket-sdk", "SocketClient.shared's loop, and the gallery's socket-sdk-* client's loop"),
    ("conf-tests-", "OffloadConformanceTests' static pool"),
]

/// What ends the process-wide resources tests share (a client made once for the whole process):
/// the run-end check runs these first, newest first, so that what is left after them is a leak.
package enum RunEnd {
    private static let teardowns = LockedValue<[@Sendable () -> Void]>([])

    /// Registers `teardown`, which ends a resource the process keeps until its end.
    package static func atEnd(_ teardown: @escaping @Sendable () -> Void) {
        teardowns.withLock { $0.append(teardown) }
    }

    static func tearDown() {
        let all = teardowns.withLock { teardowns in
            defer { teardowns = [] }
            return teardowns
        }
        for teardown in all.reversed() {
            teardown()
        }
    }
}

/// Whether a library thread named `name` lives for the whole process (``processWideThreads``).
private func isProcessWide(_ name: String) -> Bool {
    processWideThreads.contains { name.hasPrefix($0.prefix) }
}

/// What is left running now that should not be: a line per kind, empty when nothing is.
func runEndLeftovers() -> [String] {
    var problems: [String] = []
    let clients = lsdk_live_clients()
    if clients > 0 { problems.append("\(clients) simulated SDK client(s) never destroyed") }
    let sdkThreads = lsdk_live_threads()
    if sdkThreads > 0 { problems.append("\(sdkThreads) SDK thread(s) still running (workers, timers, loops)") }
    let library = LiveThreads.byName.filter { name, _ in !isProcessWide(name) }
    for (name, count) in library.sorted(by: { $0.key < $1.key }) {
        problems.append("\(count) library thread(s) named \"\(name)\" (a pool, loop or executor nobody shut down)")
    }
    return problems
}

/// Called once at exit (RunEndHook.c): waits up to a bound for what is ending to end, then reports.
/// Returns the exit status: 0, or 70 when something was left running.
@_cdecl("legacy_bridge_run_end_check")
public func legacyBridgeRunEndCheck() -> Int32 {
    RunEnd.tearDown()
    let seconds = testsUnderThreadSanitizer ? 60 : 20
    let deadline = ContinuousClock.now + .seconds(seconds)
    var leftovers = runEndLeftovers()
    while !leftovers.isEmpty && ContinuousClock.now < deadline {
        usleep(50_000)
        leftovers = runEndLeftovers()
    }
    let kept = LiveThreads.byName.filter { name, _ in isProcessWide(name) }.values.reduce(0, +)
    let threads = "peak \(legacy_bridge_peak_threads()) threads, \(legacy_bridge_thread_count()) at exit"
    guard leftovers.isEmpty else {
        var message = "error: run-end check: tests left these running after \(seconds) s of waiting:\n"
        for line in leftovers { message += "  - \(line)\n" }
        message += "  (\(threads); every test must destroy its SDK clients and shut down its pools and loops)\n"
        writeToStandardError(message)
        return 70
    }
    writeToStandardError(
        "run-end check: nothing left running: 0 SDK clients, 0 SDK threads, \(kept) process-wide library threads (\(threads))\n"
    )
    return 0
}

private func writeToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}
