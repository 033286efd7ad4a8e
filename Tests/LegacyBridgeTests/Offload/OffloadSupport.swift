// Test helpers for the offload pool and the SDK-thread executor. Names start with `Offload`.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
@testable import LegacyBridge

/// A gate a pool thread (never a cooperative one) blocks on until the test opens it. The wait is
/// bounded by the hang bound, so a test that fails before opening it cannot hang the run.
final class OffloadLatch: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let opened = AtomicCell<Bool>(false)

    /// Blocks the calling (pool) thread until `open()`. Returns false if the hang bound passed.
    @discardableResult
    func wait() -> Bool {
        if opened.load(ordering: .acquiring) { return true }
        let result = semaphore.wait(timeout: .now() + .seconds(testHangBoundSeconds)) == .success
        if result { semaphore.signal() }  // let every other waiter through as well
        return result
    }

    func open() {
        if !opened.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
    }

    var isOpen: Bool { opened.load(ordering: .acquiring) }
}

/// A flag set once from any thread.
final class OffloadFlag: Sendable {
    private let value = AtomicCell<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// The name of the calling thread (Linux: as the kernel reports it).
func offloadCurrentThreadName() -> String {
    let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return name.trimmingCharacters(in: .whitespacesAndNewlines)
}

extension OffloadPool {
    /// The machine's state (test-only introspection).
    var offloadSnapshot: OffloadPoolCore.Machine { core.snapshot }
}
