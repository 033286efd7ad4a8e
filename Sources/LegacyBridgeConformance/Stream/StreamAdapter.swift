import LegacyBridge

/// One event of a simulated legacy event stream.
public struct LegacyEvent: Sendable, Hashable {
    /// What the event carries.
    public enum Kind: Sendable, Hashable {
        /// Bytes done so far.
        case progress
        /// A chunk of data.
        case data
    }

    /// The event's number in production order: 0, 1, 2, ...
    public var sequence: UInt64
    /// Progress or data.
    public var kind: Kind
    /// Progress: bytes done; data: offset of the chunk.
    public var bytes: UInt64
    /// Data: the chunk's length; progress: 0.
    public var length: Int

    /// Creates an event.
    /// - Parameters:
    ///   - sequence: The event's number in production order.
    ///   - kind: Progress or data.
    ///   - bytes: Bytes done, or the chunk's offset.
    ///   - length: The chunk's length.
    public init(sequence: UInt64, kind: Kind, bytes: UInt64, length: Int) {
        self.sequence = sequence
        self.kind = kind
        self.bytes = bytes
        self.length = length
    }
}

/// The raw controls a legacy event source hands back when it starts.
public struct LegacySourceControl: Sendable {
    /// Stops the source. Idempotent; may call `onEvent`/`onEnd` synchronously before returning.
    public let cancel: LegacyCancel
    /// Asks the source to stop producing new events (events already in flight may still arrive).
    public let pause: @Sendable () -> Void
    /// Lets a paused source produce again.
    public let resume: @Sendable () -> Void

    package init(
        cancel: @escaping LegacyCancel, pause: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void
    ) {
        self.cancel = cancel
        self.pause = pause
        self.resume = resume
    }
}

/// A multi-event legacy source, as a conformance scenario hands it to a stream adapter.
///
/// Events come from SDK threads, possibly several at once and out of order (never more than
/// ``reorderWindow`` sequence numbers apart), possibly faster than the consumer takes them. The end
/// comes through `onEnd`, and a misbehaving source may send events, or the end, again after it.
///
/// Some sources belong to an SDK that must only be called from its own loop thread (like libcurl's
/// multi interface): then ``post`` is set, and the source's `cancel`, `pause` and `resume` must be
/// called only from jobs posted through it. Pass ``controlScheduler`` to `StreamControl` and a
/// `CallbackStream` does exactly that. `start` may be called from any thread: the source posts its
/// own start to the loop thread.
public struct LegacyEventSource: Sendable {
    @usableFromInline
    let starter:
        @Sendable (
            @escaping @Sendable (LegacyEvent) -> Void,
            @escaping @Sendable ((any Error)?) -> Void
        ) -> LegacySourceControl

    /// How far out of order events can arrive: an adapter that reorders needs at least this window.
    public let reorderWindow: Int
    /// The buffer size at which a backpressured adapter should pause the source.
    public let highWater: Int
    /// The buffer size below which a paused source should be resumed.
    public let lowWater: Int
    /// Runs a job later on the SDK's own thread (never inside the call), or `nil` when the SDK
    /// may be called from any thread. When set, call the source's controls only from jobs posted
    /// through it.
    public let post: (@Sendable (_ job: @escaping @Sendable () -> Void) -> Void)?

    /// ``post`` as an `SDKScheduler` for `StreamControl(scheduler:cancel:CancelHandle(pause:resume:))`, or
    /// `nil` when the SDK may be called from any thread (the stream's default contract then applies).
    public var controlScheduler: SDKScheduler? { post.map { SDKScheduler($0) } }

    package init(
        reorderWindow: Int, lowWater: Int, highWater: Int,
        post: (@Sendable (_ job: @escaping @Sendable () -> Void) -> Void)? = nil,
        start:
            @escaping @Sendable (
                @escaping @Sendable (LegacyEvent) -> Void,
                @escaping @Sendable ((any Error)?) -> Void
            ) -> LegacySourceControl
    ) {
        self.reorderWindow = reorderWindow
        self.lowWater = lowWater
        self.highWater = highWater
        self.post = post
        self.starter = start
    }

    /// Starts the source.
    /// - Parameters:
    ///   - onEvent: Called for each event, from SDK threads.
    ///   - onEnd: Called with `nil` for success or the error that ended the stream.
    /// - Returns: The source's cancel, pause and resume functions.
    @inlinable
    public func start(
        onEvent: @escaping @Sendable (LegacyEvent) -> Void,
        onEnd: @escaping @Sendable ((any Error)?) -> Void
    ) -> LegacySourceControl {
        starter(onEvent, onEnd)
    }
}

/// Something that turns a legacy event source into an async sequence of its events.
///
/// The sequence should deliver every event once, in sequence order, end after the source's end, stop
/// the source when the consumer goes away, and keep memory bounded when the consumer is slow.
public protocol StreamAdapter: Sendable {
    /// The sequence the adapter produces.
    associatedtype Events: AsyncSequence where Events.Element == LegacyEvent
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Wraps `source` in an async sequence. The source should start when iteration starts.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in order, ending when the source ends.
    func events(from source: LegacyEventSource) -> Events
}
