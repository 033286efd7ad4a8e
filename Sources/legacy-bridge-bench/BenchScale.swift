import Foundation
import LegacyBridge
import ToolSupport

// `bench --only scale`: the library at tens of thousands of operations, through its public API.
//
// - Concurrent timeouts: N calls to `withCallback(timeout:)` on an SDK that never answers, against
//   N `Task.sleep`s of the same length, wall time until every caller is back.
// - One `cancelAll()` over N pending `withCallback` calls whose SDK cancel blocks 20 ms: how long
//   until every caller is back, and until every cancel has run.
// - N `CallbackStream`s whose cancel blocks 20 ms, cancelled at once: the same two times.
// - The library's job threads (named "lbridge-job") counted from /proc every few milliseconds
//   through all of the above: the peak must stay within `BridgeThreads.limit`.
// - Memory per pending call with N suspended at once (fresh child processes, as `memory` does).

/// Figures of the `scale` section.
struct BenchScaleReport: Encodable {
    var timeoutCalls = 0
    var timeoutMilliseconds = 0
    /// Wall time until every `withCallback(timeout:)` caller had its `BridgeTimeoutError`.
    var timeoutsMs = 0.0
    /// The same number of `Task.sleep`s of the same length.
    var sleepsMs = 0.0
    var cancelAllCalls = 0
    var slowCancelMs = 0
    /// From `cancelAll()` to the last caller back with `CancellationError`.
    var cancelAllCallersBackMs = 0.0
    /// From `cancelAll()` to the last SDK cancel returned.
    var cancelAllHandlesDoneMs = 0.0
    var streams = 0
    /// From cancelling every consumer to the last consumer back.
    var streamConsumersBackMs = 0.0
    /// From cancelling every consumer to the last stream cancel returned.
    var streamCancelsDoneMs = 0.0
    /// Most library job threads alive at once during the section.
    var peakLibraryThreads = 0
    /// Most threads of the whole process at once during the section.
    var peakProcessThreads = 0
    /// The documented bound on library job threads.
    var threadLimit = 0
    var memoryOperations = 0
    var bareBytesPerPending = 0.0
    var bridgeBytesPerPending = 0.0
    var rounds = 0
}

enum BenchScale {
    /// `count` calls to `withCallback(timeout:)` on an operation that never answers; wall time
    /// until every one has thrown `BridgeTimeoutError` (milliseconds).
    static func timeouts(count: Int, timeout: Duration) async -> Double {
        let timedOut = AtomicCounter()
        let start = ContinuousClock.now
        await withDiscardingTaskGroup { group in
            for _ in 0..<count {
                group.addTask {
                    do {
                        _ = try await withCallback(timeout: timeout) { (_: Completion<Int>) in CancelHandle {} }
                    } catch is BridgeTimeoutError {
                        timedOut.increment()
                    } catch {}
                }
            }
        }
        let elapsed = ContinuousClock.now - start
        precondition(timedOut.value == count, "a call did not time out")
        return elapsed.benchNanoseconds / 1e6
    }

    /// `count` tasks sleeping `duration`; wall time until every one is back (milliseconds).
    static func sleeps(count: Int, duration: Duration) async -> Double {
        let start = ContinuousClock.now
        await withDiscardingTaskGroup { group in
            for _ in 0..<count {
                group.addTask { try? await Task.sleep(for: duration) }
            }
        }
        return (ContinuousClock.now - start).benchNanoseconds / 1e6
    }

    /// `count` pending calls whose cancel handle blocks `cancelCost`, cancelled by one
    /// `cancelAll()`: (last caller back, last handle returned), in milliseconds from `cancelAll()`.
    static func cancelAll(count: Int, cancelCost: Duration) async -> (callers: Double, handles: Double) {
        let started = AtomicCounter()
        let handled = AtomicCounter()
        let cancelled = AtomicCounter()
        let micros = UInt32(cancelCost.benchNanoseconds / 1_000)
        let (callers, origin) = await withTaskGroup(of: ContinuousClock.Instant.self) { group in
            for _ in 0..<count {
                group.addTask {
                    do {
                        _ = try await withCallback { (_: Completion<Int>) in
                            started.increment()
                            return CancelHandle {
                                usleep(micros)
                                handled.increment()
                            }
                        }
                    } catch is CancellationError {
                        cancelled.increment()
                    } catch {}
                    return ContinuousClock.now
                }
            }
            while started.value < count { try? await Task.sleep(for: .milliseconds(1)) }
            // Every `start` has run; give the last callers a moment to suspend.
            try? await Task.sleep(for: .milliseconds(20))
            let origin = ContinuousClock.now
            group.cancelAll()
            var last = origin
            for await back in group { last = max(last, back) }
            return ((last - origin).benchNanoseconds / 1e6, origin)
        }
        precondition(cancelled.value == count, "a caller did not throw CancellationError")
        while handled.value < count { try? await Task.sleep(for: .milliseconds(1)) }
        return (callers, (ContinuousClock.now - origin).benchNanoseconds / 1e6)
    }

