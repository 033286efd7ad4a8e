// The loop an `SDKLoop` made without a driver runs: it waits (DescriptorWaitSet, with poll) on
// the watched descriptors, a wake pipe and the nearest timer, then runs the handlers of what is ready, then
// the due timers. Posted jobs run between two waits (SDKLoopCore's drain).
//
// The registry of watches and timers lives behind one lock and may be changed from any thread.
// The loop thread copies what it needs to wait on (rebuilt only when a watch changed), waits
// without the lock, then asks the registry again before each handler call: a watch or timer
// ended in the meantime (by an earlier handler of the same batch, for example) is skipped, and
// readiness the watch is no longer interested in is dropped. No handler is called under the lock.

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

    struct Watch {
        var descriptor: Int32
        var interest: DescriptorEvents
        var handler: WatchHandler
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
        var nextID: UInt64 = 1
        /// Changes whenever the set of watched descriptors or an interest changes.
        var version: UInt64 = 0
        /// The loop thread has left: nothing is registered any more, descriptors close at once.
        var exited = false
        /// Descriptors to close when the loop thread leaves (cancelled with `closingDescriptor`
        /// while the loop shut down).
        var closeAtExit: [Int32] = []

        mutating func takeID() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }
    }

    let loopName: String
    private let registry = LockedBox(Registry())
    private let waitSet: LoopThreadOnly<DescriptorWaitSet>
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Receives what a handler threw; nil stops the process with a message.
    private let onHandlerError: (@Sendable (any Error) -> Void)?
    /// Runs on the loop thread before each wait.
    private let beforeWait: (@Sendable () -> Void)?

    /// Creates the wake pipe; throws the `pipe` error number when the process has no descriptors left.
    init(
        loopName: String, onHandlerError: (@Sendable (any Error) -> Void)?, beforeWait: (@Sendable () -> Void)?
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
        self.onHandlerError = onHandlerError
        self.beforeWait = beforeWait
        do {
            self.waitSet = LoopThreadOnly(try DescriptorWaitSet(wakeDescriptor: ends[0]))
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
    }

    deinit {
        waitSet.withValue { $0.close() }
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

    /// Registers a watch; nil when the loop thread has left.
    func add(descriptor: Int32, interest: DescriptorEvents, handler: @escaping WatchHandler) -> UInt64? {
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
            registry.watches[id] = Watch(descriptor: descriptor, interest: interest, handler: handler)
            registry.watchedDescriptors[descriptor] = id
            registry.version &+= 1
            return id
        }
    }

    /// Changes a watch's interest; whether it changed (the watch exists and the interest differs).
    func update(_ id: UInt64, interest: DescriptorEvents) -> Bool {
        registry.withLock { registry in
            guard var watch = registry.watches[id], watch.interest != interest else { return false }
            watch.interest = interest
            registry.watches[id] = watch
            registry.version &+= 1
            return true
        }
    }

    /// Ends a watch; whether it was registered. Its handler is released outside the lock.
    ///
    /// On the loop thread the wait set forgets the descriptor at once, while it is still open:
    /// the caller may close it next, and a kernel wait set (epoll) keyed by the open file would
    /// otherwise keep an entry for it that no later call can remove (the number then names
    /// another file, or none), reporting its readiness on every wait for as long as the file
    /// lives on elsewhere (a forked child, a duplicate).
    @discardableResult
    func remove(watch id: UInt64, onLoopThread: Bool) -> Bool {
        let removed = registry.withLock { registry -> Watch? in
            guard let watch = registry.watches.removeValue(forKey: id) else { return nil }
            registry.watchedDescriptors[watch.descriptor] = nil
            registry.version &+= 1
            return watch
        }
        if removed != nil, onLoopThread { waitSet.withValue { $0.forget(id) } }
        return removed != nil
    }

    func interest(of id: UInt64) -> DescriptorEvents {
        registry.withLock { $0.watches[id]?.interest ?? [] }
    }

    func isWatching(_ id: UInt64) -> Bool {
        registry.withLock { $0.watches[id] != nil }
    }

    /// Registers a timer; nil when the loop thread has left.
    func add(timerAt deadline: ContinuousClock.Instant, period: Duration?, handler: @escaping TimerHandler) -> UInt64? {
        registry.withLock { registry -> UInt64? in
            guard !registry.exited else { return nil }
            let id = registry.takeID()
            registry.timers[id] = Timer(deadline: deadline, period: period, handler: handler)
            return id
        }
    }

    func remove(timer id: UInt64) {
        let removed = registry.withLock { $0.timers.removeValue(forKey: id) }
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
        if now { _ = close(descriptor) }  // no wait any more: nothing to forget, and any thread
    }

    /// Closes a descriptor whose watch has ended, on the loop thread, so the wait set can forget
    /// it first, while it is still open.
    func closeDescriptor(_ descriptor: Int32) {
        waitSet.withValue { $0.forget(descriptor: descriptor) }
        _ = close(descriptor)
    }

    // MARK: The loop thread

    /// One iteration: waits until a descriptor is ready, a timer is due or a wake came, then runs
    /// the handlers of what is ready and the due timers.
    func runOnce() {
        beforeWait?()
        let (version, nextDeadline) = registry.withLock { registry in
            (registry.version, registry.timers.values.lazy.map(\.deadline).min())
        }
        // Handlers run outside the wait set's access: one may end a watch, which the wait set
        // then forgets at once (see `remove(watch:onLoopThread:)`).
        let (refused, ready) = waitSet.withValue { set in
            var refused: [UInt64] = []
            if set.version != version {
                let watches = registry.withLock { registry in
                    registry.watches.map {
                        WatchedDescriptor(id: $0.key, descriptor: $0.value.descriptor, interest: $0.value.interest)
                    }
                    .sorted { $0.id < $1.id }
                }
                // Descriptors the system refuses to watch (closed, or a kind it cannot wait on).
                refused = set.sync(to: watches, version: version)
            }
            if set.wait(milliseconds: Self.milliseconds(until: nextDeadline)) { drainWakePipe() }
            return (refused, set.ready)
        }
        for id in refused { dispatch(id, .invalid) }
        for (id, events) in ready { dispatch(id, events) }
        if nextDeadline != nil { fireDueTimers() }
    }

    /// The loop thread has left: ends every watch and timer (their handlers are released here)
    /// and closes what waited for the exit.
    func finish() {
        let (watches, timers, closing) = registry.withLock { registry in
            registry.exited = true
            defer {
                registry.watches = [:]
                registry.watchedDescriptors = [:]
                registry.timers = [:]
                registry.closeAtExit = []
            }
            return (registry.watches, registry.timers, registry.closeAtExit)
        }
        _ = (watches, timers)
        for descriptor in closing { closeDescriptor(descriptor) }
    }

    /// Calls a watch's handler if it is still registered and still wants some of `events`.
    private func dispatch(_ id: UInt64, _ events: DescriptorEvents) {
        let target = registry.withLock { registry -> (WatchHandler, DescriptorEvents)? in
            guard let watch = registry.watches[id] else { return nil }
            let delivered = events.intersection(watch.interest.union([.error, .hangUp, .invalid]))
            guard !delivered.isEmpty else { return nil }
            if delivered.contains(.invalid) {
                // Reported once: a closed descriptor would make every wait return at once.
                registry.watches[id] = nil
                registry.watchedDescriptors[watch.descriptor] = nil
                registry.version &+= 1
            }
            return (watch.handler, delivered)
        }
        guard let (handler, delivered) = target else { return }
        do {
            try handler(delivered)
        } catch {
            remove(watch: id, onLoopThread: true)
            report(error)
        }
    }

    private func fireDueTimers() {
        let now = ContinuousClock.now
        let due = registry.withLock { registry in
            registry.timers.filter { $0.value.deadline <= now }.sorted {
                ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
            }.map(\.key)
        }
        for id in due {
            let handler = registry.withLock { registry -> TimerHandler? in
                guard var timer = registry.timers[id], timer.deadline <= now else { return nil }
                if let period = timer.period {
                    // Behind by more than a period (a long handler, a stopped process): the next
                    // run is a period from now, not a burst of the missed ones.
                    let next = timer.deadline + period
                    timer.deadline = next > now ? next : now + period
                    registry.timers[id] = timer
                } else {
                    registry.timers[id] = nil
                }
                return timer.handler
            }
            guard let handler else { continue }
            do {
                try handler()
            } catch {
                remove(timer: id)
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
    /// The wait set could not be created (on Linux, `epoll_create1` or `epoll_ctl` failed with
    /// `code`).
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
private final class LoopThreadOnly<Value>: @unchecked Sendable {
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withValue<Result>(_ body: (inout Value) -> Result) -> Result { body(&value) }
}
