// Bad-adapter gallery, one-shot calls whose callback is forwarded before it reaches the gate:
// WRONG ON PURPOSE. See Gallery.swift.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. Forwards each SDK callback to `withCallback`'s completion through a new
/// `Task` ("get off the SDK's thread first").
///
/// Why it is wrong: each callback becomes a task that runs later, on a pool thread, in any
/// order. A value followed by an error may reach the gate as error first, so the first outcome
/// no longer wins, and the result waits for a pool thread the caller does not control (on a
/// busy pool, for as long as the pool is busy). The gate already is safe on the SDK's thread.
/// Flagged by: `outcome-decided-in-callback`.
public struct TaskForwardedCallbackAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `task-forwarded-callback`.
    public var name: String { "task-forwarded-callback" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: forwards each SDK callback to the completion through a new Task"
    }

    /// Bridges with `withCallback`, forwarding every callback through a task.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The value of the outcome that reached the gate first.
    /// - Throws: That outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { result in
                Task { completion(result) }  // WRONG: the outcome reaches the gate later, in any order
            }.map { cancel in CancelHandle(cancel) }
        }
    }
}

/// WRONG ON PURPOSE. Forwards each SDK callback to the completion through a serial dispatch queue
/// of its own ("all state changes on one queue").
///
/// Why it is wrong: the order survives, but the outcome waits on a queue: the caller is resumed
/// only when that queue's thread gets to it, after whatever else was queued there, and a
/// cancellation or timeout arriving meanwhile wins over a value the SDK already delivered. The
/// gate needs no queue: it is safe to complete from any thread.
/// Flagged by: `outcome-decided-in-callback`.
public struct QueueForwardedCallbackAdapter: OneShotAdapter {
    private let queue = DispatchQueue(label: "queue-forwarded-callback")

    /// Creates the adapter.
    public init() {}
    /// `queue-forwarded-callback`.
    public var name: String { "queue-forwarded-callback" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: forwards each SDK callback to the completion through a serial dispatch queue"
    }

    /// Bridges with `withCallback`, forwarding every callback through a queue.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        let queue = self.queue
        return try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { result in
                queue.async { completion(result) }  // WRONG: the caller waits for the queue's thread
            }.map { cancel in CancelHandle(cancel) }
        }
    }
}

/// WRONG ON PURPOSE. Its SDK callback is isolated to the main actor, as every closure written in
/// main-actor code is in an app target that is MainActor by default.
///
/// Why it is wrong: the SDK calls back from its own threads. Swift checks at such a callback's entry
/// that it runs on the main actor (the check the compiler inserts where a main-actor closure is
/// handed to a C or Objective-C SDK; spelled out here with `MainActor.assumeIsolated`, because this
/// module is not MainActor by default), and stops the process when it does not. Everything else is
/// `withCallback`'s and correct.
/// Flagged by: `foreign-thread-callback` (a crash, which the runner names as the isolation check).
public struct MainActorCallbackAdapter: OneShotAdapter {
    /// Creates the adapter.
    public init() {}
    /// `main-actor-callback`.
    public var name: String { "main-actor-callback" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: its SDK callback is isolated to the main actor (traps when the SDK calls it from its thread)"
    }

    /// Bridges with `withCallback`, through a main-actor callback.
    /// - Parameters:
    ///   - operation: The legacy operation.
    ///   - isolation: The caller's actor.
    /// - Returns: The first outcome's value.
    /// - Throws: The first outcome's error, `CancellationError`, or `BridgeTimeoutError`.
    public func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { result in
                // WRONG: a main-actor callback; the SDK calls it from whatever thread it is on
                MainActor.assumeIsolated { _ = completion(result) }
            }.map(CancelHandle.init)
        }
    }
}
