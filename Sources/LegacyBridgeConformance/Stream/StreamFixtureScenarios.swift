import LegacyBridge

/// The stream contract on a real adapter over its SDK, through a ``StreamFixture``.
///
/// Each scenario needs some of what a fixture can give and is reported as not checked, with the
/// reason, when the fixture does not give it. Every scenario ends with the checks of
/// ``FixtureContext/finalCheck()``: endless subscriptions released, the SDK's resources back to
/// where they were, no SDK call off its thread, and on each subscription no second SDK cancel and
/// no cancel after the SDK had ended it.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
enum StreamFixtureScenarios<Element: Sendable> {
    typealias Fixture = StreamFixture<Element>

    static var all: [Scenario<Fixture, FixtureContext>] {
        [
            finite, failure, consumerCancel, breakEarly, stalledConsumer, eventsAfterEnd, endInsideCancel,
            foreignThreadEnd, threadAffinity,
        ]
    }

    // MARK: - Helpers

    /// What a consumer saw.
    struct Consumed: Sendable {
        var elements: [Element] = []
        var error: (any Error)?
        /// The loop ended by itself (end of sequence or a thrown error), not by the consumer leaving.
        var ended = false
        /// What one more `next()` after the end did: `nil` when it returned `nil`, as it must.
        var afterEnd: String?
    }

    static func recorder(_ context: FixtureContext, _ hostility: StreamHostility = .init()) -> StreamRecorder<Element> {
        let recorder = StreamRecorder<Element>(hostility, threading: context.threading)
        context.watch(recorder)
        return recorder
    }

    /// Subscribes through `recorder`'s probe and takes events until the sequence ends, `limit`
    /// events were taken, or `carryOn` (asked after each event) says to leave. The iterator is
    /// dropped before this returns.
    static func consume(
        _ subscribe: Fixture.Subscribe, _ recorder: StreamRecorder<Element>, limit: Int = .max,
        carryOn: (@Sendable (Int) async -> Bool)? = nil
    ) async -> Consumed {
        var consumed = Consumed()
        let sequence: any AsyncSequence<Element, any Error>
        do {
            sequence = try await subscribe(recorder.probe)
        } catch {
            consumed.error = error
            consumed.ended = true
            return consumed
        }
        var iterator = sequence.makeAsyncIterator()
        do {
            while consumed.elements.count < limit {
                guard let element = try await iterator.next() else {
                    consumed.ended = true
                    break
                }
                recorder.noteConsumed()
                consumed.elements.append(element)
                if let carryOn, await !carryOn(consumed.elements.count) { break }
            }
        } catch {
            consumed.error = error
            consumed.ended = true
        }
        if consumed.ended {
            do {
                if try await iterator.next() != nil { consumed.afterEnd = "returned another event" }
            } catch {
                consumed.afterEnd = "threw again (\(error))"
            }
        }
        return consumed
    }

    /// How a stalled consumer's subscription went.
    struct Stall: Sendable {
        /// The stall ended on something the scenario can judge: the adapter held more than its
        /// bound allows, the SDK came to rest with events waiting, or a callback was held too long.
        /// Otherwise half the patience passed first: the SDK is too slow to stall against.
        var decided = false
        /// How many events the consumer takes in all: one, then what the adapter can still hand
        /// over after the stall, then 8 that only an SDK delivering again can give.
        var wanted = Int.max
    }

