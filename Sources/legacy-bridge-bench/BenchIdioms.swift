import Foundation
import LegacyBridge

// What users write instead of the newer primitives, each written as plainly as a user would and
// correct where that is possible: the baselines of the keyed, shared, latest and coalesced
// sections. Their known holes are named on each; the benchmarks never exercise those holes (they
// measure cost, and the tests prove the primitives close them).

/// A hand-made RPC client's table: continuations by id behind a lock, resumed by the reply
/// callback. A reply that finds nobody is dropped. Holes: no timeout, no cancellation (a
/// cancelled caller waits for its reply forever), a late reply for a reused id completes the
/// newer request.
final class HandWrittenRequestTable: @unchecked Sendable {
    // @unchecked Sendable: `waiting` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var waiting: [Int: CheckedContinuation<Int, any Error>] = [:]

    func request(id: Int, _ send: (Int) -> Void) async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            waiting[id] = continuation
            lock.unlock()
            send(id)
        }
    }

    /// Resumes the request waiting for `id`; false if there is none.
    @discardableResult
    func complete(_ id: Int, with result: Result<Int, any Error>) -> Bool {
        lock.lock()
        let continuation = waiting.removeValue(forKey: id)
        lock.unlock()
        guard let continuation else { return false }
        continuation.resume(with: result)
        return true
    }

    func failAll(_ error: any Error) {
        lock.lock()
        let all = waiting
        waiting = [:]
        lock.unlock()
        for continuation in all.values { continuation.resume(throwing: error) }
    }

    var pending: Int {
        lock.lock()
        defer { lock.unlock() }
        return waiting.count
    }
}

/// One `AsyncStream` per consumer, fed by a broadcaster that holds the continuations in a locked
/// dictionary. Holes: no backpressure (each buffer grows without bound behind a slow consumer), a
/// consumer that joins after the end waits forever, the SDK subscription is never stopped when
/// the last consumer leaves.
final class HandWrittenBroadcaster: @unchecked Sendable {
    // @unchecked Sendable: `continuations` and `nextID` are read and written only under `lock`.
    private let lock = NSLock()
    private var continuations: [Int: AsyncStream<Int>.Continuation] = [:]
    private var nextID = 0

    func subscribe() -> AsyncStream<Int> {
        AsyncStream { continuation in
            lock.lock()
            let id = nextID
            nextID += 1
            continuations[id] = continuation
            lock.unlock()
            continuation.onTermination = { [weak self] _ in self?.remove(id) }
        }
    }

    private func remove(_ id: Int) {
        lock.lock()
        continuations[id] = nil
        lock.unlock()
    }

    func yield(_ value: Int) {
        lock.lock()
        for continuation in continuations.values { continuation.yield(value) }
        lock.unlock()
    }

    func finish() {
        lock.lock()
        let all = continuations
        continuations = [:]
        lock.unlock()
        // In subscription order: the memory probe's 100,000 consumer tasks then end oldest first,
        // which is what the runtime's task group removes cheaply (in dictionary order each removal
        // walks its list of children, quadratic in all).
        for id in all.keys.sorted() { all[id]?.finish() }
    }

    var consumers: Int {
        lock.lock()
        defer { lock.unlock() }
        return continuations.count
    }
}

/// A stored `Task`, cancelled and replaced on each call; the call is a continuation inside
/// `withTaskCancellationHandler` whose handler cancels the SDK call. A superseded caller throws
/// `CancellationError`, even if its value came first. Holes: two calls racing each other may
/// both believe they are the newest for a moment (the last to take the lock wins); a value that
/// arrives for a superseded call is dropped silently (nothing releases what it owns).
final class HandWrittenLatestWins: @unchecked Sendable {
    // @unchecked Sendable: `current` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var current: Task<Int, any Error>?

    func run(_ operation: @escaping @Sendable () async throws -> Int) async throws -> Int {
        let task = Task { try await operation() }
        let previous = lock.withLock {
            defer { current = task }
            return current
        }
        previous?.cancel()
        let value = try await task.value
        guard lock.withLock({ current == task }) else { throw CancellationError() }
        return value
    }
}

/// The in-flight calls in a `[Key: Task]` dictionary behind a lock; a caller of a key in flight
/// awaits its task's value. Holes: a caller that leaves does not leave the call (it runs on, and
/// it is never cancelled when every caller left), a failure is shared by everyone who joined.
final class HandWrittenCoalescer: @unchecked Sendable {
    // @unchecked Sendable: `inFlight` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var inFlight: [Int: Task<Int, any Error>] = [:]

