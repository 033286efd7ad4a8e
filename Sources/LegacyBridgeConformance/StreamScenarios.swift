import LegacyBridge
import LegacySimulator

/// The stream contract, one scenario per way real event sources break adapters.
enum StreamScenarios<Adapter: StreamAdapter> {
    static var all: [Scenario<Adapter>] {
        [eventsAfterTerminal, exactlyOneTerminal, consumerCancelStopsProducer, breakStopsProducer, slowConsumerBackpressure, outOfOrderRestored]
    }

    /// What a consumer saw.
    struct Consumed: Sendable {
        var sequences: [UInt64] = []
        var error: (any Error)?
        /// The loop ended by itself (end of sequence or a thrown error), not by `limit`.
        var ended = false
        /// After the end, a further `next()` returned `nil` (as it must) rather than an element or an error.
        var quietAfterEnd = true
    }

    /// Iterates the adapter's sequence, counting every element as consumed on the probe.
    static func consume(
        _ adapter: Adapter, _ source: LegacyEventSource, _ probe: SourceProbe,
        limit: Int = .max, afterFirst: (@Sendable () async -> Void)? = nil
    ) async -> Consumed {
        var consumed = Consumed()
        var iterator = adapter.events(from: source).makeAsyncIterator()
        do {
            while consumed.sequences.count < limit, let event = try await iterator.next() {
                probe.noteConsumed()
                consumed.sequences.append(event.sequence)
                if consumed.sequences.count == 1, let afterFirst { await afterFirst() }
            }
            consumed.ended = consumed.sequences.count < limit
        } catch {
            consumed.error = error
            consumed.ended = true
        }
        if consumed.ended {
            do {
                if try await iterator.next() != nil { consumed.quietAfterEnd = false }
            } catch {
                consumed.quietAfterEnd = false
            }
        }
        return consumed
    }

    static func inOrderWithoutGaps(_ sequences: [UInt64], count: Int) -> String? {
        guard sequences.count == count else {
            return "received \(sequences.count) events, expected \(count)"
        }
        for (index, sequence) in sequences.enumerated() where sequence != UInt64(index) {
            return "event #\(index) had sequence number \(sequence): \(sequence < UInt64(index) ? "out of order or repeated" : "events were lost or reordered")"
        }
        return nil
    }

