import Synchronization

/// What a ``CurlLoop`` did, counted as it happened. Read it with ``CurlLoop/statistics``.
///
/// Every `curl_*` call for a transfer (and for the multi handle) must be made on the loop thread;
/// the loop checks each one and counts it in ``callsOnLoopThread`` or ``callsOffLoopThread``
/// (`curl_global_init`, `curl_version` and `curl_easy_strerror`, which libcurl allows anywhere,
/// are not counted). When the loop is idle, `easyHandlesCreated == easyHandlesCleanedUp`.
public struct CurlStatistics: Hashable, Sendable {
    /// `curl_*` calls made on the loop thread.
    public var callsOnLoopThread = 0
    /// `curl_*` calls made on any other thread. Always 0: the loop traps before making one.
    public var callsOffLoopThread = 0
    /// libcurl callbacks (write, open-socket) that ran on the loop thread.
    public var callbacksOnLoopThread = 0
    /// libcurl callbacks that ran on any other thread. Always 0 with the multi interface.
    public var callbacksOffLoopThread = 0
    /// Easy handles created (`curl_easy_init`), one per transfer.
    public var easyHandlesCreated = 0
    /// Easy handles freed (`curl_easy_cleanup`).
    public var easyHandlesCleanedUp = 0
    /// Multi handles created (one per loop).
    public var multiHandlesCreated = 0
    /// Multi handles freed (when the loop shuts down).
    public var multiHandlesCleanedUp = 0
    /// Transfers that ended (completed, failed or cancelled).
    public var transfersFinished = 0
    /// Transfers among those that ended because they were cancelled (by their owner, or because
    /// the loop shut down), their handle removed before libcurl finished them.
    public var transfersCancelled = 0
    /// Bytes handed to transfers' data handlers.
    public var bytesDelivered = 0
    /// Times a write callback answered `CURL_WRITEFUNC_PAUSE` (libcurl keeps those bytes and
    /// delivers them again after the transfer is resumed).
    public var pausesAnswered = 0
    /// `curl_easy_pause(…, CURLPAUSE_CONT)` calls.
    public var resumes = 0
    /// Connections libcurl opened (its open-socket callback).
    public var connectionsOpened = 0
    /// Connections refused by the loopback guard (to an address outside 127.0.0.0/8 and ::1).
    public var connectionsRefused = 0

    /// Creates empty statistics.
    public init() {}
}

/// The live counters behind ``CurlStatistics``.
final class CurlCounters: Sendable {
    let callsOnLoopThread = Atomic<Int>(0)
    let callsOffLoopThread = Atomic<Int>(0)
    let callbacksOnLoopThread = Atomic<Int>(0)
    let callbacksOffLoopThread = Atomic<Int>(0)
    let easyHandlesCreated = Atomic<Int>(0)
    let easyHandlesCleanedUp = Atomic<Int>(0)
    let multiHandlesCreated = Atomic<Int>(0)
    let multiHandlesCleanedUp = Atomic<Int>(0)
    let transfersFinished = Atomic<Int>(0)
    let transfersCancelled = Atomic<Int>(0)
    let bytesDelivered = Atomic<Int>(0)
    let pausesAnswered = Atomic<Int>(0)
    let resumes = Atomic<Int>(0)
    let connectionsOpened = Atomic<Int>(0)
    let connectionsRefused = Atomic<Int>(0)

    var snapshot: CurlStatistics {
        var out = CurlStatistics()
        out.callsOnLoopThread = callsOnLoopThread.load(ordering: .relaxed)
        out.callsOffLoopThread = callsOffLoopThread.load(ordering: .relaxed)
        out.callbacksOnLoopThread = callbacksOnLoopThread.load(ordering: .relaxed)
        out.callbacksOffLoopThread = callbacksOffLoopThread.load(ordering: .relaxed)
        out.easyHandlesCreated = easyHandlesCreated.load(ordering: .relaxed)
        out.easyHandlesCleanedUp = easyHandlesCleanedUp.load(ordering: .relaxed)
        out.multiHandlesCreated = multiHandlesCreated.load(ordering: .relaxed)
        out.multiHandlesCleanedUp = multiHandlesCleanedUp.load(ordering: .relaxed)
        out.transfersFinished = transfersFinished.load(ordering: .relaxed)
        out.transfersCancelled = transfersCancelled.load(ordering: .relaxed)
        out.bytesDelivered = bytesDelivered.load(ordering: .relaxed)
        out.pausesAnswered = pausesAnswered.load(ordering: .relaxed)
        out.resumes = resumes.load(ordering: .relaxed)
        out.connectionsOpened = connectionsOpened.load(ordering: .relaxed)
        out.connectionsRefused = connectionsRefused.load(ordering: .relaxed)
        return out
    }
}

extension Atomic where Value == Int {
    /// Adds `amount` (relaxed: these are counters, read for reports and tests).
    func increment(by amount: Int = 1) {
        self.add(amount, ordering: .relaxed)
    }
}
