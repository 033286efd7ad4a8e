import Foundation
import LegacyBridge

// `--only loop`: the descriptor loop of `SDKLoop(name:)` against the poll loop users write by
// hand for a socket-driven SDK (a pthread, a job queue behind a lock, a self-pipe polled beside
// the SDK's sockets, the poll set rebuilt on each turn).
//
// One round trip: a client thread posts a job; the job writes a byte into a socket pair; the
// loop's watch on the other end becomes readable; its handler reads the byte and signals the
// client thread, which starts the next round. Scaling: the same round trip while 1, 10, 100 or
// 1,000 descriptors are watched (the others never ready: duplicates of an idle socket).

/// Figures of the `loop` section.
struct BenchLoopReport: Encodable {
    var roundTripNs = 0.0
    var idiomRoundTripNs = 0.0
    var roundTrip1000Ns = 0.0
    var idiomRoundTrip1000Ns = 0.0
    /// The library's round trip with 10,000 descriptors watched (no hand-written figure: its
    /// poll set of 10,000 makes a round trip take milliseconds); 0 when the descriptor limit
    /// does not allow it.
    var roundTrip10000Ns = 0.0
    /// The library's round trip with 10,000 timers armed an hour out.
    var roundTripTimersNs = 0.0
    var roundTrips = 0
    var rounds = 0
}

/// The two loops under test, as the benchmark drives them.
protocol BenchDescriptorLoop: Sendable {
    func post(_ job: @escaping @Sendable () -> Void)
    /// Watches `descriptor` for reading; `handler` runs on the loop thread when it is readable.
    func watchReadable(_ descriptor: Int32, _ handler: @escaping @Sendable () -> Void)
    func stop() async
}

/// What users write: a pthread polling a self-pipe and the watched sockets, jobs in a locked
/// array, the poll set rebuilt from the watch list on each turn.
final class HandWrittenPollLoop: BenchDescriptorLoop, @unchecked Sendable {
    // @unchecked Sendable: `jobs` and `stopped` are touched only under `lock`; `watched` only on
    // the loop thread (a watch is added by a posted job).
    private let lock = NSLock()
    private var jobs: [@Sendable () -> Void] = []
    private var stopped = false
    private var watched: [(descriptor: Int32, handler: @Sendable () -> Void)] = []
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)

    init() {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0, "pipe failed")
        for end in ends { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
        (wakeRead, wakeWrite) = (ends[0], ends[1])
        let thread = Thread { [self] in run() }
        thread.start()
    }

    func post(_ job: @escaping @Sendable () -> Void) {
        lock.lock()
        let wasEmpty = jobs.isEmpty
        jobs.append(job)
        lock.unlock()
        if wasEmpty {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    func watchReadable(_ descriptor: Int32, _ handler: @escaping @Sendable () -> Void) {
        post { [self] in watched.append((descriptor, handler)) }
    }

    func stop() async {
        lock.withLock { stopped = true }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        await withCheckedContinuation { continuation in
            Thread { [finished] in
                finished.wait()
                continuation.resume()
            }.start()
        }
        close(wakeRead)
        close(wakeWrite)
    }

    private func run() {
        var descriptors: [pollfd] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            lock.lock()
            let batch = jobs
            jobs = []
            let stop = stopped
            lock.unlock()
            for job in batch { job() }
            if stop { break }
            descriptors.removeAll(keepingCapacity: true)
            descriptors.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            for watch in watched { descriptors.append(pollfd(fd: watch.descriptor, events: Int16(POLLIN), revents: 0)) }
            guard poll(&descriptors, nfds_t(descriptors.count), -1) > 0 else { continue }
            if descriptors[0].revents != 0 { while read(wakeRead, &buffer, buffer.count) > 0 {} }
            for index in 1..<descriptors.count where descriptors[index].revents != 0 { watched[index - 1].handler() }
        }
        finished.signal()
    }
}

/// The library's loop, driven the same way.
struct LibraryDescriptorLoop: BenchDescriptorLoop {
    let loop: SDKLoop

