// Keyed-request adapters over a test double of a request/reply SDK, checked through
// `KeyedFixture` the way a user checks their own: the library's `PendingRequests` over an SDK that
// can withdraw a request and over one that cannot, and two hand-written continuation tables that
// each get one thing wrong.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// A test double of a request/reply SDK with one reply callback for every request and ids the
/// caller chooses (JSON-RPC over a socket, MQTT message ids). It answers a request only when
/// told, on its own reply thread, and answers only requests it still holds, as a well-behaved SDK
/// does; a stray reply is made on demand. Like a server, it takes a second request with an id it
/// still holds, and answers the two in the order they came.
public final class KeyedDoubleSDK: Sendable {
    /// Whether ``cancel(id:)`` withdraws a request (an SDK with a per-request cancel).
    public let canCancel: Bool
    private struct State {
        var onReply: (@Sendable (UInt64, Result<UInt64, any Error>) -> Void)?
        /// Requests held, by id: how many with that id.
        var outstanding: [UInt64: Int] = [:]
        var count = 0
    }
    private let state = LockedValue(State())
    private let replies = DispatchQueue(label: "keyed-double-replies")

    /// Creates the double.
    /// - Parameter canCancel: Whether ``cancel(id:)`` withdraws a request.
    public init(canCancel: Bool) {
        self.canCancel = canCancel
    }

    /// The error the double reports for a request it fails (``fail(id:)``).
    public struct Failure: Error, Sendable, Hashable {}

    /// Installs the one reply callback; replies come on the double's reply thread.
    public func setReplyHandler(_ onReply: @escaping @Sendable (UInt64, Result<UInt64, any Error>) -> Void) {
        state.withLock { $0.onReply = onReply }
    }

    /// Sends a request under `id`.
    public func send(id: UInt64) {
        state.withLock {
            $0.outstanding[id, default: 0] += 1
            $0.count += 1
        }
    }

    /// Withdraws the oldest held request `id` if the double can, silently. Returns whether one
    /// was withdrawn.
    @discardableResult
    public func cancel(id: UInt64) -> Bool {
        guard canCancel else { return false }
        return state.withLock { Self.take(id, from: &$0) }
    }

    /// Answers the held request `id` with `token`, on the reply thread; nothing when no request
    /// with that id is held (withdrawn, answered, never sent). Returns once delivered.
    public func reply(id: UInt64, token: UInt64) {
        deliver(id, .success(token), onlyHeld: true)
    }

    /// Fails the held request `id`, on the reply thread. Returns once delivered.
    public func fail(id: UInt64) {
        deliver(id, .failure(Failure()), onlyHeld: true)
    }

    /// Delivers a reply under `id` whether or not a request with that id is held: a duplicate, or
    /// one for an id nobody sent. Returns once delivered.
    public func stray(id: UInt64, token: UInt64) {
        deliver(id, .success(token), onlyHeld: false)
    }

    /// Requests the double holds now.
    public var outstanding: Int { state.withLock { $0.count } }

    private static func take(_ id: UInt64, from state: inout State) -> Bool {
        guard let held = state.outstanding[id] else { return false }
        state.outstanding[id] = held > 1 ? held - 1 : nil
        state.count -= 1
        return true
    }

    private func deliver(_ id: UInt64, _ result: Result<UInt64, any Error>, onlyHeld: Bool) {
        replies.sync {
            let onReply = state.withLock { state -> (@Sendable (UInt64, Result<UInt64, any Error>) -> Void)? in
                let held = Self.take(id, from: &state)
                return held || !onlyHeld ? state.onReply : nil
            }
            onReply?(id, result)
        }
    }
}

/// Keyed-request adapters over ``KeyedDoubleSDK``, as ``KeyedFixture``s.
public enum KeyedDoubleFixtures {
    /// The fixture of an adapter whose request function is `request`, over a fresh double.
    static func fixture(
        name: String, canCancel: Bool, tracked: @escaping @Sendable () -> Int,
        request: @escaping @Sendable (UInt64, CallProbe<UInt64>) async throws -> UInt64, sdk: KeyedDoubleSDK
    ) -> KeyedFixture<UInt64> {
        KeyedFixture(
            name: name,
            request: { id, probe in try await request(id, probe) },
            reply: { id, token in sdk.reply(id: id, token: token) },
            token: { $0 },
            failing: { id in sdk.fail(id: id) },
            strayReply: { id, token in sdk.stray(id: id, token: token) },
            liveResources: { sdk.outstanding + tracked() },
            requestCancellation: canCancel ? .perRequest : .none)
    }

