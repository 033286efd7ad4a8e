import LegacyBridge

/// The one-shot contract on a real adapter over its SDK, through a ``OneShotFixture``.
///
/// Each scenario needs some of what a fixture can give (a call that succeeds, fails, hangs or times
/// out; the probe threaded through the adapter; the SDK's resource counts) and is reported as not
/// checked, with the reason, when the fixture does not give it. Every scenario ends with the checks
/// of ``FixtureContext/finalCheck()``: hanging calls released, the SDK's resources back to where
/// they were, no SDK call off its thread, and on each call no second SDK cancel, no cancel after
/// the SDK's own outcome decided, no cancel before the start.
enum OneShotFixtureScenarios<Value: Sendable> {
    typealias Fixture = OneShotFixture<Value>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [
            success, failureThrows, cancelInFlight, cancelBeforeHandle, timeout, lateCallbackAfterCancel,
            duplicateCallback, successThenError, errorThenSuccess, synchronousCallback, foreignThreadCallback,
            callbackInsideCancel, burst, callerNotBlocked, mainActorCaller, threadAffinity, sdkThreadNotHeld,
            loopWatchesReleased,
        ]
    }

    // MARK: - Helpers

    /// A recorder for one call of this scenario, judged when the scenario ends.
    static func recorder(_ context: FixtureContext, _ hostility: CallHostility<Value> = .init()) -> CallRecorder<Value>
    {
        let recorder = CallRecorder(hostility, threading: context.threading)
        context.watch(recorder)
        return recorder
    }

    /// Runs `call` once with a fresh recorder and returns its outcome.
    static func run(
        _ call: @escaping Fixture.Call, _ context: FixtureContext, _ hostility: CallHostility<Value> = .init(),
        on place: CallerPlace = .task
    ) async -> (Result<Value, any Error>, CallRecorder<Value>) {
        let recorder = recorder(context, hostility)
        let launched = launchCall(call, recorder, on: place)
        return (await launched.result, recorder)
    }

    /// The caller's outcome, or `nil` when it did not come within `bound`.
    static func outcome(of call: LaunchedCall<Value>, within bound: Duration) async -> Result<Value, any Error>? {
        await value(of: call.task, within: bound)
    }

    /// A value of the fixture's succeeding call, for scenarios that need the SDK to deliver one it
    /// would not, or what keeps the scenario from running.
    static func sample(_ fixture: Fixture, _ context: FixtureContext, for purpose: String) async -> (Value?, Check?) {
        guard let succeeding = fixture.succeeding else {
            return (nil, .notChecked("the fixture gives no succeeding call, whose value \(purpose) needs"))
        }
        let recorder = recorder(context)
        let call = launchCall(succeeding, recorder)
        switch await outcome(of: call, within: context.patience) {
        case .success(let value)?: return (value, nil)
        case .failure(let error)?: return (nil, unexpectedFailure(error, recorder))
        case nil:
            return (
                nil,
                .fail(
                    "the succeeding call, made to get a value for \(purpose), did not return within \(context.patience): the adapter loses the SDK's outcome, or waits for something that never comes"
                )
            )
        }
    }

    /// The succeeding call failed: the adapter's fault when its SDK reported a value, the
    /// fixture's otherwise.
    static func unexpectedFailure(_ error: any Error, _ recorder: CallRecorder<Value>) -> Check {
        if recorder.snapshot.sdkReportedSuccess, !recorder.snapshot.sdkReportedFailure {
            return .fail(
                "the SDK reported a value, yet the caller got \(describeOutcome(Result<Value, any Error>.failure(error))): the adapter must return the value its SDK delivered"
            )
        }
        return .usageError(
            "the fixture's succeeding call threw \(type(of: error)): \(error). It cannot succeed here: is the SDK, or its test server, reachable?"
        )
    }

    /// Checks that `result` is a value, for calls that must succeed.
    /// Before anything is released: how many of `cancelled` and `evidence` (calls on hanging
    /// requests whose callers were cancelled; `evidence` only once their requests were started)
    /// ended by their cancellation after their SDK request was started, yet never reached the
    /// SDK's cancel; `nil` when none, or when the adapter passes no cancel through the probe
    /// (nothing can be seen; `cancel-in-flight` says so) or a call did not end.
    static func droppedCancels(
        of cancelled: [LaunchedCall<Value>], evidence: [LaunchedCall<Value>], within bound: Duration
    ) async -> Int? {
        let all = cancelled + evidence
        guard !cancelled.isEmpty,
            await eventually(within: bound, { all.allSatisfy { $0.recorder.snapshot.end != nil } })
        else { return nil }
        let due = all.filter { call in
            let snapshot = call.recorder.snapshot
            return snapshot.end == .cancelled && snapshot.startsEnded > 0
        }
        guard !due.isEmpty else { return nil }
        // Whether the adapter passes its SDK cancel through the probe: some cancel was seen.
        _ = await eventually(within: bound) { due.contains { $0.recorder.snapshot.cancels > 0 } }
        guard due.contains(where: { $0.recorder.snapshot.cancels > 0 }) else { return nil }
        _ = await eventually(within: bound) { due.allSatisfy { $0.recorder.snapshot.cancels > 0 } }
        let dropped = due.filter { $0.recorder.snapshot.cancels == 0 }.count
        return dropped > 0 ? dropped : nil
    }

    static func expectValue(
        _ result: Result<Value, any Error>, _ recorder: CallRecorder<Value>, _ fixture: Fixture
    ) -> Check {
        switch result {
        case .success(let value):
            if let wrong = fixture.checkValue?(value) {
                return .fail(
                    "\(wrong): the adapter must return the value its SDK delivered (a payload copied after the callback returned, a wrong field, a handle or a default in its place are other values)"
                )
            }
            return .pass
        case .failure(let error): return unexpectedFailure(error, recorder)
        }
    }

    /// After a failure or a cancel: one more succeeding call must return, with its value, within
    /// the patience. An adapter that leaves something blocked behind (its callback sleeping or
    /// retrying on the SDK's thread, a lock kept) passes the scenario's own checks, and only the
    /// next call shows it. `nil` when it returned (or the fixture gives no succeeding call).
    static func nextCallAnswers(_ fixture: Fixture, _ context: FixtureContext, after what: String) async -> Check? {
        guard let succeeding = fixture.succeeding else { return nil }
        let recorder = recorder(context)
        let call = launchCall(succeeding, recorder)
        guard let result = await outcome(of: call, within: context.patience) else {
            call.task.cancel()
            return .fail(
                "after \(what), the next call did not return within \(context.patience): the adapter left something blocked behind (its callback sleeping, retrying or waiting on the SDK's thread, a lock it kept), and every later call waits behind it"
            )
        }
        if case .fail(let why) = expectValue(result, recorder, fixture) { return .fail("after \(what), \(why)") }
        if case .usageError(let why) = expectValue(result, recorder, fixture) { return .usageError(why) }
        return nil
    }

    /// Whether the adapter passed this call's callback through the probe; the reason to skip otherwise.
    static func wrapsCallback(_ recorder: CallRecorder<Value>, for what: String) -> Check? {
        guard recorder.snapshot.callbacksWrapped == 0 else { return nil }
        return .notChecked(
            "the adapter does not pass its SDK callback through the probe (probe.callback was never called), so \(what) cannot be made"
        )
    }

    /// How the scenario knew the hanging call's SDK request is under way.
    enum Started {
        case byProbe, byResources, unknown
        /// The call ended before it was released.
        case ended
    }

    /// Waits until the hanging call's SDK request is under way: the probe's `start` returned, or
    /// (for an adapter that does not pass its start through the probe) the SDK holds more
    /// resources than when the call was launched. Without either to watch, waits the patience and
    /// returns ``Started/unknown``.
    static func waitStarted(_ call: LaunchedCall<Value>, _ context: FixtureContext, liveAtLaunch: Int?) async -> Started
    {
        let recorder = call.recorder
        let grew: @Sendable () -> Bool = {
            guard let liveAtLaunch, let live = context.live else { return false }
            return live > liveAtLaunch
        }
        _ = await eventually {
            let snapshot = recorder.snapshot
            return snapshot.startsEnded > 0 || snapshot.end != nil || (snapshot.startsBegun == 0 && grew())
        }
        let snapshot = recorder.snapshot
        if snapshot.end != nil { return .ended }
        if snapshot.startsEnded > 0 { return .byProbe }
        if grew() { return .byResources }
        return .unknown
    }

    /// The hanging call returned before it was cancelled or released: the fixture's fault unless
    /// the probe shows the SDK had reported nothing.
    static func returnedEarly(_ result: Result<Value, any Error>, _ recorder: CallRecorder<Value>) -> Check {
        let snapshot = recorder.snapshot
        if snapshot.callbacksWrapped > 0 && snapshot.sdkOutcomes.isEmpty {
            return .fail(
                "the call returned \(describeOutcome(result)) before its SDK request had reported anything (the request was still hanging): the adapter does not wait for the SDK's callback"
            )
        }
        return .usageError(
            "the fixture's hanging call returned \(describeOutcome(result)) before it was released: it cannot hang. Fix the fixture: hold the request (a server that does not answer, a pipe nobody writes to) until release runs"
        )
    }

    /// Launches the fixture's hanging call with `hostility`, waits until its request is under way
    /// and cancels the caller's task from a thread of the suite's own. Returns the caller's outcome,
    /// or the problem.
    static func cancelInFlight(
        _ hanging: Fixture.HangingCall, _ context: FixtureContext, _ hostility: CallHostility<Value> = .init()
    ) async -> (Result<Value, any Error>?, CallRecorder<Value>, Started, Check?) {
        context.releaseAtEnd(hanging.release)
        let recorder = recorder(context, hostility)
        let liveAtLaunch = context.live
        let call = launchCall(hanging.start, recorder)
        let started = await waitStarted(call, context, liveAtLaunch: liveAtLaunch)
        if started == .ended {
            let result = await call.result
            return (result, recorder, started, returnedEarly(result, recorder))
        }
        call.task.cancel()
        guard let result = await outcome(of: call, within: context.patience) else {
            return (
                nil, recorder, started,
                .fail(
                    "the caller was not resumed within \(context.patience) of its task being cancelled, while the SDK request hung: the adapter waits for the SDK instead of letting a cancelled caller go"
                )
            )
        }
        // The SDK reported a value for a request that hangs until released: the fixture cannot
        // hang, whichever of the cancel and that value reached the adapter first.
        if recorder.snapshot.sdkReportedSuccess {
            return (
                result, recorder, started,
                .usageError(
                    "the fixture's hanging call returned a value before it was released: it cannot hang (its SDK request reported a value while the caller was being cancelled). Fix the fixture: hold the request (a server that does not answer, a pipe nobody writes to) until release runs"
                )
            )
        }
        return (result, recorder, started, nil)
    }

    /// Checks that a cancelled caller got `CancellationError`.
    static func expectCancellation(_ result: Result<Value, any Error>, _ recorder: CallRecorder<Value>) -> Check {
        switch result {
        case .failure(let error) where error is CancellationError:
            return .pass
        case .success where recorder.snapshot.sdkOutcomes.isEmpty:
            return .fail(
                "the caller's task was cancelled while the SDK request hung, yet the caller got a value its SDK never delivered"
            )
        case .success:
            return returnedEarly(result, recorder)
        case .failure:
            return .fail(
                "the caller's task was cancelled while the SDK request hung; expected CancellationError, got \(describeOutcome(result)): cancellation decides the outcome, whatever the SDK reports as it stops"
            )
        }
    }

    /// After a caller was cancelled (or timed out) with its SDK request still hanging: the SDK's
    /// request ended without being released (its resources came back), and the SDK's cancel was
    /// made. `nil` when all is well, a note when it could not be seen. One wait, bounded by the
    /// patience: a failing scenario still has time to say why before the watchdog.
    static func sdkStopped(_ recorder: CallRecorder<Value>, _ context: FixtureContext, how: String) async -> Check? {
        let counts = context.common.liveResources != nil
        if context.common.requestCancellation == .none {
            // Nothing comes back before the request ends by itself: end it (its late reply), and
            // then everything it allocated must come back.
            context.releaseHangs()
            guard counts else {
                return .passWithNote(
                    "whether the request's resources came back with its late reply is not checked: the fixture counts no liveResources"
                )
            }
            return await context.resourcesBack(
                after:
                    "\(how), and then the hanging request's late reply (the fixture declares an SDK without a per-request cancel, so what the request allocated must come back with that reply)"
            )
        }
        let baseline = context.liveBaseline ?? 0
        _ = await eventually {
            counts ? (context.live ?? baseline) <= baseline : recorder.snapshot.cancels > 0
        }
        let snapshot = recorder.snapshot
        if counts,
            let problem = await context.resourcesBack(
                after: "\(how), with the hanging request not released", within: .zero)
        {
            guard case .fail(let why) = problem else { return problem }
            if snapshot.cancels == 0 {
                return .fail(
                    "\(why). The adapter never called the SDK's cancel: call it from the adapter's cancel handle, or the request runs on until it completes by itself"
                )
            }
            return .fail("\(why). The SDK's cancel was called, yet what the call allocated was not freed")
        }
        if snapshot.cancels == 0 && !counts {
            return .passWithNote(
                "whether the SDK request was cancelled is not checked: the adapter passes no cancel through the probe and the fixture counts no liveResources"
            )
        }
        return nil
    }

    /// The first problem among `checks`, or the last note, or `.pass`.
    static func all(_ checks: Check?...) -> Check {
        var note: Check = .pass
        for check in checks {
            switch check {
            case .fail?, .notChecked?, .usageError?: return check!
            case .passWithNote?: note = check!
            case .pass?, nil: continue
            }
        }
        return note
    }

    // MARK: - Scenarios

    static var success: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "success",
            summary: "the succeeding call returns its value; no SDK cancel; the SDK's resources come back"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let (result, recorder) = await run(succeeding, context)
            return expectValue(result, recorder, fixture)
        }
    }

    static var failureThrows: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "failure-throws",
            summary: "the failing call throws the SDK's error, never a value; no SDK cancel"
        ) { fixture, context in
            guard let failing = fixture.failing else {
                return .notChecked("the fixture gives no failing call")
            }
            let (result, recorder) = await run(failing, context)
            switch result {
            case .failure(let error) where error is CancellationError && recorder.snapshot.sdkReportedFailure:
                return .fail(
                    "the SDK reported a failure, but the caller got CancellationError: throw the SDK's error")
            case .failure:
                return await nextCallAnswers(fixture, context, after: "the SDK failed a call") ?? .pass
            case .success where recorder.snapshot.sdkReportedFailure:
                return .fail(
                    "the SDK reported a failure, but the caller got a value: a failure must reach the caller as a thrown error, never as an empty or default value"
                )
            case .success:
                return .usageError(
                    "the fixture's failing call returned a value: it cannot fail. Fix the fixture: ask the SDK for something it refuses (a missing file, an unknown host)"
                )
            }
        }
    }

    static var cancelInFlight: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "cancel-in-flight",
            summary:
                "the caller is cancelled while the SDK request hangs: CancellationError at once, the SDK's cancel made once, its resources come back before the request is released"
        ) { fixture, context in
            guard let hanging = fixture.hanging else {
                return .notChecked(
                    "the fixture gives no hanging call, so a cancellation in flight cannot be forced")
            }
            let (result, recorder, started, problem) = await cancelInFlight(hanging, context)
            if let problem { return problem }
            guard let result else { return .fail("the caller was not resumed") }
            if case .fail(let why) = expectCancellation(result, recorder) { return .fail(why) }
            let stopped = await sdkStopped(recorder, context, how: "after the caller was cancelled")
            // A cancel that did nothing leaves the request to answer once it is released: release it
            // now, before the next call, which the SDK answers after it.
            // (An SDK declared without a per-request cancel answers it late by design.)
            let cancelReturned =
                recorder.snapshot.cancelsEnded > 0 && context.common.requestCancellation == .perRequest
            if cancelReturned { context.releaseHangs() }
            if let stuck = await nextCallAnswers(fixture, context, after: "a caller was cancelled") {
                return all(stopped, stuck)
            }
            if cancelReturned && recorder.snapshot.valuesAfterCancelReturned > 0 {
                return all(
                    stopped,
                    .fail(
                        "the SDK delivered a value for the request after the adapter's cancel had returned: the cancel did not stop it (a flag the SDK never reads, a cancel of another handle, an abort value never returned from the SDK's callback). Make the cancel reach the SDK's own cancel for this request"
                    ))
            }
            if started == .unknown {
                return all(
                    stopped,
                    .passWithNote(
                        "cancelled right after the launch: the fixture has neither the probe nor liveResources to tell when the SDK request was under way"
                    ))
            }
            return all(stopped)
        }
    }

    static var cancelBeforeHandle: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "cancel-before-handle",
            summary:
                "the caller's task is cancelled inside the probe's start, before the adapter has its cancel handle: CancellationError, the SDK's cancel made once, after the start"
        ) { fixture, context in
            guard let hanging = fixture.hanging else {
                return .notChecked("the fixture gives no hanging call, whose request the early cancel must stop")
            }
            context.releaseAtEnd(hanging.release)
            let recorder = recorder(context, CallHostility(cancelCallerInStart: true))
            let call = launchCall(hanging.start, recorder)
            // The probe cancels the caller from its start; without the probe nothing does.
            var reachedStart = await eventually {
                recorder.snapshot.startsBegun > 0 || recorder.snapshot.end != nil || context.liveAboveBaseline == true
            }
            // Resources above baseline and no start yet: an adapter that registers its request and
            // then posts its start to the SDK's thread is between the two. Jobs on that thread run
            // in order, so once a job posted now has run, a start posted before it has begun.
            if reachedStart, recorder.snapshot.startsBegun == 0, recorder.snapshot.end == nil {
                reachedStart = await drainSDKThread(fixture.threading)
            }
            if !reachedStart || recorder.snapshot.startsBegun == 0 {
                call.task.cancel()
                _ = await outcome(of: call, within: context.patience)
                return .notChecked(
                    "the adapter does not pass its SDK start through the probe (probe.start was never called), so the caller cannot be cancelled from inside it"
                )
            }
            guard let result = await outcome(of: call, within: context.patience) else {
                return .fail(
                    "the caller's task was cancelled while the adapter was starting the SDK call, and the caller was not resumed within \(context.patience): a cancellation that comes before the adapter has its cancel handle must still end the call"
                )
            }
            if case .fail(let why) = expectCancellation(result, recorder) { return .fail(why) }
            return all(await sdkStopped(recorder, context, how: "after the caller was cancelled during the start"))
        }
    }

    static var timeout: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "timeout",
            summary:
                "a hanging request given the adapter's timeout of 100 ms: an error other than CancellationError in time, the SDK's cancel made once; then calls given a timeout that end first, by the SDK's reply and by a cancellation: nothing of the timeout acts on them past their deadline"
        ) { fixture, context in
            guard let timed = fixture.timingOut else {
                return .notChecked("the fixture gives no timed call")
            }
            if let hanging = fixture.hanging { context.releaseAtEnd(hanging.release) }
            let limit = Duration.milliseconds(100)
            let recorder = recorder(context, CallHostility(timesOut: true))
            let call = launchCall({ probe in try await timed.call(probe, limit) }, recorder)
            guard let result = await outcome(of: call, within: limit + context.patience) else {
                return .fail(
                    "the caller was not resumed within \(limit + context.patience) although its timeout was \(limit): the adapter's timeout does not end the wait"
                )
            }
            switch result {
            case .failure(let error) where error is CancellationError:
                return .fail("the timeout expired, but the caller got CancellationError: throw a timeout error")
            case .failure:
                let stopped = await sdkStopped(recorder, context, how: "after the timeout expired")
                if case .fail? = stopped { return all(stopped) }
                for endsBy in [TimedEnd.reply, .cancellation] {
                    if let problem = await timerAfterEnd(timed, endsBy: endsBy, fixture, context) { return problem }
                }
                return all(stopped)
            case .success:
                return .usageError(
                    "the fixture's timed call returned a value within its 100 ms timeout: its request must not complete by itself"
                )
            }
        }
    }

    /// How a call given a timeout ends before its deadline.
    enum TimedEnd: Sendable {
        /// The hanging request is released, and the SDK's reply ends the call.
        case reply
        /// The caller's task is cancelled.
        case cancellation
    }

    /// A call given a timeout that ends first, as `endsBy` says, watched until past its deadline:
    /// a timer the adapter keeps for the timeout must not act on it then (an SDK cancel after the
    /// reply, a second one after the caller's). The deadline is a sixth of the patience, then a
    /// third should the call not end first. `nil` when nothing acted, or when the call could not
    /// be made to end first (no hanging call to release, no probe to see the start).
    static func timerAfterEnd(
        _ timed: Fixture.TimedCall, endsBy: TimedEnd, _ fixture: Fixture, _ context: FixtureContext
    ) async -> Check? {
        if endsBy == .reply && fixture.hanging == nil { return nil }
        for limit in [context.patience / 6, context.patience / 3] {
            let clock = ContinuousClock()
            let launched = clock.now
            let recorder = recorder(context, CallHostility(timesOut: true))
            let call = launchCall({ probe in try await timed.call(probe, limit) }, recorder)
            guard await waitStarted(call, context, liveAtLaunch: context.live) == .byProbe else {
                call.task.cancel()
                _ = await outcome(of: call, within: context.patience)
                return nil
            }
            switch endsBy {
            case .reply: fixture.hanging?.release()
            case .cancellation: call.task.cancel()
            }
            let result = await outcome(of: call, within: context.patience)
            let endedFirst: Bool
            switch (endsBy, result) {
            case (.reply, .success?): endedFirst = true
            case (.cancellation, .failure(let error)?): endedFirst = error is CancellationError
            default: endedFirst = false
            }
            // Ended by its timeout after all (a slow machine): try again with a later deadline.
            guard endedFirst, clock.now < launched + limit else { continue }
            let allowed = endsBy == .reply ? 0 : 1
            if endsBy == .cancellation {
                _ = await eventually(within: context.patience / 4) { recorder.snapshot.cancels > 0 }
            }
            let pastDeadline = launched + limit + context.patience / 10
            _ = await eventually(within: pastDeadline - clock.now) { recorder.snapshot.cancels > allowed }
            let cancels = recorder.snapshot.cancels
            guard cancels > allowed else { return nil }
            let how = endsBy == .reply ? "with the SDK's reply" : "by the caller's cancellation"
            return .fail(
                "a call given a timeout of \(limit) ended \(how) before it, yet the adapter called the SDK's cancel \(cancels) time(s) for it (\(allowed) expected) as the deadline passed: a timer of the adapter's own outlived the call. Cancel the timer when the call ends another way (withCallback(timeout:) does), or it cancels a request that already ended, whose handle may belong to another"
            )
        }
        return nil
    }

    static var lateCallbackAfterCancel: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "late-callback-after-cancel",
            summary:
                "after the caller was cancelled, the request is released and a late outcome is delivered: both are ignored, nothing crashes"
        ) { fixture, context in
            guard let hanging = fixture.hanging else {
                return .notChecked("the fixture gives no hanging call, whose request could call back late")
            }
            let (result, recorder, _, problem) = await cancelInFlight(hanging, context)
            if let problem { return problem }
            guard let result else { return .fail("the caller was not resumed") }
            if case .fail(let why) = expectCancellation(result, recorder) { return .fail(why) }
            // The real SDK calls back late, if it still can; then the probe delivers one more.
            hanging.release()
            recorder.deliverLate(.failure(ProbeInjectedError()))
            if recorder.snapshot.callbacksWrapped == 0 {
                return .passWithNote(
                    "no late outcome was injected: the adapter does not pass its callback through the probe")
            }
            return .pass
        }
    }

    static var duplicateCallback: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "duplicate-callback",
            summary: "the SDK's callback reports the value twice: the caller gets it once, nothing crashes"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let (result, recorder) = await run(succeeding, context, CallHostility(repeatEach: true))
            if let skip = wrapsCallback(recorder, for: "a duplicate callback") { return skip }
            return expectValue(result, recorder, fixture)
        }
    }

    static var successThenError: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "success-then-error",
            summary: "the SDK's value is followed by an error: the value wins, the error is ignored"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let (result, recorder) = await run(
                succeeding, context, CallHostility(conflicting: .failure(ProbeInjectedError())))
            if let skip = wrapsCallback(recorder, for: "a second, conflicting callback") { return skip }
            if case .failure(let error) = result, error is ProbeInjectedError {
                return .fail(
                    "the SDK reported a value and then an error; the caller got the error: the first outcome must decide, later ones are ignored"
                )
            }
            return expectValue(result, recorder, fixture)
        }
    }

    static var errorThenSuccess: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "error-then-success",
            summary: "the SDK's error is followed by a value: the error wins, the value is ignored"
        ) { fixture, context in
            guard let failing = fixture.failing else { return .notChecked("the fixture gives no failing call") }
            let (value, skip) = await sample(fixture, context, for: "a late success")
            guard let value else { return skip! }
            let (result, recorder) = await run(failing, context, CallHostility(conflicting: .success(value)))
            if let skip = wrapsCallback(recorder, for: "a second, conflicting callback") { return skip }
            switch result {
            case .failure:
                return .pass
            case .success where recorder.snapshot.sdkReportedFailure:
                return .fail(
                    "the SDK reported an error and then a value; the caller got the value: the first outcome must decide, later ones are ignored"
                )
            case .success:
                return .usageError("the fixture's failing call returned a value: it cannot fail")
            }
        }
    }

    static var synchronousCallback: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "synchronous-callback",
            summary:
                "the callback comes right after the SDK call is made, before start returns (the SDK's own callback withheld): the value is not lost"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let (value, skip) = await sample(fixture, context, for: "a synchronous callback")
            guard let value else { return skip! }
            let recorder = recorder(context, CallHostility(synchronousValue: value))
            let call = launchCall(succeeding, recorder)
            guard let result = await outcome(of: call, within: context.patience) else {
                if recorder.snapshot.startsBegun == 0 || recorder.snapshot.callbacksWrapped == 0 {
                    return .fail(
                        "the call did not return within \(context.patience) and the probe's start or callback was never called: pass both through the probe"
                    )
                }
                return .fail(
                    "the callback came before start returned, and the caller was not resumed within \(context.patience): the adapter loses an outcome that arrives before it is ready to wait (its continuation or gate)"
                )
            }
            if recorder.snapshot.startsBegun == 0 {
                return .notChecked("the adapter does not pass its SDK start through the probe (probe.start)")
            }
            if recorder.snapshot.nothingToDeliverThrough {
                return .notChecked(
                    "the adapter wraps its callback only after the start returned, so nothing could call back inside it"
                )
            }
            return expectValue(result, recorder, fixture)
        }
    }

    static var foreignThreadCallback: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "foreign-thread-callback",
            summary: "the callback comes on a thread the SDK never uses: the value arrives"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let (result, recorder) = await run(succeeding, context, CallHostility(foreignThread: true))
            if let skip = wrapsCallback(recorder, for: "a callback on another thread") { return skip }
            return expectValue(result, recorder, fixture)
        }
    }

    static var callbackInsideCancel: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "callback-inside-cancel",
            summary:
                "the SDK's cancel reports an error synchronously, inside the cancel: no deadlock, the caller gets CancellationError"
        ) { fixture, context in
            guard let hanging = fixture.hanging else {
                return .notChecked("the fixture gives no hanging call, which the cancel must stop")
            }
            guard fixture.requestCancellation == .perRequest else {
                return .notChecked(
                    "the fixture declares an SDK without a per-request cancel: nothing can call back inside one")
            }
            let (result, recorder, _, problem) = await cancelInFlight(
                hanging, context, CallHostility(insideCancel: ProbeInjectedError()))
            if let problem { return problem }
            guard let result else { return .fail("the caller was not resumed") }
            if case .fail(let why) = expectCancellation(result, recorder) { return .fail(why) }
            // A cancel posted to the SDK's thread comes a little later (after a start posted there);
            // without the probe, none comes.
            await drainSDKThread(fixture.threading)
            _ = await eventually { recorder.snapshot.cancels > 0 || recorder.snapshot.startsBegun == 0 }
            if recorder.snapshot.cancels == 0 {
                return .notChecked(
                    "the adapter does not pass the SDK's cancel through the probe (probe.cancel), so nothing could call back inside it"
                )
            }
            if recorder.snapshot.callbacksWrapped == 0 {
                return .notChecked("the adapter does not pass its SDK callback through the probe (probe.callback)")
            }
            return .pass
        }
    }

    static var burst: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "burst-random-cancels",
            summary:
                "up to 100 calls at once, succeeding and hanging, a third cancelled at random: every call ends, the SDK's resources come back"
        ) { fixture, context in
            var kinds: [Fixture.Call] = []
            if let succeeding = fixture.succeeding { kinds.append(succeeding) }
            if let hanging = fixture.hanging {
                kinds.append(hanging.start)
                context.releaseAtEnd(hanging.release)
            }
            guard !kinds.isEmpty else {
                return .notChecked("the fixture gives neither a succeeding nor a hanging call")
            }
            let count = max(1, min(context.options.burstSize, 100))
            var random = SplitMix64(seed: context.options.seed ^ 0xB0B5)
            // On an SDK with a thread of its own, the thread is held while the calls are made and a
            // third of them cancelled: every start posted there waits behind the hold, so a cancel
            // that comes before its start has run is forced, on every run, not left to the timing.
            let hold = LabGate()
            let held = (try? context.threading.scheduler?.post { _ = hold.wait(upTo: context.patience / 3) }) != nil
            defer { hold.open() }
            var calls: [LaunchedCall<Value>] = []
            var cancelledHanging: [Int] = []
            var laterHanging: [Int] = []
            for index in 0..<count {
                let kind = Int(random.next() % UInt64(kinds.count))
                let launched = launchCall(kinds[kind], recorder(context))
                let hanging = fixture.hanging != nil && kind == kinds.count - 1
                if random.next() % 3 == 0 {
                    cancelFromForeignThread(launched.task)
                    if hanging { cancelledHanging.append(index) }
                } else if hanging, laterHanging.count < 5 {
                    laterHanging.append(index)
                }
                calls.append(launched)
            }
            let launched = calls
            let cancelled = cancelledHanging
            if held {
                // The cancelled callers end by their cancellation alone (the SDK's thread is not
                // needed for that), then the held starts run.
                _ = await eventually(within: context.patience / 4) {
                    cancelled.allSatisfy { launched[$0].recorder.snapshot.end != nil }
                }
                hold.open()
            }
            // A few hanging calls are cancelled only once their requests were started: their
            // cancels show whether the adapter passes its SDK cancel through the probe at all.
            // An adapter that passes nothing through the probe waits this out in full: kept short,
            // so that the release below keeps most of the watchdog's time.
            let usesProbe = await eventually(within: context.patience / 8) {
                launched.contains { $0.recorder.snapshot.usesProbe }
            }
            let later = usesProbe ? laterHanging.map { launched[$0] } : []
            _ = await eventually(within: context.patience / 4) {
                later.allSatisfy { $0.recorder.snapshot.startsEnded > 0 }
            }
            for call in later { cancelFromForeignThread(call.task) }
            // An SDK without a per-request cancel has no cancel to drop.
            if usesProbe, fixture.requestCancellation == .perRequest,
                let dropped = await droppedCancels(
                    of: cancelled.map { launched[$0] }, evidence: later, within: context.patience / 4)
            {
                for _ in 0..<3 { fixture.hanging?.release() }
                _ = await eventually { launched.allSatisfy { $0.recorder.snapshot.end != nil } }
                return .fail(
                    "\(dropped) of the \(cancelled.count + later.count) calls cancelled while their SDK request hung never reached the SDK's cancel, though their requests were started: the request runs on, holding what it allocated, until the SDK answers (here, until the scenario released it, which hid it from the resource count). A cancel that races a start posted to the SDK's thread must not be dropped: post the cancel after the start on the same thread, or remember it until the start has run"
                )
            }
            // Hanging requests are released, again and again (a release lets go of the requests
            // started so far), until every call ended or the patience ran out.
            let clock = ContinuousClock()
            let deadline = clock.now + context.patience
            var ended = 0
            repeat {
                fixture.hanging?.release()
                _ = await eventually(within: .milliseconds(20)) {
                    launched.allSatisfy { $0.recorder.snapshot.end != nil }
                }
                ended = launched.filter { $0.recorder.snapshot.end != nil }.count
            } while ended < count && clock.now < deadline
            guard ended == count else {
                return .fail(
                    "only \(ended) of \(count) calls ended after every hanging request was released: the others were never resumed"
                )
            }
            return .pass
        }
    }

    static var callerNotBlocked: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "caller-not-blocked",
            summary: "while the SDK request hangs, the caller's actor runs other work (no semaphore or spin wait)"
        ) { fixture, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return .notChecked("this scenario needs task executors (macOS 15, iOS 18 or later)")
            }
            guard let hanging = fixture.hanging else {
                return .notChecked("the fixture gives no hanging call to keep the caller waiting")
            }
            context.releaseAtEnd(hanging.release)
            // The caller is an actor whose tasks all run on one thread of their own: a blocking
            // wait, on the actor or on a thread it hops to within this task, occupies that thread.
            let lane = ScenarioExecutor(label: "conformance caller", maxThreads: 1)
            let caller = FixtureCaller()
            let recorder = recorder(context)
            let call = Task(executorPreference: lane) { await caller.call(hanging.start, recorder.probe) }
            let started = await eventually {
                recorder.snapshot.startsEnded > 0 || (context.liveAboveBaseline ?? false) || call.isCancelled
            }
            let pinged = LockedBox(false)
            let ping = Task(executorPreference: lane) {
                await caller.ping()
                pinged.withLock { $0 = true }
            }
            let responsive = await eventually { pinged.withLock { $0 } }
            hanging.release()
            recorder.callReturned(await call.value)
            await ping.value
            guard responsive else {
                return .fail(
                    "while the SDK request hung, the caller's actor could not run anything for \(context.patience): the adapter blocks the caller's thread until the callback comes (a semaphore, a lock, a spin wait). Suspend instead: a continuation, or withCallback"
                )
            }
            if !started {
                return .passWithNote(
                    "the actor stayed responsive, but the scenario could not tell the SDK request was under way (no probe start, no liveResources)"
                )
            }
            return .pass
        }
    }

    static var mainActorCaller: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "main-actor-caller",
            summary:
                "a @MainActor caller: the value arrives there, and the SDK call starts where the adapter's threading says (the main actor for .anyThread, the SDK's thread for .sdkThread)"
        ) { fixture, context in
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call")
            }
            let (result, recorder) = await run(succeeding, context, on: .mainActor)
            if let problem = expectValue(result, recorder, fixture).problem { return problem }
            guard let spot = recorder.snapshot.startSpots.first else {
                return .passWithNote(
                    "the value arrived; where the SDK call started is not checked: the adapter does not pass its start through the probe"
                )
            }
            switch context.threading.kind {
            case .anyThread:
                guard spot.onMainActor else {
                    return .fail(
                        "the SDK call started off the main actor: the adapter hopped away from its @MainActor caller. Take `isolation: isolated (any Actor)? = #isolation` and pass it on (withCallback does), or, if your SDK must be called on its own thread and the start is posted there, declare threading: .sdkThread(scheduler)"
                    )
                }
                return .pass
            case .sdkThread:
                switch spot.onSDKThread {
                case true?:
                    return .pass
                case false?:
                    return .fail(
                        "the SDK call started \(spot.onMainActor ? "on the main actor" : "on another thread"), not on the SDK's thread the adapter declares (\(context.threading.declared)): post the start to the SDK's thread, whoever the caller is"
                    )
                case nil:
                    return .passWithNote(
                        "the value arrived; where the SDK call started is not checked: the scheduler given to \(context.threading.declared) was made without isCurrent"
                    )
                }
            }
        }
    }

    static var threadAffinity: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "thread-affinity",
            summary:
                "an SDK that must be called on its own thread: start and cancel ran there, and the SDK counted no call off it"
        ) { fixture, context in
            try await context.threadAffinity(
                noCall: "the fixture gives neither a succeeding nor a hanging call",
                notThroughProbe:
                    "the adapter passes neither its start nor its cancel through the probe, and the fixture counts no offThreadCalls"
            ) {
                var recorders: [CallRecorder<Value>] = []
                if let succeeding = fixture.succeeding {
                    let (result, recorder) = await run(succeeding, context)
                    if let problem = expectValue(result, recorder, fixture).problem {
                        throw ScenarioStop(check: problem)
                    }
                    recorders.append(recorder)
                }
                if let hanging = fixture.hanging {
                    let (result, recorder, _, problem) = await cancelInFlight(hanging, context)
                    if let problem { throw ScenarioStop(check: problem) }
                    if let result, case .fail(let why) = expectCancellation(result, recorder) {
                        throw ScenarioStop(check: .fail(why))
                    }
                    if fixture.requestCancellation == .perRequest {
                        // A cancel posted to the SDK's thread runs after the jobs already there.
                        await drainSDKThread(fixture.threading)
                        _ = await eventually { recorder.snapshot.cancels > 0 || recorder.snapshot.startsBegun == 0 }
                    }
                    recorders.append(recorder)
                }
                return recorders.map { !$0.snapshot.startSpots.isEmpty || !$0.snapshot.cancelSpots.isEmpty }
            }
        }
    }
}

