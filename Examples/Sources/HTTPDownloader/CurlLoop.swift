import LegacyBridge
import Synchronization

/// libcurl's multi interface on an `SDKLoop`: a thread of the library's own, and the queue other
/// threads post work to.
///
/// libcurl's multi interface is single-threaded: every `curl_*` call for a transfer must come from
/// the thread that drives the multi handle. A `CurlLoop` is that thread: the `SDKLoop` iterates
/// `curl_multi_poll` and `curl_multi_perform`, and wakes it with `curl_multi_wakeup`. Transfers are
/// started, resumed and cancelled by jobs posted to it (in posting order, one at a time); their
/// callbacks run on it. Posting never blocks and never runs the job inline, so it is safe from any
/// thread, including the task runtime's cancellation handlers and the loop's own callbacks.
///
/// ```swift
/// let loop = try CurlLoop()
/// // … transfers …
/// await loop.shutdown()
/// ```
///
/// Dropping the last reference shuts the loop down too, without waiting: running transfers end
/// as cancelled.
public final class CurlLoop: Sendable {
    private let loop: SDKLoop
    private let driver: CurlDriver
    private let counters: CurlCounters
    private let nextID = Atomic<UInt64>(0)

    /// Starts the loop thread and its multi handle.
    ///
    /// - Parameter loopbackOnly: Refuse every connection to an address outside 127.0.0.0/8 and
    ///   ::1 (libcurl's open-socket callback answers "no socket", the transfer fails with
    ///   ``CurlError/couldNotConnect`` and nothing is sent). For tests and sandboxes.
    /// - Throws: ``CurlError/outOfMemory`` if the thread cannot be started, or the code of a
    ///   failed `curl_global_init`.
    public init(loopbackOnly: Bool = false) throws(CurlError) {
        try Curl.initializeLibrary()
        let counters = CurlCounters()
        self.counters = counters
        let driver = CurlDriver(counters: counters, loopbackOnly: loopbackOnly)
        self.driver = driver
        do {
            self.loop = try SDKLoop(
                name: "curl loop",
                driver: .iterating(
                    runOnce: { driver.waitAndProcess(maxWaitMilliseconds: 1000) },
                    wake: { driver.wake() }))
        } catch {
            throw CurlError.outOfMemory
        }
    }

    deinit {
        // The loop shuts down in the background once released; this job runs before it stops.
        try? loop.post { [driver] in driver.destroyAll() }
    }

    /// Runs `job` on the loop thread, after every job posted before it. Never blocks; never runs
    /// `job` inline. This is how a stream's control calls reach libcurl.
    ///
    /// - Parameter job: The work.
    /// - Returns: `false` if the loop has shut down (the job was dropped).
    @discardableResult
    package func post(_ job: @escaping @Sendable () -> Void) -> Bool {
        (try? loop.post(job)) != nil
    }

    /// Runs `job` with the loop's driver, on the loop thread, after every job posted before it.
    /// Never blocks; never runs `job` inline.
    ///
    /// - Parameter job: The work; it may call the driver (it runs on the driver's thread).
    /// - Returns: `false` if the loop has shut down (the job was dropped).
    @discardableResult
    func postToDriver(_ job: @escaping @Sendable (CurlDriver) -> Void) -> Bool {
        let driver = self.driver
        return post { job(driver) }
    }

    /// A fresh transfer id.
    func makeTransferID() -> TransferID {
        TransferID(rawValue: nextID.add(1, ordering: .relaxed).newValue)
    }

    /// Whether the caller runs on the loop thread.
    package var isCurrent: Bool { loop.isCurrent }

    /// The loop thread as a scheduler, for the streams' control calls.
    package var scheduler: SDKScheduler { loop.scheduler }

    /// Starts a GET of `url` on the loop thread.
    ///
    /// - Parameters:
    ///   - url: An `http` or `https` URL.
    ///   - handlers: The transfer's callbacks; they run on the loop thread.
    /// - Returns: The transfer's id, or nil if the loop has shut down (`onEnd` is then called
    ///   with `.cancelled` before this returns).
    @discardableResult
    package func startTransfer(url: String, handlers: TransferHandlers) -> TransferID? {
        let id = makeTransferID()
        guard postToDriver({ driver in driver.start(id: id, url: url, handlers: handlers) }) else {
            handlers.onEnd(.cancelled)
            return nil
        }
        return id
    }

    /// Resumes a transfer whose write callback answered "pause" (posted to the loop thread).
    package func resumeTransfer(_ id: TransferID) {
        postToDriver { driver in driver.resume(id: id) }
    }

    /// Cancels a transfer (posted to the loop thread); its `onEnd` reports `.cancelled` unless it
    /// ended first.
    package func cancelTransfer(_ id: TransferID) {
        postToDriver { driver in driver.cancel(id: id) }
    }

    /// What the loop has done so far.
    public var statistics: CurlStatistics {
        counters.snapshot
    }

    /// The libcurl version string, e.g. "libcurl/7.88.1 OpenSSL/3.0.17 zlib/1.2.13 …".
    public static var libraryVersion: String {
        Curl.version
    }

    /// Stops the loop thread and returns when it has cancelled every transfer and freed every
    /// handle.
    public func shutdown() async {
        _ = postToDriver { driver in driver.destroyAll() }
        await loop.shutdown()
    }
}
