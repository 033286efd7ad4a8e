// The loop an `SDKLoop` made without a driver runs: it waits (DescriptorWaitSet.swift: epoll or
// poll) on the watched descriptors, a wake pipe and the nearest timer, then runs the handlers of
// every ready descriptor, then the due timers. Posted jobs run between two waits, in bounded
// batches (SDKLoopCore's drain), and the wait does not block while jobs are queued.
//
// The registry of watches and timers lives behind one lock and may be changed from any thread. A
// kernel wait set (epoll) is changed with it, under that lock: its calls never block and call no
// user code, and a cancel must be final when it returns, whatever thread makes it. The poll set
// is the loop thread's own copy, rebuilt when a watch changed. The loop thread waits without the
// lock, then asks the registry again before each handler call: a watch or timer ended in the
// meantime (by an earlier handler of the same batch, for example) is skipped, and readiness the
// watch is no longer interested in is dropped. No handler is called under the lock.
//
// A watch may carry the SDK's own readiness query, for a descriptor that only signals a change
// (ZeroMQ's ZMQ_FD): the loop asks it before each wait, and again after a wait in which the
// descriptor signalled (GLib's prepare and check), outside the lock, so that a send that took the
// signal of a waiting message never leaves the loop blocked on a quiet descriptor.

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The descriptors, timers and wake pipe of one descriptor-watching `SDKLoop`.
final class DescriptorPoller: Sendable {
    typealias WatchHandler = @Sendable (DescriptorEvents) throws -> Void
    typealias TimerHandler = @Sendable () throws -> Void
    typealias ReadinessQuery = @Sendable () -> DescriptorEvents

    struct Watch {
        var descriptor: Int32
        var interest: DescriptorEvents
        var handler: WatchHandler
        /// The SDK's own readiness query: the descriptor only signals that it may have changed.
        var readiness: ReadinessQuery?
        /// The kernel set cannot wait on it (a regular file): reported ready at every iteration.
        var unpollable = false

        /// What the wait set waits for: the interest, or only the signal (readable) of a
        /// descriptor whose SDK is asked for the rest.
        var waitedFor: DescriptorEvents { readiness == nil ? interest : .readable }
    }

    struct Timer {
        var deadline: ContinuousClock.Instant
        var period: Duration?
        var handler: TimerHandler
    }

    struct Registry {
        var watches: [UInt64: Watch] = [:]
        var watchedDescriptors: [Int32: UInt64] = [:]
        var timers: [UInt64: Timer] = [:]
        var deadlines = LoopTimerHeap()
        var nextID: UInt64 = 1
        /// Changes whenever the set of watched descriptors or an interest changes (the poll set).
        var version: UInt64 = 0
        /// The loop thread has left: nothing is registered any more, descriptors close at once.
        var exited = false
        /// Descriptors to close when the loop thread leaves (cancelled with `closingDescriptor`
        /// while the loop shut down).
        var closeAtExit: [Int32] = []
        /// Watches the kernel set found not open: reported `.invalid` at the next iteration.
        var pendingInvalid: [UInt64] = []
        /// Watches the kernel set cannot wait on, always ready.
        var unpollable: Set<UInt64> = []
        /// Watches that carry the SDK's readiness query, asked before each wait.
        var queried: Set<UInt64> = []
        /// Watches ended by `.invalid` whose handle is still alive: their number was not open, so
        /// `cancel(closingDescriptor: true)` must not close it (it may name someone else's file).
        var endedInvalid: Set<UInt64> = []
        /// How many watches ended by `.invalid` since the loop started.
        var invalidEnds = 0

        mutating func takeID() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }

