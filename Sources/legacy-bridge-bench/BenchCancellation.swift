import ToolSupport
import LegacyBridge
import LegacySimulator

// Cancellation latency: a task waits in `withCallback` on an operation that never completes; the
// time from `task.cancel()` to the moment the waiter runs again (it reads the clock right after
// its call threw), one task per sample.

enum BenchCancellation {
    /// Shared between the measuring task and the waiter of one sample.
    final class Probe: Sendable {
        let started = AtomicCell<Bool>(false)
        let handleCalls = AtomicCell<Int>(0)
        let cancellationsSeen = AtomicCell<Int>(0)
    }

    struct Result: Sendable {
        var latencies: [Double]
        /// Samples whose waiter threw CancellationError and whose cancel handle was called.
        var confirmed: Int
    }

    static func measure(samples: Int) async -> Result {
        var latencies: [Double] = []
        latencies.reserveCapacity(samples)
        var confirmed = 0
        for index in 0..<(samples + samples / 10 + 1) {
            let probe = Probe()
            let latency = await sample(probe)
            guard index > samples / 10 else { continue }  // the first tenth warms up
            latencies.append(latency)
            if probe.handleCalls.load(ordering: .relaxed) == 1 && probe.cancellationsSeen.load(ordering: .relaxed) == 1
            {
                confirmed += 1
            }
        }
        return Result(latencies: latencies, confirmed: confirmed)
    }

    /// One sample: start the waiter, let it suspend, cancel, wait for it; nanoseconds.
    static func sample(_ probe: Probe) async -> Double {
        let waiter = Task.detached { () -> ContinuousClock.Instant in
            do {
                _ = try await withCallback { (_: Completion<Int>) in
                    probe.started.store(true, ordering: .releasing)
                    return CancelHandle { probe.handleCalls.add(1, ordering: .relaxed) }
                }
            } catch is CancellationError {
                probe.cancellationsSeen.add(1, ordering: .relaxed)
            } catch {}
            return ContinuousClock.now
        }
        while !probe.started.load(ordering: .acquiring) {
            await Task.yield()
        }
        // `start` has returned or is about to; the waiter installs its handler and continuation
        // right after it, on its own thread. This bound leaves it ample time to be suspended.
        try? await Task.sleep(for: .microseconds(200))
        let cancelled = ContinuousClock.now
        waiter.cancel()
        let resumed = await waiter.value
        // The cancel handle runs on a job thread of the library, possibly after the waiter resumed.
        let bound = ContinuousClock.now + .seconds(10)
        while probe.handleCalls.load(ordering: .relaxed) == 0 && ContinuousClock.now < bound { await Task.yield() }
        return (resumed - cancelled).benchNanoseconds
    }
}
