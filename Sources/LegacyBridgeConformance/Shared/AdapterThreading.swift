import LegacyBridge

/// Where an adapter's SDK must be called, as the adapter declares it to the conformance suite.
///
/// The scenarios check the declaration:
/// - ``anyThread``: the SDK may be called from any thread. A `@MainActor` caller's call must
///   start on the main actor: the adapter passes the caller's isolation on and hops nowhere.
/// - ``sdkThread(_:)``: the SDK must only be called from its own thread. The SDK calls the probe
///   wraps (start, cancel, and for streams pause and resume) must run where the scheduler's
///   `isCurrent` is true, whoever the caller is. Every scenario ends by posting a job to that
///   thread, which must run within the patience: an adapter that leaves the SDK's thread blocked
///   (a callback sleeping, retrying or waiting there) is failed by the first scenario that makes
///   it block, whatever the kind of fixture.
/// - ``sdkLoop(_:)``: the same, for an SDK hosted on an `SDKLoop`; the suite also counts the
///   loop's watches and timers (`SDKLoop.statistics`), so a watch or a timer left behind by each
///   call, or a descriptor closed under a live watch, is failed.
public struct AdapterThreading: Sendable {
    enum Kind: Sendable {
        case anyThread
        case sdkThread(SDKScheduler)
    }

    let kind: Kind
    /// The declaration as the fixture wrote it, for messages: `.anyThread`, `.sdkThread` or `.sdkLoop`.
    let declared: String
    /// The loop of ``sdkLoop(_:)``, whose watches and timers the suite counts.
    var loop: SDKLoop? { hostLoop?() }
    private var hostLoop: (@Sendable () -> SDKLoop)? = nil

    private init(kind: Kind, declared: String, hostLoop: (@Sendable () -> SDKLoop)? = nil) {
        self.kind = kind
        self.declared = declared
        self.hostLoop = hostLoop
    }

    /// The SDK may be called from any thread.
    public static var anyThread: AdapterThreading { AdapterThreading(kind: .anyThread, declared: ".anyThread") }

    /// The SDK must only be called from its own thread, the one `scheduler` posts to.
    ///
    /// - Parameter scheduler: The SDK's thread, for example an `SDKLoop`'s ``SDKLoop/scheduler``.
    ///   Create it with `isCurrent` so that the suite can tell where each SDK call ran.
    /// - Returns: The declaration.
    public static func sdkThread(_ scheduler: SDKScheduler) -> AdapterThreading {
        AdapterThreading(kind: .sdkThread(scheduler), declared: ".sdkThread")
    }

    /// The SDK is hosted on `loop` and must only be called from its thread: the loop-driven SDKs
    /// (libcurl multi, c-ares, hiredis, libpq) and thread-affine ones alike.
    ///
    /// The one-shot `loop-watches-released` scenario then also reads the loop's
    /// `SDKLoop.statistics` around sequential calls: a watch or a timer left behind by each call,
    /// or a descriptor closed under a live watch each time, fails it.
    ///
    /// - Parameter loop: The loop the SDK runs on.
    /// - Returns: The declaration, as ``sdkThread(_:)`` with the loop's scheduler.
    public static func sdkLoop(_ loop: SDKLoop) -> AdapterThreading {
        AdapterThreading(kind: .sdkThread(loop.scheduler), declared: ".sdkLoop", hostLoop: { loop })
    }

    /// ``sdkLoop(_:)`` for a loop made on first use: `loop` is asked only when a scenario runs
    /// (the gallery's fixtures, which must not start threads when the catalog is listed).
    package static func sdkLoop(_ loop: @escaping @Sendable () -> SDKLoop) -> AdapterThreading {
        AdapterThreading(
            kind: .sdkThread(SDKScheduler(post: { job in try loop().post(job) }, isCurrent: { loop().isCurrent })),
            declared: ".sdkLoop", hostLoop: loop)
    }

    /// The SDK's thread, for ``sdkThread(_:)``.
    var scheduler: SDKScheduler? {
        if case .sdkThread(let scheduler) = kind { return scheduler }
        return nil
    }

    /// Where the calling code runs, as the declaration can tell it.
    func spot() -> ThreadSpot {
        ThreadSpot(
            onMainActor: isOnMainQueue(),
            onSDKThread: scheduler.flatMap { $0.knowsCurrentThread ? $0.isCurrent : nil })
    }

    /// Whether the suite can tell the SDK's thread from others.
    var knowsSDKThread: Bool { scheduler?.knowsCurrentThread ?? false }
}

/// Where one SDK call ran.
struct ThreadSpot: Sendable, Hashable {
    /// On the main actor's executor.
    var onMainActor: Bool
    /// On the SDK's thread; `nil` when the declaration cannot tell (``AdapterThreading/anyThread``,
    /// or a scheduler made without `isCurrent`).
    var onSDKThread: Bool?
}
