// Latest-wins and coalesced adapters over a test double of a one-shot SDK call, checked through
// `LatestWinsFixture` and `CoalescedFixture` the way a user checks their own: the library's
// `LatestWins` and `CoalescedCalls`, over an SDK that can withdraw a request and over one that
// cannot, and hand-written adapters that each get one thing wrong.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// A test double of an SDK's one-shot call for a key (a search, a lookup), with a callback per
/// call and a handle to cancel it. It answers the requests it holds for a key only when told, on
/// its own reply thread; a request it no longer holds (withdrawn, answered) gets nothing.
public final class CallDoubleSDK: Sendable {
    /// Whether ``cancel(_:)`` withdraws a request (an SDK with a per-request cancel).
    public let canCancel: Bool
    private struct Request {
        var key: UInt64
        var callback: @Sendable (Result<UInt64, any Error>) -> Void
    }
    private struct State {
        var requests: [UInt64: Request] = [:]
        var nextHandle: UInt64 = 1
    }
    private let state = LockedValue(State())
    private let replies = DispatchQueue(label: "call-double-replies")

    /// Creates the double.
    /// - Parameter canCancel: Whether ``cancel(_:)`` withdraws a request.
    public init(canCancel: Bool) {
        self.canCancel = canCancel
    }

    /// The error the double reports for a request it fails (``fail(key:)``).
    public struct Failure: Error, Sendable, Hashable {}

    /// Starts a request for `key`; `callback` gets its answer, once, on the reply thread.
    /// - Returns: The request's handle, for ``cancel(_:)``.
    public func start(key: UInt64, callback: @escaping @Sendable (Result<UInt64, any Error>) -> Void) -> UInt64 {
        state.withLock { state in
            let handle = state.nextHandle
            state.nextHandle += 1
            state.requests[handle] = Request(key: key, callback: callback)
            return handle
        }
    }

    /// Withdraws the request `handle` if the double can, silently. Returns whether it was held.
    @discardableResult
    public func cancel(_ handle: UInt64) -> Bool {
        guard canCancel else { return false }
        return state.withLock { $0.requests.removeValue(forKey: handle) != nil }
    }

    /// Answers every held request for `key` with `token`, on the reply thread. Returns once
    /// delivered.
    public func answer(key: UInt64, token: UInt64) {
        deliver(key, .success(token))
    }

    /// Fails every held request for `key`, on the reply thread. Returns once delivered.
    public func fail(key: UInt64) {
        deliver(key, .failure(Failure()))
    }

    /// Requests the double holds now.
    public var outstanding: Int { state.withLock { $0.requests.count } }

    private func deliver(_ key: UInt64, _ result: Result<UInt64, any Error>) {
        replies.sync {
            let callbacks = state.withLock { state in
                let handles = state.requests.filter { $0.value.key == key }.map(\.key).sorted()
                return handles.compactMap { state.requests.removeValue(forKey: $0)?.callback }
            }
            for callback in callbacks { callback(result) }
        }
    }
}

/// Latest-wins and coalesced adapters over ``CallDoubleSDK``, as fixtures.
public enum CallDoubleFixtures {
    /// Starts the double's call for `key` through `probe`, delivering to `deliver`; returns how
    /// to withdraw it through the probe.
    static func start(
        _ sdk: CallDoubleSDK, key: UInt64, probe: CallProbe<UInt64>,
        deliver: @escaping @Sendable (Result<UInt64, any Error>) -> Void
    ) -> @Sendable () -> Void {
        let callback = probe.callback(deliver)
        let handle = probe.start { sdk.start(key: key, callback: callback) }
        return { probe.cancel { _ = sdk.cancel(handle) } }
    }

    static func latestWins(
        name: String, sdk: CallDoubleSDK, call: @escaping LatestWinsFixture<UInt64>.Call
    ) -> LatestWinsFixture<UInt64> {
        LatestWinsFixture(
            name: name, call: call,
            answer: { key, token in sdk.answer(key: key, token: token) },
            token: { $0 },
            failing: { key in sdk.fail(key: key) },
            liveResources: { sdk.outstanding },
            requestCancellation: sdk.canCancel ? .perRequest : .none)
    }

    static func coalesced(
        name: String, sdk: CallDoubleSDK, tracked: @escaping @Sendable () -> Int = { 0 },
        call: @escaping CoalescedFixture<UInt64>.Call
    ) -> CoalescedFixture<UInt64> {
        CoalescedFixture(
            name: name, call: call,
            answer: { key, token in sdk.answer(key: key, token: token) },
            token: { $0 },
            failing: { key in sdk.fail(key: key) },
            liveResources: { sdk.outstanding + tracked() },
            requestCancellation: sdk.canCancel ? .perRequest : .none)
    }

