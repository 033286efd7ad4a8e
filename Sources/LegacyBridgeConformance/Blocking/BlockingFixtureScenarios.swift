import LegacyBridge

/// The blocking-call contract on a real adapter over its SDK, through a ``BlockingFixture``: the
/// blocking SDK call never occupies the cooperative pool, and a cancelled caller is let go at once
/// while its call is interrupted. Verdicts about the pool are taken on threads of the suite's own,
/// never in a task. Every scenario ends with the checks of ``FixtureContext/finalCheck()``.
enum BlockingFixtureScenarios<Value: Sendable> {
    typealias Fixture = BlockingFixture<Value>

    static var all: [FixtureScenario<Fixture>] {
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

    static var value: FixtureScenario<Fixture> {
        FixtureScenario(
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

    static var error: FixtureScenario<Fixture> {
        FixtureScenario(
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

    static var cancelInterrupts: FixtureScenario<Fixture> {
        FixtureScenario(
            name: "blocking-cancel-interrupts",
            summary:
                "the caller is cancelled while its SDK call blocks: CancellationError promptly (a third of the patience), the SDK call interrupted once and returned"
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
            let interrupted = await eventually {
                let snapshot = recorder.snapshot
                return snapshot.bodiesEnded > 0 || (counts && context.liveAboveBaseline == false)
            }
            guard interrupted else {
                let snapshot = recorder.snapshot
                return .fail(
                    "the caller was let go, but its blocked SDK call was never interrupted\(snapshot.interrupts > 0 ? " (the interrupt was called and did not end it)" : ""): it holds a thread for its whole duration. Interrupt it from the cancel (OffloadPool.run(cancel:))"
                )
            }
            return .pass
        }
    }

    static var leavesPoolFree: FixtureScenario<Fixture> {
        FixtureScenario(
            name: "blocking-leaves-pool-free",
            summary:
                "with 2 × cores + 2 blocking calls in flight, an unrelated task still starts promptly (a third of the patience)"
        ) { fixture, context in
            guard let blocking = fixture.blocking else {
                return .notChecked("the fixture gives no blocking call to fill the pool with")
            }
            context.releaseAtEnd(blocking.release)
            let promptly = context.patience / 3
            let cores = activeProcessorCount()
            let count = 2 * cores + 2
            let recorders = (0..<count).map { _ in recorder(context) }
            // On the cooperative pool, as application code calls the adapter.
            let calls = recorders.map { recorder in
                let probe = recorder.probe
                return Task { () -> Result<Value, any Error> in
                    do { return .success(try await blocking.start(probe)) } catch { return .failure(error) }
                }
            }
            let verdict = FirstResultLatch<Bool>()
            onDedicatedThread("conformance verdict") {
                _ = waitOnThisThread(upTo: promptly / 2) {
                    recorders.filter { $0.snapshot.bodiesBegun > 0 }.count >= min(count, cores + 1)
                }
                let started = LockedBox(false)
                let unrelated = Task { started.withLock { $0 = true } }
                let startedPromptly = waitOnThisThread(upTo: promptly) { started.withLock { $0 } }
                _ = unrelated
                blocking.release()
                verdict.offer(startedPromptly)
            }
            let startedPromptly = await verdict.value()
            var ended = 0
            let clock = ContinuousClock()
            let deadline = clock.now + context.patience / 2
            for call in calls {
                blocking.release()
                if await LegacyBridgeConformance.value(of: call, within: max(.milliseconds(1), deadline - clock.now))
                    != nil
                {
                    ended += 1
                }
            }
            guard startedPromptly else {
                return .fail(
                    "an unrelated task did not start within \(milliseconds(promptly)) while \(count) blocking calls were in flight (\(cores) cores): the adapter makes the blocking SDK call on cooperative threads. Run it on threads of its own (OffloadPool)"
                )
            }
            guard ended == count else {
                return .fail("only \(ended) of \(count) blocking calls returned after they were released")
            }
            return .pass
        }
    }

    static var threadAffinity: FixtureScenario<Fixture> {
        FixtureScenario(
            name: "blocking-thread-affinity",
            summary: "an SDK that must be called on its own thread: the blocking call ran there"
        ) { fixture, context in
            guard case .sdkThread = context.threading.kind else {
                return .notChecked("the fixture declares threading .anyThread: its SDK may be called from any thread")
            }
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            guard context.threading.knowsSDKThread || fixture.offThreadCalls != nil else {
                return .notChecked(
                    "the scheduler given to .sdkThread was made without isCurrent and the fixture counts no offThreadCalls"
                )
            }
            let recorder = recorder(context)
            _ = await LegacyBridgeConformance.value(of: launch(succeeding, recorder), within: context.patience)
            if recorder.snapshot.bodiesBegun == 0 && fixture.offThreadCalls == nil {
                return .notChecked("the adapter does not pass its SDK call through the probe (probe.body)")
            }
            return .pass
        }
    }
}
