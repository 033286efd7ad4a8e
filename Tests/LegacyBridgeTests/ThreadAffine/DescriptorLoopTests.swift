// SDKLoop without a driver: the library's own loop waits on descriptors (pipes and socket pairs
// here), timers and its wake pipe, on every backend the platform has (epoll and poll on Linux). Orders are forced by holding the loop thread in a posted job
// until the descriptors are ready, and checked after a round trip through the loop (`run`): the
// post wakes the wait, so everything ready at that wait was dispatched before the job ran.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// A one-way channel between two non-blocking descriptors (a socket pair).
final class TestPipe: @unchecked Sendable {
    // @unchecked Sendable: the descriptors are plain numbers; each test closes an end at most once.
    let readEnd: Int32
    let writeEnd: Int32
    init() {
        var ends: [Int32] = [-1, -1]
        // A socket pair, close-on-exec and non-blocking from the start: a child process started
        // by another test (an exit test) must not keep an end open.
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        precondition(socketpair(AF_UNIX, type, 0, &ends) == 0)
        (readEnd, writeEnd) = (ends[0], ends[1])
    }
    func put(_ count: Int = 1) {
        let bytes = [UInt8](repeating: 7, count: count)
        precondition(write(writeEnd, bytes, count) == count)
    }
    /// Reads everything there is; the number of bytes.
    @discardableResult
    func drain() -> Int {
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = read(readEnd, &buffer, buffer.count)
            if count <= 0 { return total }
            total += count
        }
    }
    func closeAll() {
        _ = close(readEnd)
        _ = close(writeEnd)
    }
}

/// Records handler calls: the events, and whether each ran on the loop thread.
final class CallLog: Sendable {
    private let entries = LockedBox<[DescriptorEvents]>([])
    let offLoop = AtomicCell<Int>(0)
    func record(_ events: DescriptorEvents, on loop: SDKLoop) {
        if !loop.isCurrent { offLoop.add(1, ordering: .relaxed) }
        entries.withLock { $0.append(events) }
    }
    /// A copy made inside the lock: the reader never shares a buffer a writer may still grow.
    var all: [DescriptorEvents] { entries.withLock { $0.map { $0 } } }
    var count: Int { entries.withLock { $0.count } }
}

struct HandlerFailure: Error, Equatable {}

/// Holds the loop thread in a posted job until `release`: what becomes ready meanwhile is seen by
/// one and the same wait.
func holdLoop(_ loop: SDKLoop) throws -> DispatchSemaphore {
    let gate = DispatchSemaphore(value: 0)
    let held = DispatchSemaphore(value: 0)
    try loop.post {
        held.signal()
        gate.wait()
    }
    held.wait()
    return gate
}

@Suite("SDKLoop watching descriptors and timers")
struct DescriptorLoopTests {
    @Test(
        "a descriptor watched from another thread wakes the loop; its handler runs on the loop thread",
        arguments: DescriptorBackend.available)
    func readableReachesHandler(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-read", backend: backend)
        let pipe = TestPipe()
        let log = CallLog()
        let bytes = AtomicCell<Int>(0)
        try loop.watch(pipe.readEnd, for: .readable) { events in
            log.record(events, on: loop)
            bytes.add(pipe.drain(), ordering: .relaxed)
        }
        pipe.put(3)
        #expect(await eventually { bytes.load(ordering: .acquiring) == 3 })
        #expect(log.all.allSatisfy { $0 == .readable })
        #expect(log.offLoop.load(ordering: .acquiring) == 0)
        await loop.shutdown()
        pipe.closeAll()
    }