    /// The library's latest-wins bridge: one `LatestWins` over the double's call. Expected to pass
    /// every scenario.
    public static func latestWins(canCancel: Bool) -> LatestWinsFixture<UInt64> {
        let sdk = CallDoubleSDK(canCancel: canCancel)
        let runs = LatestWins<UInt64>()
        return latestWins(
            name: canCancel ? "latest-double-latest-wins" : "latest-double-latest-wins-no-cancel", sdk: sdk
        ) { key, probe in
            try await runs.run { completion in
                let cancel = start(sdk, key: key, probe: probe) { _ = completion($0) }
                return canCancel ? CancelHandle(cancel) : nil
            }
        }
    }

    /// The library's coalesced bridge: one `CoalescedCalls` table over the double's call.
    /// Expected to pass every scenario.
    public static func coalescedCalls(canCancel: Bool) -> CoalescedFixture<UInt64> {
        let sdk = CallDoubleSDK(canCancel: canCancel)
        let calls = CoalescedCalls<UInt64, UInt64>()
        let tracked: @Sendable () -> Int = { calls.statistics.inFlight }
        return coalesced(
            name: canCancel ? "coalesced-double-coalesced-calls" : "coalesced-double-coalesced-calls-no-cancel",
            sdk: sdk, tracked: tracked
        ) { key, probe in
            try await calls.value(for: key) { completion in
                let cancel = start(sdk, key: key, probe: probe) { _ = completion($0) }
                return canCancel ? CancelHandle(cancel) : nil
            }
        }
    }
}

/// One mistake of a hand-written latest-wins adapter over ``CallDoubleSDK``: WRONG ON PURPOSE.
public enum LatestWinsDoubleMistake: String, CaseIterable, Sendable {
    /// One slot for "the current caller": whatever answer comes resumes whoever holds the slot
    /// then, so a superseded call's late answer lands in the newest caller's hands.
    case deliversToNewest = "latest-double-delivers-to-newest"
    /// `LatestWins` with no cancel handle over an SDK that could withdraw a request: a
    /// superseded request runs on, holding what it allocated.
    case neverCancels = "latest-double-never-cancels"
    /// Each caller waits for its own answer and only then checks that it is still the newest: a
    /// superseded caller waits for an answer nobody wants (forever, if it never comes).
    case supersededWaits = "latest-double-superseded-waits"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .deliversToNewest: return ["latest-late-answer-never-lands"]
        case .neverCancels, .supersededWaits: return ["latest-superseded-let-go"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .deliversToNewest:
            return
                "WRONG ON PURPOSE: a latest-wins slot whose callback resumes the current caller, whoever it is: a late answer lands in the newest"
        case .neverCancels:
            return "WRONG ON PURPOSE: LatestWins with no cancel handle: a superseded SDK request runs on"
        case .supersededWaits:
            return "WRONG ON PURPOSE: a latest-wins adapter that checks the revision only when the answer comes"
        }
    }

    /// The mistaken adapter's fixture, over a fresh double.
    public var fixture: LatestWinsFixture<UInt64> {
        switch self {
        case .deliversToNewest:
            let sdk = CallDoubleSDK(canCancel: true)
            typealias Resume = @Sendable (Result<UInt64, any Error>) -> Void
            let slot = LockedValue<(resume: Resume, cancel: (@Sendable () -> Void)?)?>(nil)
            return CallDoubleFixtures.latestWins(name: rawValue, sdk: sdk) { key, probe in
                try await withCheckedThrowingContinuation { continuation in
                    let resume: Resume = { continuation.resume(with: $0) }
                    let previous = slot.withLock { slot in
                        defer { slot = (resume, nil) }
                        return slot
                    }
                    previous?.cancel?()
                    previous?.resume(.failure(SupersededError()))
                    // WRONG: the answer resumes whoever holds the slot when it comes.
                    let cancel = CallDoubleFixtures.start(sdk, key: key, probe: probe) { result in
                        slot.withLock { slot in
                            defer { slot = nil }
                            return slot?.resume
                        }?(result)
                    }
                    slot.withLock { slot in slot?.cancel = cancel }
                }
            }
        case .neverCancels:
            let sdk = CallDoubleSDK(canCancel: true)
            let runs = LatestWins<UInt64>()
            return CallDoubleFixtures.latestWins(name: rawValue, sdk: sdk) { key, probe in
                try await runs.run { completion in
                    _ = CallDoubleFixtures.start(sdk, key: key, probe: probe) { _ = completion($0) }
                    return nil  // WRONG: the SDK could withdraw the request; nobody asks it to.
                }
            }
        case .supersededWaits:
            let sdk = CallDoubleSDK(canCancel: false)
            let revision = LockedValue<UInt64>(0)
            return CallDoubleFixtures.latestWins(name: rawValue, sdk: sdk) { key, probe in
                let mine = revision.withLock { revision in
                    revision += 1
                    return revision
                }
                let value = try await withCheckedThrowingContinuation { continuation in
                    _ = CallDoubleFixtures.start(sdk, key: key, probe: probe) { continuation.resume(with: $0) }
                }
                // WRONG: checked only once the answer came; until then a superseded caller waits.
                guard revision.withLock({ $0 }) == mine else { throw SupersededError() }
                return value
            }
        }
    }
}