    /// The library's keyed bridge: a `PendingRequests` table fed by the double's reply callback,
    /// with the double's cancel when it has one. Expected to pass every scenario.
    public static func pendingRequests(canCancel: Bool) -> KeyedFixture<UInt64> {
        let sdk = KeyedDoubleSDK(canCancel: canCancel)
        // Each request's probe by id, for the table-wide cancel: a cancel that runs after its caller
        // returned finds none and is made without one (the suite then does not count it).
        let probes = LockedValue<[UInt64: CallProbe<UInt64>]>([:])
        let withdraw: @Sendable (UInt64) -> Void = { id in
            let probe: CallProbe<UInt64> = probes.withLock { $0[id] } ?? .off
            probe.cancel { _ = sdk.cancel(id: id) }
        }
        let table = PendingRequests<UInt64, UInt64>(cancel: canCancel ? withdraw : nil)
        sdk.setReplyHandler { id, result in _ = table.complete(id, with: result) }
        return fixture(
            name: canCancel ? "keyed-double-pending-requests" : "keyed-double-pending-requests-no-cancel",
            canCancel: canCancel, tracked: { table.statistics.pending },
            request: { id, probe in
                defer { probes.withLock { $0[id] = nil } }
                return try await table.request(id: id) { id in
                    probes.withLock { $0[id] = probe }
                    probe.start { sdk.send(id: id) }
                }
            }, sdk: sdk)
    }
}

/// One mistake of a hand-written keyed adapter over ``KeyedDoubleSDK``: WRONG ON PURPOSE.
public enum KeyedDoubleMistake: String, CaseIterable, Sendable {
    /// A `[id: continuation]` table over an SDK that cannot withdraw a request: a cancelled caller's
    /// entry is removed at once, so the request's late reply completes a newer request that reused
    /// the id.
    case freesIDBeforeLateReply = "keyed-double-frees-id-early"
    /// A `[id: continuation]` table that cancels by id from a job after its caller is back,
    /// without checking that the id is still the cancelled request's: the cancel withdraws a newer
    /// request that reused the id, which then never gets its reply.
    case lateCancelByID = "keyed-double-late-cancel"
    /// A `[id: continuation]` table that keeps a reply for an id it does not hold, for the request
    /// that registers the id next, in case the reply beat the registration: the SDK's duplicate of
    /// an answered request's reply waits there, and the next request that reuses the id gets it.
    case keepsUnmatchedReply = "keyed-double-keeps-unmatched-reply"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .freesIDBeforeLateReply, .lateCancelByID: return ["keyed-cancel-then-reuse"]
        case .keepsUnmatchedReply: return ["keyed-stray-replies"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .freesIDBeforeLateReply:
            return
                "WRONG ON PURPOSE: a continuation table that frees a cancelled caller's id before the SDK's late reply (no SDK cancel)"
        case .lateCancelByID:
            return
                "WRONG ON PURPOSE: a continuation table whose SDK cancel by id, made later on a job, can reach a newer request with the id"
        case .keepsUnmatchedReply:
            return
                "WRONG ON PURPOSE: a continuation table that keeps a reply for an id it does not hold, for the next request with that id"
        }
    }

    /// The mistaken adapter's fixture, over a fresh double.
    public var fixture: KeyedFixture<UInt64> {
        let canCancel = self != .freesIDBeforeLateReply
        let sdk = KeyedDoubleSDK(canCancel: canCancel)
        let table = LockedValue<[UInt64: @Sendable (Result<UInt64, any Error>) -> Void]>([:])
        // Replies that came for an id nobody waits on, by id.
        let unmatched = LockedValue<[UInt64: Result<UInt64, any Error>]>([:])
        let mistake = self
        sdk.setReplyHandler { id, result in
            if let deliver = table.withLock({ $0.removeValue(forKey: id) }) {
                deliver(result)
            } else if mistake == .keepsUnmatchedReply {
                unmatched.withLock { $0[id] = result }  // WRONG: a duplicate is kept for the next request
            }
        }
        return KeyedDoubleFixtures.fixture(
            name: rawValue, canCancel: canCancel, tracked: { table.withLock { $0.count } },
            request: { id, probe in
                if let kept = unmatched.withLock({ $0.removeValue(forKey: id) }) { return try kept.get() }
                return try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        let deliver = probe.callback { result in continuation.resume(with: result) }
                        table.withLock { $0[id] = deliver }
                        probe.start { sdk.send(id: id) }
                    }
                } onCancel: {
                    // WRONG (the first two): the id is free for a newer request at once.
                    guard let deliver = table.withLock({ $0.removeValue(forKey: id) }) else { return }
                    if mistake == .keepsUnmatchedReply {
                        // Withdrawn before the caller is let go: nobody can reuse the id before.
                        probe.cancel { _ = sdk.cancel(id: id) }
                    }
                    deliver(.failure(CancellationError()))
                    if mistake == .lateCancelByID {
                        // WRONG: later, by id only, whoever holds the id by then.
                        DispatchQueue.global().async { probe.cancel { _ = sdk.cancel(id: id) } }
                    }
                }
            }, sdk: sdk)
    }
}