    /// - Parameter idleTimers: Timers armed an hour out, which never fire while the bench runs.
    init(idleTimers: Int = 0) {
        do {
            loop = try SDKLoop(name: "bench-loop")
            for _ in 0..<idleTimers { try loop.schedule(after: .seconds(3600)) {} }
        } catch {
            fatalError("bench: could not start an SDKLoop: \(error)")
        }
    }

    func post(_ job: @escaping @Sendable () -> Void) {
        do { try loop.post(job) } catch { fatalError("bench: the loop refused a job: \(error)") }
    }

    func watchReadable(_ descriptor: Int32, _ handler: @escaping @Sendable () -> Void) {
        do {
            try loop.watch(descriptor, for: .readable) { _ in handler() }
        } catch {
            fatalError("bench: the loop refused a watch: \(error)")
        }
    }

    func stop() async { await loop.shutdown() }
}

enum BenchLoop {
    /// Round trip, library / hand-written, with one descriptor watched.
    static let target = 1.0
    /// Flatness: the library's round trip with 1,000 descriptors watched / with one.
    static let flatTarget = 1.5
    /// How many descriptors are watched in the scaling rows.
    static let watchCounts = [1, 10, 100, 1_000]
    /// The library's last scaling row, and the timers armed in its timer row.
    static let manyWatched = 10_000
    static let manyTimers = 10_000
    /// Flatness with 10,000 descriptors, or with 10,000 timers armed, against one descriptor.
    static let manyTarget = 1.5

    /// Raises this process's descriptor limit to fit `count` more descriptors; whether it fits.
    static func allowDescriptors(_ count: Int) -> Bool {
        var limit = rlimit()
        guard getrlimit(descriptorLimitResource, &limit) == 0 else { return false }
        let needed = rlim_t(count + 256)
        if limit.rlim_cur >= needed { return true }
        guard limit.rlim_max >= needed else { return false }
        limit.rlim_cur = needed
        return setrlimit(descriptorLimitResource, &limit) == 0
    }

    /// Runs `rounds` round trips through a fresh loop of `make()` with `watched` descriptors
    /// watched (one live, the others idle), on a thread of its own; ns per round trip.
    static func roundTrip(
        _ rounds: Int, watched: Int, _ make: @escaping @Sendable () -> any BenchDescriptorLoop
    ) async -> Double {
        let loop = make()
        var pair: [Int32] = [-1, -1]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0, "socketpair failed")
        var idlePair: [Int32] = [-1, -1]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &idlePair) == 0, "socketpair failed")
        let (live, feed) = (pair[0], pair[1])
        let idle = (1..<max(watched, 1)).map { _ in dup(idlePair[0]) }
        precondition(idle.allSatisfy { $0 >= 0 }, "bench: not enough descriptors for \(watched) watches")
        for descriptor in idle { loop.watchReadable(descriptor) {} }
        let arrived = DispatchSemaphore(value: 0)
        loop.watchReadable(live) {
            var byte: UInt8 = 0
            _ = read(live, &byte, 1)
            arrived.signal()
        }
        let ns = await withCheckedContinuation { (continuation: CheckedContinuation<Double, Never>) in
            Thread {
                let send: @Sendable () -> Void = {
                    var byte: UInt8 = 1
                    _ = write(feed, &byte, 1)
                }
                for _ in 0..<min(rounds, 200) {  // warm-up
                    loop.post(send)
                    arrived.wait()
                }
                let start = ContinuousClock.now
                for _ in 0..<rounds {
                    loop.post(send)
                    arrived.wait()
                }
                continuation.resume(returning: (ContinuousClock.now - start).benchNanoseconds / Double(rounds))
            }.start()
        }
        await loop.stop()
        for descriptor in idle + pair + idlePair { close(descriptor) }
        return ns
    }
}

#if canImport(Glibc)
private let descriptorLimitResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
private let descriptorLimitResource = RLIMIT_NOFILE
#endif
