import Dispatch
import LegacyBridge
import LegacySimulator

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh simulated SDK client for one scenario, plus factories for instrumented operations.
///
/// Each scenario gets its own client so counters are its own and so that tearing the client down
/// stops anything a broken adapter left running. Each kind's lab adds its instruments in an
/// extension (OneShot/OneShotLab.swift, Stream/StreamLab.swift).
final class ScenarioLab: Sendable {
    let sdk: SDKClient
    /// How long the lab itself waits for something that must happen (a held `start`, a held end).
    let patience: Duration
    /// Every one-shot operation handed out, for the context lifetime checks after the scenario.
    let probes = LockedBox<[OperationProbe]>([])

    /// Clients the scenario made besides ``sdk`` (``adopt(_:)``), destroyed with it.
    private let adopted = LockedBox<[SDKClient]>([])

    init(seed: UInt64, patience: Duration = .seconds(2), workerThreads: Int = 4) throws {
        sdk = try SDKClient(workerThreads: workerThreads, seed: seed)
        self.patience = patience
    }

    /// Makes `client` the lab's to destroy at the scenario's end (see ``destroyClients(waiting:)``).
    func adopt(_ client: SDKClient) -> SDKClient {
        adopted.withLock { $0.append(client) }
        return client
    }

    /// Destroys the scenario's clients, which an adapter may still hold (a leaked context, a
    /// session it never closed), so that nothing the scenario made keeps running after it: every
    /// operation is cancelled and releases its context, and every SDK thread ends. The destroy runs
    /// on a thread of its own, since it waits for callbacks still running, and a broken adapter's
    /// may never return; this waits for it at most `bound`.
    func destroyClients(waiting bound: Duration) async {
        let clients = [sdk] + adopted.withLock { $0 }
        let done = LockedBox(false)
        onDedicatedThread("conformance lab teardown") {
            for client in clients { client.destroy() }
            done.withLock { $0 = true }
        }
        _ = await eventually(within: bound) { done.withLock { $0 } }
    }

    var counters: SDKCounters { sdk.counters }

    func register(_ probe: OperationProbe) {
        probes.withLock { $0.append(probe) }
    }
}

/// How long scenarios wait for something that must happen (a release, a cancel). Set per run from
/// the watchdog, so a loaded machine (or ThreadSanitizer) does not turn a slow pass into a failure.
enum Patience {
    @TaskLocal static var bound: Duration = .seconds(2)
}

/// Polls `condition` until it holds or `bound` (default: the run's patience) passes. Returns
/// whether it held. The sleep is only an upper bound on how long to wait for something that must happen.
func eventually(within bound: Duration? = nil, _ condition: @Sendable () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + (bound ?? Patience.bound)
    while clock.now < deadline {
        if condition() { return true }
        // A cancelled task cannot sleep; the watchdog has given up on it anyway.
        if Task.isCancelled { break }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}

/// The blocking form of ``eventually(within:_:)``, for the lab's own threads (never a pool thread).
func waitUntil(within bound: Duration, _ condition: () -> Bool) -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + bound
    while clock.now < deadline {
        if condition() { return true }
        usleep(200)
    }
    return condition()
}

/// Polls `condition` on the calling (Dispatch) thread until it holds or `bound` passes.
func waitOnThisThread(upTo bound: Duration, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + bound
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleepOnThisThread(1_000)
    }
    return condition()
}

/// Sleeps the calling thread (a Dispatch thread of the lab, never a cooperative one).
private func usleepOnThisThread(_ microseconds: Int) {
    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .microseconds(microseconds))
}

/// A bound in words, e.g. "666 ms".
func milliseconds(_ duration: Duration) -> String {
    "\(duration.nanosecondsClamped / 1_000_000) ms"
}

/// The number of processors the system has online.
func activeProcessorCount() -> Int {
    max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}