    @Test(
        "the interest decides: no calls while empty, calls once writable is asked for, none once it is dropped",
        arguments: DescriptorBackend.available)
    func interestChanges(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-interest", backend: backend)
        let pipe = TestPipe()  // the write end is writable at once
        let log = CallLog()
        // Once called, the handler drops its interest itself: a level-triggered writable end would
        // otherwise call it on every wait until the test cancels it, a loop thread spinning beside
        // the other tests (under ThreadSanitizer it starved them for minutes).
        let own = LockedBox<DescriptorWatch?>(nil)
        let watch = try loop.watch(pipe.writeEnd, for: []) { events in
            log.record(events, on: loop)
            own.withLock { $0 }?.update(interest: [])
        }
        own.withLock { $0 = watch }
        _ = try await loop.run { 0 }  // a wait that saw the writable end has passed
        #expect(log.count == 0)
        #expect(watch.interest == [])
        // Drop the interest from inside the first call: no second call follows.
        let inner = LockedBox<DescriptorWatch?>(nil)
        let innerLog = CallLog()
        let second = TestPipe()
        // Registered with no interest, so that the handler finds its own watch from its first call.
        let secondWatch = try loop.watch(second.writeEnd, for: []) { events in
            innerLog.record(events, on: loop)
            inner.withLock { $0 }?.update(interest: [])
        }
        inner.withLock { $0 = secondWatch }
        secondWatch.update(interest: .writable)
        #expect(await eventually { innerLog.count >= 1 })
        _ = try await loop.run { 0 }
        _ = try await loop.run { 0 }
        #expect(innerLog.count == 1, "one call, then the empty interest stops them")
        #expect(innerLog.all.first == .writable)
        #expect(secondWatch.interest == [])
        watch.update(interest: .writable)
        #expect(await eventually { log.count >= 1 })
        #expect(log.all.allSatisfy { $0 == .writable })
        watch.cancel()
        secondWatch.cancel()
        inner.withLock { $0 = nil }
        own.withLock { $0 = nil }
        await loop.shutdown()
        pipe.closeAll()
        second.closeAll()
    }

    @Test(
        "beforeWait runs on the loop thread before each wait: an SDK that says what it wants only when asked",
        arguments: DescriptorBackend.available)
    func beforeWaitSetsInterest(backend: DescriptorBackend) async throws {
        // The stand-in SDK wants to write only while `pending` is set, like mosquitto_want_write.
        let pending = AtomicCell<Bool>(false)
        let watchBox = LockedBox<DescriptorWatch?>(nil)
        let offLoop = AtomicCell<Int>(0)
        let loopBox = LockedBox<SDKLoop?>(nil)
        let loop = try SDKLoop(
            name: "fd-prepare", backend: backend,
            beforeWait: {
                if loopBox.withLock({ $0 })?.isCurrent == false { offLoop.add(1, ordering: .relaxed) }
                watchBox.withLock { $0 }?.update(interest: pending.load(ordering: .acquiring) ? .writable : [])
            })
        loopBox.withLock { $0 = loop }
        let pipe = TestPipe()
        let writes = AtomicCell<Int>(0)
        let watch = try loop.watch(pipe.writeEnd, for: []) { _ in
            writes.add(1, ordering: .relaxed)
            pending.store(false, ordering: .releasing)  // written: the SDK wants nothing more
        }
        watchBox.withLock { $0 = watch }
        _ = try await loop.run { 0 }
        _ = try await loop.run { 0 }
        #expect(writes.load(ordering: .acquiring) == 0, "nothing was pending")
        try await loop.run { pending.store(true, ordering: .releasing) }
        #expect(await eventually { writes.load(ordering: .acquiring) == 1 })
        _ = try await loop.run { 0 }
        _ = try await loop.run { 0 }
        #expect(writes.load(ordering: .acquiring) == 1, "one write, then beforeWait dropped the interest")
        #expect(offLoop.load(ordering: .acquiring) == 0)
        watchBox.withLock { $0 = nil }
        loopBox.withLock { $0 = nil }
        await loop.shutdown()
        pipe.closeAll()
    }

