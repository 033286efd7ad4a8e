import LegacyBridge
import LegacySimulator

/// The coalesced contract: concurrent callers for one key share one SDK call and its answer, one
/// caller leaving leaves the call to the others, and the last one leaving cancels it.
///
/// Every caller has joined before the scenario goes on: the callers' tasks run on one thread of
/// the suite's own, first come first served, and a task queued after them runs only once each
/// caller suspended. The SDK's calls answer only when the scenario says (``CallDesk``).
enum CoalescedScenarios {
    static let all: [Scenario<any CoalescedAdapter, LabContext>] = [
        sharesOneCall, firstLeaverKeepsCall, lastLeaverCancels, failureNotKept,
    ]

    static func open(_ adapter: any CoalescedAdapter) async throws -> (CallDesk, any CoalescedSession) {
        let desk = CallDesk()
        return (desk, try await adapter.open(LegacyCallSDK(desk: desk)))
    }

    /// `count` callers for `key` on one thread of the suite's own, and a flag set once each of
    /// them suspended.
    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    static func callers(
        _ count: Int, key: UInt64, of session: any CoalescedSession
    ) async -> [Task<Result<LegacyAnswer, any Error>, Never>]? {
        let lane = ScenarioExecutor(label: "conformance callers", maxThreads: 1)
        let tasks = (0..<count).map { _ in
            Task(executorPreference: lane) { () -> Result<LegacyAnswer, any Error> in
                do { return .success(try await session.value(for: key)) } catch { return .failure(error) }
            }
        }
        guard await lane.ranEverythingQueued() else {
            for task in tasks { task.cancel() }
            return nil
        }
        return tasks
    }

    typealias CallerTask = Task<Result<LegacyAnswer, any Error>, Never>

