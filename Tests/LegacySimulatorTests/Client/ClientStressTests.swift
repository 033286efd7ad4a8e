// Bursts of concurrent fetches and downloads over chaos behaviours, with random cancellations
// and timeouts: every call ends, and the SDK ends up with every context and handle released.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

/// How one call of a burst is ended early, if at all.
private struct ClientTestFetchPlan: Sendable {
    var seed: UInt64
    var responseSize: Int
    var timeout: Duration?
    /// Cancel the calling task after this many yields (0: before the call starts).
    var cancelAfterYields: Int?
}

/// Tracks how many calls are inside `fetch` at once.
private final class ClientTestInFlight: Sendable {
    private let current = AtomicCell<Int>(0)
    private let highest = AtomicCell<Int>(0)
    let ended = AtomicCell<Int>(0)

    func enter() {
        let now = current.add(1, ordering: .relaxed).newValue
        var seen = highest.load(ordering: .relaxed)
        while now > seen {
            let (exchanged, original) = highest.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if exchanged { break }
            seen = original
        }
    }

    func leave() { current.subtract(1, ordering: .relaxed) }
    var peak: Int { highest.load(ordering: .relaxed) }
}

@Suite("LegacyClient bursts", .serialized)
struct ClientStressTests {
    @Test(
        "24,000 fetches issued at once, over 10,000 in flight together, over chaos behaviours with random cancellations and timeouts: all end, nothing leaks"
    )
    func fetchBurst() async throws {
        // About a third of chaos calls complete synchronously inside their start and some are
        // cancelled before they start; the rest (over 10,000) are in flight together.
        let count = 24_000
        let client = try LegacyClient(configuration: .init(workerThreads: 4, seed: 7))
        var random = ClientTestRandom(seed: 0xF37C)
        let plans = (0..<count).map { index -> ClientTestFetchPlan in
            var plan = ClientTestFetchPlan(seed: UInt64(index + 1), responseSize: Int(random.next() % 256))
            switch random.next() % 4 {
            case 0: plan.cancelAfterYields = Int(random.next() % 4)
            case 1: plan.timeout = .milliseconds(Int(1 + random.next() % 20))
            case 2:
                plan.cancelAfterYields = Int(random.next() % 4)
                plan.timeout = .milliseconds(Int(1 + random.next() % 20))
            default:
                // Left alone; one that never completes by itself still needs an end.
                if SimulatedBehavior.chaos(seed: plan.seed).outcomes.isEmpty {
                    plan.timeout = .milliseconds(Int(1 + random.next() % 20))
                }
            }
            return plan
        }
        let inFlight = ClientTestInFlight()
        // The whole burst in one bounded call: if a fetch never ended, the test fails instead of
        // hanging. Every call is its own task, all created before any of them runs, so they are
        // all issued before the first result is taken.
        let burst = ClientTestCall { () -> [ClientTestOutcome] in
            let tasks = plans.map { plan in
                let task = Task {
                    inFlight.enter()
                    defer { inFlight.leave() }
                    return try await client.fetch(
                        FetchRequest(path: "/burst", responseSize: plan.responseSize),
                        behavior: .chaos(seed: plan.seed), timeout: plan.timeout)
                }
                if plan.cancelAfterYields == 0 { task.cancel() }  // before the call starts
                return task
            }
            // The other cancellations land at random points while the burst runs.
            for (plan, task) in zip(plans, tasks) {
                guard let yields = plan.cancelAfterYields, yields > 0 else { continue }
                for _ in 0..<yields { await Task.yield() }
                task.cancel()
            }
            var outcomes: [ClientTestOutcome] = []
            outcomes.reserveCapacity(tasks.count)
            for task in tasks {
                outcomes.append(ClientTestOutcome(await task.result))
                inFlight.ended.add(1, ordering: .relaxed)
            }
            return outcomes
        }
        guard let outcomes = try await burst.result(within: Double(3 * testHangBoundSeconds))?.get() else {
            Issue.record("only \(inFlight.ended.load(ordering: .relaxed)) of \(count) fetches ended")
            return
        }
        var kinds: [String: Int] = [:]
        for (plan, outcome) in zip(plans, outcomes) {
            let behavior = SimulatedBehavior.chaos(seed: plan.seed)
            switch outcome {
            case .success(let response):
                kinds["success", default: 0] += 1
                #expect(behavior.outcomes.first == .success, "seed \(plan.seed)")
                #expect(response.attempt == 1, "seed \(plan.seed)")
                #expect(response.body == clientTestContent(requestID: response.requestID, count: plan.responseSize))
            case .sdkError(let status, let message):
                kinds["error", default: 0] += 1
                #expect(behavior.outcomes.first == .failure, "seed \(plan.seed)")
                #expect(status == behavior.errorStatus.rawValue && message == "simulated remote failure")
            case .cancelled:
                kinds["cancelled", default: 0] += 1
                #expect(plan.cancelAfterYields != nil, "seed \(plan.seed): cancelled without a cancel")
            case .timedOut(let timeout):
                kinds["timeout", default: 0] += 1
                #expect(timeout == plan.timeout, "seed \(plan.seed): timed out without a timeout")
            case .other, .hung:
                Issue.record("seed \(plan.seed): \(outcome)")
            }
        }
        #expect(kinds.keys.sorted() == ["cancelled", "error", "success", "timeout"])
        let counters = await clientTestSettledCounters(client, seconds: Double(testHangBoundSeconds))
        #expect(counters.contextsCreated == UInt64(count))
        #expect(counters.contextsReleased == counters.contextsCreated)
        #expect(counters.handlesCreated == UInt64(count))
        #expect(counters.handlesOutstanding == 0)
        #expect(counters.cancels > 0)
        // Every call is issued before any result is taken, so the calls that do not end inside
        // their start are in flight together (about 11,400 here; the runtime runs jobs in order).
        #expect(inFlight.peak >= 10_000)
        print(
            "fetch burst: peak \(inFlight.peak) calls in flight at once; outcomes \(kinds.sorted { $0.key < $1.key })")
    }

