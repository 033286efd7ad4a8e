import LegacyBridge
import LegacySimulator

/// The stream contract, one scenario per way real event sources break adapters.
///
/// Every scenario whose stream ends (normally, with an error, or because the consumer left) also
/// checks that the adapter let go of the source afterwards: the SDK released its context, the
/// source's controls (which hold the SDK handle) were freed, no SDK handle is left outstanding.
enum StreamScenarios<Adapter: StreamAdapter> {
    static var all: [Scenario<Adapter, LabContext>] {
        [
            eventsAfterTerminal, exactlyOneTerminal, consumerCancelStopsProducer, breakStopsProducer,
            slowConsumerBackpressure, outOfOrderRestored, reorderedAcrossWindow, resourcesReleased,
        ] + threadingScenarios
    }

    /// What a consumer saw.
    struct Consumed: Sendable {
        var sequences: [UInt64] = []
        var error: (any Error)?
        /// The loop ended by itself (end of sequence or a thrown error), not by `limit`.
        var ended = false
        /// What one more `next()` after the end did: `nil` when it returned `nil`, as it must.
        var afterEnd: String?
    }

    /// Iterates the adapter's sequence, counting every element as consumed on the probe, until it
    /// ends, `limit` events were taken, or `until` (asked after each event) says to leave.
    static func consume(
        _ adapter: Adapter, _ source: LegacyEventSource, _ probe: SourceProbe,
        limit: Int = .max, afterFirst: (@Sendable () async -> Void)? = nil, until: (@Sendable () -> Bool)? = nil
    ) async -> Consumed {
        var consumed = Consumed()
        var iterator = adapter.events(from: source).makeAsyncIterator()
        var stopped = false
        do {
            while consumed.sequences.count < limit, let event = try await iterator.next() {
                probe.noteConsumed()
                consumed.sequences.append(event.sequence)
                if consumed.sequences.count == 1, let afterFirst { await afterFirst() }
                if let until, until() {
                    stopped = true
                    break
                }
            }
            consumed.ended = consumed.sequences.count < limit && !stopped
        } catch {
            consumed.error = error
            consumed.ended = true
        }
        if consumed.ended {
            do {
                if let event = try await iterator.next() {
                    consumed.afterEnd = "returned another event (sequence \(event.sequence))"
                }
            } catch {
                consumed.afterEnd = "threw again (\(error))"
            }
        }
        return consumed
    }

    static func inOrderWithoutGaps(_ sequences: [UInt64], count: Int) -> String? {
        guard sequences.count == count else {
            return "received \(sequences.count) events, expected \(count)"
        }
        for (index, sequence) in sequences.enumerated() where sequence != UInt64(index) {
            return
                "event #\(index) had sequence number \(sequence): \(sequence < UInt64(index) ? "out of order or repeated" : "events were lost or reordered")"
        }
        return nil
    }

    /// Checks that the adapter let go of the source once its stream is over and the consumer has
    /// dropped the sequence and its iterator.
    static func sourceReleased(_ probe: SourceProbe, _ lab: ScenarioLab, after: String) async -> Check {
        guard await eventually({ probe.snapshot.released }) else {
            return .fail(
                "\(after), the source never finished: the SDK still holds its context (was the source cancelled?)")
        }
        guard await eventually({ probe.controlsFreed != false }) else {
            return .fail(
                "\(after), with the sequence and its iterator gone, the adapter still holds the source's controls and the SDK handle in them (a leak per subscription): something keeps the subscription alive — a reference cycle, or a registry only cleared on cancel"
            )
        }
        guard await eventually({ lab.counters.handlesOutstanding == 0 }) else {
            return .fail("\(after), \(lab.counters.handlesOutstanding) SDK handle(s) were never released")
        }
        let counters = lab.counters
        guard counters.contextsCreated == counters.contextsReleased else {
            return .fail(
                "\(after), SDK contexts created \(counters.contextsCreated), released \(counters.contextsReleased)")
        }
        return .pass
    }

