import Dispatch
import LegacyBridge
import LegacySimulator

extension ScenarioLab {
    /// A download-backed event source in `behavior`, and the probe that watches it.
    ///
    /// - Parameters:
    ///   - behavior: What the simulated SDK does with the download.
    ///   - totalBytes: The download's size.
    ///   - reverseBlocks: Deliver events reversed in blocks of this many (2: 1, 0, 3, 2, ...; 8:
    ///     7, 6, ..., 0, 15, ...): out of order on every run, as far apart as the source's declared
    ///     window, which is then this size, independent of thread timing. 0 delivers in order.
    ///   - lowWater: The source's suggested low watermark.
    ///   - highWater: The source's suggested high watermark.
    ///   - client: The SDK client to run on (default: the lab's). A client with a loop thread
    ///     makes a loop-thread-only source: it offers `post`, starts the download on the loop, and
    ///     counts every control call made on another thread (``SourceProbe/Snapshot/foreignControls``).
    ///   - beforeEvent: Runs on the SDK's thread, inside the SDK's callback, before each data or
    ///     progress event is passed on, and may hold it (the lab stands in for the SDK here).
    ///   - cancelTakes: The source's cancel stops the SDK, then blocks its caller until this gate
    ///     opens (or the lab's patience ran out): an SDK whose cancel takes long to return.
    ///   - beforeEnd: Runs on the SDK's thread before the first end is passed on, and may hold it
    ///     (the lab stands in for the SDK here): a scenario forces the order "the consumer waits in
    ///     `next()`, then the end arrives" this way.
    /// - Returns: The source to hand to the adapter, and the probe that watches it.
    func source(
        _ behavior: SimulatedBehavior, totalBytes: Int, reverseBlocks: Int = 0,
        lowWater: Int = 16, highWater: Int = 64, client: SDKClient? = nil,
        beforeEvent: (@Sendable (LegacyEvent, SourceProbe) -> Void)? = nil, cancelTakes: LabGate? = nil,
        beforeEnd: (@Sendable (SourceProbe) -> Void)? = nil
    ) -> (LegacyEventSource, SourceProbe) {
        let probe = SourceProbe()
        // Held weakly: the client's owner (the lab, or the scenario) decides when it is destroyed,
        // which also ends a cancel that deadlocked inside a callback.
        weak let sdk = client ?? self.sdk
        let onLoop = client?.hasLoopThread ?? false
        let patience = self.patience
        let reorders = reverseBlocks > 1
        let window = reorders ? reverseBlocks : Int(behavior.streamConcurrency)
        var post: (@Sendable (_ job: @escaping @Sendable () -> Void) -> Void)?
        if onLoop {
            post = { job in postJob(job, to: sdk, probe: probe) }
        }
        let source = LegacyEventSource(
            reorderWindow: window, lowWater: lowWater, highWater: highWater, post: post
        ) { [post] onEvent, onEnd in
            probe.noteStart()
            let reverser = BlockReverser(size: max(1, reverseBlocks))
            let deliver: @Sendable (LegacyEvent) -> Void = { event in
                probe.noteDelivered(event.sequence)
                beforeEvent?(event, probe)
                let entered = probe.callbackEntered()
                onEvent(event)
                probe.callbackReturned(entered)
            }
            let slot = SourceSlot()
            let startDownload: @Sendable () -> Void = {
                guard let sdk else { return }
                let started = SDK.startDownload(
                    client: sdk, request: DownloadRequest(path: "/conformance", totalBytes: totalBytes),
                    behavior: behavior,
                    onEvent: { raw in
                        switch raw.kind {
                        case .end:
                            if reorders { for held in reverser.flush() { deliver(held) } }
                            if probe.noteEnd() == 1 { beforeEnd?(probe) }
                            let entered = probe.callbackEntered()
                            onEnd(raw.error)
                            probe.callbackReturned(entered)
                        case .data, .progress:
                            let event = LegacyEvent(
                                sequence: raw.sequence, kind: raw.kind == .data ? .data : .progress,
                                bytes: raw.bytesDone, length: raw.data.count)
                            if reorders {
                                for ready in reverser.pass(event) { deliver(ready) }
                            } else {
                                deliver(event)
                            }
                        }
                    },
                    onRelease: { probe.noteRelease() })
                switch started {
                case .success(let handle):
                    // The controls hold the SDK handle, as a real SDK's task object does; the lab
                    // watches them to tell when the adapter lets go of its subscription.
                    let controls = SourceControls(handle)
                    probe.watchControls(controls)
                    if slot.attach(controls) { handle.cancel() }  // a cancel came first (counted)
                case .failure(let error):
                    probe.noteRelease()
                    onEnd(error)
                }
            }
            if onLoop {
                post?(startDownload)
            } else {
                startDownload()
            }
            let checkThread: @Sendable () -> Void = {
                if onLoop, sdk?.isLoopThread != true { probe.noteForeignControl() }
            }
            return LegacySourceControl(
                cancel: {
                    checkThread()
                    probe.noteCancel()
                    slot.cancel()
                    if let cancelTakes { _ = cancelTakes.wait(upTo: patience) }
                },
                pause: {
                    checkThread()
                    probe.notePause()
                    try? slot.handle?.pause()
                },
                resume: {
                    checkThread()
                    probe.noteResume()
                    try? slot.handle?.resume()
                })
        }
        return (source, probe)
    }
}