    func value(for key: Int, _ operation: @escaping @Sendable () async throws -> Int) async throws -> Int {
        let task = lock.withLock {
            if let task = inFlight[key] { return task }
            let task = Task {
                defer { lock.withLock { inFlight[key] = nil } }
                return try await operation()
            }
            inFlight[key] = task
            return task
        }
        return try await task.value
    }
}

// MARK: - The SDK of the latest and coalesced sections

/// A callback SDK on a pthread of its own: a call waits until it is cancelled or the driver says
/// to answer (`answerFromNowOn`), then that thread answers it with `value(id)`; a cancel answers
/// the call with `CancellationError` from that thread. A cancel that comes before its call is
/// remembered and that call is then answered as cancelled, so a cancel racing its start is never
/// lost (many real SDKs are less forgiving; the idioms rely on it, the primitives do not).
final class BenchCallSDK: @unchecked Sendable {
    // @unchecked Sendable: every var is read and written only while `condition` is locked.
    typealias Reply = @Sendable (Result<Int, any Error>) -> Void

    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var stopping = false
    private var pending: [Int: Reply] = [:]
    private var cancelledEarly: Set<Int> = []
    private var counts = Counts()
    private var answering: Bool
    private let value: @Sendable (Int) -> Int

    struct Counts: Sendable, Equatable {
        var started = 0
        var answered = 0
        var cancelled = 0
    }

    /// - Parameters:
    ///   - answering: Calls are answered as soon as the SDK's thread gets to them; otherwise they
    ///     wait for `answerFromNowOn()` or their cancel.
    ///   - value: The value of call `id`.
    init(answering: Bool, value: @escaping @Sendable (Int) -> Int = { $0 }) {
        self.answering = answering
        self.value = value
        // The thread keeps the SDK alive until `stop()` ends its loop.
        let thread = Thread { self.loop() }
        thread.name = "bench-sdk"
        thread.start()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job() }
        }
    }

    private func post(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Starts call `id`; `reply` is called once, from the SDK's thread.
    func start(_ id: Int, reply: @escaping Reply) {
        condition.lock()
        counts.started += 1
        if cancelledEarly.remove(id) != nil {
            counts.cancelled += 1
            condition.unlock()
            post { reply(.failure(CancellationError())) }
            return
        }
        pending[id] = reply
        let now = answering
        condition.unlock()
        if now { post { [self] in answer(id) } }
    }

    private func answer(_ id: Int) {
        condition.lock()
        let reply = pending.removeValue(forKey: id)
        if reply != nil { counts.answered += 1 }
        condition.unlock()
        reply?(.success(value(id)))
    }

    /// Cancels call `id`: its reply is a `CancellationError`, from the SDK's thread. A cancel for a
    /// call not started yet is kept for it.
    func cancel(_ id: Int) {
        condition.lock()
        guard let reply = pending.removeValue(forKey: id) else {
            cancelledEarly.insert(id)
            condition.unlock()
            return
        }
        counts.cancelled += 1
        condition.unlock()
        post { reply(.failure(CancellationError())) }
    }

    /// Answers every call waiting now and every call started from now on, from the SDK's thread.
    func answerFromNowOn() {
        condition.lock()
        answering = true
        let ids = Array(pending.keys)
        condition.unlock()
        post { [self] in for id in ids { answer(id) } }
    }

    /// Calls wait again for `answerFromNowOn()` or their cancel; the cancels kept for calls never
    /// started are forgotten (a superseded run may never make its call). Between batches.
    func holdCalls() {
        condition.lock()
        answering = false
        cancelledEarly.removeAll()
        condition.unlock()
    }

    /// Calls started and not answered or cancelled.
    var live: Int {
        condition.lock()
        defer { condition.unlock() }
        return pending.count
    }

    var snapshot: Counts {
        condition.lock()
        defer { condition.unlock() }
        return counts
    }

    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }
}

/// A one-time signal a task can wait for without polling.
final class BenchSignal: Sendable {
    private let state = LockedValue<(fired: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.fired = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let fired = state.withLock { state -> Bool in
                if !state.fired { state.waiter = continuation }
                return state.fired
            }
            if fired { continuation.resume() }
        }
    }
}
