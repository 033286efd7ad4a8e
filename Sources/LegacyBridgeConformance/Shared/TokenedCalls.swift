import LegacyBridge

// Calls whose answers the suite makes itself, each carrying a token it can read back from the
// caller's value: the keyed, latest-wins and coalesced fixtures. What they share: knowing when a
// call's SDK request was made (an answer made before that would answer nothing), and judging
// whether a caller got the answer meant for it.

enum TokenedCalls<Value: Sendable> {
    /// Waits until each call's SDK request was made (the probe's start returned) or the call
    /// ended. `nil` when all were made; otherwise the reason the scenario cannot go on.
    /// `answer` names what the suite makes ("reply", "answer").
    static func madeAll(_ calls: [LaunchedCall<Value>], answer: String = "reply") async -> Check? {
        _ = await eventually {
            calls.allSatisfy { $0.recorder.snapshot.startsEnded > 0 || $0.recorder.snapshot.end != nil }
        }
        if calls.contains(where: { $0.recorder.snapshot.startsBegun == 0 && $0.recorder.snapshot.end == nil }) {
            return .notChecked(
                "the adapter does not pass its SDK call through probe.start, so the suite cannot tell when a request reached the SDK, and a \(answer) made before that would answer nothing"
            )
        }
        for call in calls where call.recorder.snapshot.end != nil {
            let result = await call.result
            return .usageError(
                "a call returned \(describeOutcome(result)) before the suite made its \(answer): the fixture's call must wait for the \(answer) the suite asks for (a list nobody pushes to, a test double that holds it)"
            )
        }
        return nil
    }

    /// Whether `result` is the value that carried `token`; the problem otherwise. `subject` names
    /// the call in messages ("request 5"), `answer` what the suite made ("reply"), and `others`
    /// the tokens of other answers, to say whose the caller got.
    static func expect(
        _ result: Result<Value, any Error>?, subject: String, answer: String = "reply", token: UInt64,
        tokenOf: (Value) -> UInt64?, patience: Duration, others: [UInt64: String] = [:]
    ) -> Check? {
        guard let result else {
            return .fail(
                "the caller of \(subject) was not resumed within \(patience) of its \(answer): the adapter lost the \(answer), or matched it to another call"
            )
        }
        switch result {
        case .success(let value):
            guard let got = tokenOf(value) else {
                return .fail(
                    "the caller of \(subject) got a value that carries no token, though its \(answer) carried \(token): the adapter must return the value of the call's own \(answer)"
                )
            }
            guard got == token else {
                let whose = others[got].map { " (\($0))" } ?? ""
                return .fail(
                    "the caller of \(subject) got the \(answer) carrying \(got)\(whose), but its own \(answer) carried \(token): the adapter gave one call the \(answer) of another"
                )
            }
            return nil
        case .failure(let error):
            return .fail(
                "the caller of \(subject) threw \(type(of: error)) (\(error)), though the SDK answered it with a value carrying \(token): the adapter must deliver each call's own \(answer)"
            )
        }
    }

    /// Launches `body` with a fresh recorder (with `hostility`), watched to the scenario's end.
    static func launch(
        _ context: FixtureContext, _ hostility: CallHostility<Value> = .init(),
        _ body: @escaping OneShotFixture<Value>.Call
    ) -> LaunchedCall<Value> {
        let recorder = CallRecorder(hostility, threading: context.threading)
        context.watch(recorder)
        return launchCall(body, recorder)
    }

    /// The caller's outcome, or `nil` when it did not come within `bound`.
    static func outcome(of call: LaunchedCall<Value>, within bound: Duration) async -> Result<Value, any Error>? {
        await OneShotFixtureScenarios<Value>.outcome(of: call, within: bound)
    }
}
