import LegacyBridge

/// How the simulated legacy SDK behaves for one operation: every knob of the SDK's
/// `lsdk_behavior_t`, with Swift types.
///
/// Start from a preset (``wellBehaved`` is the SDK's documented default) and change what you
/// need, directly or with ``with(_:)``. Values are passed to the SDK as they are: an invalid one
/// (nine outcomes, a delay above ten seconds, a chunk of zero bytes) makes the start fail with the
/// SDK's ``LegacySDKError/outOfRange`` error, never a Swift trap.
public struct SimulatedBehavior: Sendable, Hashable {
    /// Where callbacks are delivered.
    public enum Delivery: Int32, Sendable, Hashable, CaseIterable {
        /// On the caller's thread, inside the start call, before it returns (delays ignored).
        case synchronous = 0
        /// On one of the client's worker threads.
        case worker = 1
        /// On a freshly created thread, one per callback.
        case freshThread = 2
        /// Each callback draws synchronous, worker or fresh thread from the operation's seed
        /// (never the loop thread).
        case mixed = 3
        /// On the client's loop thread, one callback at a time, in FIFO order with posted jobs
        /// (asynchronous cancellations and late callbacks included). The client must have a loop
        /// thread; otherwise the start fails with ``LegacySDKError/noLoopThread``. A concurrent
        /// stream's batches still arrive shuffled, but one at a time.
        case loop = 4
    }

    /// The outcome of one completion of a request.
    public enum Outcome: Int32, Sendable, Hashable, CaseIterable {
        /// A response (its `attempt` tells repeats apart).
        case success = 0
        /// The behaviour's ``SimulatedBehavior/errorStatus`` and ``SimulatedBehavior/errorMessage``.
        case failure = 1
    }

    /// What cancelling an unfinished operation does.
    public enum CancelMode: Int32, Sendable, Hashable, CaseIterable {
        /// A cancellation callback, synchronously inside the cancel call, on the cancelling thread
        /// (re-entrant when cancel is called from a callback).
        case callbackSynchronously = 0
        /// A cancellation callback later, from a worker thread.
        case callbackAsynchronously = 1
        /// The operation stops and calls back no more.
        case silent = 2
        /// The cancel is ignored; the operation completes normally.
        case ignored = 3
        /// "After cancel returns, no callback runs": the operation stops and calls back no more,
        /// and the cancel call blocks until no callback of the operation is running. Called from
        /// inside one of the operation's own callbacks it deadlocks (counted in
        /// ``SDKCounters/cancelDeadlocks``) until the client is destroyed. Chaos never draws it.
        case waits = 4
    }

    /// How a stream ends.
    public enum StreamEnd: Int32, Sendable, Hashable, CaseIterable {
        /// A successful end event.
        case success = 0
        /// An end event carrying ``SimulatedBehavior/errorStatus``.
        case failure = 1
        /// No end event: the stream delivers its data, then goes silent until cancelled.
        case none = 2
    }

    /// What a stream does while paused.
    public enum PauseMode: Int32, Sendable, Hashable, CaseIterable {
        /// No new events are produced while paused.
        case stops = 0
        /// A live source: events are produced on schedule and dropped while paused.
        case drops = 1
    }

