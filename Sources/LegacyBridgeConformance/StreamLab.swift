import LegacyBridge
import LegacySimulator

extension ScenarioLab {
    /// A download-backed event source in `behavior`, and the probe that watches it.
    ///
    /// - Parameters:
    ///   - swapPairs: Deliver events pairwise swapped (1, 0, 3, 2, ...): out of order on every run,
    ///     within a window of 2, independent of thread timing.
    func source(
        _ behavior: SimulatedBehavior, totalBytes: Int, swapPairs: Bool = false,
        lowWater: Int = 16, highWater: Int = 64
    ) -> (LegacyEventSource, SourceProbe) {
        let probe = SourceProbe()
        let sdk = self.sdk
        let window = swapPairs ? 2 : Int(behavior.streamConcurrency)
        let source = LegacyEventSource(reorderWindow: window, lowWater: lowWater, highWater: highWater) { onEvent, onEnd in
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
                        probe.noteEnd()
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
                return LegacySourceControl(
                    cancel: {
                        probe.noteCancel()
                        handle.cancel()
                    },
                    pause: {
                        probe.notePause()
                        try? handle.pause()
                    },
                    resume: {
                        probe.noteResume()
                        try? handle.resume()
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

    private let state = LockedBox(Snapshot())

    var snapshot: Snapshot { state.withLock { $0 } }

    func noteStart() { state.withLock { $0.starts += 1 } }
    func noteDelivered() {
        state.withLock {
            $0.delivered += 1
            $0.maxOutstanding = max($0.maxOutstanding, $0.outstanding)
        }
    }
    func noteConsumed() { state.withLock { $0.consumed += 1 } }
    func noteCancel() { state.withLock { $0.cancels += 1 } }
    func notePause() { state.withLock { $0.pauses += 1 } }
    func noteResume() { state.withLock { $0.resumes += 1 } }
    func noteEnd() { state.withLock { $0.ends += 1 } }
    func noteRelease() { state.withLock { $0.released = true } }
}