    /// Subscribes through `recorder`'s probe, takes one event, stalls, then takes what the adapter
    /// can still hand over and 8 more, and leaves.
    ///
    /// The stall lasts until the adapter holds more than its bound allows, or the SDK rested with
    /// events waiting, or an event callback is held too long, or half the patience passed. A
    /// backpressure adapter must also have told the SDK to stop (a pause, or a yield's answer):
    /// quiet alone may only be a busy machine's SDK thread. A dropping adapter is asked for what
    /// its limit lets it keep, never for what the SDK delivered: the events it dropped can never
    /// reach the consumer, however long it waits.
    static func consumeAroundStall(
        _ subscribe: Fixture.Subscribe, _ recorder: StreamRecorder<Element>, _ fixture: Fixture,
        _ context: FixtureContext
    ) async -> (Consumed, Stall) {
        let promptly = context.patience / 3
        let quiet = context.patience / 20
        let limit = fixture.bound.heldLimit
        let mustBeTold = fixture.bound.isBackpressure
        let stall = LockedBox(Stall())
        let consumed = await consume(subscribe, recorder) { count in
            guard count == 1 else { return count < stall.withLock { $0.wanted } }
            let decided = await eventually(within: context.patience / 2) {
                let snapshot = recorder.snapshot
                let told = !mustBeTold || snapshot.pauses + snapshot.stopAnswers > 0
                let rested =
                    told && snapshot.outstanding > 0 && recorder.callbacksInFlight == 0
                    && (snapshot.lastDelivery.map { ContinuousClock.now - $0 > quiet } ?? false)
                return snapshot.outstanding > limit || rested || recorder.longestCallback > promptly
            }
            let kept = fixture.bound.handedOver(of: recorder.snapshot.outstanding)
            stall.withLock { $0 = Stall(decided: decided, wanted: 1 + kept + 8) }
            return true
        }
        return (consumed, stall.withLock { $0 })
    }

    /// Events out of sequence in `elements`, in words, or `nil` (only with `ordered`). A lossless
    /// bound needs every sequence number in turn; a dropping one, numbers that only grow: what it
    /// dropped leaves gaps, never a repeat or a step back.
    static func orderProblem(_ elements: [Element], _ fixture: Fixture) -> String? {
        guard let ordered = fixture.ordered, let first = elements.first.map(ordered) else { return nil }
        var previous = first
        for (index, element) in elements.enumerated() {
            let sequence = ordered(element)
            if !fixture.bound.isLossless {
                if index > 0 && sequence <= previous {
                    return
                        "event #\(index) had sequence number \(sequence) after \(previous): an event came twice or out of order (a dropping stream may leave gaps, never repeat or reorder)"
                }
                previous = sequence
                continue
            }
            let expected = first &+ UInt64(index)
            if sequence != expected {
                return
                    "event #\(index) had sequence number \(sequence), expected \(expected): \(sequence < expected ? "an event came twice or out of order" : "events were lost or reordered")"
            }
        }
        return nil
    }

    /// After the consumer left an endless subscription: the SDK's cancel was made and the
    /// subscription's resources came back. One wait, bounded by the patience.
    static func sdkStopped(_ recorder: StreamRecorder<Element>, _ context: FixtureContext, how: String) async -> Check?
    {
        let counts = context.common.liveResources != nil
        let baseline = context.liveBaseline ?? 0
        let grace = context.patience / 40
        _ = await eventually {
            recorder.snapshot.keptComing(grace: grace)
                || (counts ? (context.live ?? baseline) <= baseline : recorder.snapshot.cancels > 0)
        }
        if let kept = await eventsAfterCancel(recorder, context) { return kept }
        let snapshot = recorder.snapshot
        if counts, let problem = await context.resourcesBack(after: how, within: .zero) {
            guard case .fail(let why) = problem else { return problem }
            if snapshot.cancels == 0 {
                return .fail(
                    "\(why). The adapter never called the SDK's cancel: wire the consumer's leaving (task cancelled, loop left, iterator dropped) to the SDK's cancel"
                )
            }
            return .fail("\(why). The SDK's cancel was called, yet what the subscription allocated was not freed")
        }
        if !counts && snapshot.cancels == 0 {
            return .passWithNote(
                "whether the SDK was told to stop is not checked: the adapter passes no cancel through the probe and the fixture counts no liveResources"
            )
        }
        return nil
    }