extension OneShotFixtureScenarios {
    static var sdkThreadNotHeld: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "sdk-thread-not-held",
            summary:
                "while one SDK request hangs, another call returns its value, and the SDK's thread then runs a job posted to it: nothing on that thread waits for the hanging request"
        ) { fixture, context in
            guard let scheduler = context.threading.scheduler else {
                return .notChecked("the fixture declares no SDK thread of its own (threading .sdkThread)")
            }
            guard let hanging = fixture.hanging, let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no hanging call and succeeding call to make at once")
            }
            context.releaseAtEnd(hanging.release)
            let held = launchCall(hanging.start, recorder(context))
            // The hanging request is started first: its start, posted to the SDK's thread, has run.
            _ = await drainSDKThread(context.threading)
            _ = await eventually(within: context.patience / 4) { held.recorder.snapshot.startsEnded > 0 }
            let other = launchCall(succeeding, recorder(context))
            let returned = await eventually(within: context.patience / 2) { other.recorder.snapshot.end != nil }
            if returned, case .fail(let why) = expectValue(await other.result, other.recorder, fixture) {
                hanging.release()
                _ = await eventually { held.recorder.snapshot.end != nil }
                return .fail(why)
            }
            // The SDK's thread must be free now, whether or not the other call could return (an SDK
            // that serializes requests on one connection answers it after the hanging one).
            let ran = LabGate()
            let posted = (try? scheduler.post { ran.open() }) != nil
            let threadFree = await eventually(within: context.patience / 2) { ran.wait(upTo: .zero) }
            var result = Check.pass
            if posted && !threadFree {
                result = .fail(
                    "while one SDK request hung\(returned ? " and another call had returned" : ""), a job posted to the SDK's thread did not run within \(context.patience / 2): a handler or callback keeps that thread waiting for the hanging request (reading until every request is answered, blocking until the next reply), and every send, cancel and timer waits behind it. A handler takes what is ready and returns; the loop calls it again"
                )
            } else if !returned {
                result = .passWithNote(
                    "while one SDK request hung, another call did not return within \(context.patience / 2) (an SDK that serializes its requests answers it after the hanging one); the SDK's thread stayed free"
                )
            }
            hanging.release()
            _ = await eventually { held.recorder.snapshot.end != nil && other.recorder.snapshot.end != nil }
            return result
        }
    }
}

