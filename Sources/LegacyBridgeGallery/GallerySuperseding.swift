// Bad-adapter gallery, superseding and coalesced calls: WRONG ON PURPOSE. See Gallery.swift.

import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. A revision check without a cancel: each call remembers the revision it
/// started at and refuses its result if a newer call began, but never cancels the call it
/// superseded.
///
/// Why it is wrong: the stale result never lands, but the superseded SDK call keeps running to
/// its end, and its caller waits for it. Type ten letters and ten searches run at once.
/// Flagged by: `latest-superseded-let-go`.
public struct RevisionWithoutCancelAdapter: LatestWinsAdapter {
    /// Creates the adapter.
    public init() {}
    /// `revision-without-cancel`.
    public var name: String { "revision-without-cancel" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: refuses a superseded call's result by revision but never cancels the call"
    }

    /// Returns a session with a revision counter.
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ sdk: LegacyCallSDK) async throws -> any LatestWinsSession {
        Session(sdk: sdk, revision: LockedBox(0))
    }

    private struct Session: LatestWinsSession {
        let sdk: LegacyCallSDK
        let revision: LockedBox<Int>

        func latest(_ key: UInt64) async throws -> LegacyAnswer {
            let mine = revision.withLock {
                $0 += 1
                return $0
            }
            // WRONG: starting this call does not cancel the one it supersedes.
            let answer = try await withCallback { completion in
                CancelHandle(sdk.start(key) { completion($0) })
            }
            guard revision.withLock({ $0 }) == mine else { throw CancellationError() }
            return answer
        }
    }
}

/// WRONG ON PURPOSE. Keeps one "current" continuation: a new call resumes the previous caller
/// with an error and takes its place, and every SDK callback resumes whichever caller is current.
///
/// Why it is wrong: a callback does not say which call it answers here, so the late result of a
/// superseded call resumes the newest caller with the wrong answer, and the newest call's own
/// answer then finds nobody. The superseded SDK call is not cancelled either.
/// Flagged by: `latest-late-answer-never-lands`.
public struct CurrentContinuationAdapter: LatestWinsAdapter {
    /// Creates the adapter.
    public init() {}
    /// `current-continuation`.
    public var name: String { "current-continuation" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: every SDK callback resumes the current caller, so a superseded call's late result lands"
    }

    /// Returns a session with one current continuation.
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ sdk: LegacyCallSDK) async throws -> any LatestWinsSession {
        Session(sdk: sdk, current: LockedBox(nil))
    }

    private struct Session: LatestWinsSession {
        let sdk: LegacyCallSDK
        let current: LockedBox<CheckedContinuation<LegacyAnswer, any Error>?>

        func latest(_ key: UInt64) async throws -> LegacyAnswer {
            let current = self.current
            return try await withCheckedThrowingContinuation { continuation in
                let previous = current.withLock { current in
                    defer { current = continuation }
                    return current
                }
                previous?.resume(throwing: CancellationError())
                _ = sdk.start(key) { result in
                    // WRONG: whichever caller is current now, not the one this call belongs to.
                    let target = current.withLock { current in
                        defer { current = nil }
                        return current
                    }
                    target?.resume(with: result)
                }
            }
        }
    }
}

/// WRONG ON PURPOSE. Coalesces callers by key in a hand-rolled table, and a caller that leaves
/// cancels the shared call on its way out.
///
/// Why it is wrong: the SDK call belongs to every caller waiting for it. Cancelling it when the
/// first of them leaves, a view that scrolled away say, fails the others with a cancellation they
/// never asked for. Cancel only when the last waiter leaves.
/// Flagged by: `coalesced-first-leaver-keeps-call`.
public struct CancelOnFirstLeaveAdapter: CoalescedAdapter {
    /// Creates the adapter.
    public init() {}
    /// `cancel-on-first-leave`.
    public var name: String { "cancel-on-first-leave" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: coalesces callers by key, and any caller that leaves cancels the shared call"
    }

