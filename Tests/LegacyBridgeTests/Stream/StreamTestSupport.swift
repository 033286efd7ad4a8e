import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

/// A one-way gate between threads (a counting semaphore with a hang bound).
final class StreamGate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)

    func open() { semaphore.signal() }

    /// Waits for `open()`; records an issue instead of hanging forever.
    func wait(
        what: String = "gate", seconds: Double = Double(testHangBoundSeconds),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if semaphore.wait(timeout: .now() + seconds) == .timedOut {
            Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
        }
    }
}

/// Records the producer-control calls (and anything else) in order.
final class StreamCallLog: Sendable {
    private let entries = LockedBox<[String]>([])

    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    /// A copy made inside the lock: the reader never shares a buffer a writer may still grow.
    var all: [String] { entries.withLock { $0.map { $0 } } }
    func count(of entry: String) -> Int { entries.withLock { $0.filter { $0 == entry }.count } }
}

/// A value shared between the test and the producer's threads.
final class StreamShared<Value: Sendable>: Sendable {
    private let box: LockedBox<Value>
    init(_ value: Value) { box = LockedBox(value) }
    var value: Value {
        get { box.withLock { $0 } }
        set { box.withLock { $0 = newValue } }
    }
    func update<R>(_ body: (inout Value) -> R) -> R { box.withLock(body) }
}

/// Polls until `condition` holds; the timeout is only an upper bound for a
/// hang, never a guess at a schedule.
func streamPoll(
    seconds: Double = Double(testHangBoundSeconds), _ what: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    until condition: () -> Bool
) async {
    let deadline = Date().addingTimeInterval(seconds)
    var attempt = 0
    while !condition() {
        if Date() > deadline {
            Issue.record("timed out waiting until \(what)", sourceLocation: sourceLocation)
            return
        }
        await pollPause(attempt)
        attempt += 1
    }
}

/// Runs `body` on a plain thread (not the cooperative pool), like an SDK's own thread.
func streamThread(_ name: String = "stream-test-producer", _ body: @escaping @Sendable () -> Void) {
    let thread = Thread(block: body)
    thread.name = name
    thread.start()
}

/// Test-only views into a stream through the sink handed to `start`.
enum StreamProbe {
    static func isConsumerWaiting<Element>(_ sink: EventSink<Element>) -> Bool {
        sink.storage.box.withLock { $0.isConsumerWaiting }
    }
}

struct StreamTestError: Error, Equatable {
    var code: Int
}
