// Test helpers for the one-shot bridge. All names start with `OneShot` or are
// file-private: the test module is shared with other areas.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// Counts live `OneShotToken`s: capture a token wherever something must be
/// freed, then check the count drops to zero.
final class OneShotAlive: Sendable {
    let count = AtomicCell<Int>(0)
    var value: Int { self.count.load(ordering: .acquiring) }

    /// Polls (sleeping only as an upper bound) until every token is freed.
    func waitUntilAllFreed(_ seconds: Int = testHangBoundSeconds) async -> Bool {
        await eventually(within: Double(seconds)) { self.value == 0 }
    }
}

/// An object whose lifetime is counted by an `OneShotAlive`.
final class OneShotToken: Sendable {
    let alive: OneShotAlive
    init(_ alive: OneShotAlive) {
        self.alive = alive
        alive.count.add(1, ordering: .relaxed)
    }
    deinit { self.alive.count.subtract(1, ordering: .releasing) }
}

/// A thread-safe counter.
final class OneShotCounter: Sendable {
    private let count = AtomicCell<Int>(0)
    var value: Int { self.count.load(ordering: .acquiring) }
    func increment() { self.count.add(1, ordering: .acquiringAndReleasing) }

    /// Waits until the count has reached `expected`, then says whether it is exactly that. A
    /// cancel handle runs on a job thread, where it may still be on its way when the cancelled
    /// caller has resumed: the wait is an upper bound (the hang bound), not a guess.
    func reaches(_ expected: Int) async -> Bool {
        await eventually { self.value >= expected } && self.value == expected
    }
}

/// A thread-safe list (records discarded values, events, ...).
final class OneShotRecorder<Element: Sendable>: Sendable {
    private let box = LockedBox<[Element]>([])
    func append(_ element: Element) { self.box.withLock { $0.append(element) } }
    /// A copy made inside the lock: the reader never shares a buffer a writer may still grow.
    var values: [Element] { self.box.withLock { $0.map { $0 } } }
}

/// Where a fake SDK keeps the completion it was given, until the test drops it.
final class OneShotSlot<Element: Sendable>: Sendable {
    private let box = LockedBox<Element?>(nil)
    func store(_ element: Element) { self.box.withLock { $0 = element } }
    var value: Element? { self.box.withLock { $0 } }
    func clear() {
        let old = self.box.withLock { slot -> Element? in
            defer { slot = nil }
            return slot
        }
        _ = old  // released outside the lock
    }
}

/// A weak reference (to check that a gate's storage was freed), plus the identity it had.
final class OneShotWeak: @unchecked Sendable {
    // Written once in init, only read afterwards; weak loads are thread-safe in the runtime.
    private(set) weak var object: AnyObject?
    let identifier: ObjectIdentifier
    init(_ object: AnyObject) {
        self.object = object
        self.identifier = ObjectIdentifier(object)
    }
}

struct OneShotTestError: Error, Equatable {
    let code: Int
}

/// The kind of outcome a call ended with, comparable in `#expect`.
enum OneShotOutcome: Equatable, Sendable, CustomStringConvertible {
    case success(Int)
    case failure(Int)
    case cancelled
    case timedOut(Duration)
    case other(String)

    init(_ result: Result<Int, any Error>) {
        switch result {
        case .success(let value): self = .success(value)
        case .failure(let error as OneShotTestError): self = .failure(error.code)
        case .failure(is CancellationError): self = .cancelled
        case .failure(let error as BridgeTimeoutError): self = .timedOut(error.timeout)
        case .failure(let error): self = .other(String(describing: error))
        }
    }

    init(catching body: () async throws -> Int) async {
        do {
            self = .success(try await body())
        } catch {
            self.init(.failure(error))
        }
    }

    var description: String {
        switch self {
        case .success(let value): "success(\(value))"
        case .failure(let code): "failure(\(code))"
        case .cancelled: "cancelled"
        case .timedOut(let timeout): "timedOut(\(timeout))"
        case .other(let text): "other(\(text))"
        }
    }
}

