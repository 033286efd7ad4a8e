import LegacyBridge

// The coalesced scenarios of the real-adapter path: several callers for one key, all inside the
// adapter before the scenario goes on (they run on one thread of the suite's own, first come first
// served, and a task queued after them runs only once each of them suspended); the SDK answers a
// key's request when the suite says. The suite counts SDK calls by the probes' starts, and checks
// by the token in each value that every caller got the answer of the call it shared.

enum CoalescedFixtureScenarios<Value: Sendable> {
    typealias Fixture = CoalescedFixture<Value>
    typealias Calls = TokenedCalls<Value>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [sharesOneCall, firstLeaverKeepsCall, lastLeaverCancels, failureNotKept, keysApart]
    }

    // MARK: - Helpers

    /// The key of the scenario numbered `scenario` (its `index`-th): unique in a run.
    static func key(_ scenario: UInt64, _ index: UInt64 = 1) -> UInt64 { scenario << 20 | index }

    /// The token of the `attempt`-th answer made for `key`: unique in a run.
    static func token(_ key: UInt64, _ attempt: UInt64 = 1) -> UInt64 { key << 8 | attempt }

    static var needsExecutors: Check {
        .notChecked(
            "this scenario needs task executors (macOS 15, iOS 18 or later) to have every caller inside the adapter before it goes on"
        )
    }

    /// `count` callers for each of `keys`, on one thread of the suite's own, each with a recorder
    /// watched to the end; returned once every one of them suspended (`nil` if they did not).
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    static func callers(
        _ count: Int, keys: [UInt64], _ fixture: Fixture, _ context: FixtureContext
    ) async -> [LaunchedCall<Value>]? {
        let lane = ScenarioExecutor(label: "conformance callers", maxThreads: 1)
        let call = fixture.call
        var calls: [LaunchedCall<Value>] = []
        for key in keys {
            for _ in 0..<count {
                let recorder = CallRecorder<Value>(threading: context.threading)
                context.watch(recorder)
                let probe = recorder.probe
                let task = Task(executorPreference: lane) { () -> Result<Value, any Error> in
                    let result: Result<Value, any Error>
                    do { result = .success(try await call(key, probe)) } catch { result = .failure(error) }
                    recorder.callReturned(result)
                    return result
                }
                recorder.setCaller { task.cancel() }
                calls.append(LaunchedCall(recorder: recorder, task: task))
            }
        }
        guard await lane.ranEverythingQueued() else {
            for call in calls { call.task.cancel() }
            return nil
        }
        return calls
    }

    /// SDK calls made through `calls`' probes so far.
    static func starts(_ calls: [LaunchedCall<Value>]) -> Int {
        calls.reduce(0) { $0 + $1.recorder.snapshot.startsBegun }
    }

    /// SDK cancels made through `calls`' probes so far.
    static func cancels(_ calls: [LaunchedCall<Value>]) -> Int {
        calls.reduce(0) { $0 + $1.recorder.snapshot.cancels }
    }

    /// Waits until `calls`' shared SDK call was made: one start among them (an adapter may start it
    /// from a task of its own; it must come), and it returned. The problem otherwise.
    static func madeOne(_ calls: [LaunchedCall<Value>], key: UInt64, _ context: FixtureContext) async -> Check? {
        _ = await eventually {
            calls.contains { $0.recorder.snapshot.startsEnded > 0 }
                || calls.contains { $0.recorder.snapshot.end != nil }
        }
        if let ended = calls.first(where: { $0.recorder.snapshot.end != nil }) {
            let result = await ended.result
            return .usageError(
                "a caller for key \(key) returned \(describeOutcome(result)) before the suite answered: the fixture's call must wait for the answer the suite asks for (a list nobody pushes to, a test double that holds it)"
            )
        }
        let made = starts(calls)
        if made == 0 {
            return .notChecked(
                "the adapter does not pass its SDK call through probe.start, so the suite cannot count the SDK calls the callers made, nor tell when the request reached the SDK"
            )
        }
        if made > 1 {
            return .fail(
                "\(calls.count) concurrent callers for key \(key) made \(made) SDK calls, expected 1: share the call in flight for a key (CoalescedCalls does)"
            )
        }
        return nil
    }

    /// Every call got the value carrying `token`; the problem otherwise.
    static func expectShared(
        _ calls: [LaunchedCall<Value>], key: UInt64, token: UInt64, _ fixture: Fixture, _ context: FixtureContext
    ) async -> Check? {
        for (index, call) in calls.enumerated() {
            let result = await Calls.outcome(of: call, within: context.patience)
            if result == nil {
                let reported = calls.reduce(0) { $0 + $1.recorder.snapshot.sdkOutcomes.count }
                let ended = calls.filter { $0.recorder.snapshot.end != nil }.count
                return .fail(
                    "caller \(index + 1) of \(calls.count) for key \(key) was not resumed within \(context.patience) of its answer (the SDK reported \(reported) outcome(s) through the probes; \(ended) of the callers had returned): \(reported == 0 ? "the answer never reached the adapter's callback" : "the adapter lost the answer on its way to this caller")"
                )
            }
            if let problem = Calls.expect(
                result, subject: "key \(key) (caller \(index + 1) of \(calls.count))", answer: "answer", token: token,
                tokenOf: fixture.token, patience: context.patience)
            {
                return problem
            }
        }
        return nil
    }

    /// A caller for `key` once its earlier calls ended: it makes a new SDK call (`before` were
    /// made so far) and gets the new answer. `after` says what ended, for messages.
    ///
    /// `stillRunning` is the token of an earlier call's answer that may legitimately reach this
    /// caller without a new SDK call: the answer of a call every caller left, on an SDK that cannot
    /// withdraw it, made just before this caller came. The adapter may have handed that answer on
    /// after this caller joined the call, which was still in flight for it.
    static func freshCall(
        _ fixture: Fixture, key: UInt64, attempt: UInt64, _ context: FixtureContext, after what: String,
        stillRunning: UInt64? = nil
    ) async -> Check? {
        let later = fixture.launch(key, context)
        let recorder = later.recorder
        _ = await eventually {
            let snapshot = recorder.snapshot
            return snapshot.startsEnded > 0 || snapshot.end != nil
        }
        if recorder.snapshot.startsBegun == 0 {
            // Ended: its task returns at once. Otherwise it still waits, and is let go below.
            let kept = recorder.snapshot.end != nil ? await later.result : nil
            if let stillRunning, case .success(let value)? = kept, fixture.token(value) == stillRunning { return nil }
            later.task.cancel()
            return .fail(
                "a caller for key \(key) after \(what) made no SDK call within \(context.patience)\(kept.map { " and got \(describeOutcome($0))" } ?? ""): the adapter kept the ended call's outcome for the key. Forget a call when it ends, whatever its outcome"
            )
        }
        await fixture.answer(key, token(key, attempt))
        let result = await Calls.outcome(of: later, within: context.patience)
        return Calls.expect(
            result, subject: "key \(key) after \(what)", answer: "answer", token: token(key, attempt),
            tokenOf: fixture.token, patience: context.patience)
    }

    /// Each caller threw `CancellationError` within the patience; the problem otherwise.
    static func expectCancelled(_ calls: [LaunchedCall<Value>], _ context: FixtureContext) async -> Check? {
        for call in calls {
            guard let result = await Calls.outcome(of: call, within: context.patience) else {
                return .fail(
                    "a caller was not resumed within \(context.patience) of its task being cancelled: a caller that leaves must not wait for the shared call"
                )
            }
            guard case .failure(let error) = result, error is CancellationError else {
                return .fail(
                    "a caller's task was cancelled while the shared call waited; expected CancellationError, got \(describeOutcome(result))"
                )
            }
        }
        return nil
    }

    // MARK: - Scenarios

    static var sharesOneCall: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "coalesced-shares-one-call",
            summary:
                "3 concurrent callers for one key share one SDK call and its answer; a caller after the answer makes a new SDK call and gets the new answer"
        ) { fixture, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return needsExecutors
            }
            let key = key(1)
            guard let calls = await callers(3, keys: [key], fixture, context) else {
                return .fail(
                    "3 callers did not all suspend within \(context.patience) (the adapter blocks its callers)")
            }
            if let problem = await madeOne(calls, key: key, context) { return problem }
            await fixture.answer(key, token(key))
            if let problem = await expectShared(calls, key: key, token: token(key), fixture, context) {
                return problem
            }
            if let problem = await freshCall(fixture, key: key, attempt: 2, context, after: "the shared call answered")
            {
                return problem
            }
            return .pass
        }
    }

    static var firstLeaverKeepsCall: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "coalesced-first-leaver-keeps-call",
            summary:
                "of 2 callers sharing a call, the one whose call reached the SDK leaves: it throws CancellationError, the SDK call is not cancelled, and the other caller gets its answer"
        ) { fixture, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return needsExecutors
            }
            let key = key(2)
            guard let calls = await callers(2, keys: [key], fixture, context) else {
                return .fail(
                    "2 callers did not all suspend within \(context.patience) (the adapter blocks its callers)")
            }
            if let problem = await madeOne(calls, key: key, context) { return problem }
            // The caller whose probe made the SDK call leaves: the call must stay for the other.
            let (leaver, stayer) =
                calls[0].recorder.snapshot.startsBegun > 0 ? (calls[0], calls[1]) : (calls[1], calls[0])
            leaver.task.cancel()
            if let problem = await expectCancelled([leaver], context) { return problem }
            await fixture.answer(key, token(key))
            let result = await Calls.outcome(of: stayer, within: context.patience)
            let cancelled = cancels(calls)
            if cancelled > 0 {
                return .fail(
                    "one of 2 callers sharing an SDK call left, and the adapter called the SDK's cancel (\(cancelled) time(s)): the other caller still waits for that call. Cancel a shared call only when its last caller leaves"
                )
            }
            if let problem = Calls.expect(
                result, subject: "key \(key) (the caller that stayed)", answer: "answer", token: token(key),
                tokenOf: fixture.token, patience: context.patience)
            {
                guard case .fail(let observed) = problem else { return problem }
                return .fail(
                    "\(observed). Likely: the shared call was cancelled, or its answer dropped, when the other caller left"
                )
            }
            return .pass
        }
    }

    static var lastLeaverCancels: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "coalesced-last-leaver-cancels",
            summary:
                "both callers sharing a call leave: each throws CancellationError, the SDK call is cancelled once (its resources come back), and a later caller for the key makes a new call"
        ) { fixture, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return needsExecutors
            }
            let key = key(3)
            guard let calls = await callers(2, keys: [key], fixture, context) else {
                return .fail(
                    "2 callers did not all suspend within \(context.patience) (the adapter blocks its callers)")
            }
            if let problem = await madeOne(calls, key: key, context) { return problem }
            for call in calls { call.task.cancel() }
            if let problem = await expectCancelled(calls, context) { return problem }
            var note: Check?
            if fixture.requestCancellation == .perRequest {
                let counts = fixture.liveResources != nil
                let baseline = context.liveBaseline ?? 0
                _ = await eventually {
                    counts ? (context.live ?? baseline) <= baseline : cancels(calls) > 0
                }
                if counts, let problem = await context.resourcesBack(after: "after both callers left", within: .zero) {
                    guard case .fail(let why) = problem else { return problem }
                    return .fail(
                        "\(why)\(cancels(calls) == 0 ? ", and the adapter never called the SDK's cancel" : ""): cancel the shared call when its last caller leaves (CoalescedCalls does), or it runs on until the SDK answers"
                    )
                }
                if !counts && cancels(calls) == 0 {
                    note = .passWithNote(
                        "whether the shared SDK call was cancelled is not checked: the adapter passes no cancel through the probe and the fixture counts no liveResources"
                    )
                }
            } else {
                // An SDK without a cancel answers at last: nobody is left to get it.
                await fixture.answer(key, token(key))
            }
            // Without a cancel, the call may still be in flight when the next caller comes (the
            // adapter hands its late answer on, and learns that every caller left, on threads of
            // its own): joining it, and getting that answer, is sharing, not a kept outcome.
            let late = fixture.requestCancellation == .none ? token(key) : nil
            if let problem = await freshCall(
                fixture, key: key, attempt: 2, context, after: "every caller left", stillRunning: late)
            {
                return problem
            }
            return note ?? .pass
        }
    }

    static var failureNotKept: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "coalesced-failure-not-kept",
            summary:
                "2 callers share a call, which the SDK fails: both throw; a caller for the same key after that makes a new SDK call and gets its answer"
        ) { fixture, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return needsExecutors
            }
            guard let failing = fixture.failing else {
                return .notChecked("the fixture gives no failing: the SDK cannot be made to fail a call")
            }
            let key = key(4)
            guard let calls = await callers(2, keys: [key], fixture, context) else {
                return .fail(
                    "2 callers did not all suspend within \(context.patience) (the adapter blocks its callers)")
            }
            if let problem = await madeOne(calls, key: key, context) { return problem }
            await failing(key)
            for (index, call) in calls.enumerated() {
                switch await Calls.outcome(of: call, within: context.patience) {
                case nil:
                    return .fail(
                        "caller \(index + 1) of 2 was not resumed within \(context.patience) of the shared call's failure: every caller sharing a call gets its outcome"
                    )
                case .success?:
                    return .fail(
                        "the SDK failed the shared call, yet caller \(index + 1) of 2 got a value: a failure must reach every caller as a thrown error"
                    )
                case .failure?:
                    continue
                }
            }
            if let problem = await freshCall(fixture, key: key, attempt: 2, context, after: "the shared call failed") {
                return problem
            }
            return .pass
        }
    }

    static var keysApart: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "coalesced-keys-apart",
            summary:
                "2 callers for each of 2 keys at once: one SDK call per key, answered in reverse order; each caller gets its own key's answer"
        ) { fixture, context in
            guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
                return needsExecutors
            }
            let keys = [key(5, 1), key(5, 2)]
            guard let calls = await callers(2, keys: keys, fixture, context) else {
                return .fail(
                    "4 callers did not all suspend within \(context.patience) (the adapter blocks its callers)")
            }
            let byKey = [Array(calls[0..<2]), Array(calls[2..<4])]
            // One call per key must come; a call shared across keys shows as a group with none.
            _ = await eventually {
                byKey.allSatisfy { starts($0) > 0 } || calls.contains { $0.recorder.snapshot.end != nil }
            }
            if starts(calls) > 0, let idle = zip(keys, byKey).first(where: { starts($0.1) == 0 }) {
                return .fail(
                    "callers for keys \(keys[0]) and \(keys[1]) made \(starts(calls)) SDK call(s), none of them through the callers for key \(idle.0): calls for different keys must not be shared (the key decides which callers share)"
                )
            }
            for (key, group) in zip(keys, byKey) {
                if let problem = await madeOne(group, key: key, context) { return problem }
            }
            for key in keys.reversed() { await fixture.answer(key, token(key)) }
            for (key, group) in zip(keys, byKey) {
                if let problem = await expectShared(group, key: key, token: token(key), fixture, context) {
                    guard case .fail(let observed) = problem else { return problem }
                    return .fail("\(observed). Likely: callers for different keys were given one call")
                }
            }
            return .pass
        }
    }
}
