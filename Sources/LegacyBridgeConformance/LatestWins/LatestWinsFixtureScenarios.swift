import LegacyBridge

// The latest-wins scenarios of the real-adapter path: each call goes through the same adapter, so
// each supersedes the one before; the suite makes the SDK answer a key's request when it chooses
// (the superseded call's answer after the newer call was made, while the adapter's cancel of it
// is held back) and checks by the token in each value that the newest caller got its own answer.

enum LatestWinsFixtureScenarios<Value: Sendable> {
    typealias Fixture = LatestWinsFixture<Value>
    typealias Calls = TokenedCalls<Value>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [lateAnswerNeverLands, supersededLetGo, failureThenNext, newestCancelled, manySuperseded]
    }

    // MARK: - Helpers

    /// `count` keys for the scenario numbered `scenario`: unique in a run.
    static func keys(_ scenario: UInt64, count: Int) -> [UInt64] {
        (1...UInt64(count)).map { scenario << 20 | $0 }
    }

    /// The token of the answer made for `key`: unique in a run.
    static func token(_ key: UInt64) -> UInt64 { key << 8 | 1 }

    static func expectOwn(
        _ result: Result<Value, any Error>?, key: UInt64, _ fixture: Fixture, _ context: FixtureContext,
        others: [UInt64: String] = [:]
    ) -> Check? {
        Calls.expect(
            result, subject: "the newest call (key \(key))", answer: "answer", token: token(key),
            tokenOf: fixture.token, patience: context.patience, others: others)
    }

    /// The superseded caller's outcome: an error, within the patience.
    static func expectSupersededError(
        _ result: Result<Value, any Error>?, key: UInt64, _ context: FixtureContext
    )
        -> Check?
    {
        switch result {
        case nil:
            return .fail(
                "the caller of the superseded call (key \(key)) was not resumed within \(context.patience) of a newer call reaching the SDK: resume a superseded caller at once, with an error, instead of leaving it to wait for an answer nobody wants"
            )
        case .success?:
            return .fail(
                "the caller of the superseded call (key \(key)) got a value, though a newer call superseded it before the SDK answered: a superseded caller gets an error"
            )
        case .failure?:
            return nil
        }
    }

    /// Makes the next call after `what` and checks it gets its own answer.
    static func nextCallAnswers(
        _ fixture: Fixture, key: UInt64, _ context: FixtureContext, after what: String
    ) async -> Check? {
        let next = fixture.launch(key, context)
        if let problem = await Calls.madeAll([next], answer: "answer") {
            if case .notChecked = problem {
                return .fail(
                    "after \(what), the next call was not made within \(context.patience): the adapter (or the SDK's thread it holds) stays blocked"
                )
            }
            return problem
        }
        await fixture.answer(key, token(key))
        return expectOwn(await Calls.outcome(of: next, within: context.patience), key: key, fixture, context)
    }

    // MARK: - Scenarios

    static var lateAnswerNeverLands: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "latest-late-answer-never-lands",
            summary:
                "call 1's answer comes after call 2 superseded it (while the adapter's cancel of call 1 is held back, or late from an SDK without a cancel), then call 2's: the newest caller gets call 2's answer, call 1's caller an error"
        ) { fixture, context in
            let keys = keys(1, count: 2)
            let (older, newer) = (keys[0], keys[1])
            let late = fixture.requestCancellation == .none
            // Opened right after call 1's answer; the bound only matters to an adapter that never
            // lets the newer call go on while its cancel waits.
            let hold = CancelHold(bound: context.patience)
            let first = fixture.launch(
                older, context, CallHostility(superseded: true, holdCancel: late ? nil : hold))
            if let problem = await Calls.madeAll([first], answer: "answer") {
                hold.open()
                return problem
            }
            let second = fixture.launch(newer, context)
            // The adapter has taken the newer call once its cancel of the older request reached
            // the hold, or the newer request reached the SDK.
            let taken = await eventually {
                let snapshot = second.recorder.snapshot
                return hold.arrived > 0 || snapshot.startsEnded > 0 || snapshot.end != nil
            }
            guard taken else {
                hold.open()
                return .fail(
                    "the newer call neither reached the SDK nor cancelled the older one within \(context.patience): the adapter keeps a newer caller waiting behind the call it supersedes"
                )
            }
            // Call 1's answer, while its cancel is held: it reaches the adapter's callback.
            await fixture.answer(older, token(older))
            hold.open()
            let landed = second.recorder
            _ = await eventually { landed.snapshot.startsEnded > 0 || landed.snapshot.end != nil }
            if landed.snapshot.end != nil, case .success(let value) = await second.result,
                fixture.token(value) == token(older)
            {
                return .fail(
                    "the caller of the newest call (key \(newer)) got the answer of the call it superseded (key \(older)) before its own request was even made: before delivering an answer, check that its call is still the newest (LatestWins does)"
                )
            }
            if let problem = await Calls.madeAll([second], answer: "answer") { return problem }
            await fixture.answer(newer, token(newer))
            let newest = await Calls.outcome(of: second, within: context.patience)
            if case .success(let value)? = newest, fixture.token(value) == token(older) {
                return .fail(
                    "the caller of the newest call (key \(newer)) got the answer of the call it superseded (key \(older)), which came after the newer call was made: before delivering an answer, check that its call is still the newest (LatestWins does)"
                )
            }
            if let problem = expectOwn(newest, key: newer, fixture, context) { return problem }
            if let problem = expectSupersededError(
                await Calls.outcome(of: first, within: context.patience), key: older, context)
            {
                return problem
            }
            return .pass
        }
    }

    static var supersededLetGo: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "latest-superseded-let-go",
            summary:
                "call 2 supersedes call 1, which the SDK never answers: call 1's caller throws at once, its SDK request is cancelled (its resources come back), and call 2 gets its answer"
        ) { fixture, context in
            let keys = keys(2, count: 2)
            let (older, newer) = (keys[0], keys[1])
            let first = fixture.launch(older, context, CallHostility(superseded: true))
            if let problem = await Calls.madeAll([first], answer: "answer") { return problem }
            // What one call holds, to tell the older request's resources from the newer's.
            let perCall = (context.live ?? 0) - (context.liveBaseline ?? 0)
            let second = fixture.launch(newer, context)
            if let problem = await Calls.madeAll([second], answer: "answer") { return problem }
            if let problem = expectSupersededError(
                await Calls.outcome(of: first, within: context.patience), key: older, context)
            {
                return problem
            }
            var note: Check?
            if fixture.requestCancellation == .perRequest {
                let counts = fixture.liveResources != nil && perCall > 0
                let limit = (context.liveBaseline ?? 0) + perCall
                let recorder = first.recorder
                _ = await eventually {
                    counts ? (context.live ?? limit) <= limit : recorder.snapshot.cancels > 0
                }
                let cancels = recorder.snapshot.cancels
                if counts, let live = context.live, live > limit {
                    return .fail(
                        "after call 2 superseded call 1, the SDK still held call 1's resources (liveResources \(live), \(limit) expected with only call 2 running)\(cancels == 0 ? " and the adapter never called the SDK's cancel" : ""): cancel a superseded request (LatestWins does, through the cancel handle you give it), or it runs on until the SDK answers"
                    )
                }
                if !counts && cancels == 0 {
                    note = .passWithNote(
                        "whether call 1's SDK request was cancelled is not checked: the adapter passes no cancel through the probe and the fixture counts no liveResources"
                    )
                }
            }
            // An SDK without a cancel answers call 1 at last (first: an SDK that serves requests in
            // order, like commands pipelined on one connection, answers call 2 only after it).
            if fixture.requestCancellation == .none { await fixture.answer(older, token(older)) }
            await fixture.answer(newer, token(newer))
            if let problem = expectOwn(
                await Calls.outcome(of: second, within: context.patience), key: newer, fixture, context,
                others: [token(older): "the answer of superseded call \(older)"])
            {
                return problem
            }
            return note ?? .pass
        }
    }

    static var failureThenNext: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "latest-failure-then-next",
            summary: "the SDK fails the newest call: its caller throws, and the next call still gets its answer"
        ) { fixture, context in
            guard let failing = fixture.failing else {
                return .notChecked("the fixture gives no failing: the SDK cannot be made to fail a call")
            }
            let keys = keys(3, count: 2)
            let call = fixture.launch(keys[0], context)
            if let problem = await Calls.madeAll([call], answer: "answer") { return problem }
            await failing(keys[0])
            switch await Calls.outcome(of: call, within: context.patience) {
            case nil:
                return .fail(
                    "the caller of the call for key \(keys[0]) was not resumed within \(context.patience) of the SDK failing it: the adapter loses failures"
                )
            case .success?:
                return .fail(
                    "the SDK failed the call for key \(keys[0]), yet its caller got a value: a failure must reach the caller as a thrown error"
                )
            case .failure?:
                break
            }
            if let problem = await nextCallAnswers(fixture, key: keys[1], context, after: "the SDK failed a call") {
                return problem
            }
            return .pass
        }
    }

    static var newestCancelled: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "latest-newest-cancelled",
            summary:
                "the newest caller's task is cancelled while its SDK request waits: CancellationError at once, the SDK's cancel made (its resources come back), and the next call gets its answer"
        ) { fixture, context in
            let keys = keys(4, count: 2)
            let call = fixture.launch(keys[0], context)
            if let problem = await Calls.madeAll([call], answer: "answer") { return problem }
            call.task.cancel()
            guard let result = await Calls.outcome(of: call, within: context.patience) else {
                return .fail(
                    "the caller was not resumed within \(context.patience) of its task being cancelled: the adapter waits for the SDK instead of letting a cancelled caller go"
                )
            }
            guard case .failure(let error) = result, error is CancellationError else {
                return .fail(
                    "the caller's task was cancelled while its SDK request waited; expected CancellationError, got \(describeOutcome(result))"
                )
            }
            var note: Check?
            if fixture.requestCancellation == .perRequest {
                let stopped = await OneShotFixtureScenarios<Value>.sdkStopped(
                    call.recorder, context, how: "after the caller was cancelled")
                if case .passWithNote? = stopped {
                    note = stopped
                } else if let stopped {
                    return stopped
                }
            } else {
                await fixture.answer(keys[0], token(keys[0]))
            }
            if let problem = await nextCallAnswers(fixture, key: keys[1], context, after: "a caller was cancelled") {
                return problem
            }
            return note ?? .pass
        }
    }

    static var manySuperseded: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "latest-many-superseded",
            summary:
                "8 calls in a row, each made once the one before reached the SDK; the superseded ones answered late in a seeded random order, then the last: every superseded caller throws, the last gets its own answer"
        ) { fixture, context in
            let keys = keys(5, count: 8)
            var calls: [LaunchedCall<Value>] = []
            for (index, key) in keys.enumerated() {
                let last = index == keys.count - 1
                let call = fixture.launch(key, context, CallHostility(superseded: !last))
                if let problem = await Calls.madeAll([call], answer: "answer") { return problem }
                calls.append(call)
            }
            var random = SplitMix64(seed: context.options.seed ^ 0x1A7E)
            var others: [UInt64: String] = [:]
            for key in keys.dropLast().shuffled(using: &random) {
                await fixture.answer(key, token(key))
                others[token(key)] = "the answer of superseded call \(key)"
            }
            let lastKey = keys[keys.count - 1]
            await fixture.answer(lastKey, token(lastKey))
            if let problem = expectOwn(
                await Calls.outcome(of: calls[calls.count - 1], within: context.patience), key: lastKey, fixture,
                context, others: others)
            {
                return problem
            }
            for (key, call) in zip(keys, calls).dropLast() {
                if let problem = expectSupersededError(
                    await Calls.outcome(of: call, within: context.patience), key: key, context)
                {
                    return problem
                }
            }
            return .pass
        }
    }
}
