// Bad-adapter gallery, stream threading: WRONG ON PURPOSE. See Gallery.swift.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

/// WRONG ON PURPOSE. Hands the source's controls to `CallbackStream` directly, without the
/// scheduler the source offers.
///
/// Why it is wrong: without a scheduler the stream makes each control call on whichever thread
/// made it due: `pause` on the SDK thread whose yield reached the high watermark, `resume` on the
/// consumer, `cancel` on a library job thread. An SDK that must only be called from its own loop
/// thread (libcurl's multi interface, c-ares, GUI toolkits) is then called from foreign threads: a
/// data race inside the SDK, invisible to the compiler. It is the README's stream snippet before
/// the threading contract, and passes every scenario whose SDK accepts any thread.
/// Flagged by: `stream-thread-affinity`.
public struct ForeignThreadStreamControlAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `foreign-thread-stream-control`.
    public var name: String { "foreign-thread-stream-control" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: CallbackStream without the source's scheduler (pause, resume, cancel on foreign threads)"
    }

    /// Wraps `source` in a `CallbackStream` that ignores its scheduler.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(
            buffering: source.waterMarkBuffering, ordering: source.windowOrdering
        ) { sink in
            let control = source.start(feeding: sink)
            // WRONG: no `scheduler: source.controlScheduler`.
            return StreamControl(cancel: CancelHandle(control.cancel), pause: control.pause, resume: control.resume)
        }
    }
}

/// WRONG ON PURPOSE. Cancels the SDK from its own callback as soon as a yield says the consumer is
/// gone ("stop the download the moment nobody listens").
///
/// Why it is wrong: the cancel runs on the SDK's thread, inside the SDK's event callback. Many SDKs
/// forbid that; those whose cancel waits for running callbacks to return ("after cancel returns,
/// no callback runs") deadlock: the cancel waits for the very callback it is called from. The
/// stream would have cancelled the SDK itself, from outside the callback.
/// Flagged by: `stream-no-cancel-inside-callback`.
public struct CancelInYieldPathAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `cancel-in-yield-path`.
    public var name: String { "cancel-in-yield-path" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: cancels the SDK inside its event callback when a yield answers .terminated"
    }

    /// Wraps `source` in a `CallbackStream` that cancels from the yield path.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(
            buffering: source.waterMarkBuffering, ordering: source.windowOrdering
        ) { sink in
            let started = LockedBox<LegacySourceControl?>(nil)
            let control = source.start(
                onEvent: { event in
                    if sink.yield(event, sequence: event.sequence) == .terminated {
                        started.withLock { $0 }?.cancel()  // WRONG: inside the SDK's callback
                    }
                },
                onEnd: { error in
                    if let error { sink.finish(throwing: error) } else { sink.finish() }
                })
            started.withLock { $0 = control }
            return StreamControl(
                scheduler: source.controlScheduler, cancel: CancelHandle(control.cancel), pause: control.pause,
                resume: control.resume)
        }
    }
}

