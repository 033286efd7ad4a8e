// The coalesced kind: callers asking for the same key while a call is in flight share it. The
// hazards: one SDK call per caller, and a shared call cancelled when one of its waiters leaves.

import LegacyBridge

/// What an adapter of coalesced calls gives its callers.
public protocol CoalescedSession: Sendable {
    /// Returns the answer for `key`, sharing the SDK call in flight for it if there is one.
    ///
    /// - Parameter key: What the call is for: equal keys share one call.
    /// - Returns: The answer of the shared call.
    /// - Throws: The call's error, or `CancellationError` when the calling task was cancelled.
    func value(for key: UInt64) async throws -> LegacyAnswer
}

/// Something that lets concurrent callers with the same key share one SDK call.
///
/// Conform in a few lines with the library's `CoalescedCalls`:
/// ```swift
/// struct MyAdapter: CoalescedAdapter {
///     var name: String { "mine" }
///     var summary: String { "CoalescedCalls over the SDK's call" }
///     func open(_ sdk: LegacyCallSDK) async throws -> any CoalescedSession { MySession(sdk) }
/// }
/// ```
public protocol CoalescedAdapter: Sendable {
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Wraps `sdk`; the scenario then calls the session from many tasks at once.
    ///
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: When the adapter cannot set itself up.
    func open(_ sdk: LegacyCallSDK) async throws -> any CoalescedSession
}

/// The library's coalesced adapter: one `CoalescedCalls` table over the SDK's call.
package struct CoalescedCallsAdapter: CoalescedAdapter {
    /// Creates the adapter.
    package init() {}
    /// `coalesced-calls`.
    package var name: String { "coalesced-calls" }
    /// One line describing the adapter.
    package var summary: String { "CoalescedCalls over the SDK's one-shot call (the library's sharing bridge)" }

    /// Returns a session over one `CoalescedCalls` table.
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    package func open(_ sdk: LegacyCallSDK) async throws -> any CoalescedSession {
        Session(sdk: sdk, calls: CoalescedCalls())
    }

    private struct Session: CoalescedSession {
        let sdk: LegacyCallSDK
        let calls: CoalescedCalls<UInt64, LegacyAnswer>

        func value(for key: UInt64) async throws -> LegacyAnswer {
            try await calls.value(for: key) { completion in
                CancelHandle(sdk.start(key) { completion($0) })
            }
        }
    }
}