    @Test(
        "a watch cancelled by an earlier handler of the same wait never reaches its handler",
        arguments: DescriptorBackend.available)
    func cancelledInSameBatch(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-batch", backend: backend)
        let first = TestPipe()
        let second = TestPipe()
        let secondLog = CallLog()
        let secondWatch = LockedBox<DescriptorWatch?>(nil)
        let firstCalls = AtomicCell<Int>(0)
        try loop.watch(first.readEnd, for: .readable) { _ in
            first.drain()
            firstCalls.add(1, ordering: .relaxed)
            secondWatch.withLock { $0 }?.cancel()
        }
        secondWatch.withLock {
            $0 = try? loop.watch(second.readEnd, for: .readable) { events in secondLog.record(events, on: loop) }
        }
        // Both become readable while the loop is held: its next wait sees both at once.
        let gate = try holdLoop(loop)
        first.put()
        second.put()
        gate.signal()
        #expect(await eventually { firstCalls.load(ordering: .acquiring) >= 1 })
        _ = try await loop.run { 0 }
        #expect(secondLog.count == 0, "the second handler ran after the first had cancelled it")
        #expect(secondWatch.withLock { $0 }?.isActive == false)
        secondWatch.withLock { $0 = nil }
        await loop.shutdown()
        first.closeAll()
        second.closeAll()
    }

    @Test(
        "a watched descriptor that is not open is reported once as invalid; the watch ends",
        arguments: DescriptorBackend.available)
    func notOpenIsInvalid(backend: DescriptorBackend) async throws {
        // The highest number the process may open: no other test opens it meanwhile (descriptors
        // are handed out lowest first), so it stays closed.
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let high = Int32(clamping: min(limit.rlim_cur, 1 << 20) - 1)
        #expect(fcntl(high, F_GETFD) == -1)
        let loop = try SDKLoop(name: "fd-invalid", backend: backend)
        let log = CallLog()
        let watch = try loop.watch(high, for: .readable) { events in log.record(events, on: loop) }
        #expect(await eventually { log.count >= 1 })
        _ = try await loop.run { 0 }
        _ = try await loop.run { 0 }
        #expect(log.all == [.invalid])
        #expect(!watch.isActive)
        #expect(loop.statistics == .init(watches: 0, timers: 0, watchesEndedInvalid: 1))
        await loop.shutdown()
    }

    @Test(
        "statistics count the live watches and armed timers, and drop each as it is cancelled or fires",
        arguments: DescriptorBackend.available)
    func statisticsCount(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-stats", backend: backend)
        let pipe = TestPipe()
        #expect(loop.statistics == .init(watches: 0, timers: 0, watchesEndedInvalid: 0))
        let watch = try loop.watch(pipe.readEnd, for: .readable) { _ in }
        let later = try loop.schedule(after: .seconds(3600)) {}
        let fired = AtomicCell<Int>(0)
        try loop.schedule(after: .zero) { fired.add(1, ordering: .releasing) }
        #expect(await eventually { fired.load(ordering: .acquiring) == 1 })
        #expect(loop.statistics == .init(watches: 1, timers: 1, watchesEndedInvalid: 0))
        watch.cancel()
        later.cancel()
        #expect(loop.statistics == .init(watches: 0, timers: 0, watchesEndedInvalid: 0))
        await loop.shutdown()
        pipe.closeAll()
    }

    @Test("a hang-up reaches a handler that asked for nothing", arguments: DescriptorBackend.available)
    func hangUpReported(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-hup", backend: backend)
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        let log = CallLog()
        // The handler ends its watch at the hang-up, as an SDK closes its connection: a hang-up is
        // reported on every wait, and a watch left on it spins the loop thread until cancelled.
        let own = LockedBox<DescriptorWatch?>(nil)
        let watch = try loop.watch(pair[0], for: []) { events in
            log.record(events, on: loop)
            if events.contains(.hangUp) { own.withLock { $0 }?.cancel() }
        }
        own.withLock { $0 = watch }
        _ = close(pair[1])
        #expect(await eventually { log.count >= 1 })
        #expect(log.all.first?.contains(.hangUp) == true)
        #expect(log.all.allSatisfy { !$0.contains(.readable) }, "readable was not asked for")
        #expect(!watch.isActive, "the handler ended it")
        own.withLock { $0 = nil }
        _ = close(pair[0])
        await loop.shutdown()
    }

