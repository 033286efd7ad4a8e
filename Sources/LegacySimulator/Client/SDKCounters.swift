import LegacyBridge

/// What the simulated SDK did, counted: for one client (``LegacyClient/counters``) or for the
/// whole process (``processWide``).
///
/// Each counter is exact; a snapshot is not taken atomically across counters.
public struct SDKCounters: Sendable, Hashable {
    /// Operations started successfully.
    public var operationsStarted: UInt64 = 0
    /// Operations the SDK is done with (their context was released).
    public var operationsFinished: UInt64 = 0
    /// Callbacks on the caller's thread inside a start call.
    public var callbacksSync: UInt64 = 0
    /// Callbacks on a worker thread.
    public var callbacksWorker: UInt64 = 0
    /// Callbacks on a freshly created thread.
    public var callbacksFreshThread: UInt64 = 0
    /// Request completions after the first one of their operation.
    public var callbacksRepeated: UInt64 = 0
    /// Callbacks made after a cancel took effect (or was ignored), other than the cancellation itself.
    public var callbacksAfterCancel: UInt64 = 0
    /// Callbacks delivered synchronously inside a cancel (or a client destroy).
    public var callbacksReentrantCancel: UInt64 = 0
    /// Cancels that took effect.
    public var cancels: UInt64 = 0
    /// Stream events delivered, of every kind.
    public var streamEvents: UInt64 = 0
    /// Stream events produced and dropped while paused (live streams).
    public var streamEventsDroppedPaused: UInt64 = 0
    /// Stream events delivered after the stream's first end event.
    public var streamEventsAfterTerminal: UInt64 = 0
    /// Pauses that changed a stream's state.
    public var streamPauses: UInt64 = 0
    /// Resumes that changed a stream's state.
    public var streamResumes: UInt64 = 0
    /// Contexts handed to the SDK by successful starts.
    public var contextsCreated: UInt64 = 0
    /// Contexts the SDK released.
    public var contextsReleased: UInt64 = 0
    /// Operation handles created.
    public var handlesCreated: UInt64 = 0
    /// Operation handles released.
    public var handlesReleased: UInt64 = 0
    /// Handles created and not yet released.
    public var handlesOutstanding: UInt64 = 0
    /// Threads created for fresh-thread callbacks.
    public var threadsCreated: UInt64 = 0
    /// Calls the SDK rejected with an argument, handle or state error.
    public var badCalls: UInt64 = 0
    /// Callbacks on the client's loop thread.
    public var callbacksLoop: UInt64 = 0
    /// Jobs posted to the client's loop thread that started running.
    public var loopJobs: UInt64 = 0
    /// Calls made from a thread the client's affinity forbids (each was still performed).
    public var affinityViolations: UInt64 = 0
    /// Cancels called on a thread that was running a callback of the same operation.
    public var cancelsInsideCallback: UInt64 = 0
    /// Waiting cancels called from inside their own operation's callback: each deadlocked until
    /// the client was destroyed.
    public var cancelDeadlocks: UInt64 = 0
    /// Stream events a pull-style callback refused (each paused its stream).
    public var streamPausesByCallback: UInt64 = 0
    /// Blocking calls that started blocking.
    public var blockingCalls: UInt64 = 0
    /// Blocking calls ended early by an interrupt or by the client's destruction.
    public var blockingCallsInterrupted: UInt64 = 0
    /// Blocking calls blocked right now (a gauge, not a running total).
    public var blockingInFlight: UInt64 = 0
    /// The most blocking calls ever blocked at once.
    public var blockingInFlightPeak: UInt64 = 0

    /// Reply connections created (``LegacyReplyClient``).
    public var rpcConnectionsCreated: UInt64 = 0
    /// Reply connections destroyed whose last callback returned.
    public var rpcConnectionsFinished: UInt64 = 0
    /// Requests sent on reply connections.
    public var rpcRequestsSent: UInt64 = 0
    /// Requests no longer pending: answered, cancelled or dropped by a disconnect.
    public var rpcRequestsSettled: UInt64 = 0
    /// Requests the SDK is done with.
    public var rpcRequestsFinished: UInt64 = 0
    /// Ids pending now: sent and not settled.
    public var rpcRequestsPending: UInt64 = 0
    /// Requests the SDK still owes a callback or an id: sent and not finished.
    public var rpcRequestsLive: UInt64 = 0
    /// Replies delivered, of every kind.
    public var rpcReplies: UInt64 = 0
    /// First replies delivered while a request sent earlier on the same connection was pending.
    public var rpcRepliesOutOfOrder: UInt64 = 0
    /// Replies after the first one of their request.
    public var rpcRepliesDuplicate: UInt64 = 0
    /// Replies for an id that was not pending.
    public var rpcRepliesUnknownID: UInt64 = 0
    /// Late replies of requests a disconnect dropped.
    public var rpcRepliesAfterDisconnect: UInt64 = 0
    /// Late replies of cancelled requests, and replies of requests whose cancel was ignored.
    public var rpcRepliesAfterCancel: UInt64 = 0
    /// Replies discarded because no reply callback was installed.
    public var rpcRepliesDiscarded: UInt64 = 0
    /// Cancels by id that found their request pending.
    public var rpcCancels: UInt64 = 0
    /// Disconnects of every kind: asked for, spontaneous, and those of destroys.
    public var rpcDisconnects: UInt64 = 0
    /// Disconnects the SDK made by itself.
    public var rpcDisconnectsSpontaneous: UInt64 = 0
    /// Pending requests dropped by disconnects.
    public var rpcDroppedAtDisconnect: UInt64 = 0

    /// Listeners started (``LegacySharedListener``).
    public var listenerStarts: UInt64 = 0
    /// Listeners the SDK is done with.
    public var listenerFinished: UInt64 = 0
    /// Listeners started and not finished.
    public var listenerLive: UInt64 = 0
    /// Listeners stopped by a cancel.
    public var listenerStops: UInt64 = 0
    /// Listeners that ended by themselves, with an end or an error.
    public var listenerEnds: UInt64 = 0
    /// Listener starts refused because the topic already had one.
    public var listenerBusy: UInt64 = 0
    /// Listener events delivered.
    public var listenerEvents: UInt64 = 0
    /// Listener events delivered while their listener was paused: the ones in flight at the pause.
    public var listenerEventsWhilePaused: UInt64 = 0
    /// Pauses that changed a listener's state.
    public var listenerPauses: UInt64 = 0
    /// Resumes that changed a listener's state.
    public var listenerResumes: UInt64 = 0

    /// All zero.
    public init() {}

    /// The counters of every client the process ever created, destroyed ones included.
    public static var processWide: SDKCounters { SDK.processWideCounters() }
}
