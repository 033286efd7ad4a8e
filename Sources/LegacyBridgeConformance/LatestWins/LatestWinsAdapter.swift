// The latest-wins kind: a new call supersedes the one in flight (search as you type). The
// hazards: a superseded call whose late result lands in the newest caller's hands, and a
// superseded SDK call nobody cancels.

import LegacyBridge

/// What an adapter of superseding calls gives its callers.
public protocol LatestWinsSession: Sendable {
    /// Starts a call for `key` that supersedes the one in flight, and returns its answer if it is
    /// still the newest when it comes back.
    ///
    /// - Parameter key: What the call is for.
    /// - Returns: The answer of this call, never of an older one.
    /// - Throws: An error when a newer call superseded this one, or the call's own error.
    func latest(_ key: UInt64) async throws -> LegacyAnswer
}

/// Something that turns one-shot SDK calls into calls where the newest wins.
///
/// Conform in a few lines with the library's `LatestWins`:
/// ```swift
/// struct MyAdapter: LatestWinsAdapter {
///     var name: String { "mine" }
///     var summary: String { "LatestWins over the SDK's call" }
///     func open(_ sdk: LegacyCallSDK) async throws -> any LatestWinsSession { MySession(sdk) }
/// }
/// ```
public protocol LatestWinsAdapter: Sendable {
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Wraps `sdk`; the scenario then starts calls that supersede each other.
    ///
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: When the adapter cannot set itself up.
    func open(_ sdk: LegacyCallSDK) async throws -> any LatestWinsSession
}

/// The library's latest-wins adapter: each call is a run of one `LatestWins`, which cancels the
/// run it supersedes through its cancel handle.
package struct LatestWinsLibraryAdapter: LatestWinsAdapter {
    /// Creates the adapter.
    package init() {}
    /// `latest-wins`.
    package var name: String { "latest-wins" }
    /// One line describing the adapter.
    package var summary: String { "LatestWins over the SDK's one-shot call (the library's superseding bridge)" }

    /// Returns a session over one `LatestWins`.
    /// - Parameter sdk: The SDK's one-shot call.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    package func open(_ sdk: LegacyCallSDK) async throws -> any LatestWinsSession {
        Session(sdk: sdk, runs: LatestWins())
    }

    private struct Session: LatestWinsSession {
        let sdk: LegacyCallSDK
        let runs: LatestWins<LegacyAnswer>

        func latest(_ key: UInt64) async throws -> LegacyAnswer {
            try await runs.run { completion in
                CancelHandle(sdk.start(key) { completion($0) })
            }
        }
    }
}
