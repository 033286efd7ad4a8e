import LegacyBridge

/// The blocking-call contract on a real adapter over its SDK, through a ``BlockingFixture``: the
/// blocking SDK call never occupies the cooperative pool, and a cancelled caller is let go at once
/// while its call is interrupted. Verdicts about the pool are taken on threads of the suite's own,
/// never in a task. Every scenario ends with the checks of ``FixtureContext/finalCheck()``.
enum BlockingFixtureScenarios<Value: Sendable> {
    typealias Fixture = BlockingFixture<Value>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [value, error, cancelInterrupts, leavesPoolFree, threadAffinity]
    }

    static func recorder(_ context: FixtureContext) -> BlockingRecorder {
        let recorder = BlockingRecorder(threading: context.threading)
        context.watch(recorder)
        return recorder
    }

    /// Runs `call` in a task of the scenario's threads.
    static func launch(
        _ call: @escaping Fixture.Call, _ recorder: BlockingRecorder
    ) -> Task<Result<Value, any Error>, Never> {
        let probe = recorder.probe
        return ScenarioThreads.task {
            do { return .success(try await call(probe)) } catch { return .failure(error) }
        }
    }

    static var value: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "blocking-value",
            summary: "the succeeding call returns its value; the blocking SDK call is made once"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let recorder = recorder(context)
            guard
                let result = await LegacyBridgeConformance.value(
                    of: launch(succeeding, recorder), within: context.patience)
            else {
                return .fail("the succeeding call did not return within \(context.patience)")
            }
            if case .failure(let error) = result {
                return .usageError(
                    "the fixture's succeeding call threw \(type(of: error)): \(error). It cannot succeed here: is the SDK reachable?"
                )
            }
            return .pass
        }
    }

    static var error: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "blocking-error",
            summary: "the failing call throws the SDK's error, never a value"
        ) { fixture, context in
            guard let failing = fixture.failing else { return .notChecked("the fixture gives no failing call") }
            let recorder = recorder(context)
            guard
                let result = await LegacyBridgeConformance.value(
                    of: launch(failing, recorder), within: context.patience)
            else {
                return .fail("the failing call did not return within \(context.patience)")
            }
            switch result {
            case .failure(let error) where error is CancellationError:
                return .fail("the SDK call failed, but the caller got CancellationError: throw the SDK's error")
            case .failure:
                return .pass
            case .success:
                return .usageError(
                    "the fixture's failing call returned a value: it cannot fail (or the adapter turns the SDK's failure into a value)"
                )
            }
        }
    }

    static var cancelInterrupts: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "blocking-cancel-interrupts",
            summary:
                "the caller is cancelled while its SDK call blocks: CancellationError promptly (a third of the patience), the SDK call interrupted once and returned (not checked for an SDK without an interrupt)"
        ) { fixture, context in
            guard let blocking = fixture.blocking else {
                return .notChecked("the fixture gives no blocking call to cancel")
            }
            context.releaseAtEnd(blocking.release)
            let promptly = context.patience / 3
            let recorder = recorder(context)
            let task = launch(blocking.start, recorder)
            let counts = context.common.liveResources != nil
            let entered = await eventually {
                recorder.snapshot.bodiesBegun > 0 || (counts && context.liveAboveBaseline == true)
            }
            guard entered else {
                task.cancel()
                return .notChecked(
                    "the scenario cannot tell when the SDK call blocks: the adapter does not pass it through the probe (probe.body) and the fixture counts no liveResources"
                )
            }
            task.cancel()
            guard let result = await LegacyBridgeConformance.value(of: task, within: promptly) else {
                return .fail(
                    "the cancelled caller was not resumed within \(milliseconds(promptly)) while its SDK call stayed blocked: let the caller go at once (OffloadPool.run does) and interrupt the call"
                )
            }
            guard case .failure(let error) = result, error is CancellationError else {
                if case .success = result {
                    return .usageError("the fixture's blocking call returned a value before it was released")
                }
                return .fail(
                    "the caller's task was cancelled; expected CancellationError, got \(describeOutcome(result))")
            }
            if fixture.requestCancellation == .none {
                // The call runs on until released: what it held must come back then, and the
                // scenario's other checks still apply.
                context.releaseHangs()
                _ = await eventually { recorder.snapshot.bodiesEnded >= recorder.snapshot.bodiesBegun }
                let final = await context.finalCheck()
                guard case .pass = final else { return final }
                return .notChecked(
                    "whether the blocked SDK call is interrupted, because the SDK has no interrupt (the fixture declares requestCancellation .none); the cancelled caller was let go at once"
                )
            }
            // A call the probe saw begin has ended only when the probe sees it end, whatever the
            // SDK's resource count says (a cancel that frees the call's record without interrupting
            // it brings the count back while the call still blocks). The count stands in only for
            // an adapter that does not pass its call through the probe.
            let interrupted = await eventually {
                let snapshot = recorder.snapshot
                if snapshot.bodiesBegun > 0 { return snapshot.bodiesEnded > 0 }
                return counts && context.liveAboveBaseline == false
            }
            guard interrupted else {
                let snapshot = recorder.snapshot
                let counted =
                    snapshot.bodiesBegun > 0 && counts && context.liveAboveBaseline == false
                    ? " (the probe saw it begin and never end, although the SDK's resource count came back)" : ""
                return .fail(
                    "the caller was let go, but its blocked SDK call was never interrupted\(snapshot.interrupts > 0 ? " (the interrupt was called and did not end it)" : "")\(counted): it holds a thread for its whole duration. Interrupt it from the cancel (OffloadPool.run(cancel:))"
                )
            }
            return .pass
        }
    }

    static var leavesPoolFree: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "blocking-leaves-pool-free",
            summary:
                "while its blocking SDK call is in flight, the caller's thread runs other work (a third of the patience)"
        ) { fixture, context in
            guard let blocking = fixture.blocking else {
                return .notChecked("the fixture gives no blocking call to hold the caller with")
            }
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .notChecked("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            context.releaseAtEnd(blocking.release)
            let promptly = context.patience / 3
            let recorder = recorder(context)
            // The caller's tasks all run on one thread of the suite's own: whatever the adapter does
            // to wait for its blocking call in the caller's task, the wait occupies that thread, and
            // a second task on it cannot run until the call is released. A forced order, on any
            // number of cores and any load: the wait below is only a hang bound.
            let lane = ScenarioExecutor(label: "conformance caller", maxThreads: 1)
            let probe = recorder.probe
            let call = Task(executorPreference: lane) { () -> Result<Value, any Error> in
                do { return .success(try await blocking.start(probe)) } catch { return .failure(error) }
            }
            let counts = context.common.liveResources != nil
            let entered = await eventually {
                recorder.snapshot.bodiesBegun > 0 || (counts && context.liveAboveBaseline == true)
            }
            guard entered else {
                blocking.release()
                return .notChecked(
                    "the scenario cannot tell when the SDK call blocks: the adapter does not pass it through the probe (probe.body) and the fixture counts no liveResources"
                )
            }
            let pinged = LockedBox(false)
            let ping = Task(executorPreference: lane) { pinged.withLock { $0 = true } }
            let responsive = await eventually(within: promptly) { pinged.withLock { $0 } }
            let returned = await releaseUntilReturned(blocking.release, [call], within: context.patience / 2)
            _ = ping
            guard responsive else {
                return .fail(
                    "while the blocking SDK call was in flight, the caller's thread ran nothing else for \(milliseconds(promptly)): the adapter makes the blocking call in the caller's task, or blocks that task's thread until the call returns (a semaphore, a lock). On the cooperative pool a few such calls hold every thread. Run the call on threads of its own (OffloadPool) and suspend the caller"
                )
            }
            guard returned == 1 else {
                return .fail("the blocking call did not return after it was released")
            }
            return .pass
        }
    }

    /// Releases the fixture's hanging calls until every one of `calls` has returned, or `bound`
    /// has passed; returns how many returned. `release` lets only the calls started so far return,
    /// so a call that starts blocking later needs another release: one release per call in a fixed
    /// order would leave it blocked.
    static func releaseUntilReturned(
        _ release: @escaping @Sendable () -> Void, _ calls: [Task<Result<Value, any Error>, Never>],
        within bound: Duration
    ) async -> Int {
        let returned = LockedBox(0)
        let watchers = calls.map { call in
            Task {
                _ = await call.value
                returned.withLock { $0 += 1 }
            }
        }
        _ = await eventually(within: bound) {
            release()
            return returned.withLock { $0 } == calls.count
        }
        _ = watchers
        return returned.withLock { $0 }
    }

    static var threadAffinity: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "blocking-thread-affinity",
            summary: "an SDK that must be called on its own thread: the blocking call ran there"
        ) { fixture, context in
            try await context.threadAffinity(
                noCall: "the fixture gives no succeeding call",
                notThroughProbe: "the adapter does not pass its SDK call through the probe (probe.body)"
            ) {
                guard let succeeding = fixture.succeeding else { return [] }
                let recorder = recorder(context)
                _ = await LegacyBridgeConformance.value(of: launch(succeeding, recorder), within: context.patience)
                return [recorder.snapshot.bodiesBegun > 0]
            }
        }
    }
}