    /// Returns a session over a hand-rolled table.
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ sdk: LegacyCallSDK) async throws -> any CoalescedSession {
        Session(sdk: sdk, table: LockedBox(Table()))
    }

    private struct Entry {
        var waiters: [Int: CheckedContinuation<LegacyAnswer, any Error>] = [:]
        var cancel: LegacyCancel?
    }

    private struct Table {
        var entries: [UInt64: Entry] = [:]
        var nextWaiter = 0
    }

    private struct Session: CoalescedSession {
        let sdk: LegacyCallSDK
        let table: LockedBox<Table>

        func value(for key: UInt64) async throws -> LegacyAnswer {
            let table = self.table
            let sdk = self.sdk
            let waiter = table.withLock { table in
                defer { table.nextWaiter += 1 }
                return table.nextWaiter
            }
            /// Removes this caller and resumes it with `CancellationError`, cancelling the call.
            @Sendable func leave() {
                let (continuation, cancel) = table.withLock { table in
                    (table.entries[key]?.waiters.removeValue(forKey: waiter), table.entries[key]?.cancel)
                }
                guard let continuation else { return }
                cancel?()  // WRONG: other callers may still wait for this call
                continuation.resume(throwing: CancellationError())
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let leads = table.withLock { table in
                        let leads = table.entries[key] == nil
                        table.entries[key, default: Entry()].waiters[waiter] = continuation
                        return leads
                    }
                    if leads {
                        let cancel = sdk.start(key) { result in
                            let waiters = table.withLock { $0.entries.removeValue(forKey: key)?.waiters.values }
                            for waiter in waiters ?? [:].values { waiter.resume(with: result) }
                        }
                        table.withLock { $0.entries[key]?.cancel = cancel }
                    }
                    if Task.isCancelled { leave() }
                }
            } onCancel: {
                leave()
            }
        }
    }
}

/// WRONG ON PURPOSE. Coalesces callers in a hand-written table of the calls in flight, and keeps a
/// call's failure in the table "so that a failing key does not hammer the SDK".
///
/// Why it is wrong: a call that failed stays in the table, so every later caller for that key gets
/// the old error at once and the SDK is never asked again (a timeout or a dropped connection is
/// then remembered forever). Forget a call when it ends, whatever its outcome.
/// Flagged by: `coalesced-failure-not-kept`.
public struct KeptFailureAdapter: CoalescedAdapter {
    /// Creates the adapter.
    public init() {}
    /// `kept-failure`.
    public var name: String { "kept-failure" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a hand-written table of calls in flight that keeps a failed call's error for its key"
    }

    /// Returns a session over a hand-written table.
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ sdk: LegacyCallSDK) async throws -> any CoalescedSession {
        Session(sdk: sdk, table: LockedValue([:]))
    }

    private enum Entry {
        case inFlight([CheckedContinuation<LegacyAnswer, any Error>])
        case failed(any Error)
    }

    private struct Session: CoalescedSession {
        let sdk: LegacyCallSDK
        let table: LockedValue<[UInt64: Entry]>

        func value(for key: UInt64) async throws -> LegacyAnswer {
            let table = self.table
            let sdk = self.sdk
            return try await withCheckedThrowingContinuation { continuation in
                enum Next {
                    case start
                    case wait
                    case fail(any Error)
                }
                let next = table.withLock { table -> Next in
                    switch table[key] {
                    case .failed(let error)?: return .fail(error)
                    case .inFlight(let waiters)?:
                        table[key] = .inFlight(waiters + [continuation])
                        return .wait
                    case nil:
                        table[key] = .inFlight([continuation])
                        return .start
                    }
                }
                switch next {
                case .fail(let error): continuation.resume(throwing: error)
                case .wait: break
                case .start:
                    _ = sdk.start(key) { result in
                        let waiters = table.withLock { table -> [CheckedContinuation<LegacyAnswer, any Error>] in
                            guard case .inFlight(let waiters)? = table[key] else { return [] }
                            switch result {
                            case .success: table[key] = nil
                            case .failure(let error): table[key] = .failed(error)  // WRONG: kept for the key
                            }
                            return waiters
                        }
                        for waiter in waiters { waiter.resume(with: result) }
                    }
                }
            }
        }
    }
}
