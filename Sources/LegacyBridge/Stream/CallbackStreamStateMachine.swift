// The pure state machine behind one `CallbackStream` subscription.
//
// It owns no lock, calls no closure and resumes nothing: each event returns an action, and the
// storage (CallbackStreamStorage) performs it after releasing the lock. The consumer, the
// producer's threads, the gap timer and the control calls all meet here, under one lock, so every
// hand-off is ordered by it, and the tests drive every ordering of events without threads.
//
// The types are `@usableFromInline` so that the yield and the consumer's batch swap can be
// `@inlinable` and specialised in the caller's module. Nothing outside Stream/ uses them.

/// The buffer, terminal and producer-control decisions of one subscription.
///
/// Rules:
/// - Elements reach the consumer in the order they were accepted, a sequenced stream's in sequence
///   order, in batches that the consumer swaps out under the lock.
/// - The terminal comes once, after every element accepted before it; no buffering policy drops it.
/// - The consumer is woken only from an empty buffer, with nothing: it asks the machine again.
/// - Backpressure follows ``StreamBackpressure``. A yield answers `stopProducing` while a pause is
///   wanted and the producer can be restarted.
/// - Pause, resume and cancel follow ``ProducerControlStateMachine``.
/// - The consumer stopping drops what is buffered or held and cancels a running producer. A
///   producer that finished is never cancelled.
/// - Whatever leaves the machine undelivered (elements, the handle, a gap timer) is handed back to
///   be released outside the lock.
@usableFromInline
struct CallbackStreamStateMachine<Element: Sendable> {
    @usableFromInline typealias Continuation = UnsafeContinuation<Void, Never>
    @usableFromInline typealias Call = ProducerControlStateMachine.Call

    /// A sequenced stream's reorderer and the timer of its newest gap: a value with its storage
    /// behind one reference, copied on write, so that the state stays small to copy.
    ///
    /// `@unchecked Sendable`: the storage is changed only through `makeUnique()`, when this value
    /// holds its one reference, as the standard library's copy-on-write collections do.
    @usableFromInline
    struct Sequencing: @unchecked Sendable {
        final class Storage {
            var reorderer: SequenceReorderer<Element>
            /// At most one pending timer: a newer gap's replaces the older.
            var gapTimer: (generation: UInt64, timer: DeadlineTimer)?

            init(reorderer: SequenceReorderer<Element>, gapTimer: (generation: UInt64, timer: DeadlineTimer)?) {
                self.reorderer = reorderer
                self.gapTimer = gapTimer
            }
        }

        var storage: Storage

        init(_ reorderer: SequenceReorderer<Element>) {
            self.storage = Storage(reorderer: reorderer, gapTimer: nil)
        }

        var reorderer: SequenceReorderer<Element> {
            get { storage.reorderer }
            _modify {
                makeUnique()
                yield &storage.reorderer
            }
        }

        var gapTimer: (generation: UInt64, timer: DeadlineTimer)? {
            get { storage.gapTimer }
            set {
                makeUnique()
                storage.gapTimer = newValue
            }
        }

        mutating func makeUnique() {
            if !isKnownUniquelyReferenced(&storage) {
                storage = Storage(reorderer: storage.reorderer, gapTimer: storage.gapTimer)
            }
        }
    }

    /// The elements between producer and consumer: those waiting, and the size of the batch the
    /// consumer took last. Both count as held until the consumer comes back for more.
    @usableFromInline
    struct Handoff: Sendable {
        @usableFromInline var buffer: RingBuffer<Element>
        @usableFromInline var inBatch: Int

        @inlinable
        init() {
            self.buffer = RingBuffer()
            self.inBatch = 0
        }

        @inlinable
        var held: Int { buffer.count &+ inBatch }
    }

    @usableFromInline
    enum State {
        /// The producer is live.
        /// - `waiter`: the suspended consumer, only ever set while nothing waits.
        /// - `backpressure`: the watermarks of a `.backpressure` stream.
        /// - `sequencing`: the reorderer of a `.sequenced` stream.
        case streaming(waiter: Continuation?, backpressure: StreamBackpressure?, sequencing: Sequencing?)
        /// The producer finished, with `failure` or normally; the terminal waits behind the buffer.
        case draining(failure: (any Error)?)
        /// The consumer received the terminal or called `stop()`: `next()` returns `nil`.
        case finished
        /// The consumer's task was cancelled or the consumer went away: `next()` throws `CancellationError`.
        case cancelled
        /// Placeholder while a payload is taken out to be changed in place.
        case modifying
    }