    /// Where callbacks are delivered.
    public var delivery: Delivery
    /// Delay before each delivery, in microseconds (at most 10 s).
    public var delayMicroseconds: UInt32
    /// Extra random delay, up to this many microseconds, drawn per delivery (at most 10 s).
    public var jitterMicroseconds: UInt32
    /// Requests: one entry per completion, in order (at most 8; empty = never completes).
    public var outcomes: [Outcome]
    /// What cancelling does.
    public var cancelMode: CancelMode
    /// After a cancel takes effect, one more callback arrives later from a worker thread.
    public var lateCallbackAfterCancel: Bool
    /// Streams: bytes per data event (1 byte ... 1 MiB).
    public var chunkSize: UInt32
    /// Streams: a progress event after every n-th data event; 0 = none.
    public var progressEvery: UInt32
    /// Streams: pause between produced events, in microseconds (at most 10 s).
    public var intervalMicroseconds: UInt32
    /// Streams: how many events may be delivered at once, out of order (1 ... 8).
    public var streamConcurrency: UInt32
    /// Streams: how the stream ends.
    public var streamEnd: StreamEnd
    /// Streams: the terminal event is delivered twice.
    public var duplicateTerminal: Bool
    /// Streams: data events delivered after the terminal event (at most 16).
    public var eventsAfterTerminal: UInt32
    /// Streams: what a pause does.
    public var pauseMode: PauseMode
    /// The status carried by failures (not `.cancelled`).
    public var errorStatus: LegacySDKError
    /// The message carried by failures (at most 255 bytes are kept); `nil` = the SDK's default.
    public var errorMessage: String?
    /// Seed of every random choice of the operation; 0 = derived from the client's seed.
    public var seed: UInt64

    // Hostile sequence numbers (streams). Each event has a production index i = 1, 2, ... over
    // every kind; its sequence number is (firstSequence + i - 1, plus sequenceJump once i passes
    // sequenceJumpAt) modulo 2^sequenceBits, except one corrupted data event. Offsets and data stay
    // truthful. The defaults number 0, 1, 2, ...; chaos never changes them.

    /// Streams: number of the first event (below 2^``sequenceBits``); near the top it wraps to 0.
    public var firstSequence: UInt64 = 0
    /// Streams: width of the SDK's counter, 8 ... 64 bits (a 32-bit counter wraps after 2^32 - 1).
    public var sequenceBits: UInt32 = 64
    /// Streams: after the event with this 1-based index, numbering jumps ahead by
    /// ``sequenceJump`` (0 = never).
    public var sequenceJumpAt: UInt64 = 0
    /// Streams: how far numbering jumps after ``sequenceJumpAt``.
    public var sequenceJump: UInt64 = 0
    /// Streams: the 1-based number of one content data event whose sequence number is replaced by
    /// ``sequenceCorruptValue`` (0 = none); numbering continues normally after it.
    public var sequenceCorruptAt: UInt64 = 0
    /// Streams: the garbage number, delivered as it is (for example `UInt64.max`).
    public var sequenceCorruptValue: UInt64 = 0

    /// The SDK's documented defaults: worker delivery, no delay, one successful completion,
    /// asynchronous cancellation, 4 KiB chunks with progress, an in-order stream ending well.
    public init() {
        self = SDK.defaultBehavior()
    }

    init(
        delivery: Delivery, delayMicroseconds: UInt32, jitterMicroseconds: UInt32, outcomes: [Outcome],
        cancelMode: CancelMode, lateCallbackAfterCancel: Bool, chunkSize: UInt32, progressEvery: UInt32,
        intervalMicroseconds: UInt32, streamConcurrency: UInt32, streamEnd: StreamEnd, duplicateTerminal: Bool,
        eventsAfterTerminal: UInt32, pauseMode: PauseMode, errorStatus: LegacySDKError, errorMessage: String?,
        seed: UInt64
    ) {
        self.delivery = delivery
        self.delayMicroseconds = delayMicroseconds
        self.jitterMicroseconds = jitterMicroseconds
        self.outcomes = outcomes
        self.cancelMode = cancelMode
        self.lateCallbackAfterCancel = lateCallbackAfterCancel
        self.chunkSize = chunkSize
        self.progressEvery = progressEvery
        self.intervalMicroseconds = intervalMicroseconds
        self.streamConcurrency = streamConcurrency
        self.streamEnd = streamEnd
        self.duplicateTerminal = duplicateTerminal
        self.eventsAfterTerminal = eventsAfterTerminal
        self.pauseMode = pauseMode
        self.errorStatus = errorStatus
        self.errorMessage = errorMessage
        self.seed = seed
    }

