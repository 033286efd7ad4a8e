import LegacyBridge
import LegacySimulator

/// The latest-wins contract: the newest caller gets the answer of its own call, never a late one
/// of a call it superseded, and a superseded SDK call is cancelled.
///
/// The SDK's calls answer only when the scenario says (``CallDesk``), so "call 1 answers after
/// call 2 started" is forced, not hoped for.
enum LatestWinsScenarios {
    static let all: [Scenario<any LatestWinsAdapter, LabContext>] = [lateResultNeverLands, supersededCallCancelled]

    static func open(_ adapter: any LatestWinsAdapter) async throws -> (CallDesk, any LatestWinsSession) {
        let desk = CallDesk()
        return (desk, try await adapter.open(LegacyCallSDK(desk: desk)))
    }

    typealias CallerTask = Task<Result<LegacyAnswer, any Error>, Never>

    /// Opens the adapter and makes call 1, then call 2 once call 1 reached the SDK; returns once
    /// call 2 reached it too, or stops the scenario.
    static func twoCalls(
        _ adapter: any LatestWinsAdapter
    ) async throws -> (CallDesk, CallerTask, CallerTask) {
        let desk: CallDesk
        let session: any LatestWinsSession
        do {
            (desk, session) = try await open(adapter)
        } catch {
            throw ScenarioStop(check: .fail("could not open the adapter: \(error)"))
        }
        let first = launchCall { try await session.latest(1) }
        guard await eventually({ desk.starts == 1 }) else {
            first.cancel()
            throw ScenarioStop(check: .fail("the first call never reached the SDK"))
        }
        let second = launchCall { try await session.latest(2) }
        guard await eventually({ desk.starts == 2 }) else {
            await desk.answerAllPending()
            throw ScenarioStop(check: .fail("the second call never reached the SDK"))
        }
        return (desk, first, second)
    }

    static let lateResultNeverLands = Scenario<any LatestWinsAdapter, LabContext>(
        name: "latest-late-answer-never-lands",
        summary:
            "call 1 answers after call 2 superseded it, then call 2 answers: the newest caller gets call 2's answer, the superseded one an error"
    ) { adapter, _ in
        let (desk, first, second) = try await twoCalls(adapter)
        // Call 1's result was already on its way when call 2 superseded it.
        await desk.answer(1, evenIfCancelled: true)
        await desk.answer(2)
        guard let results = await values(of: [first, second], within: Patience.bound) else {
            return .fail(
                "a caller was not resumed within \(Patience.bound) of both calls answering: resume the superseded caller with an error, and the newest with its own answer"
            )
        }
        guard case .success(let answer) = results[1], answer.key == 2 else {
            return .fail(
                "the caller of the newest call got \(describe(results[1])): a superseded call's late result must never land (check the revision before delivering)"
            )
        }
        if case .success = results[0] {
            return .fail("the superseded caller got \(describe(results[0])), expected an error")
        }
        return .pass
    }

    static let supersededCallCancelled = Scenario<any LatestWinsAdapter, LabContext>(
        name: "latest-superseded-let-go",
        summary:
            "call 2 starts while call 1 waits for its answer: call 1's SDK call is cancelled once and its caller throws, call 2 returns its answer"
    ) { adapter, _ in
        let (desk, first, second) = try await twoCalls(adapter)
        guard await eventually({ desk.wasCancelled(1) }) else {
            await desk.answerAllPending()
            return .fail(
                "\(Patience.bound) after call 2 started, call 1's SDK call was still running: cancel the superseded call when a newer one starts, not only refuse its result"
            )
        }
        guard let superseded = await values(of: [first], within: Patience.bound)?.first else {
            await desk.answerAllPending()
            return .fail("the superseded caller was not resumed within \(Patience.bound) of its call's cancellation")
        }
        if case .success = superseded {
            return .fail("the superseded caller got \(describe(superseded)), expected an error")
        }
        await desk.answer(2)
        guard let newest = await values(of: [second], within: Patience.bound)?.first else {
            return .fail("the newest caller was not resumed within \(Patience.bound) of its call's answer")
        }
        guard case .success(let answer) = newest, answer.key == 2 else {
            return .fail("the caller of the newest call got \(describe(newest)), expected call 2's answer")
        }
        guard desk.cancels(of: 1) == 1, desk.cancels(of: 2) == 0 else {
            return .fail(
                "the adapter called call 1's cancel \(desk.cancels(of: 1)) time(s) and call 2's \(desk.cancels(of: 2)), expected once and never"
            )
        }
        return .pass
    }
}