extension OneShotFixtureScenarios {
    /// Sequential calls measured, after one that warms the SDK up (a connection it keeps).
    static var loopCalls: Int { 6 }

    static var loopWatchesReleased: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "loop-watches-released",
            summary:
                "on an SDK hosted on an SDKLoop, \(loopCalls) calls one after another leave no watch or timer behind each, and close no descriptor under a live watch"
        ) { fixture, context in
            guard let loop = context.threading.loop else {
                return .notChecked(
                    "the fixture does not declare its SDKLoop (threading .sdkLoop(loop)), whose watches and timers this counts"
                )
            }
            guard loop.watchesDescriptors else {
                return .notChecked(
                    "the fixture's SDKLoop runs the SDK's own loop (it was made with a driver): it holds no watches or timers to count"
                )
            }
            guard let succeeding = fixture.succeeding else {
                return .notChecked("the fixture gives no succeeding call to repeat")
            }
            // One call first: a connection the SDK opens on first use and keeps is not a leak.
            let (first, firstRecorder) = await run(succeeding, context)
            if case .fail(let why) = expectValue(first, firstRecorder, fixture) { return .fail(why) }
            _ = await drainSDKThread(context.threading)
            let before = loop.statistics
            for _ in 0..<loopCalls {
                let (result, recorder) = await run(succeeding, context)
                if case .fail(let why) = expectValue(result, recorder, fixture) { return .fail(why) }
            }
            // A watch or timer ended by a job the adapter posted is gone once the jobs have run; a
            // descriptor closed under a watch is found at the loop's next wait.
            let half = (loopCalls + 1) / 2
            let leftBehind: @Sendable (SDKLoop.Statistics) -> String? = { now in
                let grown = [
                    (
                        now.watches - before.watches,
                        "watch(es) more than before them: a watch not cancelled when its call ended (a descriptor closed without cancelling its watch stays in the loop, deaf, and its number cannot be watched again)"
                    ),
                    (
                        now.timers - before.timers,
                        "timer(s) more than before them: a timer of the adapter's own (a deadline, a retry) not cancelled when its call ended"
                    ),
                    (
                        now.watchesEndedInvalid - before.watchesEndedInvalid,
                        "watch(es) ended because their descriptor was closed under them: a descriptor closed before its watch was cancelled; until the loop found it, its number could name another file, and the watch heard that file"
                    ),
                ]
                guard let (count, what) = grown.first(where: { $0.0 >= half }) else { return nil }
                return
                    "after \(loopCalls) calls one after another, the SDK's loop had \(count) \(what). Cancel the watch, then close the descriptor (DescriptorWatch.cancel(closingDescriptor: true) does both), and cancel a call's timers when it ends"
            }
            // Watches ended as invalid never come back: that count is judged at once. Watches and
            // timers an adapter ends by a job of its own are given time.
            let now = loop.statistics
            if now.watchesEndedInvalid - before.watchesEndedInvalid >= half, let problem = leftBehind(now) {
                return .fail(problem)
            }
            let clock = ContinuousClock()
            let deadline = clock.now + context.patience / 2
            var problem = leftBehind(loop.statistics)
            while problem != nil && clock.now < deadline {
                _ = await drainSDKThread(context.threading)
                _ = await eventually(within: .milliseconds(20)) { leftBehind(loop.statistics) == nil }
                problem = leftBehind(loop.statistics)
            }
            return problem.map { .fail($0) } ?? .pass
        }
    }
}

/// The caller of the caller-not-blocked scenario: an actor that must stay responsive while the
/// adapter waits for its SDK.
actor FixtureCaller {
    func call<Value: Sendable>(
        _ call: OneShotFixture<Value>.Call, _ probe: CallProbe<Value>
    ) async -> Result<Value, any Error> {
        do {
            return .success(try await call(probe))
        } catch {
            return .failure(error)
        }
    }

    func ping() {}
}

/// Waits until every job posted to the adapter's SDK thread before this call has run, for an
/// adapter that posts its start or cancel there: jobs on that thread run in order, so a job posted
/// now runs after them. Returns false if the thread refused the job or did not run it within the
/// run's patience; true at once for an adapter without an SDK thread.
@discardableResult
func drainSDKThread(_ threading: AdapterThreading) async -> Bool {
    guard let scheduler = threading.scheduler else { return true }
    let ran = LockedValue(false)
    guard (try? scheduler.post { ran.withLock { $0 = true } }) != nil else { return false }
    return await eventually { ran.withLock { $0 } }
}