    /// A copy with `change` applied, for building on a preset.
    ///
    /// - Parameter change: Edits the copy.
    /// - Returns: The changed copy.
    public func with(_ change: (inout SimulatedBehavior) -> Void) -> SimulatedBehavior {
        var copy = self
        change(&copy)
        return copy
    }
}

extension SimulatedBehavior {
    /// The SDK's defaults: a well-behaved operation.
    public static var wellBehaved: SimulatedBehavior { SimulatedBehavior() }

    /// Every callback on the caller's thread, before the start call returns.
    public static var synchronous: SimulatedBehavior { .wellBehaved.with { $0.delivery = .synchronous } }

    /// Every callback on a freshly created thread.
    public static var freshThread: SimulatedBehavior { .wellBehaved.with { $0.delivery = .freshThread } }

    /// Every callback on a thread drawn from the seed (caller, worker or fresh thread).
    ///
    /// - Parameter seed: The operation's seed; 0 derives it from the client's seed.
    /// - Returns: The behaviour.
    public static func mixedDelivery(seed: UInt64 = 0) -> SimulatedBehavior {
        .wellBehaved.with {
            $0.delivery = .mixed
            $0.seed = seed
        }
    }

    /// A request that completes once per outcome, in order (the SDK allows up to 8).
    ///
    /// - Parameter outcomes: The completions, in order.
    /// - Returns: The behaviour.
    public static func repeats(_ outcomes: [Outcome]) -> SimulatedBehavior {
        .wellBehaved.with { $0.outcomes = outcomes }
    }

    /// An operation that never calls back on its own: a request with no completion, a stream
    /// that goes silent after its data. Only a cancel (or destroying the client) ends it.
    public static var neverCompletes: SimulatedBehavior {
        .wellBehaved.with {
            $0.outcomes = []
            $0.streamEnd = .none
        }
    }

    /// Cancel delivers its cancellation callback synchronously inside the cancel call.
    public static var cancelCallsBackSynchronously: SimulatedBehavior {
        .wellBehaved.with { $0.cancelMode = .callbackSynchronously }
    }

    /// Cancel stops the operation without any callback.
    public static var cancelSilently: SimulatedBehavior { .wellBehaved.with { $0.cancelMode = .silent } }

    /// Cancel is ignored: the operation completes normally.
    public static var cancelIgnored: SimulatedBehavior { .wellBehaved.with { $0.cancelMode = .ignored } }

    /// After a cancel takes effect, one more callback arrives later from a worker thread.
    public static var lateCallbackAfterCancel: SimulatedBehavior {
        .wellBehaved.with { $0.lateCallbackAfterCancel = true }
    }

    /// A stream delivering up to four events at once from different threads, out of order (never
    /// more than four sequence numbers apart).
    public static var concurrentOutOfOrderStream: SimulatedBehavior {
        .wellBehaved.with { $0.streamConcurrency = 4 }
    }

    /// A live stream: while paused, events are produced on schedule and dropped.
    public static var liveStream: SimulatedBehavior { .wellBehaved.with { $0.pauseMode = .drops } }

    /// An operation that fails: a request whose one completion is a failure, a stream that ends
    /// with a failure.
    ///
    /// - Parameters:
    ///   - error: The status to fail with (not `.cancelled`).
    ///   - message: The message to attach; `nil` = the SDK's default.
    /// - Returns: The behaviour.
    public static func failing(_ error: LegacySDKError = .remote, message: String? = nil) -> SimulatedBehavior {
        .wellBehaved.with {
            $0.outcomes = [.failure]
            $0.streamEnd = .failure
            $0.errorStatus = error
            $0.errorMessage = message
        }
    }

    /// Every knob drawn from `seed` by the SDK itself (small delays, short streams), so Swift and
    /// the SDK agree on what a chaos seed means. Always valid; an operation that never ends by
    /// itself is never paired with an ignored cancel.
    ///
    /// - Parameter seed: The chaos seed.
    /// - Returns: The behaviour.
    public static func chaos(seed: UInt64) -> SimulatedBehavior { SDK.chaosBehavior(seed: seed) }
}