    /// A gap timer to arm or to cancel.
    @usableFromInline
    enum GapTimerEffect {
        case none
        /// Arm a timer for the gap of this reorderer generation.
        case arm(generation: UInt64)
        /// A timer no longer needed.
        case cancel(DeadlineTimer)
    }

    /// What an event asks the storage to do outside the lock, in this order.
    @usableFromInline
    struct Effects {
        /// The suspended consumer, to resume.
        @usableFromInline var wakeUp: Continuation?
        /// A producer-control call to make, or the handle to release.
        @usableFromInline var producer: ProducerControlStateMachine.Action
        @usableFromInline var gapTimer: GapTimerEffect
        /// Elements that leave undelivered: their deinit may run user code.
        @usableFromInline var discarded: RingBuffer<Element>

        @inlinable
        init() {
            self.wakeUp = nil
            self.producer = .none
            self.gapTimer = .none
            self.discarded = RingBuffer()
        }

        /// Whether there is nothing to do.
        @inlinable
        var isEmpty: Bool {
            switch (producer, gapTimer) {
            case (.none, .none): return wakeUp == nil && discarded.isEmpty
            case (.make, _), (.release, _), (_, .arm), (_, .cancel): return false
            }
        }
    }

    /// Result of the three yields.
    @usableFromInline
    enum YieldAction {
        /// Nothing to do but answer.
        case answer(YieldOutcome)
        /// `bufferingNewest` made room: release the oldest element outside the lock, answer `.dropped`.
        case evicted(Element)
        /// Perform the effects, then answer.
        case perform(Effects, answer: YieldOutcome)
    }

    /// Result of `next(into:)`. A resume made due by the consumer's return is made first.
    @usableFromInline
    enum NextAction {
        /// The waiting elements were swapped into the consumer's batch.
        case batch(resume: Call?)
        /// Nothing waits: suspend with `suspend(_:)`, then ask again.
        case suspend(resume: Call?)
        /// The stream ended normally.
        case end
        /// The stream ended with this error.
        case fail(any Error)
        /// The consumer's task was cancelled, or the consumer went away.
        case cancelled
    }

    /// Result of `suspend(_:)`.
    @usableFromInline
    enum SuspendAction {
        /// The machine keeps the continuation until something arrives.
        case suspended
        /// Something arrived meanwhile: resume at once and ask again.
        case resume(Continuation)
    }

    /// Result of `finish`, `consumerTerminated` and `gapTimerFired`, whose only answer is effects.
    @usableFromInline
    enum EffectsAction {
        case none
        case perform(Effects)
    }

    /// Result of `gapTimerArmed`.
    @usableFromInline
    enum GapTimerArmedAction {
        /// The machine keeps the timer.
        case keep
        /// Cancel this timer: the one it replaced, or the new one if it came too late.
        case cancel(DeadlineTimer)
    }

    /// Counters for tests and debugging.
    @usableFromInline
    struct Trace: Sendable {
        /// Batches handed to the consumer.
        @usableFromInline var batches = 0
        /// Times the consumer suspended.
        @usableFromInline var suspensions = 0
    }

    @usableFromInline var state: State
    /// What waits between producer and consumer, while streaming or draining. It lives beside
    /// `state` rather than in its payload because every yield and every batch changes it: a payload
    /// can only change by moving it out and back, which the compiler does through the type's
    /// generic value witnesses.
    @usableFromInline var handoff: Handoff
    /// Pause, resume and cancel. Outlives the streaming phase: a cancel runs after termination.
    @usableFromInline var producer: ProducerControlStateMachine
    @usableFromInline var statistics: StreamStatistics
    @usableFromInline var trace: Trace
    @usableFromInline let buffering: StreamBuffering.Kind
    @usableFromInline let isSequenced: Bool
    /// Whether gaps arm timers: the ordering has a gap timeout.
    @usableFromInline let armsGapTimers: Bool