    /// `count` streams, each read by its own task, whose cancel blocks `cancelCost`; every task is
    /// cancelled at once: (last consumer back, last cancel returned), in milliseconds.
    static func streamCancels(count: Int, cancelCost: Duration) async -> (consumers: Double, cancels: Double) {
        let started = AtomicCounter()
        let cancels = AtomicCounter()
        let micros = UInt32(cancelCost.benchNanoseconds / 1_000)
        let stream = CallbackStream(of: Int.self) { _ in
            started.increment()
            return StreamControl(
                cancel: CancelHandle {
                    usleep(micros)
                    cancels.increment()
                })
        }
        let (consumers, origin) = await withTaskGroup(of: ContinuousClock.Instant.self) { group in
            for _ in 0..<count {
                group.addTask {
                    do {
                        for try await _ in stream {}
                    } catch {}
                    return ContinuousClock.now
                }
            }
            while started.value < count { try? await Task.sleep(for: .milliseconds(1)) }
            try? await Task.sleep(for: .milliseconds(20))
            let origin = ContinuousClock.now
            group.cancelAll()
            var last = origin
            for await back in group { last = max(last, back) }
            return ((last - origin).benchNanoseconds / 1e6, origin)
        }
        while cancels.value < count { try? await Task.sleep(for: .milliseconds(1)) }
        return (consumers, (ContinuousClock.now - origin).benchNanoseconds / 1e6)
    }
}

extension BenchRunner {
    /// The `scale` section.
    func scale(_ report: inout BenchReport) async throws {
        let timeoutCalls = plan.pick(100_000, 10_000, 1_000)
        let cancelCalls = plan.pick(10_000, 1_000, 100)
        let streams = plan.pick(10_000, 1_000, 100)
        let rounds = plan.pick(3, 1, 1)
        let timeout = Duration.milliseconds(200)
        let slowCancel = Duration.milliseconds(20)
        let limit = benchLibraryThreadLimit

        let census = LibraryThreadCensus()
        // Warm-up: the runtime's threads and first heap pages, for both variants.
        _ = await BenchScale.timeouts(count: timeoutCalls / 10, timeout: timeout)
        _ = await BenchScale.sleeps(count: timeoutCalls / 10, duration: timeout)
        var timeouts = BenchSeries()
        var sleeps = BenchSeries()
        for _ in 0..<rounds {
            sleeps.samples.append(await BenchScale.sleeps(count: timeoutCalls, duration: timeout))
            timeouts.samples.append(await BenchScale.timeouts(count: timeoutCalls, timeout: timeout))
        }
        let cancelAll = await BenchScale.cancelAll(count: cancelCalls, cancelCost: slowCancel)
        let streamCancels = await BenchScale.streamCancels(count: streams, cancelCost: slowCancel)
        let peaks = census.stop()
        let (bare, bridge) = try BenchMemory.measure(rounds: rounds, operations: timeoutCalls)

        report.scale = BenchScaleReport(
            timeoutCalls: timeoutCalls, timeoutMilliseconds: 200, timeoutsMs: timeouts.median, sleepsMs: sleeps.median,
            cancelAllCalls: cancelCalls, slowCancelMs: 20, cancelAllCallersBackMs: cancelAll.callers,
            cancelAllHandlesDoneMs: cancelAll.handles, streams: streams,
            streamConsumersBackMs: streamCancels.consumers, streamCancelsDoneMs: streamCancels.cancels,
            peakLibraryThreads: peaks.library, peakProcessThreads: peaks.process, threadLimit: limit,
            memoryOperations: timeoutCalls, bareBytesPerPending: bare.median, bridgeBytesPerPending: bridge.median,
            rounds: rounds)
        let calls = TextLayout.grouped(timeoutCalls)
        report.addTarget(
            "scale: \(calls) concurrent timeouts / as many Task.sleeps", value: benchRatio(timeouts, sleeps),
            atMost: 1.5)
        report.addTarget(
            "scale: peak library threads through the section (bound \(limit))", value: Double(peaks.library),
            atMost: Double(limit))
        report.addTarget(
            "scale: cancelAll over \(TextLayout.grouped(cancelCalls)) calls, 20 ms SDK cancel: last caller back (s)",
            value: cancelAll.callers / 1_000, atMost: 2)
        report.addTarget(
            "scale: memory per pending call at \(calls): withCallback / bare continuation",
            value: benchRatio(bridge, bare), atMost: 1.1)
        report.addInformation(
            "scale: \(TextLayout.grouped(streams)) streams, 20 ms cancel, cancelled at once: last consumer back (s)",
            value: streamCancels.consumers / 1_000)
        report.addInformation("scale: peak threads of the process through the section", value: Double(peaks.process))
        if printsAsItGoes {
            let lines = [
                "scale (\(rounds) rounds; library job threads counted from /proc, bound \(limit))",
                String(
                    format: "  %@ withCallback(timeout: 200 ms), silent SDK: %.0f ms; as many Task.sleep: %.0f ms",
                    calls, timeouts.median, sleeps.median),
                "  cancelAll over \(TextLayout.grouped(cancelCalls)) pending calls, 20 ms SDK cancel: "
                    + String(
                        format: "callers back in %.0f ms, cancels done in %.0f ms", cancelAll.callers,
                        cancelAll.handles),
                "  \(TextLayout.grouped(streams)) streams, 20 ms cancel, cancelled at once: "
                    + String(
                        format: "consumers back in %.0f ms, cancels done in %.0f ms", streamCancels.consumers,
                        streamCancels.cancels),
                "  peak threads: \(peaks.library) library job threads, \(peaks.process) in the process",
                String(
                    format: "  memory per pending call at %@: bare continuation %.0f B, withCallback %.0f B", calls,
                    bare.median, bridge.median),
            ]
            for line in lines { print(line) }
            print("")
            fflush(nil)
        }
    }
}

/// The documented bound on the library's job threads.
let benchLibraryThreadLimit = 64
