import ToolSupport
import Foundation
import LegacyBridge
import LegacyBridgeConformance
import LegacySimulator

// Memory per pending operation: N tasks suspended at once, RSS before and while they wait.
// Each measurement runs in a fresh child process (this executable, `--memory-probe`), so
// the heap pages freed by one variant cannot be reused by the next and hide its cost.

enum BenchMemory {
    enum Variant: String, CaseIterable, Sendable {
        /// `withUnsafeContinuation`, the continuation parked in a registry.
        case bare
        /// `withCallback`, its completion parked in a registry (no cancel handle, no timeout).
        case bridge
        /// Idle consumers of one `SharedSubscription` (the `shared` section).
        case shared
        /// Idle consumers of as many `CallbackStream`s (the `shared` section).
        case streams
        /// Idle consumers of the hand-written broadcaster, an `AsyncStream` each (the `shared` section).
        case sharedIdiom
        /// Requests pending in one `PendingRequests` (the `keyed` section).
        case keyed
        /// Requests pending in the hand-written table (the `keyed` section).
        case keyedIdiom
    }

    /// What one probe process reports (one `MEMORY {json}` line).
    struct ProbeResult: Codable, Sendable {
        var variant: String
        var operations: Int
        var baselineBytes: Int
        var suspendedBytes: Int
        var bytesPerPending: Double
        /// Operations that were found parked and then resumed (must equal `operations`).
        var resumed: Int
    }

    static let probeLinePrefix = "MEMORY "

    /// Child mode: a short warm-up (runtime threads, first heap pages), heap trimmed, then the
    /// measured run. Prints the result line.
    static func probe(_ variant: Variant, operations: Int) async -> ProbeResult {
        _ = await suspendAll(variant, count: 256)
        benchTrimHeap()
        let (baseline, suspended, resumed) = await suspendAll(variant, count: operations)
        precondition(resumed == operations, "memory probe: \(resumed) of \(operations) operations resumed")
        return ProbeResult(
            variant: variant.rawValue, operations: operations, baselineBytes: baseline, suspendedBytes: suspended,
            bytesPerPending: Double(suspended - baseline) / Double(operations), resumed: resumed)
    }

