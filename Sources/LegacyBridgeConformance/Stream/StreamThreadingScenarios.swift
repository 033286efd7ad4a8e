import Dispatch
import LegacyBridge
import LegacySimulator

/// The stream threading contract, against SDKs that enforce it: control calls on the SDK's own
/// thread, no cancel inside an SDK callback, producer threads never blocked, and a slow cancel that
/// stalls neither the cancelled consumers nor the cooperative pool.
extension StreamScenarios {
    static var threadingScenarios: [Scenario<Adapter, LabContext>] {
        [controlsOnSDKThread, noCancelInsideCallback, producerNotBlocked, consumerNotBlocked, slowCancelLeavesPoolFree]
    }

    /// How long an SDK callback, a cancelled consumer or an unrelated task may take before the
    /// adapter is blamed: a third of the run's patience (1 s with the default 5 s watchdog), so the
    /// verdict comes well inside the watchdog. Generous: each takes microseconds when nothing
    /// blocks it.
    static var promptly: Duration { Patience.bound / 3 }

    static var controlsOnSDKThread: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-thread-affinity",
            summary:
                "a source whose SDK must only be called from its loop thread (it offers post): pause, resume and cancel all reach it there"
        ) { adapter, context in
            let client: SDKClient
            do {
                client = context.lab.adopt(
                    try SDKClient(workerThreads: 2, seed: context.options.seed, loopThread: true, affinity: .loop))
            } catch {
                return .fail("could not create the loop-thread SDK client: \(error)")
            }
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 8
                $0.progressEvery = 0
                $0.streamEnd = .none
                $0.cancelMode = .callbackAsynchronously
            }
            let (source, probe) = context.lab.source(
                behavior, totalBytes: 1 << 30, lowWater: 4, highWater: 16, client: client)
            // Stall after the first event until the source was paused (a forced order), then take
            // events until the source was resumed, then leave: pause, resume and cancel all happen.
            let consumed = await consume(
                adapter, source, probe, afterFirst: { _ = await eventually({ probe.snapshot.paused }) },
                until: { probe.snapshot.resumes >= 1 })
            if consumed.ended {
                return .fail(
                    "the sequence ended after \(consumed.sequences.count) events while the source was running: \(consumed.error.map { "\($0)" } ?? "no error")"
                )
            }
            guard await eventually({ probe.snapshot.released }) else {
                return .fail("after the consumer left, the source was never cancelled")
            }
            let snapshot = probe.snapshot
            let violations = client.counters.affinityViolations
            if violations > 0 || snapshot.foreignControls > 0 {
                return .fail(
                    "the SDK was called \(max(Int(violations), snapshot.foreignControls)) time(s) from a thread other than its loop thread (pause \(snapshot.pauses), resume \(snapshot.resumes), cancel \(snapshot.cancels) calls in all): run every control call through the source's post function (CallbackStream: StreamControl(scheduler: source.controlScheduler, ...))"
                )
            }
            guard snapshot.pauses >= 1, snapshot.resumes >= 1, snapshot.cancels == 1 else {
                return .fail(
                    "expected the source paused, resumed and cancelled once each at least, saw pause \(snapshot.pauses), resume \(snapshot.resumes), cancel \(snapshot.cancels): the scenario proved nothing"
                )
            }
            return .pass
        }
    }

    static var noCancelInsideCallback: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-no-cancel-inside-callback",
            summary:
                "an SDK whose cancel waits for running callbacks: the consumer leaves while a callback runs, and a source ends; no cancel is made inside a callback (it would deadlock)"
        ) { adapter, context in
            let waits = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 64
                $0.progressEvery = 0
                $0.cancelMode = .waits
            }
            let patience = Patience.bound
            let lab = context.lab
            // 1. The SDK holds the callback of event 5 until the consumer has left (after 5
            // events) and the adapter's cancel has begun (or a third of the patience passed): the
            // cancel comes while a callback runs, and must wait for it from outside. The consumer
            // leaves only once event 5's callback runs: left earlier, the cancel could stop the
            // SDK before it delivered event 5, and no callback would run to be cancelled from.
            let left = LabGate()
            let fifthHeld = LabGate()
            let (endless, endlessProbe) = lab.source(
                waits.with { $0.streamEnd = .none }, totalBytes: 1 << 30,
                beforeEvent: { event, probe in
                    guard event.sequence == 5 else { return }
                    fifthHeld.open()
                    _ = left.wait(upTo: patience)
                    _ = waitUntil(within: patience / 3) { probe.snapshot.cancels >= 1 }
                })
            let taken = LockedBox(0)
            let consumed = await consume(
                adapter, endless, endlessProbe, limit: 5,
                until: {
                    guard
                        taken.withLock({
                            $0 += 1; return $0
                        }) == 5
                    else { return false }
                    _ = fifthHeld.wait(upTo: patience)
                    return true
                })
            left.open()
            guard consumed.sequences.count == 5 else {
                return .fail("the consumer received \(consumed.sequences.count) events, expected 5")
            }
            if let problem = await cancelledOutside(endlessProbe, lab, how: "after the consumer left its loop") {
                return .fail(problem)
            }
            // 2. A source that ends by itself: its end is the last callback, and nothing cancels.
            let (finite, finiteProbe) = lab.source(waits, totalBytes: 16 * 64)
            let all = await consume(adapter, finite, finiteProbe)
            guard all.ended, all.error == nil, all.sequences.count == 16 else {
                return .fail(
                    "the finite source's 16 events did not arrive and end cleanly (\(all.sequences.count) events, \(all.error.map { "\($0)" } ?? "no error"))"
                )
            }
            guard await eventually({ finiteProbe.snapshot.released || lab.counters.cancelsInsideCallback > 0 })
            else {
                return .fail("after the stream ended, the source was never released")
            }
            if let problem = insideCallback(lab, how: "when the source ended") { return .fail(problem) }
            return await sourceReleased(finiteProbe, lab, after: "after the stream ended")
        }
    }

    /// The SDK's verdict on cancels made inside its own callbacks, in words, or `nil`.
    static func insideCallback(_ lab: ScenarioLab, how: String) -> String? {
        let counters = lab.counters
        guard counters.cancelsInsideCallback > 0 else { return nil }
        return
            "\(how), the SDK's cancel was called \(counters.cancelsInsideCallback) time(s) from inside one of its own callbacks (\(counters.cancelDeadlocks) deadlocked: this SDK's cancel waits for running callbacks to return): never cancel in the yield path or in code a yield or finish runs (onTermination); cancel from outside the SDK's callbacks"
    }

    /// Waits until the source was cancelled once and released, or a cancel was made inside a
    /// callback; returns what went wrong, or `nil`.
    static func cancelledOutside(_ probe: SourceProbe, _ lab: ScenarioLab, how: String) async -> String? {
        let settled = await eventually { probe.snapshot.released || lab.counters.cancelsInsideCallback > 0 }
        if let problem = insideCallback(lab, how: how) { return problem }
        guard settled else {
            let snapshot = probe.snapshot
            return
                "\(how), the source was never released (cancel called \(snapshot.cancels) times): the consumer's termination must cancel the source"
        }
        if case .fail(let why) = await producerStopped(probe, lab, how: how) { return why }
        return nil
    }

    static var producerNotBlocked: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-producer-not-blocked",
            summary:
                "a fast source and a stalled consumer: every SDK callback returns promptly (1 s with the default watchdog); the producer's thread is never held until the consumer takes an element"
        ) { adapter, context in
            let total = 2_000
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 8
                $0.progressEvery = 0
            }
            let promptly = promptly
            let (source, probe) = context.lab.source(behavior, totalBytes: total * 8)
            let stalled = LockedBox(false)
            // Stall after the first event until the source rests (paused, or everything delivered,
            // and no callback running) or a callback has been held longer than the bound.
            let consumed = await consume(adapter, source, probe, limit: 100) {
                let rested = await eventually({
                    let snapshot = probe.snapshot
                    let resting = (snapshot.paused || snapshot.delivered >= total) && probe.callbacksInFlight == 0
                    return resting || probe.longestCallback > promptly
                })
                stalled.withLock { $0 = rested }
            }
            let longest = probe.longestCallback
            if longest > promptly {
                return .fail(
                    "an SDK callback did not return for \(milliseconds(longest)) while the consumer stalled (bound \(milliseconds(promptly))): the adapter holds the producer's thread until the consumer takes an element; buffer it and pause the source instead"
                )
            }
            guard stalled.withLock({ $0 }) else {
                return .fail("the source never came to rest while the consumer stalled: the scenario proved nothing")
            }
            if consumed.sequences.count != 100 {
                return .fail(
                    "the consumer received \(consumed.sequences.count) events, expected 100: \(consumed.error.map { "\($0)" } ?? "the sequence ended early")"
                )
            }
            return .pass
        }
    }

    static var consumerNotBlocked: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-consumer-not-blocked",
            summary:
                "while the source has not delivered its first event, the consumer's thread runs other work (no wait in start or next)"
        ) { adapter, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .fail("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            let promptly = promptly
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 64
                $0.progressEvery = 0
            }
            // The first event is held on the SDK's thread until a second task on the consumer's
            // thread has run, or the bound passed: a forced order on any load.
            let firstEvent = LabGate()
            let (source, probe) = context.lab.source(
                behavior, totalBytes: 8 * 64,
                beforeEvent: { _, _ in _ = firstEvent.wait(upTo: (promptly + context.lab.patience) * 3) })
            // The consumer's tasks all run on one thread of the suite's own: a wait in start, or in
            // next(), occupies it, and the second task cannot run until the first event came.
            let lane = ScenarioExecutor(label: "conformance consumer", maxThreads: 1)
            let consumer = Task(executorPreference: lane) { await consume(adapter, source, probe) }
            guard await eventually({ probe.snapshot.starts >= 1 }) else {
                firstEvent.open()
                _ = await consumer.value
                return .fail("the adapter did not start the source")
            }
            let pinged = LockedBox(false)
            let ping = Task(executorPreference: lane) { pinged.withLock { $0 = true } }
            let responsive = await eventually(within: promptly) { pinged.withLock { $0 } }
            firstEvent.open()
            let consumed = await consumer.value
            _ = ping
            guard responsive else {
                return .fail(
                    "while the source had not delivered its first event, the consumer's thread ran nothing else for \(milliseconds(promptly)): the adapter blocks the consumer's thread until events come (a semaphore or a lock in start or next). Return from start at once and suspend the consumer in next()"
                )
            }
            if let error = consumed.error { return .fail("the sequence failed: \(error)") }
            if let problem = inOrderWithoutGaps(consumed.sequences, count: 8) { return .fail(problem) }
            return .pass
        }
    }

    static var slowCancelLeavesPoolFree: Scenario<Adapter, LabContext> {
        Scenario(
            name: "stream-slow-cancel-leaves-pool-free",
            summary:
                "cores + 2 consumers of sources whose cancel takes long are cancelled at once: each resumes promptly and an unrelated task starts promptly (1 s with the default watchdog)"
        ) { adapter, context in
            let promptly = promptly
            let count = activeProcessorCount() + 2
            // Every source's cancel blocks its caller until the verdict is in: an SDK whose cancel
            // takes longer than the bound, without making a passing run wait that long.
            let slowCancel = LabGate()
            let behavior = SimulatedBehavior.wellBehaved.with {
                $0.chunkSize = 64
                $0.progressEvery = 0
                $0.intervalMicroseconds = 1_000
                $0.streamEnd = .none
                $0.cancelMode = .silent
            }
            let sources = (0..<count).map { _ in
                context.lab.source(behavior, totalBytes: 1 << 30, cancelTakes: slowCancel)
            }
            let ended = LockedBox(0)
            // Consumers on the cooperative pool, as application code runs them.
            let consumers = sources.map { source, probe in
                Task {
                    _ = await consume(adapter, source, probe)
                    ended.withLock { $0 += 1 }
                }
            }
            guard await eventually({ sources.allSatisfy { $0.1.snapshot.consumed >= 1 } }) else {
                slowCancel.open()
                for consumer in consumers { consumer.cancel() }
                return .fail("not every consumer received an event")
            }
            let verdict = FirstResultLatch<String?>()
            // The verdict is taken on a thread of its own: neither the cooperative pool nor
            // Dispatch's global threads (where a default CallbackStream runs a cancel) can stall it.
            onDedicatedThread("conformance-verdict") {
                // Each task is cancelled from a thread of its own, all at once: a cancellation
                // handler that blocks holds that thread, not the verdict.
                for consumer in consumers { onDedicatedThread("conformance-canceller") { consumer.cancel() } }
                let started = LockedBox(false)
                let unrelated = Task { started.withLock { $0 = true } }
                let startedPromptly = waitOnThisThread(upTo: promptly) { started.withLock { $0 } }
                let resumedPromptly = waitOnThisThread(upTo: promptly) { ended.withLock { $0 } == count }
                let resumed = ended.withLock { $0 }
                slowCancel.open()
                _ = unrelated
                if !startedPromptly {
                    verdict.offer(
                        "an unrelated task did not start within \(milliseconds(promptly)) while \(count) consumers of sources with a slow cancel were being cancelled (\(activeProcessorCount()) cores): the adapter runs the SDK's cancel where it blocks cooperative threads (inside the task's cancellation handler, whose lock the resumed consumer waits on)"
                    )
                } else if !resumedPromptly {
                    verdict.offer(
                        "only \(resumed) of \(count) cancelled consumers resumed within \(milliseconds(promptly)) while their sources' cancel was still running: the adapter makes the SDK's cancel before (or while) it lets the consumer go, e.g. in the task's cancellation handler or onTermination"
                    )
                } else {
                    verdict.offer(nil)
                }
            }
            if let problem = await verdict.value() { return .fail(problem) }
            for consumer in consumers { await consumer.value }
            // The lab's event counter is shared by every source: take it only once all of them were
            // released (the SDK releases a source after its last callback), or a source whose
            // cancel thread is still waking up would count against one that already stopped.
            _ = await eventually({ sources.allSatisfy { $0.1.snapshot.released } })
            for (_, probe) in sources {
                if case .fail(let why) = await producerStopped(
                    probe, context.lab, how: "after the consuming task was cancelled")
                {
                    return .fail(why)
                }
            }
            return .pass
        }
    }
}