/// WRONG ON PURPOSE. Flow control by blocking: the SDK's callback waits (on a semaphore) until the
/// consumer has taken enough elements, instead of buffering and pausing the source.
///
/// Why it is wrong: the producer's thread, an SDK thread the adapter does not own, is held for as
/// long as the consumer is slow. The SDK's worker pool (or its only loop thread) stops: timers,
/// other operations and cancellation on it stall with the stream, and an SDK that cancels by
/// waiting for its callbacks hangs. It looks right: nothing is lost and memory stays bounded.
/// Flagged by: `stream-producer-not-blocked`.
public struct BlockingYieldStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `blocking-yield-stream`.
    public var name: String { "blocking-yield-stream" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: the SDK's callback waits on a semaphore until the consumer takes its element"
    }

    /// Wraps `source` in a stream whose producer blocks while `highWater` events wait.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events as they arrive.
    public func events(from source: LegacyEventSource) -> CreditedEvents {
        CreditedEvents(source: source)
    }

    /// The events of one source; each iterator starts it.
    public struct CreditedEvents: AsyncSequence, Sendable {
        /// The element type.
        public typealias Element = LegacyEvent
        /// The error type.
        public typealias Failure = any Error

        let source: LegacyEventSource

        /// Starts the source.
        /// - Returns: The iterator.
        public func makeAsyncIterator() -> Iterator {
            let credits = Credits(count: Swift.max(1, source.highWater))
            let stream = AsyncThrowingStream<LegacyEvent, any Error> { continuation in
                let control = source.start(
                    onEvent: { event in
                        credits.take()  // WRONG: blocks the SDK's thread while the consumer is slow
                        continuation.yield(event)
                    },
                    onEnd: { continuation.finish(throwing: $0) })
                continuation.onTermination = { _ in
                    credits.close()
                    source.post.map { $0(control.cancel) } ?? DispatchQueue.global().async { control.cancel() }
                }
            }
            return Iterator(base: stream.makeAsyncIterator(), credits: credits)
        }

        /// Gives a credit back for every element the consumer takes.
        public struct Iterator: AsyncIteratorProtocol {
            var base: AsyncThrowingStream<LegacyEvent, any Error>.Iterator
            let credits: Credits

            /// The next event.
            /// - Returns: The event, or `nil` at the end.
            /// - Throws: The source's error.
            public mutating func next() async throws -> LegacyEvent? {
                let event = try await base.next()
                if event != nil { credits.give() }
                return event
            }
        }
    }

    /// Counts how many more events the producer may hand over before it has to wait.
    final class Credits: Sendable {
        private let semaphore: DispatchSemaphore
        private let closed = LockedBox(false)

        init(count: Int) {
            // Created at 0 and raised: libdispatch traps when a semaphore is freed below the value
            // it was created with.
            semaphore = DispatchSemaphore(value: 0)
            for _ in 0..<count { semaphore.signal() }
        }

        /// Waits for a credit (at most 60 s, so a forgotten stream cannot hold a thread forever).
        func take() {
            guard !closed.withLock({ $0 }) else { return }
            _ = semaphore.wait(timeout: .now() + 60)
        }

        func give() { semaphore.signal() }

        /// Lets every waiting and future producer through.
        func close() {
            closed.withLock { $0 = true }
            for _ in 0..<16 { semaphore.signal() }
        }
    }
}

/// WRONG ON PURPOSE. A correct `CallbackStream` whose iterator also cancels the SDK from the
/// consuming task's cancellation handler ("stop the SDK the moment the task is cancelled").
///
/// Why it is wrong: the runtime runs a cancellation handler on the thread that called
/// `task.cancel()`, holding the task's status lock, and the consumer resumed by the cancellation
/// cannot go on before the handler returns. An SDK cancel that takes long (it waits for a worker,
/// a network round trip, running callbacks) then holds up the cancelled consumer, and, when the
/// canceller is a cooperative thread, the pool with it. The stream already runs `cancel` on a
/// thread of its own once the consumer has left.
/// Flagged by: `stream-slow-cancel-leaves-pool-free`.
public struct CancelInCancellationHandlerAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `cancel-in-cancellation-handler`.
    public var name: String { "cancel-in-cancellation-handler" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: also calls the SDK's cancel inside the consuming task's cancellation handler"
    }

    /// The events, through an iterator that cancels the source in its cancellation handler.
    public struct Events: AsyncSequence, Sendable {
        let stream: CallbackStream<LegacyEvent>
        let control: LockedBox<LegacySourceControl?>

        /// The iterator.
        public struct AsyncIterator: AsyncIteratorProtocol {
            var inner: CallbackStream<LegacyEvent>.AsyncIterator
            let control: LockedBox<LegacySourceControl?>

            /// The next event.
            /// - Returns: The next event, or `nil` at the end.
            /// - Throws: The source's error, or `CancellationError`.
            public mutating func next() async throws -> LegacyEvent? {
                let control = self.control
                var inner = self.inner
                defer { self.inner = inner }
                return try await withTaskCancellationHandler {
                    try await inner.next()
                } onCancel: {
                    control.withLock { $0 }?.cancel()  // WRONG: the SDK's cancel, inside the handler
                }
            }
        }

        /// Makes the iterator.
        /// - Returns: The iterator.
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(inner: stream.makeAsyncIterator(), control: control)
        }
    }

    /// Wraps `source` in a `CallbackStream` (on the source's scheduler) and the cancelling iterator.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    public func events(from source: LegacyEventSource) -> Events {
        let started = LockedBox<LegacySourceControl?>(nil)
        let stream = CallbackStream(
            buffering: source.waterMarkBuffering, ordering: source.windowOrdering
        ) { sink in
            let control = source.start(feeding: sink)
            started.withLock { $0 = control }
            return StreamControl(
                scheduler: source.controlScheduler, cancel: CancelHandle(control.cancel), pause: control.pause,
                resume: control.resume)
        }
        return Events(stream: stream, control: started)
    }
}