/// Posts `job` to the loop thread of `client`, counting a refusal on `probe`.
private func postJob(_ job: @escaping @Sendable () -> Void, to client: SDKClient?, probe: SourceProbe) {
    do {
        try client?.post(job)
    } catch {
        probe.notePostRefused()
    }
}

/// Where a source's controls find the SDK handle: a source on a loop thread starts later, in a
/// job, so a control call made before that job ran (only a call from another thread can be) finds
/// no handle; a cancel is then made as soon as the handle exists.
final class SourceSlot: Sendable {
    private struct State {
        var controls: SourceControls?
        var cancelled = false
    }
    private let state = LockedBox(State())

    var handle: SDKHandle? { state.withLock { $0.controls?.handle } }

    /// Stores the controls; returns whether a cancel already came (the caller then cancels).
    func attach(_ controls: SourceControls) -> Bool {
        state.withLock {
            $0.controls = controls
            return $0.cancelled
        }
    }

    func cancel() {
        let handle = state.withLock { state -> SDKHandle? in
            state.cancelled = true
            return state.controls?.handle
        }
        handle?.cancel()
    }
}

/// A gate the lab's threads wait at (really blocked, bounded) until a scenario opens it.
final class LabGate: Sendable {
    private let group = DispatchGroup()
    private let isOpen = LockedBox(false)

    init() { group.enter() }

    deinit { open() }

    func open() {
        let first = isOpen.withLock { isOpen in
            defer { isOpen = true }
            return !isOpen
        }
        if first { group.leave() }
    }

    /// Waits until the gate opens or `bound` passes; returns whether it opened.
    func wait(upTo bound: Duration) -> Bool {
        group.wait(timeout: .now() + .nanoseconds(Int(bound.nanosecondsClamped))) == .success
    }
}

/// What the source's controls hold: the SDK handle.
final class SourceControls: Sendable {
    let handle: SDKHandle
    init(_ handle: SDKHandle) { self.handle = handle }
}

/// Reverses a source's events in blocks of `size` consecutive sequence numbers: each block is
/// held until its last event arrived, then delivered last first. An end flushes what is held.
final class BlockReverser: Sendable {
    private let size: UInt64
    private let held = LockedBox<[LegacyEvent]>([])

    init(size: Int) { self.size = UInt64(size) }

    func pass(_ event: LegacyEvent) -> [LegacyEvent] {
        held.withLock { held in
            held.append(event)
            guard event.sequence % size == size - 1 else { return [] }
            defer { held = [] }
            return held.reversed()
        }
    }

    func flush() -> [LegacyEvent] {
        held.withLock { held in
            defer { held = [] }
            return held.reversed()
        }
    }
}