/// A call run in its own task, whose end is awaited with an upper bound: a call
/// that never ends (a lost resume) becomes a reported failure instead of a hung
/// test run. The task is left behind in that case.
final class OneShotCall<T: Sendable>: Sendable {
    private let task: Task<Void, Never>
    private let slot: OneShotSlot<Result<T, any Error>>

    init(_ body: @escaping @Sendable () async throws -> T) {
        let slot = OneShotSlot<Result<T, any Error>>()
        self.slot = slot
        self.task = Task {
            do {
                slot.store(.success(try await body()))
            } catch {
                slot.store(.failure(error))
            }
        }
    }

    func cancel() { self.task.cancel() }

    /// The call's result, or nil if it did not end within `seconds`.
    func result(within seconds: Int = testHangBoundSeconds) async -> Result<T, any Error>? {
        await self.result(before: ContinuousClock.now + .seconds(seconds))
    }

    /// The call's result, or nil if it did not end before `deadline`.
    func result(before deadline: ContinuousClock.Instant) async -> Result<T, any Error>? {
        var attempt = 0
        while self.slot.value == nil && ContinuousClock.now < deadline {
            await pollPause(attempt)
            attempt += 1
        }
        return self.slot.value
    }
}

extension OneShotCall where T == Int {
    /// The call's outcome, or `.other("did not end ...")` if it hung.
    func outcome(within seconds: Int = testHangBoundSeconds) async -> OneShotOutcome {
        guard let result = await self.result(within: seconds) else {
            return .other("did not end within \(seconds) s")
        }
        return OneShotOutcome(result)
    }

    /// The call's outcome, or `.other("did not end ...")` if it had not ended by `deadline`.
    func outcome(before deadline: ContinuousClock.Instant) async -> OneShotOutcome {
        guard let result = await self.result(before: deadline) else { return .other("did not end in time") }
        return OneShotOutcome(result)
    }
}

/// Runs `body` as a watched call and returns its outcome (a hang becomes `.other`).
func oneShotOutcome(
    within seconds: Int = testHangBoundSeconds, _ body: @escaping @Sendable () async throws -> Int
) async -> OneShotOutcome {
    await OneShotCall(body).outcome(within: seconds)
}

extension Completion {
    /// Whether a waiter is installed on this completion's gate (test-only introspection).
    var oneShotHasWaiter: Bool { self.storage.machine.holdsWaiter }
    /// Whether this completion's gate holds an armed timer.
    var oneShotHasTimer: Bool { self.storage.machine.holdsTimer }
    /// The gate's storage object, to hold weakly.
    var oneShotStorageObject: AnyObject { self.storage.box.storage }
}

/// Runs `body` on a new thread that is not part of the Swift concurrency pool.
func oneShotOnForeignThread(_ body: @escaping @Sendable () -> Void) {
    let thread = Thread { body() }
    thread.start()
}

/// A serial executor that counts how many jobs were enqueued on it: every
/// executor hop onto an actor using it is one enqueue.
final class OneShotCountingExecutor: SerialExecutor {
    private let queue: DispatchQueue
    private let key = DispatchSpecificKey<Int>()
    let enqueued = AtomicCell<Int>(0)

    init() {
        self.queue = DispatchQueue(label: "oneshot.counting-executor")
        self.queue.setSpecific(key: self.key, value: 1)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        self.enqueued.add(1, ordering: .relaxed)
        let job = UnownedJob(job)
        self.queue.async {
            job.runSynchronously(on: self.asUnownedSerialExecutor())
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Whether the calling code runs on this executor's queue (no trap, unlike assertIsolated).
    var isCurrent: Bool { DispatchQueue.getSpecific(key: self.key) == 1 }

    var hops: Int { self.enqueued.load(ordering: .relaxed) }
}