        /// Runs `body` on the deadline heap, with a test of whether an entry is the current
        /// deadline of a live timer. The heap is moved out meanwhile, so it stays uniquely
        /// referenced and changes in place.
        mutating func withDeadlines<Result>(
            _ body: (inout LoopTimerHeap, (LoopTimerHeap.Entry) -> Bool) -> Result
        ) -> Result {
            var heap = deadlines
            deadlines = LoopTimerHeap()
            defer { deadlines = heap }
            let timers = self.timers
            return body(&heap) { timers[$0.id]?.deadline == $0.deadline }
        }
    }

    /// The loop thread's wait set.
    enum WaitSet {
        case poll(LoopThreadOnly<PollWaitSet>)
        case kernel(any KernelWaitSet)
    }

    let loopName: String
    let backend: DescriptorBackend
    private let registry = LockedBox(Registry())
    private let waitSet: WaitSet
    /// The kernel set's ready watches, reused between waits (loop thread only).
    private let readyScratch = LoopThreadOnly<[(id: UInt64, events: DescriptorEvents)]>([])
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Receives what a handler threw; nil stops the process with a message.
    private let onHandlerError: (@Sendable (any Error) -> Void)?
    /// Runs on the loop thread before each wait.
    private let beforeWait: (@Sendable () -> Void)?

    /// Creates the wake pipe and the wait set; throws the error number when the process has no
    /// descriptors left.
    init(
        loopName: String, backend: DescriptorBackend, onHandlerError: (@Sendable (any Error) -> Void)?,
        beforeWait: (@Sendable () -> Void)?
    ) throws(DescriptorLoopError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw .wakePipeFailed(code: errno) }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        self.wakeRead = ends[0]
        self.wakeWrite = ends[1]
        self.loopName = loopName
        self.backend = backend
        self.onHandlerError = onHandlerError
        self.beforeWait = beforeWait
        switch backend {
        case .poll:
            self.waitSet = .poll(LoopThreadOnly(PollWaitSet(wakeDescriptor: ends[0])))
        #if os(Linux)
        case .epoll:
            do {
                self.waitSet = .kernel(try EpollWaitSet(wakeDescriptor: ends[0]))
            } catch {
                close(ends[0])
                close(ends[1])
                throw error
            }
        #endif
        #if canImport(Darwin)
        case .kqueue:
            do {
                self.waitSet = .kernel(try KqueueWaitSet(wakeDescriptor: ends[0]))
            } catch {
                close(ends[0])
                close(ends[1])
                throw error
            }
        #endif
        }
    }

    deinit {
        if case .kernel(let set) = waitSet { set.close() }
        close(wakeRead)
        close(wakeWrite)
    }

    // MARK: Any thread

    /// Makes a wait return soon, or the next one return at once. Never blocks: a full pipe is
    /// already readable.
    func wake() {
        var byte: UInt8 = 1
        while write(wakeWrite, &byte, 1) < 0 && errno == EINTR {}
    }

    /// Registers a watch; nil when the loop thread has left. A kernel set watches it before this
    /// returns.
    func add(
        descriptor: Int32, interest: DescriptorEvents, readiness: ReadinessQuery?, handler: @escaping WatchHandler
    ) -> UInt64? {
        registry.withLock { registry -> UInt64? in
            guard !registry.exited else { return nil }
            precondition(
                registry.watchedDescriptors[descriptor] == nil,
                """
                SDKLoop '\(loopName)': descriptor \(descriptor) is already watched. Update that watch's \
                interest instead, or cancel it before the descriptor is closed and its number reused \
                (cancel(closingDescriptor: true) does both)
                """)
            let id = registry.takeID()
            registry.watches[id] = Watch(
                descriptor: descriptor, interest: interest, handler: handler, readiness: readiness)
            registry.watchedDescriptors[descriptor] = id
            if readiness != nil { registry.queried.insert(id) }
            registry.version &+= 1
            // The kernel set changes with the registry, under its lock (see the file's header).
            arm(id, adding: true, in: &registry)
            return id
        }
    }

    /// Changes a watch's interest, and re-arms it in a kernel set (which then hears a new file
    /// under its number). Returns whether the loop must be woken to see the change.
    func update(_ id: UInt64, interest: DescriptorEvents) -> Bool {
        registry.withLock { registry in
            guard var watch = registry.watches[id] else { return false }
            let changed = watch.interest != interest
            watch.interest = interest
            registry.watches[id] = watch
            switch waitSet {
            case .poll:
                if changed { registry.version &+= 1 }
                return changed
            case .kernel:
                let invalidBefore = registry.pendingInvalid.count
                let wasUnpollable = watch.unpollable
                arm(id, adding: false, in: &registry)
                // A query's new interest is applied by the loop's next ask, before its next wait.
                return registry.pendingInvalid.count != invalidBefore || wasUnpollable
                    || registry.watches[id]?.unpollable == true || (changed && watch.readiness != nil)
            }
        }
    }

    /// Ends a watch; whether it was registered. Its handler is released outside the lock. A
    /// kernel set forgets it before this returns; the poll set at the next wait.
    @discardableResult
    func remove(watch id: UInt64) -> Bool {
        let removed = registry.withLock { registry in end(id, in: &registry) }
        return removed != nil
    }

    func interest(of id: UInt64) -> DescriptorEvents {
        registry.withLock { $0.watches[id]?.interest ?? [] }
    }

    /// Live watches, armed timers, and the watches ended by `.invalid` so far.
    var counts: (watches: Int, timers: Int, invalidEnds: Int) {
        registry.withLock { ($0.watches.count, $0.timers.count, $0.invalidEnds) }
    }

    func isWatching(_ id: UInt64) -> Bool {
        registry.withLock { $0.watches[id] != nil }
    }

    /// Whether a live watch carries a readiness query.
    func isQueried(_ id: UInt64) -> Bool {
        registry.withLock { $0.queried.contains(id) }
    }

    /// Whether a watch that is no longer registered ended because its descriptor was not open.
    func endedInvalid(_ id: UInt64) -> Bool {
        registry.withLock { $0.endedInvalid.contains(id) }
    }

    /// A watch's handle was released: nothing will ask about it again.
    func forgetHandle(_ id: UInt64) {
        registry.withLock { _ = $0.endedInvalid.remove(id) }
    }

    /// Registers a timer; nil when the loop thread has left.
    func add(timerAt deadline: ContinuousClock.Instant, period: Duration?, handler: @escaping TimerHandler) -> UInt64? {
        registry.withLock { registry -> UInt64? in
            guard !registry.exited else { return nil }
            let id = registry.takeID()
            registry.timers[id] = Timer(deadline: deadline, period: period, handler: handler)
            registry.deadlines.push(.init(deadline: deadline, id: id))
            return id
        }
    }

    func remove(timer id: UInt64) {
        let removed = registry.withLock { registry -> Timer? in
            let timer = registry.timers.removeValue(forKey: id)
            // The heap keeps the entry until it reaches the top, or until dead entries outnumber the live.
            let live = registry.timers.count
            registry.withDeadlines { heap, isLive in heap.compact(isLive: isLive, liveCount: live) }
            return timer
        }
        _ = removed  // released outside the lock
    }

    func isScheduled(_ id: UInt64) -> Bool {
        registry.withLock { $0.timers[id] != nil }
    }

    /// Closes a descriptor now if the loop thread has left, else when it leaves.
    func closeAtExit(_ descriptor: Int32) {
        let now = registry.withLock { registry -> Bool in
            if registry.exited { return true }
            registry.closeAtExit.append(descriptor)
            return false
        }
        if now { _ = close(descriptor) }  // no wait any more: any thread
    }

    /// Whether the loop thread has left.
    var hasExited: Bool { registry.withLock { $0.exited } }

    // MARK: Under the registry lock

    /// Arms a watch in a kernel set; records what the set could not watch.
    private func arm(_ id: UInt64, adding: Bool, in registry: inout Registry) {
        guard case .kernel(let set) = waitSet, var watch = registry.watches[id] else { return }
        switch set.arm(descriptor: watch.descriptor, id: id, interest: watch.waitedFor, adding: adding) {
        case .armed:
            if watch.unpollable {
                watch.unpollable = false
                registry.watches[id] = watch
                registry.unpollable.remove(id)
            }
        case .notOpen:
            registry.pendingInvalid.append(id)
        case .unpollable:
            watch.unpollable = true
            registry.watches[id] = watch
            registry.unpollable.insert(id)
        }
    }

    /// Ends a watch: out of the registry, and out of a kernel set while its descriptor is open.
    private func end(_ id: UInt64, in registry: inout Registry) -> Watch? {
        guard let watch = registry.watches.removeValue(forKey: id) else { return nil }
        registry.watchedDescriptors[watch.descriptor] = nil
        registry.unpollable.remove(id)
        registry.queried.remove(id)
        registry.version &+= 1
        if case .kernel(let set) = waitSet, !watch.unpollable { set.disarm(descriptor: watch.descriptor, id: id) }
        return watch
    }

    // MARK: The loop thread

    /// One iteration: asks the SDKs that keep their own readiness, waits until a descriptor is
    /// ready, a timer is due or a wake came (without blocking unless `mayBlock`, or when an SDK
    /// said it is ready), then runs the handlers of every ready descriptor, then the due timers.
    func runOnce(mayBlock: Bool) {
        beforeWait?()
        let (version, nextDeadline, urgent, watchCount, queries) = registry.withLock { registry in
            let deadline = registry.withDeadlines { heap, isLive in heap.top(isLive: isLive)?.deadline }
            let urgent = !registry.pendingInvalid.isEmpty || !registry.unpollable.isEmpty
            let queries: [(id: UInt64, wanted: DescriptorEvents, query: ReadinessQuery)] =
                registry.queried.isEmpty
                ? []
                : registry.queried.compactMap { id in
                    registry.watches[id].flatMap { watch in
                        watch.readiness.map { (id, watch.interest.union([.error, .hangUp]), $0) }
                    }
                }
            return (registry.version, deadline, urgent, registry.watches.count, queries)
        }
        // Before the wait, each query says whether its SDK is ready already, whatever its
        // descriptor says (GLib's prepare). Asked outside the lock: it is the SDK's code.
        var prepared: [UInt64: DescriptorEvents] = [:]
        for (id, wanted, query) in queries {
            let events = query().intersection(wanted)
            if !events.isEmpty { prepared[id] = events }
        }
        let timeout = mayBlock && !urgent && prepared.isEmpty ? Self.milliseconds(until: nextDeadline) : 0
        var ready: [(id: UInt64, events: DescriptorEvents)]
        let rearming: Bool
        switch waitSet {
        case .poll(let set):
            rearming = false
            ready = set.withValue { set in
                if set.version != version {
                    let watches = registry.withLock { registry in
                        registry.watches.map {
                            WatchedDescriptor(id: $0.key, descriptor: $0.value.descriptor, interest: $0.value.waitedFor)
                        }
                        .sorted { $0.id < $1.id }
                    }
                    set.sync(to: watches, version: version)
                }
                if set.wait(milliseconds: timeout) { drainWakePipe() }
                return set.ready
            }
        case .kernel(let set):
            rearming = true
            ready = readyScratch.withValue { scratch in
                if set.wait(milliseconds: timeout, expected: watchCount + 1, into: &scratch) { drainWakePipe() }
                return scratch
            }
        }
        let (invalid, alwaysReady, queried) = registry.withLock { registry in
            defer { registry.pendingInvalid = [] }
            return (
                registry.pendingInvalid,
                registry.unpollable.compactMap { id in
                    registry.watches[id].map { (id: id, events: $0.interest) }
                },
                registry.queried
            )
        }
        for id in invalid { dispatch(id, .invalid, rearming: false, asking: false) }
        if !alwaysReady.isEmpty {
            ready.append(contentsOf: alwaysReady)
            ready.sort { $0.id < $1.id }
        }
        guard !queried.isEmpty else {
            for (id, events) in ready { dispatch(id, events, rearming: rearming, asking: false) }
            if nextDeadline != nil { fireDueTimers() }
            return
        }
        // A descriptor that signalled has its SDK asked again (GLib's check); an SDK that said
        // it was ready before the wait is dispatched with what it said.
        var merged: [(id: UInt64, events: DescriptorEvents, asking: Bool)] = ready.map {
            ($0.id, $0.events, queried.contains($0.id))
        }
        for entry in merged where entry.asking { prepared[entry.id] = nil }
        if !prepared.isEmpty {
            merged.append(contentsOf: prepared.map { ($0.key, $0.value, false) })
            merged.sort { $0.id < $1.id }
        }
        for (id, events, asking) in merged {
            dispatch(id, events, rearming: rearming && (asking || !queried.contains(id)), asking: asking)
        }
        if nextDeadline != nil { fireDueTimers() }
    }

    /// The loop thread has left: ends every watch and timer (their handlers are released here)
    /// and closes what waited for the exit.
    func finish() {
        let (watches, timers, closing) = registry.withLock { registry in
            registry.exited = true
            var ended: [Watch] = []
            for id in Array(registry.watches.keys) {
                if let watch = end(id, in: &registry) { ended.append(watch) }
            }
            defer {
                registry.timers = [:]
                registry.deadlines.removeAll()
                registry.closeAtExit = []
                registry.pendingInvalid = []
            }
            return (ended, registry.timers, registry.closeAtExit)
        }
        _ = (watches, timers)
        for descriptor in closing { _ = close(descriptor) }
    }

    /// Calls a watch's handler if it is still registered and still wants some of `events`, then
    /// re-arms it in a kernel set (`rearming`), where it was one-shot. `asking`: the descriptor
    /// signalled a watch with a readiness query, whose SDK says what it is ready for.
    private func dispatch(_ id: UInt64, _ events: DescriptorEvents, rearming: Bool, asking: Bool) {
        var events = events
        if asking, !events.contains(.invalid), let query = registry.withLock({ $0.watches[id]?.readiness }) {
            events = events.intersection([.error, .hangUp]).union(query())
        }
        let target = registry.withLock { registry -> (WatchHandler, DescriptorEvents)? in
            guard let watch = registry.watches[id] else { return nil }
            let delivered = events.intersection(watch.interest.union([.error, .hangUp, .invalid]))
            guard !delivered.isEmpty else { return nil }
            if delivered.contains(.invalid) {
                // Reported once: a closed descriptor would make every wait return at once.
                _ = end(id, in: &registry)
                registry.endedInvalid.insert(id)
                registry.invalidEnds += 1
            }
            return (watch.handler, delivered)
        }
        if let (handler, delivered) = target {
            do {
                try handler(delivered)
            } catch {
                remove(watch: id)
                report(error)
            }
        }
        // After the handler, which may have replaced the descriptor under the same number: the
        // kernel set then watches the new file.
        if rearming, target?.1.contains(.invalid) != true {
            registry.withLock { registry in
                guard let watch = registry.watches[id], !watch.unpollable else { return }
                arm(id, adding: false, in: &registry)
            }
        }
    }

    private func fireDueTimers() {
        let now = ContinuousClock.now
        let due = registry.withLock { registry in
            registry.withDeadlines { heap, isLive in heap.popDue(at: now, isLive: isLive) }
        }
        for entry in due {
            let handler = registry.withLock { registry -> TimerHandler? in
                // Cancelled by an earlier handler of this batch: skipped.
                guard var timer = registry.timers[entry.id], timer.deadline == entry.deadline else { return nil }
                if let period = timer.period {
                    // Behind by more than a period (a long handler, a stopped process): the next
                    // run is a period from now, not a burst of the missed ones.
                    let next = timer.deadline + period
                    timer.deadline = next > now ? next : now + period
                    registry.timers[entry.id] = timer
                    registry.deadlines.push(.init(deadline: timer.deadline, id: entry.id))
                } else {
                    registry.timers[entry.id] = nil
                }
                return timer.handler
            }
            guard let handler else { continue }
            do {
                try handler()
            } catch {
                remove(timer: entry.id)
                report(error)
            }
        }
    }

    private func report(_ error: any Error) {
        guard let onHandlerError else {
            fatalError(
                """
                SDKLoop '\(loopName)': a descriptor or timer handler threw \(error). Handle errors inside \
                the handler, or pass onHandlerError: to SDKLoop(name:onHandlerError:beforeWait:)
                """)
        }
        onHandlerError(error)
    }

    /// Reads the wake bytes: one read, since wakes are coalesced (one byte per batch of posts,
    /// usually). Bytes left over make the next wait return at once, and that turn reads them.
    private func drainWakePipe() {
        var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        while withUnsafeMutableBytes(of: &buffer, { read(wakeRead, $0.baseAddress, $0.count) }) < 0 && errno == EINTR {}
    }

    /// The wait's timeout for the nearest deadline: -1 (none), or milliseconds rounded up, so that
    /// the loop never wakes before a timer is due.
    private static func milliseconds(until deadline: ContinuousClock.Instant?) -> Int32 {
        guard let deadline else { return -1 }
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let milliseconds = seconds.multipliedReportingOverflow(by: 1_000)
        guard !milliseconds.overflow else { return Int32.max }
        let rounded = milliseconds.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: rounded)
    }
}

