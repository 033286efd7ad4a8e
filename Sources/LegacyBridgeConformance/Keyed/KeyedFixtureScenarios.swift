import LegacyBridge

// The keyed-request scenarios of the real-adapter path: the suite names each request by an id,
// makes the SDK answer it when it chooses (out of order, after a failure, late for a caller that
// left while a newer request reuses the id, with strays in between), and checks by the token in
// each value that every caller got the reply meant for it. Every order is forced: a reply is made
// only once the probe saw its request reach the SDK, and a cancel that could race a newer request
// is held until that request has been made.

enum KeyedFixtureScenarios<Value: Sendable> {
    typealias Fixture = KeyedFixture<Value>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [ownReply, strayReplies, failureThenNext, cancelThenReuse, manyOutstanding]
    }

    // MARK: - Helpers

    /// `count` ids for the scenario numbered `scenario`: unique in a run, so that no reply of one
    /// scenario can answer a request of another.
    static func ids(_ scenario: UInt64, count: Int) -> [UInt64] {
        (1...UInt64(count)).map { scenario << 20 | $0 }
    }

    /// A token for the `attempt`-th reply made for `id`: unique in a run.
    static func token(_ id: UInt64, _ attempt: UInt64 = 1) -> UInt64 { id << 8 | attempt }

    /// Waits until each call's SDK request was made; the reason the scenario cannot go on if not.
    static func madeAll(_ calls: [LaunchedCall<Value>], _ context: FixtureContext) async -> Check? {
        await TokenedCalls<Value>.madeAll(calls)
    }

    /// Whether `result` is the value of the reply that carried `token` for request `id`; the
    /// problem otherwise. `others` names tokens of other replies, to say whose the caller got.
    static func expect(
        _ result: Result<Value, any Error>?, id: UInt64, token: UInt64, _ fixture: Fixture, _ context: FixtureContext,
        others: [UInt64: String] = [:]
    ) -> Check? {
        TokenedCalls<Value>.expect(
            result, subject: "request \(id)", token: token, tokenOf: fixture.token, patience: context.patience,
            others: others)
    }

    // MARK: - Scenarios

    static var ownReply: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "keyed-own-reply",
            summary: "six requests answered in reverse order: each caller gets the reply to its own id"
        ) { fixture, context in
            let ids = ids(1, count: 6)
            let calls = ids.map { fixture.launch($0, context) }
            if let problem = await madeAll(calls, context) { return problem }
            for id in ids.reversed() { await fixture.answer(id, token(id)) }
            for (id, call) in zip(ids, calls) {
                let result = await outcome(of: call, within: context.patience)
                if let problem = expect(result, id: id, token: token(id), fixture, context) { return problem }
            }
            return .pass
        }
    }

    static var strayReplies: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "keyed-stray-replies",
            summary:
                "a reply for an id nobody sent, then a request's reply, and its duplicate while another request is pending and before a newer one reuses the id: each caller gets its own reply once"
        ) { fixture, context in
            guard let stray = fixture.strayReply else {
                return .notChecked("the fixture gives no strayReply: only a test double of the SDK can make one")
            }
            let ids = ids(2, count: 3)
            let (first, stranger, next) = (ids[0], ids[1], ids[2])
            let call = fixture.launch(first, context)
            if let problem = await madeAll([call], context) { return problem }
            await stray(stranger, token(stranger))
            await fixture.answer(first, token(first))
            let result = await outcome(of: call, within: context.patience)
            if let problem = expect(
                result, id: first, token: token(first), fixture, context,
                others: [token(stranger): "a reply for an id nobody sent"])
            {
                return problem
            }
            // The duplicate comes while another request is pending, and just before a newer
            // request reuses the answered id: it must complete neither.
            let following = fixture.launch(next, context)
            if let problem = await madeAll([following], context) { return problem }
            await stray(first, token(first, 2))
            let duplicate = [token(first, 2): "a duplicate of an earlier request's reply"]
            let reuse = fixture.launch(first, context)
            if let problem = await madeAll([reuse], context) {
                guard case .usageError = problem, let early = await outcome(of: reuse, within: context.patience)
                else { return problem }
                // Ended before its reply was made: it took what the adapter kept from before.
                if let wrong = expect(early, id: first, token: token(first, 3), fixture, context, others: duplicate) {
                    guard case .fail(let observed) = wrong else { return wrong }
                    return .fail(
                        "\(observed). The newer request under id \(first) ended before its reply was made: a reply for an id the adapter does not hold (a duplicate, a stray) must be dropped, never kept for the next request with that id"
                    )
                }
                return problem
            }
            await fixture.answer(first, token(first, 3))
            await fixture.answer(next, token(next))
            for (id, call, own) in [(next, following, token(next)), (first, reuse, token(first, 3))] {
                let result = await outcome(of: call, within: context.patience)
                if let problem = expect(result, id: id, token: own, fixture, context, others: duplicate) {
                    return problem
                }
            }
            return .pass
        }
    }

    static var failureThenNext: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "keyed-failure-then-next",
            summary:
                "the SDK fails a request: its caller throws, and the next request still gets its reply (nothing stays blocked)"
        ) { fixture, context in
            guard let failing = fixture.failing else {
                return .notChecked("the fixture gives no failing: the SDK cannot be made to fail a request")
            }
            let ids = ids(3, count: 2)
            let call = fixture.launch(ids[0], context)
            if let problem = await madeAll([call], context) { return problem }
            await failing(ids[0])
            switch await outcome(of: call, within: context.patience) {
            case nil:
                return .fail(
                    "the caller of request \(ids[0]) was not resumed within \(context.patience) of the SDK failing it: the adapter loses failure replies"
                )
            case .success?:
                return .fail(
                    "the SDK failed request \(ids[0]), yet its caller got a value: a failure must reach the caller as a thrown error"
                )
            case .failure?:
                break
            }
            let next = fixture.launch(ids[1], context)
            if let problem = await madeAll([next], context) {
                if case .notChecked = problem {
                    return .fail(
                        "after the SDK failed a request, the next request was not made within \(context.patience): the adapter (or the SDK's thread it holds) stays blocked after a failure"
                    )
                }
                return problem
            }
            await fixture.answer(ids[1], token(ids[1]))
            let result = await outcome(of: next, within: context.patience)
            if let problem = expect(result, id: ids[1], token: token(ids[1]), fixture, context) {
                return problem
            }
            return .pass
        }
    }

    static var cancelThenReuse: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "keyed-cancel-then-reuse",
            summary:
                "a caller leaves, and a newer request reuses its id before the SDK is done with the old one (its reply came while its cancel was held back, or its late reply is still to come): the newer caller gets its own reply"
        ) { fixture, context in
            let id = ids(4, count: 1)[0]
            let late = fixture.requestCancellation == .none
            let hold = CancelHold(bound: context.patience / 4)
            let first = fixture.launch(id, context, CallHostility(holdCancel: late ? nil : hold))
            if let problem = await madeAll([first], context) {
                hold.open()
                return problem
            }
            first.task.cancel()
            switch await outcome(of: first, within: context.patience) {
            case nil:
                hold.open()
                return .fail(
                    "the caller of request \(id) was not resumed within \(context.patience) of its task being cancelled: the adapter waits for the SDK instead of letting a cancelled caller go"
                )
            case .success?:
                hold.open()
                return .usageError(
                    "request \(id) returned a value though the suite never answered it: the fixture's request must wait for the reply the suite asks for"
                )
            case .failure?:
                break
            }
            if !late {
                // The SDK answers the old request while its cancel is held: the reply loses against
                // the cancel, and the SDK is done with it. A cancel by id made after this reaches
                // whatever request holds the id then.
                await fixture.answer(id, token(id, 1))
            }
            // The newer request, while the old one's SDK cancel is held (or its late reply due).
            var reuse = fixture.launch(id, context)
            let newer = reuse.recorder
            _ = await eventually(within: context.patience / 4) {
                let snapshot = newer.snapshot
                return snapshot.startsEnded > 0 || snapshot.end != nil
            }
            hold.open()
            if !late {
                // Whatever SDK cancel the adapter still makes for the old request, through its
                // probe, lands now, before the newer request's reply: wait for it to return, or
                // for the adapter to drop the old probe (no cancel can come any more).
                let old = first.recorder
                _ = await eventually(within: context.patience / 4) {
                    let snapshot = old.snapshot
                    return (snapshot.cancels > 0 && snapshot.cancelsEnded == snapshot.cancels) || old.adapterLetGo
                }
            }
            var lateSent = !late
            if reuse.recorder.snapshot.end != nil {
                // Refused: the adapter keeps the id while the SDK may still answer or cancel the
                // old request. Then it must free it once the SDK is done: retry until accepted.
                if !lateSent {
                    await fixture.answer(id, token(id, 1))
                    lateSent = true
                }
                let clock = ContinuousClock()
                let deadline = clock.now + context.patience
                var accepted = false
                while clock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(10))
                    reuse = fixture.launch(id, context)
                    let retried = reuse.recorder
                    _ = await eventually {
                        let snapshot = retried.snapshot
                        return snapshot.startsEnded > 0 || snapshot.end != nil
                    }
                    if reuse.recorder.snapshot.end == nil {
                        accepted = true
                        break
                    }
                }
                guard accepted else {
                    return .fail(
                        "a request under id \(id) was refused for \(context.patience) after the earlier request with that id ended\(late ? " and its late reply came" : ""): the adapter never frees the id"
                    )
                }
            }
            if let problem = await madeAll([reuse], context) { return problem }
            if !lateSent { await fixture.answer(id, token(id, 1)) }
            await fixture.answer(id, token(id, 2))
            let result = await outcome(of: reuse, within: context.patience)
            let why =
                late
                ? "the late reply of the request whose caller left completed the newer request that reused its id: keep the id reserved until that reply comes (PendingRequests without a cancel does)"
                : "the SDK's cancel for the request whose caller left reached the newer request that reused its id: cancel by id only while the id still belongs to the request the cancel was made for (PendingRequests does), or keep the id until the cancel returned"
            if case .success(let value)? = result, fixture.token(value) == token(id, 1) {
                return .fail("the caller of the newer request \(id) got the reply carrying \(token(id, 1)): \(why)")
            }
            if let problem = expect(result, id: id, token: token(id, 2), fixture, context) {
                guard case .fail(let observed) = problem else { return problem }
                return .fail("\(observed). Likely: \(why)")
            }
            return .pass
        }
    }

    static var manyOutstanding: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "keyed-many-outstanding",
            summary: "32 requests outstanding at once, answered in a seeded random order: each gets its own reply"
        ) { fixture, context in
            let ids = ids(5, count: 32)
            let calls = ids.map { fixture.launch($0, context) }
            if let problem = await madeAll(calls, context) { return problem }
            var random = SplitMix64(seed: context.options.seed ^ 0x1D5)
            for id in ids.shuffled(using: &random) { await fixture.answer(id, token(id)) }
            for (id, call) in zip(ids, calls) {
                let result = await outcome(of: call, within: context.patience)
                if let problem = expect(result, id: id, token: token(id), fixture, context) { return problem }
            }
            return .pass
        }
    }

    /// The caller's outcome, or `nil` when it did not come within `bound`.
    static func outcome(of call: LaunchedCall<Value>, within bound: Duration) async -> Result<Value, any Error>? {
        await TokenedCalls<Value>.outcome(of: call, within: bound)
    }
}