    /// Events the SDK kept delivering after the adapter's cancel returned, as a failure: that
    /// cancel did not stop the SDK, whether or not the subscription would end by itself. An event
    /// that begins within a fortieth of the patience of the cancel's return is in flight; one that
    /// begins later fails. The watch lasts a tenth of the patience from the cancel's return, or
    /// eight of the SDK's mean intervals between events when that is longer, up to half the
    /// patience: a slow SDK has time to show that it goes on.
    static func eventsAfterCancel(_ recorder: StreamRecorder<Element>, _ context: FixtureContext) async -> Check? {
        let grace = context.patience / 40
        let snapshot = recorder.snapshot
        guard let returned = snapshot.cancelReturned else { return nil }
        let watch = min(max(grace * 4, (snapshot.meanInterval ?? .zero) * 8), context.patience / 2)
        let left = returned + watch - ContinuousClock.now
        _ = await eventually(within: max(left, .zero)) { recorder.snapshot.keptComing(grace: grace) }
        let after = recorder.snapshot
        guard after.keptComing(grace: grace), let last = after.lastEventAfterCancel else { return nil }
        return .fail(
            "the SDK kept delivering events after the adapter's cancel returned (\(after.eventsAfterCancel) event(s), the last \(milliseconds(last - returned)) after it): the cancel did not stop the SDK. Call the SDK's own cancel (unsubscribe, close, an abort answer) in it, not only a flag of the adapter's"
        )
    }

    /// The finite subscription did not end normally: the fixture's fault unless the SDK ended it
    /// normally (the probe saw it).
    static func finiteProblem(_ consumed: Consumed, _ recorder: StreamRecorder<Element>) -> Check {
        let snapshot = recorder.snapshot
        if let error = consumed.error {
            if snapshot.sdkEnds > 0 && snapshot.sdkEndError == nil {
                return .fail(
                    "the SDK ended the subscription normally, yet the consumer's loop threw \(type(of: error)): \(error)"
                )
            }
            return .usageError(
                "the fixture's finite subscription ended with \(type(of: error)): \(error). It must end normally: is the SDK, or its test server, reachable?"
            )
        }
        return .fail("the finite subscription did not end")
    }

    // MARK: - Scenarios