/// WRONG ON PURPOSE. A `start` that waits, on a semaphore, until the source delivered its first
/// event ("make sure the subscription is live before returning").
///
/// Why it is wrong: `start` runs in the consumer's task, on its thread. The wait holds that thread
/// until the SDK delivers, however long that takes: on the cooperative pool a few such streams
/// hold every thread, and on an actor nothing else of the actor runs. Everything else is the
/// library adapter's and correct.
/// Flagged by: `stream-consumer-not-blocked`.
public struct BlockingStartStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `blocking-start-stream`.
    public var name: String { "blocking-start-stream" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: CallbackStream whose start blocks the consumer's thread until the first event"
    }

    /// Wraps `source` in a `CallbackStream` whose start waits for the first event.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        CallbackStream(buffering: source.waterMarkBuffering, ordering: source.windowOrdering) { sink in
            let live = DispatchSemaphore(value: 0)
            let signalled = LockedBox(false)
            let signalOnce: @Sendable () -> Void = {
                if signalled.withLock({ done in
                    defer { done = true }; return !done
                }) {
                    live.signal()
                }
            }
            let control = source.start(
                onEvent: { event in
                    sink.yield(event, sequence: event.sequence)
                    signalOnce()
                },
                onEnd: { error in
                    if let error { sink.finish(throwing: error) } else { sink.finish() }
                    signalOnce()
                })
            live.wait()  // WRONG: blocks the consumer's thread until the SDK delivers
            return StreamControl(
                scheduler: source.controlScheduler, cancel: CancelHandle(control.cancel), pause: control.pause,
                resume: control.resume)
        }
    }
}

/// WRONG ON PURPOSE. Restores sequence order within a window of 2, hard-coded ("our SDK only ever
/// swaps neighbours").
///
/// Why it is wrong: the source declares how far apart it may deliver events, and a newer SDK
/// version, more threads or a busier machine reorder further than a test run ever showed. An
/// event further out than the window is beyond what the stream can hold back: the stream fails
/// or skips, depending on its gap policy. Everything else is the library adapter's and correct.
/// Flagged by: `reordered-across-window`.
public struct FixedWindowStreamAdapter: StreamAdapter {
    /// Creates the adapter.
    public init() {}
    /// `fixed-window-stream`.
    public var name: String { "fixed-window-stream" }
    /// One line describing the adapter.
    public var summary: String {
        "WRONG ON PURPOSE: CallbackStream reordering within a hard-coded window of 2, not the source's"
    }

    /// Wraps `source`, reordering within a window of 2.
    /// - Parameter source: The legacy event source.
    /// - Returns: The events, in sequence order while they arrive at most 2 apart.
    public func events(from source: LegacyEventSource) -> CallbackStream<LegacyEvent> {
        // WRONG: the window is the source's (source.reorderWindow), not a constant.
        CallbackStream(buffering: source.waterMarkBuffering, ordering: .sequenced(window: 2)) { sink in
            let control = source.start(feeding: sink)
            return StreamControl(
                scheduler: source.controlScheduler, cancel: CancelHandle(control.cancel), pause: control.pause,
                resume: control.resume)
        }
    }
}