    @Test("1,000 concurrent downloads over chaos behaviours with random consumer cancellations: all end, nothing leaks")
    func downloadBurst() async throws {
        let count = 1_000
        let client = try LegacyClient(configuration: .init(workerThreads: 4, seed: 11))
        var random = ClientTestRandom(seed: 0xD0)
        enum Stop: Sendable, Equatable {
            case never
            case breakAfter(Int)
            case cancelAfter(Int)
        }
        struct Plan: Sendable {
            var seed: UInt64
            var totalBytes: Int
            var stop: Stop
        }
        let plans = (0..<count).map { index -> Plan in
            // Whole 16 KiB blocks: every data event is a full chunk of at least 1 KiB (chaos
            // chunks are 1 ... 16 KiB), so its first bytes identify the request.
            let totalBytes = 16_384 * Int(1 + random.next() % 4)
            let stop: Stop
            switch random.next() % 3 {
            case 0: stop = .breakAfter(Int(random.next() % 40))
            case 1: stop = .cancelAfter(Int(random.next() % 40))
            default: stop = .never
            }
            return Plan(seed: UInt64(0xC4A0_5000 + index), totalBytes: totalBytes, stop: stop)
        }
        // Streams that never end by themselves (no terminal event) are ended by a final sweep
        // that cancels their consumers, once every other consumer has ended.
        let mustEndAlone = plans.filter { SimulatedBehavior.chaos(seed: $0.seed).streamEnd != .none }.count
        let endedAlone = AtomicCell<Int>(0)
        let consumers = plans.map { plan in
            ClientTestCall { () -> ClientTestDownloadResult in
                let behavior = SimulatedBehavior.chaos(seed: plan.seed)
                // The request id is only known once data arrives: identify it from the first bytes.
                var stream = client.download(
                    DownloadRequest(path: "/burst", totalBytes: plan.totalBytes), behavior: behavior
                )
                .makeAsyncIterator()
                var check: ClientTestDownloadCheck?
                var events = 0
                var end: ClientTestStreamEnd = .finished
                do {
                    while let event = try await stream.next() {
                        events += 1
                        if check == nil, case .data(let offset, let bytes) = event {
                            let id = (UInt64(1)...UInt64(count)).first { id in
                                bytes.prefix(16).enumerated().allSatisfy {
                                    $0.element == SDK.contentByte(requestID: id, offset: offset + UInt64($0.offset))
                                }
                            }
                            check = ClientTestDownloadCheck(
                                requestID: id ?? 0, totalBytes: UInt64(plan.totalBytes),
                                gapsAllowed: behavior.pauseMode == .drops)
                        }
                        check?.check(event)
                        if case .breakAfter(let limit) = plan.stop, events >= limit {
                            end = .stopped
                            break
                        }
                        if case .cancelAfter(let limit) = plan.stop, events >= limit {
                            withUnsafeCurrentTask { $0?.cancel() }
                        }
                    }
                } catch {
                    end = ClientTestStreamEnd(error)
                }
                if behavior.streamEnd != .none { endedAlone.add(1, ordering: .relaxed) }
                return ClientTestDownloadResult(
                    end: end,
                    check: check ?? ClientTestDownloadCheck(requestID: 0, totalBytes: UInt64(plan.totalBytes)),
                    statistics: stream.statistics, endsOnce: true)
            }
        }
        // Every consumer of a stream that ends by itself ends without help.
        #expect(
            await eventually(within: Double(testHangBoundSeconds)) {
                endedAlone.load(ordering: .relaxed) == mustEndAlone
            })
        for consumer in consumers { consumer.cancel() }
        var ends: [String: Int] = [:]
        for (plan, consumer) in zip(plans, consumers) {
            guard let result = try await consumer.result(within: Double(testHangBoundSeconds))?.get() else {
                Issue.record("seed \(plan.seed): the consumer never ended")
                continue
            }
            let behavior = SimulatedBehavior.chaos(seed: plan.seed)
            #expect(result.problems == [], "seed \(plan.seed)")
            switch result.end {
            case .finished:
                #expect(behavior.streamEnd == .success, "seed \(plan.seed)")
                if behavior.pauseMode == .stops { #expect(result.receivedEverything, "seed \(plan.seed)") }
            case .sdkError(let status, _):
                #expect(behavior.streamEnd == .failure && status == behavior.errorStatus.rawValue, "seed \(plan.seed)")
                if behavior.pauseMode == .stops { #expect(result.receivedEverything, "seed \(plan.seed)") }
            case .stopped:
                #expect(plan.stop != .never, "seed \(plan.seed)")
            case .cancelled:
                // Its own cancel, or the final sweep of a stream that never ends.
                #expect(plan.stop != .never || behavior.streamEnd == .none, "seed \(plan.seed)")
            case .other(let text):
                Issue.record("seed \(plan.seed): \(text)")
            }
            ends[result.end.description.prefix { $0 != "(" }.description, default: 0] += 1
        }
        #expect(ends.keys.sorted() == ["cancelled", "finished", "sdkError", "stopped"])
        let counters = await clientTestSettledCounters(client, seconds: Double(testHangBoundSeconds))
        #expect(counters.contextsReleased == counters.contextsCreated)
        #expect(counters.handlesOutstanding == 0)
        #expect(counters.handlesCreated == counters.contextsCreated)
        #expect(counters.cancels > 0)
        print(
            "download burst: \(counters.contextsCreated) downloads, \(counters.streamEvents) events, \(counters.streamPauses) pauses; ends \(ends.sorted { $0.key < $1.key })"
        )
    }
}