    @usableFromInline
    init(buffering: StreamBuffering, ordering: StreamOrdering) {
        buffering.validate()
        ordering.validate()
        self.state = .streaming(
            waiter: nil, backpressure: buffering.watermarks,
            sequencing: ordering.makeReorderer().map { Sequencing($0) })
        self.handoff = Handoff()
        self.producer = ProducerControlStateMachine()
        self.statistics = StreamStatistics()
        self.trace = Trace()
        self.buffering = buffering.kind
        self.isSequenced = ordering.isSequenced
        self.armsGapTimers = ordering.effectiveGapTimeout != nil
    }

    // MARK: - Producer events

    /// One element from the producer of an arrival-ordered stream.
    @inlinable
    mutating func yield(_ element: Element) -> YieldAction {
        switch state {
        case .streaming(let waiter, let backpressure, _):
            precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
            if waiter == nil && acceptsQuietly(1, backpressure) {
                handoff.buffer.append(element)
                statistics.enqueued &+= 1
                let held = handoff.held
                if held > statistics.peakBuffered { statistics.peakBuffered = held }
                return .answer(.enqueued)
            }
            return yieldWithEffects(element)
        case .draining, .finished, .cancelled:
            statistics.yieldedAfterTermination &+= 1
            return .answer(.terminated)
        case .modifying:
            Self.modifying()
        }
    }