    /// Starts `count` child tasks that each suspend in `variant`, waits until every one has parked
    /// its continuation or completion, reads RSS, resumes them all and waits for the group.
    /// Returns RSS before, RSS while suspended, and how many finished with the resumed value.
    ///
    /// Nothing decides an outcome before the drain, so when RSS is read every task is inside its
    /// call: suspended, or (for `withCallback`, at most one per pool thread) between parking its
    /// completion in `start` and installing its continuation right after. Every task returning
    /// the drained value proves each was then released.
    static func suspendAll(_ variant: Variant, count: Int) async -> (Int, Int, Int) {
        switch variant {
        case .shared, .streams:
            return await BenchShared.suspendConsumers(shared: variant == .shared, count: count)
        case .sharedIdiom:
            return await BenchShared.suspendIdiomConsumers(count: count)
        case .keyed:
            let requests = PendingRequests<Int, Int>()
            return await suspendRequests(count: count) {
                (try? await requests.request(id: $0) { _ in }) ?? 0
            } pending: {
                requests.statistics.pending
            } complete: {
                requests.complete($0, with: .success(1))
            }
        case .keyedIdiom:
            let table = HandWrittenRequestTable()
            return await suspendRequests(count: count) {
                (try? await table.request(id: $0) { _ in }) ?? 0
            } pending: {
                table.pending
            } complete: {
                table.complete($0, with: .success(1))
            }
        case .bare:
            let registry = BenchParkedRegistry<UnsafeContinuation<Int, Never>>(capacity: count)
            let baseline = benchResidentBytes()
            return await withTaskGroup(of: Int.self) { group in
                for _ in 0..<count {
                    group.addTask { await withUnsafeContinuation { registry.park($0) } }
                }
                await registry.waitUntilFull()
                let suspended = benchResidentBytes()
                registry.drain { $0.resume(returning: 1) }
                var resumed = 0
                for await value in group { resumed += value }
                return (baseline, suspended, resumed)
            }
        case .bridge:
            let registry = BenchParkedRegistry<Completion<Int>>(capacity: count)
            let baseline = benchResidentBytes()
            return await withTaskGroup(of: Int.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        (try? await withCallback { (completion: Completion<Int>) in
                            registry.park(completion)
                            return nil
                        }) ?? 0
                    }
                }
                await registry.waitUntilFull()
                let suspended = benchResidentBytes()
                registry.drain { $0.succeed(1) }
                var resumed = 0
                for await value in group { resumed += value }
                return (baseline, suspended, resumed)
            }
        }
    }

    /// `count` requests pending in a table at once, each its own task, completed by id after RSS
    /// was read.
    private static func suspendRequests(
        count: Int, request: @escaping @Sendable (Int) async -> Int, pending: () -> Int,
        complete: (Int) -> Bool
    ) async -> (Int, Int, Int) {
        let baseline = benchResidentBytes()
        return await withTaskGroup(of: Int.self) { group in
            for id in 0..<count {
                group.addTask { await request(id) }
            }
            await BenchShared.waitUntil { pending() == count }
            let suspended = benchResidentBytes()
            for id in 0..<count { precondition(complete(id), "memory probe: request \(id) was not pending") }
            var resumed = 0
            for await value in group { resumed += value }
            return (baseline, suspended, resumed)
        }
    }

    /// Parent mode: `rounds` rounds of (bare, bridge), each a fresh child process.
    static func measure(rounds: Int, operations: Int) throws -> (bare: BenchSeries, bridge: BenchSeries) {
        try measure(.bare, against: .bridge, rounds: rounds, operations: operations)
    }

    /// Parent mode: `rounds` rounds of (`first`, `second`), each a fresh child process.
    static func measure(
        _ first: Variant, against second: Variant, rounds: Int, operations: Int
    ) throws -> (BenchSeries, BenchSeries) {
        var firstSeries = BenchSeries()
        var secondSeries = BenchSeries()
        for _ in 0..<rounds {
            firstSeries.samples.append(try runProbe(first, operations: operations).bytesPerPending)
            secondSeries.samples.append(try runProbe(second, operations: operations).bytesPerPending)
        }
        return (firstSeries, secondSeries)
    }

    struct ProbeFailure: Error, CustomStringConvertible {
        var description: String
    }

    static func runProbe(_ variant: Variant, operations: Int) throws -> ProbeResult {
        let child = try runChild(
            executable: currentExecutablePath(),
            arguments: ["--memory-probe", variant.rawValue, "--operations", String(operations)],
            bound: .seconds(300))
        guard !child.timedOut, child.signal == nil, child.exitStatus == 0 else {
            throw ProbeFailure(
                description:
                    "memory probe '\(variant.rawValue)' failed (status \(child.exitStatus ?? -1)\(child.signal != nil ? ", \(child.signalDescription)" : "")\(child.timedOut ? ", timed out" : "")): \(child.firstErrorLines(3))"
            )
        }
        guard let line = child.standardOutput.split(separator: "\n").last(where: { $0.hasPrefix(probeLinePrefix) }),
            let result = try? JSONDecoder().decode(
                ProbeResult.self, from: Data(line.dropFirst(probeLinePrefix.count).utf8))
        else {
            throw ProbeFailure(description: "memory probe '\(variant.rawValue)' printed no result")
        }
        return result
    }
}

/// Where suspended operations park their continuation or completion: a preallocated slot per
/// operation (allocated and touched before the baseline is read).
final class BenchParkedRegistry<Handle: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: each slot is written once, by the task that claimed its index with an
    // atomic increment; the slots are read only after `parked` (incremented with release after
    // each write) was seen, with acquire, to have reached the capacity.
    private let slots: UnsafeMutableBufferPointer<Handle?>
    private let claimed = AtomicCell<Int>(0)
    private let parked = AtomicCell<Int>(0)

    init(capacity: Int) {
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil)
    }

    deinit {
        slots.deinitialize()
        slots.deallocate()
    }

    func park(_ handle: Handle) {
        let index = claimed.wrappingAdd(1, ordering: .relaxed).oldValue
        slots[index] = handle
        parked.add(1, ordering: .releasing)
    }

    /// Polls (every millisecond, an upper bound) until every operation has parked.
    func waitUntilFull() async {
        while parked.load(ordering: .acquiring) < slots.count {
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Hands every parked handle to `body` once.
    func drain(_ body: (Handle) -> Void) {
        for index in slots.indices {
            guard let handle = slots[index].take() else { preconditionFailure("slot \(index) was never parked") }
            body(handle)
        }
    }
}
