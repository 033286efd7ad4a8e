import LegacyBridge
import LegacySimulator

/// The one-shot contract, one scenario per way real SDKs break adapters.
enum OneShotScenarios {
    static let all: [Scenario<any OneShotAdapter, LabContext>] = [
        synchronousCallback,
        singleFailure,
        repeated(
            "repeated-callback-same-outcome", "a second identical success is ignored; the first value is returned",
            [.success, .success], expectSuccess: true),
        repeated(
            "repeated-callback-success-then-error", "success then error: the success wins, the error is ignored",
            [.success, .failure], expectSuccess: true),
        repeated(
            "repeated-callback-error-then-success", "error then success: the error wins, the success is ignored",
            [.failure, .success], expectSuccess: false),
        concurrentCallbacks,
        finishBeforeInstall,
        noCancelAfterCompletion,
        neverCallsBackThenCancel,
        foreignThreadCallback,
        cancelBeforeHandle,
        reentrantCancel,
        lateCallbackAfterCancel,
        timeoutSilentOperation,
        contextReleasedOnce,
        contextUnusedAfterRelease,
        capturesFreed,
        mainActorCaller,
        callerNotBlocked,
        outcomeInCallback,
        burst,
    ]

    static let synchronousCallback = Scenario<any OneShotAdapter, LabContext>(
        name: "synchronous-callback",
        summary: "the callback comes on the caller's thread before start returns; its value is not lost"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.synchronous)
        let result = await launch(adapter, operation).value
        guard case .success(let payload) = result, payload.attempt == 1 else {
            return .fail("expected the value of callback #1, got \(describe(result))")
        }
        return noCancel(probe)
    }

    static let singleFailure = Scenario<any OneShotAdapter, LabContext>(
        name: "failure-throws",
        summary: "the operation fails once, from an SDK thread; the caller gets that error, not a value"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.failing(.remote, message: "conformance: injected failure"))
        let result = await launch(adapter, operation).value
        guard case .failure(let error) = result else {
            return .fail(
                "the SDK reported a failure, but the caller got a \(describe(result)): a failure must reach the caller as a thrown error, never as an empty or default value"
            )
        }
        guard (error as? LegacySDKError) == .remote else {
            return .fail("expected the SDK's own error (LegacySDKError.remote), got \(describe(result))")
        }
        return noCancel(probe)
    }

    static func repeated(
        _ name: String, _ summary: String, _ outcomes: [SimulatedBehavior.Outcome], expectSuccess: Bool
    ) -> Scenario<any OneShotAdapter, LabContext> {
        Scenario(name: name, summary: summary) { adapter, context in
            let behavior = SimulatedBehavior.synchronous.with { $0.outcomes = outcomes }
            let (operation, probe) = context.lab.operation(behavior)
            let result = await launch(adapter, operation).value
            guard await eventually({ probe.snapshot.released }) else {
                return .fail("the SDK never finished the operation")
            }
            let callbacks = probe.snapshot.callbacks
            guard callbacks == outcomes.count else {
                return .fail("the SDK made \(callbacks) callbacks instead of \(outcomes.count)")
            }
            switch (expectSuccess, result) {
            case (true, .success(let payload)) where payload.attempt == 1:
                return noCancel(probe)
            case (false, .failure(let error)) where (error as? LegacySDKError) == .remote:
                return noCancel(probe)
            default:
                return .fail(
                    "the first callback must decide the outcome (\(expectSuccess ? "value #1" : "the SDK's error")); got \(describe(result))"
                )
            }
        }
    }

    static let concurrentCallbacks = Scenario<any OneShotAdapter, LabContext>(
        name: "concurrent-callbacks",
        summary:
            "two callbacks at the same moment on two threads; one value wins, nothing crashes (run under TSan to see races)"
    ) { adapter, context in
        let (operation, scripted) = context.lab.scriptedOperation()
        let task = launch(adapter, operation)
        guard await eventually({ scripted.started }) else { return .fail("the adapter did not start the operation") }
        // Each callback on its own thread, both let go by one barrier: the adapter's callback runs
        // twice at once, with no synchronisation between the two threads but its own.
        scripted.deliver(
            [.success(LegacyPayload(requestID: 1, attempt: 1)), .success(LegacyPayload(requestID: 1, attempt: 2))],
            concurrently: true)
        let result = await task.value
        guard case .success(let payload) = result, (1...2).contains(payload.attempt) else {
            return .fail("expected the value of one of the two callbacks, got \(describe(result))")
        }
        guard await eventually({ scripted.probe.snapshot.released }) else {
            return .fail("the adapter's callback did not return on both threads")
        }
        return noCancel(scripted.probe)
    }

    static let finishBeforeInstall = Scenario<any OneShotAdapter, LabContext>(
        name: "finish-before-install",
        summary: "start is held open until the callback, made on an SDK thread, has returned; its outcome is not lost"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.wellBehaved, holdStartUntilCallbackReturned: true)
        let result = await launch(adapter, operation).value
        // The calling task's outcome decides. A start the adapter posted to a thread of its own is
        // held there, and may report only after the caller has resumed: wait for its report.
        _ = await eventually { probe.snapshot.heldStartSawCallbackReturn != nil }
        guard case .success(let payload) = result, payload.attempt == 1 else {
            return .fail(
                "the outcome arrived and was handled before start returned (before the adapter had a continuation); expected the value of callback #1, got \(describe(result))"
            )
        }
        guard probe.snapshot.heldStartSawCallbackReturn == true else {
            return .fail(
                "while start was held open, the adapter's callback (on an SDK thread) did not return within \(context.lab.patience): it waits for something only start's return provides, blocking the SDK's thread"
            )
        }
        return noCancel(probe)
    }

    static let noCancelAfterCompletion = Scenario<any OneShotAdapter, LabContext>(
        name: "no-cancel-after-completion",
        summary:
            "a success, then a failure, each decided by the SDK before any timeout: the cancel function is never called"
    ) { adapter, context in
        for (behavior, expectSuccess) in [(SimulatedBehavior.wellBehaved, true), (.failing(.remote), false)] {
            let (operation, probe) = context.lab.operation(behavior, timeout: .seconds(600))
            let result = await launch(adapter, operation).value
            switch (expectSuccess, result) {
            case (true, .success), (false, .failure):
                break
            default:
                return .fail(
                    "expected \(expectSuccess ? "the SDK's value" : "the SDK's error"), got \(describe(result))")
            }
            guard await eventually({ probe.snapshot.released }) else {
                return .fail("the SDK never finished the operation")
            }
            if case .fail(let why) = noCancel(probe) { return .fail(why) }
        }
        return .pass
    }

    static let neverCallsBackThenCancel = Scenario<any OneShotAdapter, LabContext>(
        name: "cancel-in-flight",
        summary: "the operation never calls back; cancelling the task ends the wait and cancels the operation once"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.neverCompletes.with { $0.cancelMode = .silent })
        return await cancelAfterStart(adapter, operation, probe)
    }

    static let foreignThreadCallback = Scenario<any OneShotAdapter, LabContext>(
        name: "foreign-thread-callback",
        summary: "the callback comes from a freshly created pthread"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.freshThread)
        let result = await launch(adapter, operation).value
        guard case .success(let payload) = result, payload.attempt == 1 else {
            return .fail("expected the value of callback #1, got \(describe(result))")
        }
        guard context.lab.counters.callbacksFreshThread >= 1 else {
            return .fail("the SDK made no fresh-thread callback; the scenario proved nothing")
        }
        return noCancel(probe)
    }

    static let cancelBeforeHandle = Scenario<any OneShotAdapter, LabContext>(
        name: "cancel-before-handle",
        summary: "the task is cancelled inside start, before the cancel handle exists; the operation is still cancelled"
    ) { adapter, context in
        // The caller's task, held here: a start posted to the SDK's thread runs in no task, so
        // cancelling "the current task" there would cancel nothing.
        let caller = LockedBox<(@Sendable () -> Void)?>(nil)
        let (operation, probe) = context.lab.operation(
            .neverCompletes.with { $0.cancelMode = .silent },
            beforeStart: { caller.withLock { $0 }?() })
        let task = launch(adapter, operation, beforeCall: { cancel in caller.withLock { $0 = cancel } })
        let result = await task.value
        return await expectCancelled(
            result, probe,
            neverCancelled: "a cancellation recorded before the handle arrived must cancel the operation when it does")
    }

    static let reentrantCancel = Scenario<any OneShotAdapter, LabContext>(
        name: "callback-inside-cancel",
        summary:
            "cancel calls the callback synchronously, inside cancel; no deadlock, the outcome stays CancellationError"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.neverCompletes.with { $0.cancelMode = .callbackSynchronously })
        if case .fail(let why) = await cancelAfterStart(adapter, operation, probe) { return .fail(why) }
        guard context.lab.counters.callbacksReentrantCancel == 1 else {
            return .fail("the SDK made no re-entrant callback; the scenario proved nothing")
        }
        return .pass
    }

    static let lateCallbackAfterCancel = Scenario<any OneShotAdapter, LabContext>(
        name: "late-callback-after-cancel",
        summary: "after cancelling, a cancellation callback and then a late success arrive; both are ignored"
    ) { adapter, context in
        let behavior = SimulatedBehavior.neverCompletes.with {
            $0.cancelMode = .callbackAsynchronously
            $0.lateCallbackAfterCancel = true
        }
        let (operation, probe) = context.lab.operation(behavior)
        if case .fail(let why) = await cancelAfterStart(adapter, operation, probe) { return .fail(why) }
        guard probe.snapshot.callbacks == 2 else {
            return .fail(
                "the SDK made \(probe.snapshot.callbacks) callbacks after cancel instead of 2; the scenario proved nothing"
            )
        }
        return .pass
    }

    static let timeoutSilentOperation = Scenario<any OneShotAdapter, LabContext>(
        name: "timeout",
        summary: "the operation never calls back; the caller's timeout ends the wait with an error and cancels it"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(
            .neverCompletes.with { $0.cancelMode = .silent }, timeout: .milliseconds(100))
        let result = await launch(adapter, operation).value
        guard case .failure(let error) = result, !(error is CancellationError) else {
            return .fail("expected a timeout error, got \(describe(result))")
        }
        guard await eventually({ probe.snapshot.released }) else {
            return .fail("the timed-out operation was never cancelled; it would run forever")
        }
        let cancels = probe.snapshot.cancels
        return cancels == 1
            ? .pass : .fail("the operation's cancel function was called \(cancels) times, expected exactly once")
    }

    static let contextReleasedOnce = Scenario<any OneShotAdapter, LabContext>(
        name: "context-released-once",
        summary:
            "three callbacks then the release, and a cancel with a late callback: the context lives until the SDK's release, is released once"
    ) { adapter, context in
        // Completion path: three synchronous callbacks, then the release.
        let behavior = SimulatedBehavior.synchronous.with { $0.outcomes = [.success, .success, .failure] }
        let (operation, probe) = context.lab.operation(behavior)
        _ = await launch(adapter, operation).value
        guard await eventually({ probe.snapshot.released }) else {
            return .fail("the SDK never finished the operation")
        }
        if let problem = probe.contextProblem() { return .fail(problem) }
        // Cancellation path: the cancel's callback comes later from a worker, then a late one, then the release.
        let cancelled = SimulatedBehavior.neverCompletes.with {
            $0.cancelMode = .callbackAsynchronously
            $0.lateCallbackAfterCancel = true
        }
        let (second, secondProbe) = context.lab.operation(cancelled)
        if case .fail(let why) = await cancelAfterStart(adapter, second, secondProbe) { return .fail(why) }
        if let problem = await context.lab.lifetimeProblem() { return .fail(problem) }
        let counters = context.lab.counters
        guard counters.contextsCreated == counters.contextsReleased else {
            return .fail("SDK contexts created \(counters.contextsCreated), released \(counters.contextsReleased)")
        }
        return .pass
    }

    static let contextUnusedAfterRelease = Scenario<any OneShotAdapter, LabContext>(
        name: "context-unused-after-release",
        summary:
            "after the SDK's release nothing uses the C context: under AddressSanitizer the suite frees it there, and a later use (a queue, a Task, a timer) is reported"
    ) { adapter, context in
        // A value from an SDK thread, then the release; a cancelled call whose callback and release
        // come from a worker.
        let (completed, completedProbe) = context.lab.operation(.wellBehaved)
        _ = await launch(adapter, completed).value
        let cancelled = SimulatedBehavior.neverCompletes.with { $0.cancelMode = .callbackAsynchronously }
        let (second, cancelledProbe) = context.lab.operation(cancelled)
        if case .fail(let why) = await cancelAfterStart(adapter, second, cancelledProbe) { return .fail(why) }
        for probe in [completedProbe, cancelledProbe] {
            guard await eventually({ probe.snapshot.released }) else {
                return .fail("\(probe.path), the SDK never finished the operation")
            }
            if let problem = probe.contextProblem() { return .fail(problem) }
        }
        // An adapter that never handed the SDK a context has nothing to use late.
        guard completedProbe.context != nil || cancelledProbe.context != nil else { return .pass }
        guard addressSanitizerIsActive else {
            return .passWithNote(
                "the context's lifetime held; a use of it after the SDK's release is a use of freed memory that only an AddressSanitizer build sees (swift build --sanitize=address)"
            )
        }
        // Under AddressSanitizer the lab gave up its own references at each release (see
        // ContextWatch.release), so the adapter's release freed the context there. Work the adapter
        // left for later (a queue, a Task, a timer) that still reaches the context runs in this
        // window, and AddressSanitizer stops the process with its report, inside this scenario.
        try? await Task.sleep(for: context.lab.patience / 4)
        return .pass
    }

    static let capturesFreed = Scenario<any OneShotAdapter, LabContext>(
        name: "captures-freed",
        summary:
            "after completion and after cancellation, everything the operation captured is freed (no cycle through the handle)"
    ) { adapter, context in
        // Completion path.
        let (first, firstProbe) = context.lab.operation(.wellBehaved)
        _ = await launch(adapter, first).value
        // Cancellation path.
        let (second, secondProbe) = context.lab.operation(
            .neverCompletes.with { $0.cancelMode = .callbackAsynchronously })
        let task = launch(adapter, second)
        guard await eventually({ secondProbe.snapshot.starts == 1 }) else {
            return .fail("the adapter did not start the operation")
        }
        cancelFromForeignThread(task)
        _ = await task.value
        for (path, probe) in [("completed", firstProbe), ("cancelled", secondProbe)] {
            guard await eventually({ probe.snapshot.released }) else {
                return .fail("the \(path) operation was never finished by the SDK")
            }
            if probe.captureFreed != nil {
                guard await eventually({ probe.captureFreed == true }) else {
                    return .fail(
                        "after the \(path) call returned, the operation's captured state is still alive: something (the adapter's gate, its cancel handle) keeps it in a cycle"
                    )
                }
            } else if let watch = probe.context {
                guard await eventually({ watch.adapterHoldsNothing }) else {
                    return .fail(
                        "after the \(path) call returned and the SDK released it, the adapter's context is still alive (\(watch.adapterReferencesLeft) reference(s)): something keeps it in a cycle"
                    )
                }
            }
        }
        guard await eventually({ context.lab.counters.handlesOutstanding == 0 }) else {
            return .fail("\(context.lab.counters.handlesOutstanding) SDK handles were never released")
        }
        return .pass
    }

    static let mainActorCaller = Scenario<any OneShotAdapter, LabContext>(
        name: "main-actor-caller",
        summary:
            "a @MainActor caller: the value arrives there, and start runs where the adapter's threading says (the main actor, or the SDK's thread for .sdkThread)"
    ) { adapter, context in
        let (operation, probe) = context.lab.operation(.wellBehaved, threading: adapter.threading)
        if case .fail(let why) = await MainActorProbe.run(adapter, operation, probe) { return .fail(why) }
        return noCancel(probe)
    }

    static let callerNotBlocked = Scenario<any OneShotAdapter, LabContext>(
        name: "caller-not-blocked",
        summary: "while the operation is pending, the caller's actor runs other work (no semaphore or spin wait)"
    ) { adapter, context in
        guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
            return .fail("this scenario needs task executors (macOS 15, iOS 18 or later)")
        }
        // The caller is an actor whose tasks all run on one thread of their own: whatever the
        // adapter does to wait — on the actor, or on a thread it hops to within this task — a
        // blocking wait occupies that thread, on any number of cores.
        let lane = ScenarioExecutor(label: "conformance caller", maxThreads: 1)
        let caller = CallerActor()
        let (operation, scripted) = context.lab.scriptedOperation()
        let call = Task(executorPreference: lane) { await caller.call(adapter, operation) }
        guard await eventually({ scripted.started }) else { return .fail("the adapter did not start the operation") }
        let pinged = LockedBox(false)
        let ping = Task(executorPreference: lane) {
            await caller.ping()
            pinged.withLock { $0 = true }
        }
        let responsive = await eventually { pinged.withLock { $0 } }
        // Only now does the operation complete (from a thread of the lab's own), whatever happened.
        scripted.deliver([.success(LegacyPayload(requestID: 1, attempt: 1))], concurrently: false)
        let result = await call.value
        await ping.value
        guard responsive else {
            return .fail(
                "while the operation was pending (started, no callback yet), the caller's actor could not run anything for \(context.lab.patience): the adapter blocks the caller's thread until the callback comes (a semaphore, a lock, a spin wait). Suspend instead: a continuation, or withCallback"
            )
        }
        guard case .success(let payload) = result, payload.attempt == 1 else {
            return .fail("expected the value of callback #1, got \(describe(result))")
        }
        return noCancel(scripted.probe)
    }

    static let outcomeInCallback = Scenario<any OneShotAdapter, LabContext>(
        name: "outcome-decided-in-callback",
        summary:
            "the caller waits, the SDK calls back with a value and then an error on one thread: the caller is resumed inside the first callback, not later through another task or queue"
    ) { adapter, context in
        guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
            return .fail("this scenario needs task executors (macOS 15, iOS 18 or later)")
        }
        // The caller's task runs on one thread of the suite's own, which sees on which thread the
        // task is scheduled again. An adapter that decides the outcome in the SDK's callback
        // resumes the waiting caller there, on the SDK's thread, before the callback returns; one
        // that forwards the callback (a Task, a queue, the main actor) resumes it later, from
        // elsewhere, on every run, whatever the load.
        let (operation, scripted) = context.lab.scriptedOperation()
        let resumedInside = LockedBox(false)
        let lane = ScenarioExecutor(label: "conformance caller", maxThreads: 1) {
            if scripted.isInsideCallbackOnThisThread { resumedInside.withLock { $0 = true } }
        }
        let call = Task(executorPreference: lane) { () -> Result<LegacyPayload, any Error> in
            do {
                return .success(try await adapter.value(of: operation, isolation: nil))
            } catch {
                return .failure(error)
            }
        }
        guard await eventually({ scripted.started }) else { return .fail("the adapter did not start the operation") }
        // Only a suspended caller is resumed by an enqueue the lane sees.
        let suspended = await eventually { lane.isIdle }
        scripted.deliver(
            [.success(LegacyPayload(requestID: 1, attempt: 1)), .failure(LegacySDKError.remote)], concurrently: false)
        let result = await call.value
        guard suspended else {
            return .fail(
                "after start returned, the caller's task did not suspend within \(context.lab.patience): it waits on its own thread for the callback (see caller-not-blocked)"
            )
        }
        guard resumedInside.withLock({ $0 }) else {
            return .fail(
                "the SDK's first callback returned and the waiting caller had not been resumed: it was resumed later, from another thread. Whatever carries the outcome from the callback to the continuation (a Task, a dispatch queue, the main actor) loses the order of repeated callbacks and makes the result wait for a thread the caller does not control: complete the continuation (or withCallback's completion) inside the SDK's callback"
            )
        }
        guard case .success(let payload) = result, payload.attempt == 1 else {
            return .fail("the first callback must decide the outcome (value #1); got \(describe(result))")
        }
        return noCancel(scripted.probe)
    }

    static let burst = Scenario<any OneShotAdapter, LabContext>(
        name: "burst-random-cancels",
        summary: "hundreds of chaos operations at once with random cancellations: every call ends, nothing leaks"
    ) { adapter, context in
        let count = max(1, context.options.burstSize)
        var rng = SplitMix64(seed: context.options.seed ^ 0xB0B5)
        var plans: [(SimulatedBehavior, Bool)] = []
        for index in 0..<count {
            plans.append((.chaos(seed: context.options.seed &* 31 &+ UInt64(index)), rng.next() % 3 == 0))
        }
        let finished = await withTaskGroup(of: Bool.self) { group in
            for (behavior, cancel) in plans {
                let (operation, _) = context.lab.operation(behavior, timeout: .seconds(1))
                let task = launch(adapter, operation)
                if cancel { cancelFromForeignThread(task) }
                group.addTask {
                    _ = await task.value; return true
                }
            }
            var finished = 0
            for await done in group where done { finished += 1 }
            return finished
        }
        guard finished == count else { return .fail("only \(finished) of \(count) calls ended") }
        guard
            await eventually({
                let counters = context.lab.counters
                return counters.contextsCreated == counters.contextsReleased && counters.handlesOutstanding == 0
            })
        else {
            let counters = context.lab.counters
            return .fail(
                "after every call ended: SDK contexts created \(counters.contextsCreated), released \(counters.contextsReleased); handles outstanding \(counters.handlesOutstanding)"
            )
        }
        return .pass
    }

    /// Runs the adapter, waits until it started the operation, cancels the calling task from a
    /// foreign thread, and checks the caller got `CancellationError` and the operation was
    /// cancelled exactly once and finished.
    static func cancelAfterStart(
        _ adapter: any OneShotAdapter, _ operation: LegacyOperation, _ probe: OperationProbe
    ) async -> Check {
        let task = launch(adapter, operation)
        guard await eventually({ probe.snapshot.starts == 1 }) else {
            return .fail("the adapter did not start the operation")
        }
        cancelFromForeignThread(task)
        return await expectCancelled(await task.value, probe, neverCancelled: "it would run forever")
    }

    /// Checks the rule "the cancel handle is never called when the completion decided first".
    static func noCancel(_ probe: OperationProbe) -> Check {
        let cancels = probe.snapshot.cancels
        guard cancels == 0 else {
            return .fail(
                "the operation completed by itself, yet the adapter called its cancel function \(cancels) time(s): never cancel an operation whose completion decided the outcome (cancel is not close; on a real SDK it can hit a request that reuses the handle)"
            )
        }
        return .pass
    }

    /// Checks that `result` is `CancellationError` and the operation was cancelled exactly once and finished.
    static func expectCancelled(
        _ result: Result<LegacyPayload, any Error>, _ probe: OperationProbe, neverCancelled: String
    ) async -> Check {
        guard case .failure(let error) = result, error is CancellationError else {
            return .fail("expected CancellationError, got \(describe(result))")
        }
        guard await eventually({ probe.snapshot.released }) else {
            return .fail(
                "the operation was never cancelled (its cancel function was called \(probe.snapshot.cancels) times): \(neverCancelled)"
            )
        }
        let cancels = probe.snapshot.cancels
        return cancels == 1
            ? .pass : .fail("the operation's cancel function was called \(cancels) times, expected exactly once")
    }
}