/// Errors of a descriptor-watching ``SDKLoop``.
public enum DescriptorLoopError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The wake pipe could not be created (`pipe` failed with `code`, e.g. `EMFILE`).
    case wakePipeFailed(code: Int32)
    /// The wait set could not be created (`epoll_create1`, `kqueue` or their first change failed
    /// with `code`).
    case waitSetFailed(code: Int32)
    /// The loop thread could not be started (see ``OffloadError/threadCreationFailed(code:)``).
    case threadCreationFailed(code: Int32)

    /// A readable message, e.g. "could not create the loop's wake pipe (pipe failed with errno 24)".
    public var description: String {
        switch self {
        case .wakePipeFailed(let code): return "could not create the loop's wake pipe (pipe failed with errno \(code))"
        case .waitSetFailed(let code): return "could not create the loop's wait set (errno \(code))"
        case .threadCreationFailed(let code):
            return "could not create the loop thread (pthread_create returned \(code))"
        }
    }
}

/// State that only the loop thread touches, in a `Sendable` class: `withValue` is called on that
/// thread only (`DescriptorPoller.runOnce`), never concurrently.
final class LoopThreadOnly<Value>: @unchecked Sendable {
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withValue<Result>(_ body: (inout Value) -> Result) -> Result { body(&value) }
}
