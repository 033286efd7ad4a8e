// The descriptor loop's contract where a backend could break it, on every backend the platform
// has: ready handlers before due timers however many are ready, posted bursts in batches, a
// cancel that is final when it returns, a number that comes to name a new file, and
// cancel(closingDescriptor: true) after the watch ended. Each test failed on the loop as it was
// before these guarantees (epoll built in), through the public API only.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// A non-blocking, close-on-exec socket pair the test closes itself, end by end.
private func socketPair() -> (Int32, Int32) {
    var ends: [Int32] = [-1, -1]
    let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
    precondition(socketpair(AF_UNIX, type, 0, &ends) == 0)
    return (ends[0], ends[1])
}

private func put(_ descriptor: Int32, _ count: Int = 1) {
    let bytes = [UInt8](repeating: 7, count: count)
    precondition(write(descriptor, bytes, count) == count)
}

/// Reads everything there is; the number of bytes.
private func drain(_ descriptor: Int32) -> Int {
    var total = 0
    var buffer = [UInt8](repeating: 0, count: 256)
    while true {
        let count = read(descriptor, &buffer, buffer.count)
        if count <= 0 { return total }
        total += count
    }
}

/// Makes `number` name the file of `replacement` (closing what it named), as an SDK that closes
/// its socket and opens another under the same number does; `replacement` is closed.
private func replace(_ number: Int32, with replacement: Int32) {
    precondition(dup2(replacement, number) == number)
    _ = fcntl(number, F_SETFD, FD_CLOEXEC)
    _ = close(replacement)
}

/// Whether the peer of `descriptor` was closed: a read sees the end of the stream, or a reset
/// when the peer closed with bytes it had not read.
private func peerClosed(_ descriptor: Int32) -> Bool {
    var byte: UInt8 = 0
    let count = read(descriptor, &byte, 1)
    return count == 0 || (count < 0 && errno == ECONNRESET)
}

@Suite("SDKLoop's descriptor contract on every backend")
struct DescriptorLoopContractTests {
    @Test(
        "every ready descriptor's handler runs before the timers that fell due, however many are ready",
        arguments: DescriptorBackend.available)
    func readyHandlersBeforeDueTimers(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-order", backend: backend)
        let pairs = (0..<150).map { _ in socketPair() }
        let handled = AtomicCell<Int>(0)
        for (readEnd, _) in pairs {
            try loop.watch(readEnd, for: .readable) { _ in
                if drain(readEnd) > 0 { handled.add(1, ordering: .relaxed) }
            }
        }
        _ = try await loop.run { 0 }  // the watches are part of the wait
        let seenByTimer = AtomicCell<Int>(-1)
        // One posted job makes all of them readable and arms a timer due at once: the next wait
        // sees both, and the timer must come after every handler.
        try await loop.run {
            for (_, writeEnd) in pairs { put(writeEnd) }
            try loop.schedule(after: .zero) {
                seenByTimer.store(handled.load(ordering: .acquiring), ordering: .releasing)
            }
        }
        #expect(await eventually { seenByTimer.load(ordering: .acquiring) >= 0 })
        #expect(seenByTimer.load(ordering: .acquiring) == pairs.count, "handlers left for after the timer")
        await loop.shutdown()
        for (readEnd, writeEnd) in pairs {
            _ = close(readEnd)
            _ = close(writeEnd)
        }
    }

