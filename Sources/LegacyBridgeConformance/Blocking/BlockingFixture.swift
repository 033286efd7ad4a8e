import LegacyBridge

/// Your blocking-call adapter over your SDK, as the conformance suite checks it: calls of your real
/// adapter function that the suite can make, what the adapter declares, and what the SDK counts.
///
/// ```swift
/// let fixture = BlockingFixture<Int>(
///     name: "sqlite-count",
///     succeeding: { probe in try await database.count("SELECT 1", probe: probe) },
///     failing: { probe in try await database.count("SELEKT", probe: probe) },
///     blocking: .init(start: { probe in try await database.count(slowQuery, probe: probe) },
///                     release: { database.unlockTable() }))
/// let report = await ConformanceSuite.run(fixture)
/// ```
///
/// Contract for the calls:
/// - `succeeding` succeeds and `failing` fails, each time. A blocking call blocks its thread until
///   it is interrupted or released; with `requestCancellation: .none`, until it is released. The suite reports a fixture that breaks this as a usage error.
/// - `release` lets every blocking call started so far return; the suite may call it several times.
public struct BlockingFixture<Value: Sendable>: Sendable {
    /// One call of your adapter, with the probe to pass to it.
    public typealias Call = nonisolated(nonsending) @Sendable (_ probe: BlockingProbe) async throws -> Value

    /// A call whose SDK call blocks until it is interrupted or released.
    public struct HangingCall: Sendable {
        let start: Call
        let release: @Sendable () -> Void

        /// Creates a blocking call.
        ///
        /// - Parameters:
        ///   - start: Calls the adapter on an SDK call that blocks: a query on a locked table, a
        ///     read from a socket nobody writes to.
        ///   - release: Lets every such call started so far return.
        public init(start: @escaping Call, release: @escaping @Sendable () -> Void) {
            self.start = start
            self.release = release
        }
    }

    /// The fixture's name, unique among the adapters of a run.
    public var name: String { common.name }
    /// What every fixture declares besides its calls.
    let common: FixtureCommon
    let succeeding: Call?
    let failing: Call?
    let blocking: HangingCall?

    /// Creates a fixture.
    ///
    /// - Parameters:
    ///   - name: A short name, unique among the adapters of a run (letters, digits, dashes).
    ///   - threading: Where the blocking SDK call must be made: ``AdapterThreading/anyThread`` (the
    ///     default), or ``AdapterThreading/sdkThread(_:)``.
    ///   - succeeding: A call that succeeds.
    ///   - failing: A call the SDK fails.
    ///   - blocking: A call that blocks until interrupted or released: it makes cancellation and
    ///     the cooperative pool's freedom checkable.
    ///   - liveResources: How many SDK resources are live now; it must come back to where it was.
    ///   - offThreadCalls: How many SDK calls were made off the SDK's thread so far.
    ///   - requestCancellation: Whether the SDK can interrupt a blocking call (the default,
    ///     ``SDKRequestCancellation/perRequest``), or cannot (``SDKRequestCancellation/none``: no
    ///     interrupt ends it, as for libgit2's network calls). Either way the cancelled caller must be
    ///     let go at once; with `.none` the interrupt itself is not checked.
    public init(
        name: String,
        threading: AdapterThreading = .anyThread,
        succeeding: Call?,
        failing: Call? = nil,
        blocking: HangingCall? = nil,
        liveResources: (@Sendable () -> Int)? = nil,
        offThreadCalls: (@Sendable () -> Int)? = nil,
        requestCancellation: SDKRequestCancellation = .perRequest
    ) {
        self.common = FixtureCommon(
            name: name, threading: threading, liveResources: liveResources, offThreadCalls: offThreadCalls,
            requestCancellation: requestCancellation)
        self.succeeding = succeeding
        self.failing = failing
        self.blocking = blocking
    }

}

/// Records one call made through a ``BlockingProbe``.
final class BlockingRecorder: BlockingProbeHooks, FixtureWatch, Sendable {
    struct Snapshot {
        var bodiesBegun = 0
        var bodiesEnded = 0
        var spots: [ThreadSpot] = []
        /// Blocking calls made inside a task that runs on Swift's default executors.
        var bodiesInDefaultExecutorTask = 0
        var interrupts = 0
        /// Interrupts made after the blocking call had returned.
        var interruptsAfterReturn = 0
    }

    let threading: AdapterThreading
    private let state = LockedBox(Snapshot())

    init(threading: AdapterThreading) {
        self.threading = threading
    }

    var probe: BlockingProbe { BlockingProbe(hooks: self) }
    var snapshot: Snapshot { state.withLock { $0 } }

    func bodyBegins() {
        let spot = threading.spot()
        // A task is current on this thread and prefers no task executor: the blocking call runs
        // on the cooperative pool or the main actor. Seen on the thread itself, so the verdict
        // does not depend on how busy the pool is.
        let inDefaultExecutorTask =
            withUnsafeCurrentTask { task in task.map { $0.unownedTaskExecutor == nil } ?? false }
            && spot.onSDKThread != true
        state.withLock {
            $0.bodiesBegun += 1
            $0.spots.append(spot)
            if inDefaultExecutorTask { $0.bodiesInDefaultExecutorTask += 1 }
        }
    }

    func bodyEnded(threw: Bool) {
        state.withLock { $0.bodiesEnded += 1 }
    }

    func cancelBegins() {
        state.withLock { state in
            state.interrupts += 1
            if state.bodiesBegun > 0 && state.bodiesEnded == state.bodiesBegun { state.interruptsAfterReturn += 1 }
        }
    }

    func cancelEnded() {}

    /// Rules broken on this call: a second interrupt, an interrupt after the call returned, the
    /// blocking call made off the SDK's thread.
    func problem() -> String? {
        let snapshot = self.snapshot
        if snapshot.interrupts > 1 {
            return
                "the adapter interrupted the SDK \(snapshot.interrupts) times for one call: interrupt once. A second interrupt can stop the next call on the same connection"
        }
        if snapshot.interruptsAfterReturn > 0 {
            return
                "the adapter interrupted the SDK after its blocking call had returned: the interrupt can stop the next call on the same connection. Interrupt only a call that is still running (OffloadPool.run(cancel:) does)"
        }
        if snapshot.bodiesBegun > 1 {
            return "the adapter made the blocking SDK call \(snapshot.bodiesBegun) times for one call"
        }
        if snapshot.bodiesInDefaultExecutorTask > 0 {
            return
                "the adapter made the blocking SDK call inside a task on Swift's own threads (the cooperative pool, or the main actor): a few such calls hold every thread of the pool. Run it on threads of its own (OffloadPool)"
        }
        if snapshot.spots.contains(where: { $0.onSDKThread == false }) {
            return
                "the adapter made the blocking SDK call off the SDK's thread, though it declares threading \(threading.declared)"
        }
        return nil
    }
}
