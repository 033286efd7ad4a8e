// Helpers of the SDK layer's tests (prefixed: the test module is shared).

import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

/// Collects values delivered from SDK threads and signals each one.
final class SDKTestCollector<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Value] = []
    private var releases = 0

    func append(_ value: Value) { lock.withLock { storage.append(value) } }
    func released() { lock.withLock { releases += 1 } }
    var values: [Value] { lock.withLock { storage } }
    var releaseCount: Int { lock.withLock { releases } }

    /// Polls until `condition` holds (generous bound; the sleep is only the polling interval).
    func wait(timeout: Double = Double(testHangBoundSeconds), until condition: (SDKTestCollector) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition(self) {
            if Date() > deadline { return false }
            usleep(500)
        }
        return true
    }

    func waitReleased(timeout: Double = Double(testHangBoundSeconds)) -> Bool {
        wait(timeout: timeout) { $0.releaseCount > 0 }
    }
}

/// An object whose deinit is counted: captured by SDK closures to prove they were released.
final class SDKTestLifetimeToken: Sendable {
    let counter: SDKTestCounter
    init(_ counter: SDKTestCounter) { self.counter = counter }
    deinit { counter.increment() }
}

final class SDKTestCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment(by amount: Int = 1) { lock.withLock { count += amount } }
    var value: Int { lock.withLock { count } }
}
