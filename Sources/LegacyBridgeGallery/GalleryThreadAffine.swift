// Bad-adapter gallery, thread-affine SDKs: WRONG ON PURPOSE. See Gallery.swift.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. A plain actor around a thread-affine SDK.
///
/// Why it is wrong: an actor serialises its calls, but it does not pin them to a thread. A default
/// actor runs on whichever cooperative thread is free, so the SDK, which must only be called from
/// its own loop thread, is called from foreign threads: a data race inside the SDK (libcurl,
/// c-ares, sqlite connections and GUI toolkits all forbid it), invisible to the Swift compiler.
/// The cancel function is called from the task's cancellation handler, on yet another thread.
/// Flagged by: `thread-affine-calls-on-sdk-thread`, `thread-affine-cancel-on-sdk-thread`.
public struct PlainActorAffineAdapter: ThreadAffineAdapter {
    /// Creates the adapter.
    public init() {}
    /// `plain-actor-affine`.
    public var name: String { "plain-actor-affine" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: a default actor around a thread-affine SDK (calls it from cooperative threads)"
    }

    /// Opens a plain-actor session.
    /// - Parameter sdk: The thread-affine SDK.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ sdk: LegacyAffineSDK) async throws -> any ThreadAffineSession {
        PlainSession(sdk: sdk)
    }

    private actor PlainSession: ThreadAffineSession {
        let sdk: LegacyAffineSDK
        init(sdk: LegacyAffineSDK) { self.sdk = sdk }

        func call(_ number: UInt64) -> LegacyPayload {
            sdk.call(number)  // WRONG: on a cooperative thread, not the SDK's
        }

        func value() async throws -> LegacyPayload {
            let sdk = self.sdk
            return try await withCallback { completion in
                sdk.start { completion($0) }.map(CancelHandle.init)  // WRONG: start and cancel off the SDK's thread
            }
        }
    }
}

/// WRONG ON PURPOSE. Posts each call to the SDK's loop and blocks its caller on a semaphore until
/// the loop ran it.
///
/// Why it is wrong: every SDK call does run on the loop thread, so the affinity checks pass; but
/// the caller's thread waits for as long as the loop is busy. On the cooperative pool a few such
/// callers hold every thread, and on the main actor the UI freezes.
/// Flagged by: `thread-affine-caller-not-blocked`.
public struct SemaphorePostAffineAdapter: ThreadAffineAdapter {
    /// Creates the adapter.
    public init() {}
    /// `semaphore-post-affine`.
    public var name: String { "semaphore-post-affine" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: posts each call to the SDK's loop and blocks the caller on a semaphore until it ran"
    }

    /// Opens a session.
    /// - Parameter sdk: The thread-affine SDK.
    /// - Returns: The session.
    /// - Throws: Nothing this adapter adds; the protocol allows a session that cannot open to throw.
    public func open(_ sdk: LegacyAffineSDK) async throws -> any ThreadAffineSession {
        Session(sdk: sdk)
    }

    private struct Session: ThreadAffineSession {
        let sdk: LegacyAffineSDK

        func call(_ number: UInt64) async throws -> LegacyPayload {
            let done = DispatchSemaphore(value: 0)
            let result = LockedBox<LegacyPayload?>(nil)
            sdk.post {
                result.withLock { $0 = sdk.call(number) }
                done.signal()
            }
            done.wait()  // WRONG: blocks the caller's thread while the loop is busy
            return result.withLock { $0 }!
        }

        func value() async throws -> LegacyPayload {
            let sdk = self.sdk
            return try await withCallback { completion in
                let cancel = LockedBox<LegacyCancel?>(nil)
                let started = DispatchSemaphore(value: 0)
                sdk.post {
                    cancel.withLock { $0 = sdk.start { completion($0) } }
                    started.signal()
                }
                started.wait()  // WRONG: blocks the caller until the loop started the operation
                return CancelHandle { sdk.post { cancel.withLock { $0 }?() } }
            }
        }
    }
}