    static var finite: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-finite",
            summary:
                "a finite subscription: every event arrives (in sequence, when ordered), the sequence ends once, no SDK cancel"
        ) { fixture, context in
            guard let finite = fixture.finite else { return .notChecked("the fixture gives no finite subscription") }
            let expected = fixture.finiteCount
            let recorder = recorder(context)
            let consumed = await consume(finite, recorder)
            guard consumed.ended, consumed.error == nil else { return finiteProblem(consumed, recorder) }
            if let afterEnd = consumed.afterEnd {
                return .fail("after the end, one more next() \(afterEnd): the end must come once, then nil")
            }
            if let expected, consumed.elements.count != expected, fixture.bound.isLossless {
                let delivered = recorder.snapshot.deliveredBeforeEnd.map { ", the SDK delivered \($0)" } ?? ""
                return .fail(
                    "the consumer received \(consumed.elements.count) events, expected \(expected)\(delivered): events were lost or repeated"
                )
            }
            if let problem = orderProblem(consumed.elements, fixture) { return .fail(problem) }
            if let delivered = recorder.snapshot.deliveredBeforeEnd, consumed.elements.count != delivered,
                fixture.bound.isLossless
            {
                return .fail(
                    "the consumer received \(consumed.elements.count) events; the SDK delivered \(delivered) before its end: events were lost or repeated"
                )
            }
            if expected == nil && recorder.snapshot.eventsWrapped == 0 {
                return .passWithNote(
                    "the sequence ended once; how many events arrived is not checked: the fixture gives no finiteCount and the adapter passes no event callback through the probe"
                )
            }
            return .pass
        }
    }

    static var failure: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-failure",
            summary: "a failing subscription: the consumer's loop throws the error once, then next() returns nil"
        ) { fixture, context in
            guard let failing = fixture.failing else { return .notChecked("the fixture gives no failing subscription") }
            let recorder = recorder(context)
            let consumed = await consume(failing, recorder)
            guard consumed.ended else { return .fail("the failing subscription did not end") }
            guard let error = consumed.error else {
                if recorder.snapshot.sdkEndError != nil {
                    return .fail(
                        "the SDK ended the subscription with an error, but the consumer's loop ended normally: the error was lost"
                    )
                }
                return .usageError(
                    "the fixture's failing subscription ended normally: it cannot fail. Fix the fixture: subscribe to something the SDK refuses"
                )
            }
            if error is CancellationError {
                return .fail("the SDK ended the subscription with an error, but the consumer got CancellationError")
            }
            if let afterEnd = consumed.afterEnd {
                return .fail("after the error, one more next() \(afterEnd): the error must come once, then nil")
            }
            return .pass
        }
    }

    static var consumerCancel: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-consumer-cancel",
            summary:
                "the consuming task is cancelled: its loop ends, the SDK's cancel is made once and no event comes after it returned, the subscription's resources come back"
        ) { fixture, context in
            guard let endless = fixture.endless else {
                return .notChecked("the fixture gives no endless subscription for the consumer to leave")
            }
            context.releaseAtEnd(endless.release)
            let recorder = recorder(context)
            let firstEvent = LockedBox(false)
            let consumer = ScenarioThreads.task {
                await consume(endless.start, recorder) { _ in
                    firstEvent.withLock { $0 = true }
                    return true
                }
            }
            guard await eventually({ firstEvent.withLock { $0 } }) else {
                consumer.cancel()
                return .fail("the endless subscription delivered no event within \(context.patience)")
            }
            consumer.cancel()
            guard await value(of: consumer, within: context.patience) != nil else {
                return .fail(
                    "the consuming task was cancelled, and its loop did not end within \(context.patience): the adapter's next() does not end when its task is cancelled"
                )
            }
            return all(await sdkStopped(recorder, context, how: "after the consuming task was cancelled"))
        }
    }

    static var breakEarly: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-break",
            summary:
                "the consumer leaves its loop after one event: the SDK's cancel is made once and no event comes after it returned, the subscription's resources come back"
        ) { fixture, context in
            guard let endless = fixture.endless else {
                return .notChecked("the fixture gives no endless subscription for the consumer to leave")
            }
            context.releaseAtEnd(endless.release)
            let recorder = recorder(context)
            let consumed = await consume(endless.start, recorder, limit: 1)
            if consumed.ended {
                return consumed.error == nil
                    ? .usageError("the fixture's endless subscription ended by itself before it was released")
                    : .fail("the endless subscription failed: \(consumed.error!)")
            }
            return all(await sdkStopped(recorder, context, how: "after the consumer left its loop"))
        }
    }

    static var stalledConsumer: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-stalled-consumer",
            summary:
                "the consumer stalls: every SDK callback returns promptly, the events held stay within the declared bound, and events flow again once it takes more"
        ) { fixture, context in
            guard let endless = fixture.endless else {
                return .notChecked("the fixture gives no endless subscription to outrun a stalled consumer")
            }
            context.releaseAtEnd(endless.release)
            let promptly = context.patience / 3
            let limit = fixture.bound.heldLimit
            let recorder = recorder(context)
            let (consumed, stall) = await consumeAroundStall(endless.start, recorder, fixture, context)
            let snapshot = recorder.snapshot
            guard snapshot.eventsWrapped > 0 else {
                return .notChecked(
                    "the adapter does not pass its event callback through the probe (probe.event), so what the SDK delivered cannot be counted"
                )
            }
            let longest = recorder.longestCallback
            if longest > promptly {
                return .fail(
                    "an SDK event callback did not return for \(milliseconds(longest)) while the consumer stalled (bound \(milliseconds(promptly))): the adapter holds the SDK's thread until the consumer takes an event; buffer it and stop the SDK instead"
                )
            }
            if consumed.ended {
                return consumed.error == nil
                    ? .usageError("the fixture's endless subscription ended by itself before it was released")
                    : .fail("the endless subscription failed: \(consumed.error!)")
            }
            if case .backpressure(let high) = fixture.bound.kind, snapshot.maxOutstanding > limit {
                let stop =
                    snapshot.pauses + snapshot.stopAnswers > 0
                    ? "it was asked to stop (\(snapshot.pauses) pause(s), \(snapshot.stopAnswers) stop answer(s)) but kept delivering"
                    : "the SDK was never paused and no yield answered stop"
                return .fail(
                    "\(snapshot.maxOutstanding) events were held for a stalled consumer, more than \(limit) (the declared backpressure(high: \(high)), with room for what the SDK delivers while a pause is on its way): \(stop)"
                )
            }
            guard consumed.elements.count >= stall.wanted else {
                return .fail(
                    "after the consumer came back, it received \(consumed.elements.count - 1) more events and then none within \(context.patience): the SDK was stopped and never resumed"
                )
            }
            if let problem = orderProblem(consumed.elements, fixture) { return .fail(problem) }
            let undecided: Check? =
                stall.decided
                ? nil
                : .notChecked(
                    "in \(milliseconds(context.patience / 2)) of stall the endless subscription neither outran the declared bound nor came to rest (\(snapshot.delivered) events delivered): whether the adapter holds its bound is not checked. Give an endless subscription that delivers faster than that"
                )
            return all(await sdkStopped(recorder, context, how: "after the consumer left its loop"), undecided)
        }
    }

    static var eventsAfterEnd: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-events-after-end",
            summary:
                "after its end the SDK delivers the last event again and a second end with an error: the consumer sees exactly the events before the end, and one clean end"
        ) { fixture, context in
            guard let finite = fixture.finite else { return .notChecked("the fixture gives no finite subscription") }
            let recorder = recorder(context, StreamHostility(eventsAfterEnd: true))
            let consumed = await consume(finite, recorder)
            let snapshot = recorder.snapshot
            guard snapshot.endsWrapped > 0, snapshot.eventsWrapped > 0 else {
                return .notChecked(
                    "the adapter does not pass its event and end callbacks through the probe (probe.event, probe.end), so nothing can be delivered after the end"
                )
            }
            guard consumed.ended else { return .fail("the subscription did not end") }
            if let error = consumed.error {
                if error is ProbeInjectedError {
                    return .fail(
                        "the consumer's loop threw the error of a second end, which came after the first: the first end decides, later ones are ignored"
                    )
                }
                return finiteProblem(consumed, recorder)
            }
            if let afterEnd = consumed.afterEnd {
                return .fail("after the end, one more next() \(afterEnd): the end must come once, then nil")
            }
            if let before = snapshot.deliveredBeforeEnd, consumed.elements.count != before, fixture.bound.isLossless {
                return .fail(
                    "the consumer received \(consumed.elements.count) events; the SDK delivered \(before) before its end and one more after it: an event delivered after the end must be ignored"
                )
            }
            return .pass
        }
    }

    static var endInsideCancel: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-end-inside-cancel",
            summary:
                "the consumer leaves and the SDK's cancel reports an end synchronously, inside the cancel: no deadlock, the resources come back"
        ) { fixture, context in
            guard let endless = fixture.endless else {
                return .notChecked("the fixture gives no endless subscription to cancel")
            }
            context.releaseAtEnd(endless.release)
            let recorder = recorder(context, StreamHostility(endInsideCancel: true))
            let consumed = await consume(endless.start, recorder, limit: 1)
            if consumed.ended, consumed.error == nil {
                return .usageError("the fixture's endless subscription ended by itself before it was released")
            }
            let stopped = await sdkStopped(recorder, context, how: "after the consumer left its loop")
            let snapshot = recorder.snapshot
            if snapshot.cancels == 0 {
                return all(
                    stopped,
                    .notChecked(
                        "the adapter does not pass the SDK's cancel through the probe (probe.cancel), so nothing could end the stream inside it"
                    ))
            }
            if snapshot.endsWrapped == 0 {
                return all(
                    stopped, .notChecked("the adapter does not pass its end callback through the probe (probe.end)"))
            }
            return all(stopped)
        }
    }

    static var foreignThreadEnd: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-foreign-thread-end",
            summary: "the end comes on a thread the SDK never uses, after the last event: every event still arrives"
        ) { fixture, context in
            guard let finite = fixture.finite else { return .notChecked("the fixture gives no finite subscription") }
            let recorder = recorder(context, StreamHostility(foreignThreadEnd: true))
            let consumed = await consume(finite, recorder)
            let snapshot = recorder.snapshot
            guard snapshot.endsWrapped > 0 else {
                return .notChecked("the adapter does not pass its end callback through the probe (probe.end)")
            }
            guard consumed.ended, consumed.error == nil else { return finiteProblem(consumed, recorder) }
            if let before = snapshot.deliveredBeforeEnd, consumed.elements.count != before, fixture.bound.isLossless {
                return .fail(
                    "the consumer received \(consumed.elements.count) of the \(before) events the SDK delivered before its end: an end reported on another thread overtook events already handed to the adapter"
                )
            }
            return .pass
        }
    }

    static var threadAffinity: Scenario<Fixture, FixtureContext> {
        Scenario(
            name: "stream-thread-affinity",
            summary:
                "an SDK that must be called on its own thread: start, pause, resume and cancel ran there, and the SDK counted no call off it"
        ) { fixture, context in
            try await context.threadAffinity(
                noCall: "the fixture gives neither a finite nor an endless subscription",
                notThroughProbe:
                    "the adapter passes neither its start nor its controls through the probe, and the fixture counts no offThreadCalls"
            ) {
                var recorders: [StreamRecorder<Element>] = []
                if let finite = fixture.finite {
                    let recorder = recorder(context)
                    _ = await consume(finite, recorder)
                    recorders.append(recorder)
                }
                if let endless = fixture.endless {
                    context.releaseAtEnd(endless.release)
                    let recorder = recorder(context)
                    // A stall long enough for a pause, then what was held and a few more for a
                    // resume, then leave.
                    _ = await consumeAroundStall(endless.start, recorder, fixture, context)
                    _ = await eventually { recorder.snapshot.cancels > 0 }
                    recorders.append(recorder)
                }
                return recorders.map { !$0.snapshot.spots.isEmpty }
            }
        }
    }

    /// The first problem among `checks`, or the last note, or `.pass`.
    static func all(_ checks: Check?...) -> Check {
        var note: Check = .pass
        for check in checks {
            switch check {
            case .fail?, .notChecked?, .usageError?: return check!
            case .passWithNote?: note = check!
            case .pass?, nil: continue
            }
        }
        return note
    }
}

@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension StreamFixture.Bound {
    /// Whether the declared buffering keeps every event.
    var isLossless: Bool {
        if case .dropping = kind { return false }
        return true
    }

    /// Whether the adapter stops the SDK when its consumer falls behind.
    var isBackpressure: Bool {
        if case .backpressure = kind { return true }
        return false
    }

    /// Of `outstanding` events the SDK delivered and the consumer has not taken, how many the
    /// adapter can still hand over: every one, unless it drops; then at most its limit waiting and
    /// as many again in a batch already in the consumer's hands.
    func handedOver(of outstanding: Int) -> Int {
        if case .dropping(let limit) = kind { return min(outstanding, 2 * limit) }
        return outstanding
    }

    /// How many events may be held for a stalled consumer: for backpressure, 64 times the high
    /// mark plus 256, room for what a fast SDK delivers while its pause is on its way to it (a
    /// job posted to its loop thread, say). Buffering without limit passes any such bound, since
    /// the stall lasts until it does. Otherwise a count past which holding more proves nothing.
    var heldLimit: Int {
        switch kind {
        case .backpressure(let high): return 64 * high + 256
        case .dropping(let limit): return 4 * limit + 64
        case .unbounded: return 256
        }
    }
}