    @Test(
        "cancel(closingDescriptor: true) from another thread closes the descriptor on the loop thread",
        arguments: DescriptorBackend.available)
    func cancelClosing(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-close", backend: backend)
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)
        let watch = try loop.watch(pair[0], for: .readable) { _ in }
        var byte: UInt8 = 0
        #expect(read(pair[1], &byte, 1) == -1, "open: nothing to read yet")
        watch.cancel(closingDescriptor: true)
        _ = try await loop.run { 0 }  // the close was posted before this job
        #expect(read(pair[1], &byte, 1) == 0, "the peer sees the end of the stream: the loop closed its end")
        #expect(!watch.isActive)
        await loop.shutdown()
        _ = close(pair[1])
    }

    @Test(
        "one-shot and repeating timers run on the loop thread; a cancelled one stops, even when due in the same turn",
        arguments: DescriptorBackend.available)
    func timers(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "timers", backend: backend)
        let once = AtomicCell<Int>(0)
        let offLoop = AtomicCell<Int>(0)
        let oneShot = try loop.schedule(after: .milliseconds(1)) {
            if !loop.isCurrent { offLoop.add(1, ordering: .relaxed) }
            once.add(1, ordering: .relaxed)
        }
        let ticks = AtomicCell<Int>(0)
        let repeating = LockedBox<LoopTimer?>(nil)
        repeating.withLock {
            $0 = try? loop.schedule(after: .zero, repeating: .milliseconds(1)) {
                if ticks.add(1, ordering: .relaxed).newValue == 3 { repeating.withLock { $0 }?.cancel() }
            }
        }
        #expect(await eventually { once.load(ordering: .acquiring) == 1 && ticks.load(ordering: .acquiring) == 3 })
        #expect(!oneShot.isActive)
        _ = try await loop.run { 0 }
        #expect(ticks.load(ordering: .acquiring) == 3, "the repeating timer stopped at its cancel")
        // Two timers due in the same turn (both at zero, scheduled while the loop is held): the
        // first cancels the second.
        let gate = try holdLoop(loop)
        let secondRuns = AtomicCell<Int>(0)
        let second = LockedBox<LoopTimer?>(nil)
        let firstRan = AtomicCell<Bool>(false)
        try loop.schedule(after: .zero) {
            second.withLock { $0 }?.cancel()
            firstRan.store(true, ordering: .releasing)
        }
        second.withLock { $0 = try? loop.schedule(after: .zero) { secondRuns.add(1, ordering: .relaxed) } }
        gate.signal()
        #expect(await eventually { firstRan.load(ordering: .acquiring) })
        _ = try await loop.run { 0 }
        #expect(secondRuns.load(ordering: .acquiring) == 0)
        #expect(offLoop.load(ordering: .acquiring) == 0)
        repeating.withLock { $0 = nil }
        second.withLock { $0 = nil }
        await loop.shutdown()
    }

    @Test(
        "a handler that throws ends its watch or timer, and the error reaches onHandlerError",
        arguments: DescriptorBackend.available)
    func throwingHandler(backend: DescriptorBackend) async throws {
        let errors = LockedBox<[String]>([])
        let loop = try SDKLoop(
            name: "fd-throw", backend: backend, onHandlerError: { error in errors.withLock { $0.append("\(error)") } })
        let pipe = TestPipe()
        let calls = AtomicCell<Int>(0)
        let watch = try loop.watch(pipe.readEnd, for: .readable) { _ in
            calls.add(1, ordering: .relaxed)
            throw HandlerFailure()  // and leaves the byte unread: level-triggered, it would be called again
        }
        pipe.put()
        let timer = try loop.schedule(after: .zero, repeating: .milliseconds(1)) { throw HandlerFailure() }
        #expect(await eventually { errors.withLock { $0.count } == 2 })
        _ = try await loop.run { 0 }
        #expect(calls.load(ordering: .acquiring) == 1)
        #expect(!watch.isActive && !timer.isActive)
        #expect(errors.withLock { $0 } == ["HandlerFailure()", "HandlerFailure()"])
        await loop.shutdown()
        pipe.closeAll()
    }

    @Test(
        "shutdown releases every handler and refuses new watches and timers; jobs, scheduler and executor still work before",
        arguments: DescriptorBackend.available)
    func shutdownEnds(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-shutdown", backend: backend)
        let pipe = TestPipe()
        final class Token: Sendable {}
        var token: Token? = Token()
        let weakToken = OneShotWeak(token!)
        try loop.watch(pipe.readEnd, for: .readable) { [token] _ in _ = token }
        try loop.schedule(after: .seconds(3600)) { [token] in _ = token }
        token = nil
        #expect(weakToken.object != nil, "the handlers keep what they captured while the loop runs")
        #expect(try await loop.run { loop.isCurrent })
        let viaScheduler = AtomicCell<Bool>(false)
        try loop.scheduler.post { viaScheduler.store(loop.isCurrent, ordering: .releasing) }
        _ = try await loop.run { 0 }
        #expect(viaScheduler.load(ordering: .acquiring))
        await loop.shutdown()
        #expect(weakToken.object == nil, "shutdown released the handlers")
        #expect(throws: OffloadError.shutDown) { try loop.watch(pipe.writeEnd, for: .writable) { _ in } }
        #expect(throws: OffloadError.shutDown) { try loop.schedule(after: .zero) {} }
        #expect(fcntl(pipe.readEnd, F_GETFD) != -1, "shutdown leaves the SDK's descriptors open")
        pipe.closeAll()
    }

    @Test("watching a descriptor twice stops with a message that says what to do")
    func doubleWatchStops() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let loop = try SDKLoop(name: "fd-twice")
            let pipe = TestPipe()
            try loop.watch(pipe.readEnd, for: .readable) { _ in }
            try loop.watch(pipe.readEnd, for: .readable) { _ in }
        }
    }

    @Test("watching on a loop that runs the SDK's own loop stops with a message that says what to do")
    func driverLoopCannotWatch() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let loop = try SDKLoop(
                name: "driven", driver: .iterating(runOnce: { usleep(1_000) }, wake: {}))
            try loop.watch(0, for: .readable) { _ in }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("Create it with SDKLoop(name:) to watch descriptors and timers"))
    }

    @Test(
        "500 descriptors watched at once: each ready one reaches its own handler, once per write",
        arguments: DescriptorBackend.available)
    func manyDescriptors(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-many", backend: backend)
        let pipes = (0..<250).map { _ in TestPipe() }  // 250 pipes, both ends watched
        let reads = (0..<pipes.count).map { _ in AtomicCell<Int>(0) }
        for (index, pipe) in pipes.enumerated() {
            try loop.watch(pipe.readEnd, for: .readable) { _ in reads[index].add(pipe.drain(), ordering: .relaxed) }
            try loop.watch(pipe.writeEnd, for: []) { _ in }
        }
        for (index, pipe) in pipes.enumerated() where index.isMultiple(of: 7) { pipe.put(2) }
        #expect(
            await eventually {
                pipes.indices.allSatisfy { reads[$0].load(ordering: .acquiring) == ($0.isMultiple(of: 7) ? 2 : 0) }
            })
        await loop.shutdown()
        for pipe in pipes { pipe.closeAll() }
    }
}