    @Test(
        "a burst of posted jobs is run in batches: ready descriptors and due timers are looked at long before it ends",
        arguments: DescriptorBackend.available)
    func postedBurstDoesNotStarve(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-fair", backend: backend)
        let (readEnd, writeEnd) = socketPair()
        let jobsRun = AtomicCell<Int>(0)
        let handlerSaw = AtomicCell<Int>(-1)
        let timerSaw = AtomicCell<Int>(-1)
        try loop.watch(readEnd, for: .readable) { _ in
            _ = drain(readEnd)
            if handlerSaw.load(ordering: .acquiring) < 0 {
                handlerSaw.store(jobsRun.load(ordering: .acquiring), ordering: .releasing)
            }
        }
        _ = try await loop.run { 0 }
        let burst = 2_000
        // The whole burst is queued while the loop is held, so it is queued at once when the loop
        // next takes jobs. Its first job makes the descriptor readable and arms a zero-delay timer:
        // both are ready while the other jobs of the burst still wait, and the loop must look at
        // them before it has run the burst to its end.
        let gate = try holdLoop(loop)
        try loop.post {
            put(writeEnd)
            _ = try? loop.schedule(after: .zero) {
                timerSaw.store(jobsRun.load(ordering: .acquiring), ordering: .releasing)
            }
            jobsRun.add(1, ordering: .relaxed)
        }
        for _ in 1..<burst { try loop.post { jobsRun.add(1, ordering: .relaxed) } }
        gate.signal()
        _ = try await loop.run { 0 }
        #expect(jobsRun.load(ordering: .acquiring) == burst)
        let handler = handlerSaw.load(ordering: .acquiring)
        let timer = timerSaw.load(ordering: .acquiring)
        #expect(handler >= 0 && handler < burst / 2, "the handler ran after \(handler) of \(burst) jobs")
        #expect(timer >= 0 && timer < burst / 2, "the timer ran after \(timer) of \(burst) jobs")
        await loop.shutdown()
        _ = close(readEnd)
        _ = close(writeEnd)
    }

    @Test(
        "after cancel() returns on another thread, closing the descriptor is safe even while a duplicate keeps its file readable",
        arguments: DescriptorBackend.available)
    func cancelIsFinal(backend: DescriptorBackend) async throws {
        let iterations = AtomicCell<Int>(0)
        let loop = try SDKLoop(
            name: "fd-final", backend: backend, beforeWait: { iterations.add(1, ordering: .relaxed) })
        let (readEnd, writeEnd) = socketPair()
        let duplicate = dup(readEnd)  // the open file lives on, as in a forked child
        _ = fcntl(duplicate, F_SETFD, FD_CLOEXEC)
        let calls = AtomicCell<Int>(0)
        let watch = try loop.watch(readEnd, for: .readable) { _ in calls.add(1, ordering: .relaxed) }
        _ = try await loop.run { 0 }  // the loop waits on it now
        watch.cancel()  // from this thread
        _ = close(readEnd)
        put(writeEnd)  // the file is readable, through `duplicate` only
        // A window the loop spends idle: a timer some way off. An idle loop goes round a few
        // times (the schedule's wake, the timer); one that a leftover kernel entry keeps waking
        // goes round thousands of times. Only a spinning loop can fail this.
        let before = iterations.load(ordering: .acquiring)
        let counted = AtomicCell<Int>(-1)
        try loop.schedule(after: .milliseconds(200)) {
            counted.store(iterations.load(ordering: .acquiring) - before, ordering: .releasing)
        }
        #expect(await eventually { counted.load(ordering: .acquiring) >= 0 })
        #expect(counted.load(ordering: .acquiring) < 50, "the loop kept waking for a cancelled watch")
        #expect(calls.load(ordering: .acquiring) == 0)
        await loop.shutdown()
        _ = close(duplicate)
        _ = close(writeEnd)
    }

    @Test(
        "a number its handler makes name a new file is heard as the new file (libpq's socket switch)",
        arguments: DescriptorBackend.available)
    func replacedInHandlerIsHeard(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-switch", backend: backend)
        let (number, oldPeer) = socketPair()
        let (fresh, freshPeer) = socketPair()
        let switched = AtomicCell<Bool>(false)
        let freshBytes = AtomicCell<Int>(0)
        let watch = try loop.watch(number, for: .readable) { _ in
            if switched.load(ordering: .acquiring) {
                freshBytes.add(drain(number), ordering: .relaxed)
            } else {
                _ = drain(number)
                replace(number, with: fresh)  // the old file's last descriptor goes
                switched.store(true, ordering: .releasing)
            }
        }
        put(oldPeer)
        #expect(await eventually { switched.load(ordering: .acquiring) })
        put(freshPeer, 3)
        #expect(await eventually { freshBytes.load(ordering: .acquiring) == 3 }, "the new file was not heard")
        #expect(watch.isActive)
        watch.cancel(closingDescriptor: true)
        await loop.shutdown()
        _ = close(oldPeer)
        _ = close(freshPeer)
    }