    /// Opens the adapter and starts `count` callers for key 5, each suspended in it before this
    /// returns; stops the scenario when that cannot be done.
    static func sharing(
        _ count: Int, _ adapter: any CoalescedAdapter
    ) async throws -> (CallDesk, any CoalescedSession, [CallerTask]) {
        guard #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) else {
            throw ScenarioStop(check: .notChecked("this scenario needs task executors (macOS 15, iOS 18 or later)"))
        }
        let desk: CallDesk
        let session: any CoalescedSession
        do {
            (desk, session) = try await open(adapter)
        } catch {
            throw ScenarioStop(check: .fail("could not open the adapter: \(error)"))
        }
        guard let tasks = await callers(count, key: 5, of: session) else {
            throw ScenarioStop(
                check: .fail(
                    "\(count) callers did not all suspend within \(Patience.bound) (the adapter blocks its callers)"))
        }
        return (desk, session, tasks)
    }

    static let sharesOneCall = Scenario<any CoalescedAdapter, LabContext>(
        name: "coalesced-shares-one-call",
        summary:
            "3 concurrent callers for one key share one SDK call and its answer; a caller after the answer starts a new call"
    ) { adapter, _ in
        let (desk, session, tasks) = try await sharing(3, adapter)
        guard desk.starts == 1 else {
            await desk.answerAllPending()
            return .fail(
                "3 concurrent callers for one key made \(desk.starts) SDK calls, expected 1: share the call in flight")
        }
        await desk.answer(1)
        guard let results = await values(of: tasks, within: Patience.bound) else {
            return .fail("a caller was not resumed within \(Patience.bound) of the shared call's answer")
        }
        for (index, result) in results.enumerated() {
            guard case .success(let answer) = result, answer.call == 1 else {
                return .fail("caller \(index + 1) of 3 got \(describe(result)), expected the answer of call 1")
            }
        }
        let later = launchCall { try await session.value(for: 5) }
        guard await eventually({ desk.starts == 2 }) else {
            later.cancel()
            return .fail(
                "a caller that came after the answer started no new SDK call: an answered call must not be reused")
        }
        await desk.answer(2)
        guard let result = await values(of: [later], within: Patience.bound)?.first,
            case .success(let answer) = result, answer.call == 2
        else {
            return .fail("the caller after the answer did not get the answer of its own call")
        }
        return .pass
    }

    static let firstLeaverKeepsCall = Scenario<any CoalescedAdapter, LabContext>(
        name: "coalesced-first-leaver-keeps-call",
        summary:
            "of 3 callers sharing one call, the first is cancelled: it throws CancellationError, the call goes on and the other 2 get its answer"
    ) { adapter, _ in
        let (desk, _, tasks) = try await sharing(3, adapter)
        cancelFromForeignThread(tasks[0])
        guard let leaver = await values(of: [tasks[0]], within: Patience.bound)?.first else {
            await desk.answerAllPending()
            return .fail("a cancelled caller was not resumed within \(Patience.bound)")
        }
        guard case .failure(let error) = leaver, error is CancellationError else {
            await desk.answerAllPending()
            return .fail("a cancelled caller got \(describe(leaver)), expected CancellationError")
        }
        guard await desk.answer(1) else {
            _ = await values(of: Array(tasks.dropFirst()), within: Patience.bound)
            return .fail(
                "when the first of 3 callers left, the shared SDK call was cancelled: the 2 callers still waiting lost their answer. Cancel the call only when its last waiter leaves"
            )
        }
        guard let rest = await values(of: Array(tasks.dropFirst()), within: Patience.bound) else {
            return .fail("a remaining caller was not resumed within \(Patience.bound) of the shared call's answer")
        }
        for (index, result) in rest.enumerated() {
            guard case .success(let answer) = result, answer.call == 1 else {
                return .fail("caller \(index + 2) of 3 got \(describe(result)), expected the answer of call 1")
            }
        }
        return .pass
    }

    static let lastLeaverCancels = Scenario<any CoalescedAdapter, LabContext>(
        name: "coalesced-last-leaver-cancels",
        summary:
            "both callers sharing one call are cancelled: each throws CancellationError, the SDK call is cancelled once"
    ) { adapter, _ in
        let (desk, _, tasks) = try await sharing(2, adapter)
        for task in tasks { cancelFromForeignThread(task) }
        guard let results = await values(of: tasks, within: Patience.bound) else {
            await desk.answerAllPending()
            return .fail("a cancelled caller was not resumed within \(Patience.bound)")
        }
        for (index, result) in results.enumerated() {
            guard case .failure(let error) = result, error is CancellationError else {
                await desk.answerAllPending()
                return .fail("cancelled caller \(index + 1) got \(describe(result)), expected CancellationError")
            }
        }
        guard await eventually({ desk.wasCancelled(1) }) else {
            await desk.answerAllPending()
            return .fail(
                "\(Patience.bound) after the last waiter left, the shared SDK call was still running: cancel it when its last waiter leaves"
            )
        }
        guard desk.cancels(of: 1) == 1 else {
            return .fail("the adapter called the shared call's cancel \(desk.cancels(of: 1)) times, expected once")
        }
        return .pass
    }

    static let failureNotKept = Scenario<any CoalescedAdapter, LabContext>(
        name: "coalesced-failure-not-kept",
        summary:
            "2 callers share one call, which fails: both get its error; a caller for the same key after it starts a new SDK call and gets its answer"
    ) { adapter, _ in
        let (desk, session, tasks) = try await sharing(2, adapter)
        // An adapter may start its SDK call from a task of its own: wait for it (it must come).
        guard await eventually({ desk.starts >= 1 }), desk.starts == 1 else {
            await desk.answerAllPending()
            return .fail(
                "2 concurrent callers for one key made \(desk.starts) SDK calls, expected 1: share the call in flight")
        }
        await desk.fail(1)
        guard let results = await values(of: tasks, within: Patience.bound) else {
            return .fail("a caller was not resumed within \(Patience.bound) of the shared call's failure")
        }
        for (index, result) in results.enumerated() {
            guard case .failure(let error) = result, (error as? LegacySDKError) == .remote else {
                return .fail(
                    "caller \(index + 1) of 2 got \(describe(result)), expected the shared call's error (LegacySDKError.remote)"
                )
            }
        }
        let later = launchCall { try await session.value(for: 5) }
        guard await eventually({ desk.starts == 2 }) else {
            let kept = await values(of: [later], within: Patience.bound)?.first
            return .fail(
                "a caller for the same key after the shared call failed started no new SDK call\(kept.map { " and got \(describe($0))" } ?? ""): the failure was kept for the key. Forget a call when it ends, whatever its outcome"
            )
        }
        await desk.answer(2)
        guard let result = await values(of: [later], within: Patience.bound)?.first,
            case .success(let answer) = result, answer.call == 2
        else {
            return .fail("the caller after the failure did not get the answer of its own call")
        }
        return .pass
    }
}