    static var eventsAfterTerminal: Scenario<Adapter> {
        Scenario(name: "stream-events-after-terminal", summary: "the source sends data and a second end after its end; the sequence ends once, with exactly the events before the end") { adapter, context in
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 1024
                $0.progressEvery = 0
                $0.eventsAfterTerminal = 4
                $0.duplicateTerminal = true
            }
            let (source, probe) = context.lab.source(behavior, totalBytes: 16 * 1024)
            let consumed = await consume(adapter, source, probe)
            guard consumed.ended, consumed.error == nil else {
                return .fail("the sequence did not end cleanly: \(consumed.error.map { "\($0)" } ?? "it did not end")")
            }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 16) { return .fail(problem) }
            guard await eventually({ probe.snapshot.released }) else { return .fail("the source never finished") }
            guard context.lab.counters.streamEventsAfterTerminal > 0 else {
                return .fail("the source sent nothing after its end; the scenario proved nothing")
            }
            return consumed.quietAfterEnd ? .pass : .fail("after the end, next() produced another element or error")
        }
    }

    static var exactlyOneTerminal: Scenario<Adapter> {
        Scenario(name: "stream-exactly-one-terminal", summary: "the source fails and repeats its failure; the consumer sees the error once, then the end") { adapter, context in
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 1024
                $0.progressEvery = 0
                $0.streamEnd = .failure
                $0.duplicateTerminal = true
            }
            let (source, probe) = context.lab.source(behavior, totalBytes: 8 * 1024)
            let consumed = await consume(adapter, source, probe)
            guard let error = consumed.error else {
                return .fail("the source's failure was not delivered (the sequence \(consumed.ended ? "ended normally" : "did not end"))")
            }
            guard (error as? LegacySDKError) == .remote else { return .fail("expected the source's error, got \(error)") }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 8) { return .fail(problem) }
            return consumed.quietAfterEnd ? .pass : .fail("after the error, next() produced another element or error")
        }
    }

    /// A source that runs until cancelled.
    static func endless(_ lab: ScenarioLab) -> (LegacyEventSource, SourceProbe) {
        lab.source(
            SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 64
                $0.progressEvery = 0
                $0.intervalMicroseconds = 50
                $0.streamEnd = .none
                $0.cancelMode = .callbackSynchronously
            },
            totalBytes: 1 << 40)
    }

    static func producerStopped(_ probe: SourceProbe, _ lab: ScenarioLab, how: String) async -> Check {
        guard await eventually({ probe.snapshot.released }) else {
            let snapshot = probe.snapshot
            return .fail("\(how), the source kept running (cancel called \(snapshot.cancels) times, \(snapshot.delivered) events delivered): wire the consumer's termination to the source's cancel")
        }
        let cancels = probe.snapshot.cancels
        guard cancels == 1 else { return .fail("the source's cancel was called \(cancels) times, expected exactly once") }
        let produced = lab.counters.streamEvents
        let later = await eventually(within: .milliseconds(50), { lab.counters.streamEvents != produced })
        return later ? .fail("the source still produced events after it finished") : .pass
    }

    static var consumerCancelStopsProducer: Scenario<Adapter> {
        Scenario(name: "consumer-cancel-stops-producer", summary: "the consuming task is cancelled; the source is cancelled exactly once and stops") { adapter, context in
            let (source, probe) = endless(context.lab)
            let task = Task { await consume(adapter, source, probe) }
            guard await eventually({ probe.snapshot.consumed >= 5 }) else { return .fail("the consumer received fewer than 5 events") }
            cancelFromForeignThread(task)
            _ = await task.value
            return await producerStopped(probe, context.lab, how: "after the consuming task was cancelled")
        }
    }

    static var breakStopsProducer: Scenario<Adapter> {
        Scenario(name: "break-stops-producer", summary: "the consumer leaves its loop with break; the source is cancelled exactly once and stops") { adapter, context in
            let (source, probe) = endless(context.lab)
            let consumed = await consume(adapter, source, probe, limit: 5)
            guard consumed.sequences.count == 5 else { return .fail("the consumer received \(consumed.sequences.count) events, expected 5") }
            return await producerStopped(probe, context.lab, how: "after the consumer left its loop")
        }
    }

    static var slowConsumerBackpressure: Scenario<Adapter> {
        Scenario(name: "slow-consumer-backpressure", summary: "a fast source and a stalled consumer: no event lost, buffered events stay bounded (pause/resume)") { adapter, context in
            let total = 20_000
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 8
                $0.progressEvery = 0
            }
            let (source, probe) = context.lab.source(behavior, totalBytes: total * 8)
            // A pausing adapter may overshoot by what the source produces while its pause is in
            // transit (a deliverer descheduled mid-call; yields never wait); 64 × high-water
            // tells that apart from unbounded buffering, which the stall below forces past any bound.
            let bound = 64 * source.highWater + source.reorderWindow
            let consumed = await consume(adapter, source, probe) {
                // Stall after the first event until the adapter paused the source or buffered more
                // than the bound: a forced order, not a guess about timing.
                _ = await eventually({
                    let snapshot = probe.snapshot
                    return snapshot.paused || snapshot.outstanding > bound
                })
            }
            let snapshot = probe.snapshot
            if snapshot.maxOutstanding > bound {
                return .fail("up to \(snapshot.maxOutstanding) events were buffered for a stalled consumer (bound \(bound)): memory grows without limit; pause the source at the high-water mark")
            }
            if let error = consumed.error { return .fail("the sequence failed: \(error)") }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: total) { return .fail(problem) }
            return .pass
        }
    }

    static var outOfOrderRestored: Scenario<Adapter> {
        Scenario(name: "out-of-order-restored", summary: "events arrive pairwise swapped (1, 0, 3, 2, ...); the consumer gets them in sequence order") { adapter, context in
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 256
                $0.progressEvery = 0
            }
            let (source, probe) = context.lab.source(behavior, totalBytes: 64 * 256, swapPairs: true)
            let consumed = await consume(adapter, source, probe)
            if let error = consumed.error { return .fail("the sequence failed: \(error)") }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 64) {
                return .fail("\(problem) — restore order by sequence number within the source's reorder window")
            }
            return .pass
        }
    }
}