/// What one event source saw of the adapter and its consumer. Thread-safe.
final class SourceProbe: Sendable {
    struct Snapshot {
        var starts = 0
        var delivered = 0
        /// Deliveries of a sequence number the source had delivered before (the adapter started
        /// it again, say).
        var redelivered = 0
        var consumed = 0
        /// The sequence numbers the source delivered while the consumer was stalled (see
        /// ``SourceProbe/setStalled(_:)``).
        var deliveredWhileStalled: ClosedRange<UInt64>?
        var maxOutstanding = 0
        var cancels = 0
        var pauses = 0
        var resumes = 0
        var ends = 0
        var released = false
        /// Control calls made on a thread other than the SDK's loop (loop-thread-only sources).
        var foreignControls = 0
        /// Jobs the SDK's loop refused (the client was being destroyed).
        var refusedPosts = 0

        /// Events handed to the adapter and not yet taken by the consumer (each counted once).
        var outstanding: Int { max(0, delivered - redelivered - consumed) }
        var paused: Bool { pauses > resumes }
    }

    private struct State {
        var snapshot = Snapshot()
        var seen = Set<UInt64>()
        var stalled = false
        weak var controls: SourceControls?
        var controlsWatched = false
        var nextCallback = 0
        /// When each adapter callback still running was entered.
        var inFlight: [Int: ContinuousClock.Instant] = [:]
        /// The longest adapter callback that returned.
        var longestReturned: Duration = .zero
    }

    private let state = LockedBox(State())

    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    func watchControls(_ controls: SourceControls) {
        state.withLock {
            $0.controls = controls
            $0.controlsWatched = true
        }
    }

    /// Whether the adapter let go of the source's controls (and the SDK handle they hold); `nil`
    /// when the source never started.
    var controlsFreed: Bool? {
        state.withLock { $0.controlsWatched ? $0.controls == nil : nil }
    }

    func noteStart() { state.withLock { $0.snapshot.starts += 1 } }
    func noteDelivered(_ sequence: UInt64) {
        state.withLock {
            $0.snapshot.delivered += 1
            if !$0.seen.insert(sequence).inserted { $0.snapshot.redelivered += 1 }
            if $0.stalled {
                let range = $0.snapshot.deliveredWhileStalled
                $0.snapshot.deliveredWhileStalled =
                    min(range?.lowerBound ?? sequence, sequence)...max(range?.upperBound ?? sequence, sequence)
            }
            $0.snapshot.maxOutstanding = max($0.snapshot.maxOutstanding, $0.snapshot.outstanding)
        }
    }

    /// The consumer stalls (`true`) or takes events again (`false`).
    func setStalled(_ stalled: Bool) {
        state.withLock { $0.stalled = stalled }
    }
    func noteConsumed() { state.withLock { $0.snapshot.consumed += 1 } }
    func noteCancel() { state.withLock { $0.snapshot.cancels += 1 } }
    func notePause() { state.withLock { $0.snapshot.pauses += 1 } }
    func noteResume() { state.withLock { $0.snapshot.resumes += 1 } }
    /// Counts an end event from the SDK; returns how many there were so far.
    func noteEnd() -> Int {
        state.withLock {
            $0.snapshot.ends += 1
            return $0.snapshot.ends
        }
    }
    func noteRelease() { state.withLock { $0.snapshot.released = true } }
    func noteForeignControl() { state.withLock { $0.snapshot.foreignControls += 1 } }
    func notePostRefused() { state.withLock { $0.snapshot.refusedPosts += 1 } }

    /// The SDK is about to call the adapter's callback; returns a token for ``callbackReturned(_:)``.
    func callbackEntered() -> Int {
        let now = ContinuousClock.now
        return state.withLock {
            $0.nextCallback += 1
            $0.inFlight[$0.nextCallback] = now
            return $0.nextCallback
        }
    }

    func callbackReturned(_ token: Int) {
        let now = ContinuousClock.now
        state.withLock {
            guard let entered = $0.inFlight.removeValue(forKey: token) else { return }
            $0.longestReturned = max($0.longestReturned, now - entered)
        }
    }

    /// Adapter callbacks running right now.
    var callbacksInFlight: Int { state.withLock { $0.inFlight.count } }

    /// The longest time an adapter callback took, or has been running so far.
    var longestCallback: Duration {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.inFlight.values.reduce(state.longestReturned) { max($0, now - $1) }
        }
    }
}