/// One mistake of a hand-written coalesced adapter over ``CallDoubleSDK``: WRONG ON PURPOSE.
public enum CoalescedDoubleMistake: String, CaseIterable, Sendable {
    /// Every caller makes its own SDK call: nothing is shared.
    case callPerCaller = "coalesced-double-call-per-caller"
    /// A shared call that any caller's cancellation cancels, for every caller sharing it.
    case firstLeaverCancels = "coalesced-double-first-leaver-cancels"
    /// `CoalescedCalls` with no cancel handle over an SDK that could withdraw a request: a call
    /// every caller left runs on.
    case neverCancels = "coalesced-double-never-cancels"
    /// A failure kept for its key: every later caller for it gets the old error, and no SDK call.
    case keepsFailure = "coalesced-double-keeps-failure"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .callPerCaller: return ["coalesced-shares-one-call"]
        case .firstLeaverCancels: return ["coalesced-first-leaver-keeps-call"]
        case .neverCancels: return ["coalesced-last-leaver-cancels"]
        case .keepsFailure: return ["coalesced-failure-not-kept"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .callPerCaller: return "WRONG ON PURPOSE: one SDK call per caller, nothing shared"
        case .firstLeaverCancels:
            return "WRONG ON PURPOSE: a shared call that any leaving caller cancels for all of them"
        case .neverCancels: return "WRONG ON PURPOSE: CoalescedCalls with no cancel handle: an abandoned call runs on"
        case .keepsFailure:
            return "WRONG ON PURPOSE: a coalesced table that keeps a key's failure for every later caller"
        }
    }

    /// The mistaken adapter's fixture, over a fresh double.
    public var fixture: CoalescedFixture<UInt64> {
        let sdk = CallDoubleSDK(canCancel: true)
        switch self {
        case .callPerCaller:
            return CallDoubleFixtures.coalesced(name: rawValue, sdk: sdk) { key, probe in
                // WRONG: a call of its own for every caller.
                try await withCallback { completion in
                    CancelHandle(CallDoubleFixtures.start(sdk, key: key, probe: probe) { _ = completion($0) })
                }
            }
        case .firstLeaverCancels:
            typealias Resume = @Sendable (Result<UInt64, any Error>) -> Void
            struct Shared {
                var waiters: [UInt64: Resume] = [:]
                var cancel: (@Sendable () -> Void)?
            }
            let table = LockedValue<(calls: [UInt64: Shared], next: UInt64)>(([:], 0))
            let tracked: @Sendable () -> Int = { table.withLock { $0.calls.count } }
            return CallDoubleFixtures.coalesced(
                name: rawValue, sdk: sdk, tracked: tracked
            ) { key, probe in
                let waiter = table.withLock { table in
                    table.next += 1
                    return table.next
                }
                return try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        let resume: Resume = { continuation.resume(with: $0) }
                        let leads = table.withLock { table in
                            let leads = table.calls[key] == nil
                            table.calls[key, default: Shared()].waiters[waiter] = resume
                            return leads
                        }
                        guard leads else { return }
                        let cancel = CallDoubleFixtures.start(sdk, key: key, probe: probe) { result in
                            let waiters = table.withLock { $0.calls.removeValue(forKey: key)?.waiters ?? [:] }
                            for resume in waiters.values { resume(result) }
                        }
                        table.withLock { $0.calls[key]?.cancel = cancel }
                    }
                } onCancel: {
                    // WRONG: one caller leaving ends the shared call for all of them.
                    guard let shared = table.withLock({ $0.calls.removeValue(forKey: key) }) else { return }
                    shared.cancel?()
                    for resume in shared.waiters.values { resume(.failure(CancellationError())) }
                }
            }
        case .neverCancels:
            let calls = CoalescedCalls<UInt64, UInt64>()
            let tracked: @Sendable () -> Int = { calls.statistics.inFlight }
            return CallDoubleFixtures.coalesced(
                name: rawValue, sdk: sdk, tracked: tracked
            ) { key, probe in
                try await calls.value(for: key) { completion in
                    _ = CallDoubleFixtures.start(sdk, key: key, probe: probe) { _ = completion($0) }
                    return nil  // WRONG: the SDK could withdraw the request; nobody asks it to.
                }
            }
        case .keepsFailure:
            let calls = CoalescedCalls<UInt64, UInt64>()
            let failures = LockedValue<[UInt64: any Error]>([:])
            let tracked: @Sendable () -> Int = { calls.statistics.inFlight }
            return CallDoubleFixtures.coalesced(
                name: rawValue, sdk: sdk, tracked: tracked
            ) { key, probe in
                // WRONG: a failure answers every later caller for its key, forever.
                if let failure = failures.withLock({ $0[key] }) { throw failure }
                do {
                    return try await calls.value(for: key) { completion in
                        CancelHandle(CallDoubleFixtures.start(sdk, key: key, probe: probe) { _ = completion($0) })
                    }
                } catch let failure as CallDoubleSDK.Failure {
                    failures.withLock { $0[key] = failure }
                    throw failure
                }
            }
        }
    }
}