    @Test(
        "a number a posted job makes name a new file is heard as the new file once the interest is updated",
        arguments: DescriptorBackend.available)
    func replacedInJobIsHeardAfterUpdate(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-switch-job", backend: backend)
        let (number, oldPeer) = socketPair()
        let (fresh, freshPeer) = socketPair()
        let freshBytes = AtomicCell<Int>(0)
        let watch = try loop.watch(number, for: .readable) { _ in freshBytes.add(drain(number), ordering: .relaxed) }
        _ = try await loop.run { 0 }  // the loop waits on the old file
        try await loop.run {
            replace(number, with: fresh)
            watch.update(interest: .readable)  // the same interest: the SDK still wants to read
        }
        put(freshPeer, 3)
        #expect(await eventually { freshBytes.load(ordering: .acquiring) == 3 }, "the new file was not heard")
        watch.cancel(closingDescriptor: true)
        await loop.shutdown()
        _ = close(oldPeer)
        _ = close(freshPeer)
    }

    @Test(
        "cancel(closingDescriptor: true) closes the descriptor of a watch its handler's throw ended",
        arguments: DescriptorBackend.available)
    func closingAfterThrow(backend: DescriptorBackend) async throws {
        let errors = AtomicCell<Int>(0)
        let loop = try SDKLoop(
            name: "fd-close-throw", backend: backend, onHandlerError: { _ in errors.add(1, ordering: .relaxed) })
        let (readEnd, writeEnd) = socketPair()
        let watch = try loop.watch(readEnd, for: .readable) { _ in throw HandlerFailure() }
        put(writeEnd)
        #expect(await eventually { errors.load(ordering: .acquiring) == 1 })
        #expect(!watch.isActive)
        watch.cancel(closingDescriptor: true)
        _ = try await loop.run { 0 }  // the close was posted before this job
        #expect(peerClosed(writeEnd), "the descriptor was left open")
        await loop.shutdown()
        _ = close(writeEnd)
    }

    @Test(
        "cancel(closingDescriptor: true) closes the descriptor of a watch the loop's shutdown ended",
        arguments: DescriptorBackend.available)
    func closingAfterShutdown(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-close-down", backend: backend)
        let (readEnd, writeEnd) = socketPair()
        let watch = try loop.watch(readEnd, for: .readable) { _ in }
        await loop.shutdown()
        #expect(!watch.isActive)
        watch.cancel(closingDescriptor: true)  // the loop has left: closed at once
        #expect(peerClosed(writeEnd), "the descriptor was left open")
        _ = close(writeEnd)
    }

    @Test(
        "10,000 armed timers fire in deadline order on the loop thread, and the cancelled ones never do",
        arguments: DescriptorBackend.available)
    func manyTimers(backend: DescriptorBackend) async throws {
        let loop = try SDKLoop(name: "fd-timers", backend: backend)
        let fired = LockedBox<[Int]>([])
        let count = 10_000
        // Armed while the loop is held: each deadline is later than the one armed before it.
        let gate = try holdLoop(loop)
        var timers: [LoopTimer] = []
        for index in 0..<count {
            timers.append(try loop.schedule(after: .zero) { fired.withLock { $0.append(index) } })
        }
        for index in stride(from: 0, to: count, by: 2) { timers[index].cancel() }
        gate.signal()
        #expect(await eventually { fired.withLock { $0.count } >= count / 2 })
        _ = try await loop.run { 0 }
        let order = fired.withLock { $0.map { $0 } }
        #expect(order == Array(stride(from: 1, to: count, by: 2)))
        #expect(timers.allSatisfy { !$0.isActive })
        await loop.shutdown()
    }
}