    static var eventsAfterTerminal: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-events-after-end",
            summary:
                "the source sends data and a second end after its end; the sequence ends once, with exactly the events before the end"
        ) { adapter, context in
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
            if let afterEnd = consumed.afterEnd { return .fail("after the end, next() \(afterEnd)") }
            if case .fail(let why) = await sourceReleased(probe, context.lab, after: "after the stream ended") {
                return .fail(why)
            }
            guard context.lab.counters.streamEventsAfterTerminal > 0 else {
                return .fail("the source sent nothing after its end; the scenario proved nothing")
            }
            return .pass
        }
    }

    static var exactlyOneTerminal: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-failure",
            summary:
                "the consumer waits in next() when the source fails, then fails again: the error comes once, then the end"
        ) { adapter, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .fail("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 1024
                $0.progressEvery = 0
                $0.streamEnd = .failure
                $0.duplicateTerminal = true
            }
            // The consumer runs alone on a one-thread executor: when that executor is idle after
            // the consumer took all 8 events, the consumer is parked in next(). The lab holds the
            // source's failure until then, so the failure always reaches a waiting consumer — the
            // order in which AsyncThrowingStream (Swift 6.3.1) throws the error a second time.
            let lane = ScenarioExecutor(label: "conformance consumer", maxThreads: 1)
            let forced = LockedBox<Bool?>(nil)
            let patience = context.lab.patience
            let (source, probe) = context.lab.source(
                behavior, totalBytes: 8 * 1024,
                beforeEnd: { probe in
                    let parked = waitUntil(within: patience) { probe.snapshot.consumed == 8 && lane.isIdle }
                    forced.withLock { $0 = parked }
                })
            let consumed = await Task(executorPreference: lane) { await consume(adapter, source, probe) }.value
            guard let error = consumed.error else {
                return .fail(
                    "the source's failure was not delivered (the sequence \(consumed.ended ? "ended normally" : "did not end"))"
                )
            }
            guard (error as? LegacySDKError) == .remote else {
                return .fail("expected the source's error, got \(error)")
            }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 8) { return .fail(problem) }
            if let afterEnd = consumed.afterEnd {
                return .fail(
                    "after the error (delivered to a consumer waiting in next()), the next call to next() \(afterEnd): the terminal must come once, then nil"
                )
            }
            guard forced.withLock({ $0 }) == true else {
                return .fail(
                    "the consumer did not wait in next() after the 8 events within \(patience); the failure could not be held for a waiting consumer"
                )
            }
            return await sourceReleased(probe, context.lab, after: "after the stream failed")
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
            return .fail(
                "\(how), the source kept running (cancel called \(snapshot.cancels) times, \(snapshot.delivered) events delivered): wire the consumer's termination to the source's cancel"
            )
        }
        let cancels = probe.snapshot.cancels
        guard cancels == 1 else {
            return .fail("the source's cancel was called \(cancels) times, expected exactly once")
        }
        let produced = lab.counters.streamEvents
        let later = await eventually(within: .milliseconds(50), { lab.counters.streamEvents != produced })
        if later { return .fail("the source still produced events after it finished") }
        return await sourceReleased(probe, lab, after: how)
    }

    static var consumerCancelStopsProducer: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-consumer-cancel",
            summary: "the consuming task is cancelled; the source is cancelled exactly once and stops"
        ) { adapter, context in
            let (source, probe) = endless(context.lab)
            let task = ScenarioThreads.task { await consume(adapter, source, probe) }
            guard await eventually({ probe.snapshot.consumed >= 5 }) else {
                return .fail("the consumer received fewer than 5 events")
            }
            cancelFromForeignThread(task)
            _ = await task.value
            return await producerStopped(probe, context.lab, how: "after the consuming task was cancelled")
        }
    }

    static var breakStopsProducer: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-break",
            summary: "the consumer leaves its loop with break; the source is cancelled exactly once and stops"
        ) { adapter, context in
            let (source, probe) = endless(context.lab)
            let consumed = await consume(adapter, source, probe, limit: 5)
            guard consumed.sequences.count == 5 else {
                return .fail("the consumer received \(consumed.sequences.count) events, expected 5")
            }
            return await producerStopped(probe, context.lab, how: "after the consumer left its loop")
        }
    }

    static var slowConsumerBackpressure: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-stalled-consumer",
            summary: "a fast source and a stalled consumer: no event lost, buffered events stay bounded (pause/resume)"
        ) { adapter, context in
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
            let consumed = await consume(
                adapter, source, probe,
                afterFirst: {
                    // Stall after the first event until the adapter paused the source or more than
                    // the bound was handed to it: a forced order, not a guess about timing.
                    probe.setStalled(true)
                    _ = await eventually({
                        let snapshot = probe.snapshot
                        return snapshot.paused || snapshot.outstanding > bound
                    })
                    probe.setStalled(false)
                },
                until: {
                    // A redelivered event decides the verdict: leave at once. An adapter that
                    // restarts the source at each resume has it deliver everything again each
                    // time, a quadratic amount of work that a loaded machine cannot finish
                    // before the watchdog.
                    probe.snapshot.redelivered > 0
                })
            let snapshot = probe.snapshot
            if let error = consumed.error { return .fail("the sequence failed: \(error)") }
            if let problem = observedCause(consumed.sequences, snapshot, total: total) { return .fail(problem) }
            if snapshot.maxOutstanding > bound {
                return .fail(
                    "up to \(snapshot.maxOutstanding) events were buffered for a stalled consumer (bound \(bound)): memory grows without limit; pause the source at the high-water mark"
                )
            }
            return .pass
        }
    }

    /// What went wrong with the events of the slow-consumer scenario, named by what was observed,
    /// or `nil`: duplicates (from the source, or to the consumer) first, then loss, then order.
    /// Each comes first because it would otherwise be counted as something else: a redelivered
    /// event as one more buffered, a lost one as one still buffered.
    static func observedCause(_ sequences: [UInt64], _ snapshot: SourceProbe.Snapshot, total: Int) -> String? {
        if snapshot.redelivered > 0 {
            let starts =
                snapshot.starts > 1 ? ": the adapter started it \(snapshot.starts) times for one iteration" : ""
            return
                "the source delivered \(snapshot.redelivered) events a second time\(starts). Each start delivers everything again (redelivered duplicates, more work and memory for nothing): start the source once per iteration, and pause and resume it instead of restarting it"
        }
        var seen = Set<UInt64>()
        if let repeated = sequences.first(where: { !seen.insert($0).inserted }) {
            return
                "the consumer received \(sequences.count - seen.count) events more than once (first: #\(repeated)), although the source delivered each once: the adapter hands events on twice"
        }
        let received = seen
        guard snapshot.delivered >= total, received.count < total else {
            return inOrderWithoutGaps(sequences, count: total)
        }
        let missing = (0..<UInt64(total)).filter { !received.contains($0) }
        let first = missing.first ?? 0
        let inversion = sequences.indices.dropFirst().first { sequences[$0] < sequences[$0 - 1] }
        if let inversion {
            return
                "\(missing.count) of \(total) events never reached the consumer (first missing: #\(first)), and those that did came out of the order the source delivered them in (#\(sequences[inversion]) after #\(sequences[inversion - 1])): between the SDK's callback and the buffer the adapter hands events on asynchronously (an unstructured Task or a queue hop per event), so they overtake each other and the end overtakes the last of them. Yield inside the SDK's callback"
        }
        let stalled = snapshot.deliveredWhileStalled
        let lostWhileTaking = missing.filter { !(stalled?.contains($0) ?? false) }.count
        if lostWhileTaking == 0 {
            return
                "\(missing.count) of \(total) events never reached the consumer (first missing: #\(first)), although the source delivered them all, each while the consumer was stalled: the adapter dropped events for a stalled consumer (a dropping buffer such as bufferingNewest); pause the source at the high-water mark instead"
        }
        return
            "\(missing.count) of \(total) events never reached the consumer (first missing: #\(first)), although the source delivered them all; \(lostWhileTaking) of them while the consumer was taking events, not stalled: the adapter loses events it received (handed on asynchronously and overtaken by the end, or a buffer that drops even when it is being read)"
    }

    static var outOfOrderRestored: Scenario<Adapter, LabContext> {
        Scenario(
            name: "out-of-order-restored",
            summary: "events arrive pairwise swapped (1, 0, 3, 2, ...); the consumer gets them in sequence order"
        ) { adapter, context in
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 256
                $0.progressEvery = 0
            }
            let (source, probe) = context.lab.source(behavior, totalBytes: 64 * 256, reverseBlocks: 2)
            let consumed = await consume(adapter, source, probe)
            if let error = consumed.error { return .fail("the sequence failed: \(error)") }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 64) {
                return .fail("\(problem) — restore order by sequence number within the source's reorder window")
            }
            return .pass
        }
    }

    static var reorderedAcrossWindow: Scenario<Adapter, LabContext> {
        Scenario(
            name: "reordered-across-window",
            summary:
                "a source declaring a reorder window of 8 delivers each block of 8 events last first; the consumer gets them in sequence order"
        ) { adapter, context in
            let window = 8
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 256
                $0.progressEvery = 0
            }
            let (source, probe) = context.lab.source(behavior, totalBytes: 64 * 256, reverseBlocks: window)
            let consumed = await consume(adapter, source, probe)
            if let error = consumed.error {
                return .fail(
                    "the sequence failed: \(error). The source declares a reorder window of \(source.reorderWindow) and reordered no further: restore order within the window the source declares, not a fixed one"
                )
            }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 64) {
                return .fail(
                    "\(problem). The source declares a reorder window of \(source.reorderWindow) and reordered no further: restore order within the window the source declares, not a fixed one"
                )
            }
            return .pass
        }
    }

    static var resourcesReleased: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-resources-released",
            summary:
                "after a normal end, an error, and a consumer leaving early: the source's handle and context are released"
        ) { adapter, context in
            let finite = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 1024
                $0.progressEvery = 0
            }
            let cases: [(String, () -> (LegacyEventSource, SourceProbe), Int)] = [
                ("after the stream ended normally", { context.lab.source(finite, totalBytes: 8 * 1024) }, .max),
                (
                    "after the stream failed",
                    { context.lab.source(finite.with { $0.streamEnd = .failure }, totalBytes: 8 * 1024) }, .max
                ),
                ("after the consumer left its loop early", { endless(context.lab) }, 3),
            ]
            for (after, makeSource, limit) in cases {
                let (source, probe) = makeSource()
                _ = await consume(adapter, source, probe, limit: limit)
                if case .fail(let why) = await sourceReleased(probe, context.lab, after: after) { return .fail(why) }
            }
            return .pass
        }
    }
}
