/// The producer's handle, returned by a stream's `start` closure: how the stream cancels, pauses
/// and resumes the underlying operation, and where it makes those calls.
///
/// ## Threading contract
/// The stream never holds a lock while it makes a call, so a call may call back into the
/// ``EventSink`` synchronously. It makes the calls in the order it decided them, pause and resume
/// alternating from pause, and nothing after `cancel`. A resume overtaken by a new pause before it
/// was made is not made. Calls decided before `start` returned are made once it has returned the
/// handle; until then only the yields' answers can stop a producer.
///
/// - With a `scheduler`, every call runs as a job posted through it, one at a time, so it lands on
///   the SDK's own thread. Use this for single-threaded SDKs. A call whose job the scheduler
///   refuses, because its `post` throws, is not made.
/// - Without one, `pause` runs at once on the thread whose event made it due: a producer's thread,
///   inside the yield that reached `high`. It may begin while the consumer's thread is still
///   returning from the `resume` before it, so a producer that the resume woke is stopped at once.
///   The SDK's `pause` and `resume` must therefore be safe to call from two threads, and take
///   effect in the order they are called.
/// - Without one, `resume` runs on the consumer's thread when it comes back for more, never while
///   a `pause` is in flight: the thread making that pause makes the resume right after it.
/// - Without one, `cancel` runs on a thread of the library's own once every other call returned:
///   never inside a yield or a finish, where an SDK whose cancel waits for its running callbacks
///   would deadlock, never inside the task runtime's cancellation handler, never on the
///   cooperative pool. A cancel that takes seconds delays nobody.
/// - Nobody waits for another thread's call.
///
/// ## How a producer uses it
/// - `cancel`: stop the operation and release its resources. The producer need not call `finish`
///   afterwards, and anything it still yields returns ``YieldOutcome/terminated``.
/// - `pause`: stop delivering soon. Events already in flight may still be yielded, and they are
///   kept. Optional: a producer that stops when a yield returns ``YieldOutcome/stopProducing`` can
///   leave it nil.
/// - `resume`: deliver again.
public struct StreamControl: Sendable {
    let scheduler: SDKScheduler?
    let cancel: CancelHandle
    let pause: (@Sendable () -> Void)?
    let resume: (@Sendable () -> Void)?

    /// Creates a control handle.
    ///
    /// - Parameters:
    ///   - scheduler: Where to run every call, per the threading contract above, or `nil` for the
    ///     default.
    ///   - cancel: Called exactly once if the consumer stops or a gap fails a sequenced stream
    ///     before the producer finished. The consumer stops when its task is cancelled, it leaves
    ///     the loop, drops the iterator, or calls ``CallbackStream/stop()``. If that happens while
    ///     `start` still runs, the call waits until `start` has returned this handle.
    ///   - pause: Called when a ``StreamBuffering/backpressure(low:high:)`` stream reaches its high
    ///     watermark. Elements yielded after it are still kept.
    ///   - resume: Called when such a stream has drained to its low watermark.
    public init(
        scheduler: SDKScheduler? = nil,
        cancel: CancelHandle,
        pause: (@Sendable () -> Void)? = nil,
        resume: (@Sendable () -> Void)? = nil
    ) {
        self.scheduler = scheduler
        self.cancel = cancel
        self.pause = pause
        self.resume = resume
    }
}

extension StreamControl {
    /// This control, or, if it names no scheduler, the same calls made through `fallback`.
    func scheduled(by fallback: SDKScheduler?) -> StreamControl {
        guard scheduler == nil, let fallback else { return self }
        return StreamControl(scheduler: fallback, cancel: cancel, pause: pause, resume: resume)
    }
}