/// The caller of the caller-not-blocked scenario: an actor that must stay responsive while the
/// adapter waits for its operation.
actor CallerActor {
    func call(_ adapter: any OneShotAdapter, _ operation: LegacyOperation) async -> Result<LegacyPayload, any Error> {
        do {
            return .success(try await adapter.value(of: operation, isolation: self))
        } catch {
            return .failure(error)
        }
    }

    func ping() {}
}

/// Runs the main-actor scenario's body on the main actor.
@MainActor
enum MainActorProbe {
    static func run(_ adapter: any OneShotAdapter, _ operation: LegacyOperation, _ probe: OperationProbe) async -> Check
    {
        guard isOnMainQueue() else {
            return .fail("the main actor is not running on the main queue here; cannot check")
        }
        let result: Result<LegacyPayload, any Error>
        do {
            result = .success(try await adapter.value(of: operation, isolation: MainActor.shared))
        } catch {
            result = .failure(error)
        }
        guard case .success = result else { return .fail("expected a value, got \(describe(result))") }
        guard isOnMainQueue() else { return .fail("the value arrived off the main actor") }
        let spot = probe.snapshot.startSpot
        switch adapter.threading.kind {
        case .anyThread:
            guard spot?.onMainActor == true else {
                return .fail(
                    "start ran off the main actor: the adapter hopped to another executor (take `isolation: isolated (any Actor)? = #isolation` and pass it on). If your SDK must be called on its own thread and start is posted there, declare `var threading: AdapterThreading { .sdkThread(scheduler) }`"
                )
            }
        case .sdkThread:
            if spot?.onSDKThread == false {
                return .fail(
                    "start ran \(spot?.onMainActor == true ? "on the main actor" : "on another thread"), not on the SDK's thread the adapter declares (\(adapter.threading.declared)): post start to the SDK's thread, whoever the caller is"
                )
            }
        }
        return .pass
    }
}