    /// Several elements from the producer of an arrival-ordered stream, in order: one append, at
    /// most one wake-up, and the watermarks applied as if they came one by one.
    @inlinable
    mutating func yield(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldAction {
        switch state {
        case .streaming(let waiter, let backpressure, _):
            precondition(!isSequenced, "this stream was created with ordering: .sequenced; call yield(_:sequence:)")
            guard !elements.isEmpty else { return .answer(answer(.enqueued)) }
            if waiter == nil && acceptsQuietly(elements.count, backpressure) {
                handoff.buffer.append(contentsOf: elements)
                statistics.enqueued &+= elements.count
                notePeak()
                return .answer(.enqueued)
            }
            return yieldWithEffects(contentsOf: elements)
        case .draining, .finished, .cancelled:
            statistics.yieldedAfterTermination &+= elements.count
            return .answer(.terminated)
        case .modifying:
            Self.modifying()
        }
    }

    /// A batch that needs more than an append, while streaming: a policy drop, a wake-up or a
    /// watermark.
    @inlinable
    mutating func yieldWithEffects(contentsOf elements: UnsafeBufferPointer<Element>) -> YieldAction {
        var effects = Effects()
        let stored: Int
        switch buffering {
        case .unbounded, .backpressure:
            handoff.buffer.append(contentsOf: elements)
            stored = elements.count
        case .bufferingOldest(let limit):
            stored = Swift.min(Swift.max(0, limit &- handoff.buffer.count), elements.count)
            handoff.buffer.append(contentsOf: UnsafeBufferPointer(rebasing: elements[0..<stored]))
        case .bufferingNewest(let limit):
            stored = Swift.min(limit, elements.count)
            var overflow = handoff.buffer.count &+ stored &- limit
            while overflow > 0, let oldest = handoff.buffer.popFirst() {
                effects.discarded.append(oldest)
                overflow &-= 1
            }
            handoff.buffer.append(contentsOf: UnsafeBufferPointer(rebasing: elements[(elements.count &- stored)...]))
        }
        let dropped = elements.count &- stored &+ effects.discarded.count
        statistics.droppedByBuffering &+= dropped
        statistics.enqueued &+= stored
        accepted(stored, &effects)
        let outcome = answer(dropped > 0 ? .dropped : .enqueued)
        return effects.isEmpty ? .answer(outcome) : .perform(effects, answer: outcome)
    }

    /// One numbered element from the producer of a sequenced stream. The reorder happens here,
    /// under the stream's lock, so concurrent producers cannot interleave the runs it releases.
    @usableFromInline
    mutating func yield(_ element: Element, sequence: UInt64) -> YieldAction {
        switch state {
        case .streaming(let waiter, let backpressure, var sequencing?):
            state = .modifying
            var effects = Effects()
            var stored = 0
            var outcome = YieldOutcome.enqueued
            let before = sequencing.reorderer.counters
            let placement = sequencing.reorderer.insert(
                element, sequence: sequence,
                release: { released in
                    if self.store(released, &effects) { stored &+= 1 } else { outcome = .dropped }
                },
                discard: { effects.discarded.append($0) })
            count(sequencing.reorderer.counters, since: before)
            switch placement {
            case .released, .held, .stale:
                if armsGapTimers && sequencing.reorderer.heldCount > 0
                    && sequencing.reorderer.gapGeneration != before.gapGeneration
                {
                    effects.gapTimer = .arm(generation: sequencing.reorderer.gapGeneration)
                }
                state = .streaming(
                    waiter: waiter, backpressure: backpressure, sequencing: sequencing)
                accepted(stored, &effects)
                if placement == .stale { outcome = .dropped }
                return .perform(effects, answer: answer(outcome))
            case .rejected:
                state = .streaming(
                    waiter: waiter, backpressure: backpressure, sequencing: sequencing)
                accepted(stored, &effects)
                failForGap(&effects)
                return .perform(effects, answer: .dropped)
            }
        case .streaming(_, _, sequencing: nil):
            preconditionFailure("yield(_:sequence:) needs a stream created with ordering: .sequenced(window:)")
        case .draining, .finished, .cancelled:
            statistics.yieldedAfterTermination &+= 1
            return .answer(.terminated)
        case .modifying:
            Self.modifying()
        }
    }

    /// The gap timer armed for `generation` fired: if that gap still holds elements back, give it
    /// up, skipping it or failing the stream.
    @usableFromInline
    mutating func gapTimerFired(generation: UInt64) -> EffectsAction {
        switch state {
        case .streaming(let waiter, let backpressure, var sequencing?)
        where sequencing.reorderer.gapGeneration == generation && sequencing.reorderer.heldCount > 0:
            state = .modifying
            var effects = Effects()
            var stored = 0
            let before = sequencing.reorderer.counters
            let gaveUp = sequencing.reorderer.giveUpGap { released in
                if self.store(released, &effects) { stored &+= 1 }
            }
            count(sequencing.reorderer.counters, since: before)
            statistics.gapsTimedOut &+= 1
            if let current = sequencing.gapTimer, current.generation == generation { sequencing.gapTimer = nil }
            if gaveUp && sequencing.reorderer.heldCount > 0 {
                effects.gapTimer = .arm(generation: sequencing.reorderer.gapGeneration)
            }
            state = .streaming(waiter: waiter, backpressure: backpressure, sequencing: sequencing)
            accepted(stored, &effects)
            if !gaveUp { failForGap(&effects) }
            return .perform(effects)
        case .streaming, .draining, .finished, .cancelled:
            return .none
        case .modifying:
            Self.modifying()
        }
    }

    /// A timer was created for the gap of `generation`.
    @usableFromInline
    mutating func gapTimerArmed(_ timer: DeadlineTimer, generation: UInt64) -> GapTimerArmedAction {
        switch state {
        case .streaming(let waiter, let backpressure, var sequencing?):
            // Two producers' threads may arm two generations in either order: the newer one stays.
            if let current = sequencing.gapTimer, current.generation > generation { return .cancel(timer) }
            let replaced = sequencing.gapTimer?.timer
            sequencing.gapTimer = (generation, timer)
            state = .streaming(waiter: waiter, backpressure: backpressure, sequencing: sequencing)
            return replaced.map { .cancel($0) } ?? .keep
        case .streaming(_, _, sequencing: nil):
            preconditionFailure("gapTimerArmed: an arrival-ordered stream has no gaps")
        case .draining, .finished, .cancelled:
            return .cancel(timer)
        case .modifying:
            Self.modifying()
        }
    }

    /// The producer finished, with `failure` or normally. Only the first terminal counts. A
    /// sequenced stream's held elements are flushed under `.skip`, or fail it under `.fail`.
    @usableFromInline
    mutating func finish(_ failure: (any Error)?) -> EffectsAction {
        switch state {
        case .streaming(let waiter, var backpressure, var sequencing):
            state = .modifying
            var effects = Effects()
            var failure = failure
            if let reorderer = sequencing?.reorderer, reorderer.heldCount > 0 {
                switch reorderer.gapPolicy.kind {
                case .skip:
                    let before = reorderer.counters
                    var stored = 0
                    sequencing?.reorderer.flush { released in
                        if self.store(released, &effects) { stored &+= 1 }
                    }
                    if let after = sequencing?.reorderer.counters { count(after, since: before) }
                    // No pause after the end: the flush only counts its overshoot.
                    switch stored > 0 ? backpressure?.accepted(stored, held: handoff.held) : nil {
                    case .pause(let extra)?, .overshoot(let extra)?: statistics.acceptedWhilePaused &+= extra
                    case .keepGoing?, nil: break
                    }
                    notePeak()
                case .fail:
                    let missing = reorderer.nextSequence
                    discard(sequencing?.reorderer.removeAll() ?? [], &effects)
                    if failure == nil { failure = SequenceGapError(missingSequence: missing) }
                }
                statistics.heldBehindGap = 0
            }
            if let timer = sequencing?.gapTimer?.timer { effects.gapTimer = .cancel(timer) }
            effects.producer = counted(producer.producerFinished())
            effects.wakeUp = waiter
            state = .draining(failure: failure)
            return .perform(effects)
        case .draining, .finished, .cancelled:
            return .none
        case .modifying:
            Self.modifying()
        }
    }

    /// `start` returned its handle, or `nil`: decided calls can be made now.
    @usableFromInline
    mutating func handleArrived(_ control: StreamControl?) -> ProducerControlStateMachine.Action {
        counted(producer.handleArrived(control))
    }

    /// A call handed out by this machine returned.
    @usableFromInline
    mutating func callReturned(_ operation: ProducerControlStateMachine.Operation) -> ProducerControlStateMachine.Action
    {
        counted(producer.callReturned(operation))
    }

    // MARK: - Consumer events

    /// The consumer used up its previous batch and asks for more. On `.batch` the waiting elements
    /// were swapped into `batch`, which must be empty.
    @inlinable
    mutating func next(into batch: inout RingBuffer<Element>) -> NextAction {
        switch state {
        case .streaming(let waiter, var backpressure, let sequencing):
            precondition(waiter == nil, "next() called while another next() is suspended")
            handoff.inBatch = 0
            var resume: Call?
            if case .resume? = backpressure?.consumerReturned(held: handoff.held) {
                state = .streaming(waiter: nil, backpressure: backpressure, sequencing: sequencing)
                resume = resumeDecided()
            }
            if handoff.buffer.isEmpty { return .suspend(resume: resume) }
            swap(&handoff.buffer, &batch)
            handoff.inBatch = batch.count
            trace.batches &+= 1
            return .batch(resume: resume)
        case .draining(let failure):
            if !handoff.buffer.isEmpty {
                swap(&handoff.buffer, &batch)
                trace.batches &+= 1
                return .batch(resume: nil)
            }
            state = .finished
            if let failure { return .fail(failure) }
            return .end
        case .finished:
            return .end
        case .cancelled:
            return .cancelled
        case .modifying:
            Self.modifying()
        }
    }

    /// The consumer suspends after `next(into:)` returned `.suspend`.
    @usableFromInline
    mutating func suspend(_ continuation: Continuation) -> SuspendAction {
        switch state {
        case .streaming(let waiter, let backpressure, let sequencing):
            precondition(waiter == nil, "next() called while another next() is suspended")
            if !handoff.buffer.isEmpty { return .resume(continuation) }
            state = .streaming(
                waiter: continuation, backpressure: backpressure, sequencing: sequencing)
            trace.suspensions &+= 1
            return .suspended
        case .draining, .finished, .cancelled:
            return .resume(continuation)
        case .modifying:
            Self.modifying()
        }
    }

    /// The consumer stopped: its task was cancelled, it left the loop or dropped the iterator
    /// (`cancelled`), or it called `stop()`, after which `next()` returns `nil`. Drops what is
    /// buffered and cancels the producer if it still runs.
    @usableFromInline
    mutating func consumerTerminated(cancelled: Bool) -> EffectsAction {
        switch state {
        case .streaming(let waiter, _, var sequencing):
            state = .modifying
            var effects = Effects()
            discardBuffer(&effects)
            if let held = sequencing?.reorderer.removeAll() {
                discard(held, &effects)
                statistics.heldBehindGap = 0
            }
            if let timer = sequencing?.gapTimer?.timer { effects.gapTimer = .cancel(timer) }
            effects.producer = counted(producer.cancelRequested())
            effects.wakeUp = waiter
            state = cancelled ? .cancelled : .finished
            return .perform(effects)
        case .draining:
            var effects = Effects()
            discardBuffer(&effects)
            state = cancelled ? .cancelled : .finished
            return .perform(effects)
        case .finished, .cancelled:
            return .none
        case .modifying:
            Self.modifying()
        }
    }

    // MARK: - Queries

    /// Whether the subscription ended for the consumer. Before `start` ran, only `stop()` or
    /// cancellation can have ended it.
    var hasEnded: Bool {
        switch state {
        case .finished, .cancelled: return true
        case .streaming, .draining: return false
        case .modifying: Self.modifying()
        }
    }

    /// Whether the consumer is suspended, waiting for elements (tests).
    var isConsumerWaiting: Bool {
        switch state {
        case .streaming(let waiter, _, _): return waiter != nil
        case .draining, .finished, .cancelled: return false
        case .modifying: Self.modifying()
        }
    }

    /// The pending gap timer and its generation, to cancel when the subscription goes away.
    var pendingGapTimer: (generation: UInt64, timer: DeadlineTimer)? {
        switch state {
        case .streaming(_, _, let sequencing): return sequencing?.gapTimer
        case .draining, .finished, .cancelled: return nil
        case .modifying: Self.modifying()
        }
    }

    /// Whether the producer still runs: no terminal yet, and the consumer did not stop.
    var isStreaming: Bool {
        switch state {
        case .streaming: return true
        case .draining, .finished, .cancelled: return false
        case .modifying: Self.modifying()
        }
    }

    /// Whether the watermarks want the producer paused.
    var wantsPause: Bool {
        switch state {
        case .streaming(_, let backpressure, _): return backpressure?.wantsPause ?? false
        case .draining, .finished, .cancelled: return false
        case .modifying: Self.modifying()
        }
    }

    // MARK: - Helpers

    /// Whether `count` more elements can be appended with no decision: no policy drop, no watermark.
    @inlinable
    func acceptsQuietly(_ count: Int, _ backpressure: StreamBackpressure?) -> Bool {
        switch buffering {
        case .unbounded:
            return true
        case .bufferingOldest(let limit), .bufferingNewest(let limit):
            return handoff.buffer.count &+ count <= limit
        case .backpressure:
            return backpressure?.acceptsQuietly(count, held: handoff.held) ?? true
        }
    }

    /// The answer for accepted elements: `stopProducing` while a pause is wanted and the producer
    /// can be restarted.
    @inlinable
    func answer(_ outcome: YieldOutcome) -> YieldOutcome {
        switch (outcome, state) {
        case (.enqueued, .streaming(_, let backpressure?, _)):
            return backpressure.wantsPause && producer.acceptsStopAnswers ? .stopProducing : .enqueued
        case (.enqueued, _), (.stopProducing, _), (.dropped, _), (.terminated, _):
            return outcome
        }
    }

    /// A single yield that needs more than an append: a policy drop, a wake-up or a watermark.
    @inlinable
    mutating func yieldWithEffects(_ element: Element) -> YieldAction {
        switch buffering {
        case .bufferingNewest(let limit) where handoff.buffer.count >= limit:
            guard let oldest = handoff.buffer.popFirst() else {
                preconditionFailure("bufferingNewest: a full buffer was empty")
            }
            handoff.buffer.append(element)
            statistics.enqueued &+= 1
            statistics.droppedByBuffering &+= 1
            return .evicted(oldest)
        case .unbounded, .bufferingOldest, .bufferingNewest, .backpressure:
            var effects = Effects()
            guard store(element, &effects) else { return .answer(.dropped) }
            accepted(1, &effects)
            return effects.isEmpty ? .answer(answer(.enqueued)) : .perform(effects, answer: answer(.enqueued))
        }
    }

    /// Stores one accepted element under the buffering policy, while streaming: false if
    /// `bufferingOldest` dropped it. Wake-ups and watermarks are `accepted`'s, once per event.
    @inlinable
    mutating func store(_ element: Element, _ effects: inout Effects) -> Bool {
        switch buffering {
        case .unbounded, .backpressure:
            break
        case .bufferingOldest(let limit):
            if handoff.buffer.count >= limit {
                statistics.droppedByBuffering &+= 1
                return false
            }
        case .bufferingNewest(let limit):
            if handoff.buffer.count >= limit, let oldest = handoff.buffer.popFirst() {
                effects.discarded.append(oldest)
                statistics.droppedByBuffering &+= 1
            }
        }
        handoff.buffer.append(element)
        statistics.enqueued &+= 1
        return true
    }

    /// `count` elements were stored while streaming: wakes the waiting consumer, updates the
    /// peak and applies the watermarks.
    @inlinable
    mutating func accepted(_ count: Int, _ effects: inout Effects) {
        switch state {
        case .streaming(let waiter, var backpressure, let sequencing):
            notePeak()
            guard count > 0 else { return }
            var pauseDue = false
            switch backpressure?.accepted(count, held: handoff.held) {
            case nil, .keepGoing?:
                break
            case .pause(let overshoot)?:
                statistics.acceptedWhilePaused &+= overshoot
                pauseDue = true
            case .overshoot(let extra)?:
                statistics.acceptedWhilePaused &+= extra
            }
            if waiter != nil { effects.wakeUp = waiter }
            state = .streaming(waiter: nil, backpressure: backpressure, sequencing: sequencing)
            if pauseDue { effects.producer = counted(producer.pauseDecided()) }
        case .draining, .finished, .cancelled, .modifying:
            preconditionFailure("accepted() outside the streaming phase")
        }
    }

    @inlinable
    mutating func notePeak() {
        let held = handoff.held
        if held > statistics.peakBuffered { statistics.peakBuffered = held }
    }

    /// A resume is due: the call to make, if the control machine hands one out now.
    @usableFromInline
    mutating func resumeDecided() -> Call? {
        switch counted(producer.resumeDecided()) {
        case .none: return nil
        case .make(let call): return call
        case .release: preconditionFailure("a resume decision cannot close the producer's control")
        }
    }

    /// Counts the pause and resume calls handed out.
    @usableFromInline
    mutating func counted(_ action: ProducerControlStateMachine.Action) -> ProducerControlStateMachine.Action {
        switch action {
        case .make(let call) where call.operation == .pause: statistics.pauses &+= 1
        case .make(let call) where call.operation == .resume: statistics.resumes &+= 1
        case .none, .make, .release: break
        }
        return action
    }

    /// Adds what the reorderer dropped or skipped since `before` to the statistics.
    mutating func count(_ after: SequenceReorderer<Element>.Counters, since before: SequenceReorderer<Element>.Counters)
    {
        statistics.skippedSequences &+= after.skippedSequences &- before.skippedSequences
        statistics.droppedStale &+= after.droppedStale &- before.droppedStale
        statistics.heldBehindGap = after.heldCount
    }

    /// A gap under `GapPolicy.fail`: the stream fails after what it already released, held
    /// elements are discarded and the running producer is cancelled.
    mutating func failForGap(_ effects: inout Effects) {
        switch state {
        case .streaming(let waiter, _, var sequencing?):
            state = .modifying
            let missing = sequencing.reorderer.nextSequence
            discard(sequencing.reorderer.removeAll(), &effects)
            statistics.heldBehindGap = 0
            if let timer = sequencing.gapTimer?.timer { effects.gapTimer = .cancel(timer) }
            effects.producer = counted(producer.cancelRequested())
            if let waiter { effects.wakeUp = waiter }
            state = .draining(failure: SequenceGapError(missingSequence: missing))
        case .streaming(_, _, sequencing: nil), .draining, .finished, .cancelled, .modifying:
            preconditionFailure("failForGap() outside a sequenced stream's streaming phase")
        }
    }

    mutating func discardBuffer(_ effects: inout Effects) {
        statistics.discardedAtTermination &+= handoff.buffer.count
        if effects.discarded.isEmpty {
            swap(&handoff.buffer, &effects.discarded)
        } else {
            while let element = handoff.buffer.popFirst() { effects.discarded.append(element) }
        }
    }

    mutating func discard(_ elements: [Element], _ effects: inout Effects) {
        statistics.discardedAtTermination &+= elements.count
        for element in elements { effects.discarded.append(element) }
    }

    @usableFromInline
    static func modifying() -> Never {
        preconditionFailure("CallbackStreamStateMachine: an event arrived while a payload was being changed")
    }
}

extension CallbackStreamStateMachine: Sendable {}
extension CallbackStreamStateMachine.State: Sendable {}
