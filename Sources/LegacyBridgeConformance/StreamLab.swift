import LegacyBridge
import LegacySimulator

extension ScenarioLab {
    /// A download-backed event source in `behavior`, and the probe that watches it.
    ///
    /// - Parameters:
    ///   - behavior: What the simulated SDK does with the download.
    ///   - totalBytes: The download's size.
    ///   - swapPairs: Deliver events pairwise swapped (1, 0, 3, 2, ...): out of order on every run,
    ///     within a window of 2, independent of thread timing.
    ///   - lowWater: The source's suggested low watermark.
    ///   - highWater: The source's suggested high watermark.
    ///   - beforeEnd: Runs on the SDK's thread before the first end is passed on, and may hold it
    ///     (the lab stands in for the SDK here): a scenario forces the order "the consumer waits in
    ///     `next()`, then the end arrives" this way.
    /// - Returns: The source to hand to the adapter, and the probe that watches it.
    func source(
        _ behavior: SimulatedBehavior, totalBytes: Int, swapPairs: Bool = false,
        lowWater: Int = 16, highWater: Int = 64, beforeEnd: (@Sendable (SourceProbe) -> Void)? = nil
    ) -> (LegacyEventSource, SourceProbe) {
        let probe = SourceProbe()
        let sdk = self.sdk
        let window = swapPairs ? 2 : Int(behavior.streamConcurrency)
        let source = LegacyEventSource(reorderWindow: window, lowWater: lowWater, highWater: highWater) {
            onEvent, onEnd in
            probe.noteStart()
            let swapper = PairSwapper()
            let deliver: @Sendable (LegacyEvent) -> Void = { event in
                probe.noteDelivered()
                onEvent(event)
            }
            let started = SDK.startDownload(
                client: sdk, request: DownloadRequest(path: "/conformance", totalBytes: totalBytes), behavior: behavior,
                onEvent: { raw in
                    switch raw.kind {
                    case .end:
                        if swapPairs, let held = swapper.flush() { deliver(held) }
                        if probe.noteEnd() == 1 { beforeEnd?(probe) }
                        onEnd(raw.error)
                    case .data, .progress:
                        let event = LegacyEvent(
                            sequence: raw.sequence, kind: raw.kind == .data ? .data : .progress,
                            bytes: raw.bytesDone, length: raw.data.count)
                        if swapPairs {
                            for ready in swapper.pass(event) { deliver(ready) }
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
                return LegacySourceControl(
                    cancel: {
                        probe.noteCancel()
                        controls.handle.cancel()
                    },
                    pause: {
                        probe.notePause()
                        try? controls.handle.pause()
                    },
                    resume: {
                        probe.noteResume()
                        try? controls.handle.resume()
                    })
            case .failure(let error):
                probe.noteRelease()
                onEnd(error)
                return LegacySourceControl(cancel: {}, pause: {}, resume: {})
            }
        }
        return (source, probe)
    }
}

/// What the source's controls hold: the SDK handle.
final class SourceControls: Sendable {
    let handle: SDKHandle
    init(_ handle: SDKHandle) { self.handle = handle }
}

/// Holds every even-numbered event until the next one arrives, then releases both swapped.
final class PairSwapper: Sendable {
    private let held = LockedBox<LegacyEvent?>(nil)

    func pass(_ event: LegacyEvent) -> [LegacyEvent] {
        held.withLock { held in
            if let first = held {
                held = nil
                return [event, first]
            }
            if event.sequence % 2 == 0 {
                held = event
                return []
            }
            return [event]
        }
    }

    func flush() -> LegacyEvent? {
        held.withLock { held in
            defer { held = nil }
            return held
        }
    }
}

/// What one event source saw of the adapter and its consumer. Thread-safe.
final class SourceProbe: Sendable {
    struct Snapshot {
        var starts = 0
        var delivered = 0
        var consumed = 0
        var maxOutstanding = 0
        var cancels = 0
        var pauses = 0
        var resumes = 0
        var ends = 0
        var released = false

        /// Events handed to the adapter and not yet taken by the consumer.
        var outstanding: Int { delivered - consumed }
        var paused: Bool { pauses > resumes }
    }

    private struct State {
        var snapshot = Snapshot()
        weak var controls: SourceControls?
        var controlsWatched = false
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
    func noteDelivered() {
        state.withLock {
            $0.snapshot.delivered += 1
            $0.snapshot.maxOutstanding = max($0.snapshot.maxOutstanding, $0.snapshot.outstanding)
        }
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
}
