// The one file of HTTPDownloader that calls C (libcurl, and socket(2) for the open-socket guard).
//
// It is the only place with Unmanaged, raw pointers and @convention(c) trampolines. Everything
// above it speaks Swift values: CurlDriver's start/resume/cancel/waitAndProcess/destroyAll,
// TransferHandlers, TransferEnd, CurlError.
//
// Threading: libcurl's multi interface is single-threaded. A CurlDriver is used on its SDKLoop's
// thread only (the loop's iterations and posted jobs). Every curl_* call below goes through
// `onLoop`, which counts it and traps if it is made on any other thread than the driver's first
// call's; every callback counts the thread it runs on. Two calls are made elsewhere, as libcurl
// allows: curl_multi_init when the driver is created, and curl_multi_wakeup, the loop's wake, from
// any thread (under a lock that curl_multi_cleanup also takes).
//
// Context lifetime: a transfer's context (its CurlTransfer, passed unretained as WRITEDATA and
// OPENSOCKETDATA) is owned by the driver's table. libcurl calls back only from inside
// curl_multi_perform, curl_multi_poll or curl_easy_pause on that transfer, and the driver removes
// the easy handle (curl_multi_remove_handle, curl_easy_cleanup) before it drops the transfer, so no
// callback can see a freed context.

import CCurl
import LegacyBridge

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Library

enum Curl {
    /// `curl_global_init`, run once per process on first use, before any handle exists.
    private static let globalStatus: Int32 = Int32(bitPattern: curl_global_init(ccurl_global_default).rawValue)

    /// Initialises libcurl once; throws its code if that failed.
    static func initializeLibrary() throws(CurlError) {
        guard globalStatus == 0 else { throw CurlError(rawValue: globalStatus) }
        precondition(
            CurlError.couldNotConnect.rawValue == Int32(CURLE_COULDNT_CONNECT.rawValue)
                && CurlError.aborted.rawValue == Int32(CURLE_ABORTED_BY_CALLBACK.rawValue)
                && CurlError.httpReturnedError.rawValue == Int32(CURLE_HTTP_RETURNED_ERROR.rawValue)
                && CurlError.partialFile.rawValue == Int32(CURLE_PARTIAL_FILE.rawValue),
            "CurlError's codes must be curl.h's")
    }

    /// libcurl's text for a code (`curl_easy_strerror`: static strings, any thread).
    static func codeString(_ code: Int32) -> String {
        String(cString: curl_easy_strerror(CURLcode(UInt32(bitPattern: code))))
    }

    /// The libcurl version string (`curl_version`), e.g. "libcurl/7.88.1 OpenSSL/3.0.17 …".
    static var version: String {
        String(cString: curl_version())
    }
}

// MARK: - Transfer (the context handed to libcurl)

/// One transfer: its easy handle and its handlers. Owned by the driver's table.
private final class CurlTransfer {
    let id: TransferID
    let handlers: TransferHandlers
    let driver: Unmanaged<CurlDriver>
    var easy: UnsafeMutableRawPointer?

    init(id: TransferID, handlers: TransferHandlers, driver: CurlDriver) {
        self.id = id
        self.handlers = handlers
        self.driver = Unmanaged.passUnretained(driver)
    }
}

/// libcurl's write callback: nonisolated, file-level; runs on the loop thread inside
/// curl_multi_perform or curl_easy_pause.
private func writeTrampoline(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let driver = transfer.driver.takeUnretainedValue()
    driver.countCallback()
    if transfer.handlers.shouldPause() {
        // Nothing taken: libcurl keeps these bytes and delivers them again after CURLPAUSE_CONT.
        driver.counters.pausesAnswered.increment()
        return ccurl_writefunc_pause
    }
    let length = size * count
    let bytes = data.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
    driver.counters.bytesDelivered.increment(by: length)
    transfer.handlers.onData(bytes)
    return length
}

/// libcurl's open-socket callback: creates the socket, or refuses a non-loopback address when the
/// loop is loopback-only (then nothing is ever sent).
private func openSocketTrampoline(
    _ context: UnsafeMutableRawPointer?, _ purpose: curlsocktype, _ address: UnsafeMutablePointer<curl_sockaddr>?
) -> curl_socket_t {
    guard let context, let address else { return CURL_SOCKET_BAD }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let driver = transfer.driver.takeUnretainedValue()
    driver.countCallback()
    if driver.loopbackOnly && !isLoopback(address) {
        driver.counters.connectionsRefused.increment()
        return CURL_SOCKET_BAD
    }
    driver.counters.connectionsOpened.increment()
    return socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
}

/// Whether the address is in 127.0.0.0/8 or is ::1.
private func isLoopback(_ address: UnsafeMutablePointer<curl_sockaddr>) -> Bool {
    withUnsafeMutablePointer(to: &address.pointee.addr) { raw in
        switch Int32(raw.pointee.sa_family) {
        case AF_INET:
            return raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet in
                withUnsafeBytes(of: inet.pointee.sin_addr) { $0.first == 127 }
            }
        case AF_INET6:
            return raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { inet6 in
                withUnsafeBytes(of: inet6.pointee.sin6_addr) { Array($0) == Array(repeating: 0, count: 15) + [1] }
            }
        default:
            return false
        }
    }
}

// MARK: - Driver (loop thread only)

/// The multi handle as the loop's wake sees it: nil once cleaned up.
private struct MultiHandle: @unchecked Sendable {
    // curl_multi_wakeup may be called from any thread while the handle lives; the lock around
    // the handle and curl_multi_cleanup keeps a wake from reaching a freed handle.
    var pointer: UnsafeMutableRawPointer?
}

/// Owns one multi handle and every transfer on it. Every method but `wake` is called on the
/// loop thread.
///
/// `@unchecked Sendable`: it is handed to the loop once and touched only there afterwards, except
/// for `wake`, which goes through its own lock.
final class CurlDriver: @unchecked Sendable {
    let counters: CurlCounters
    let loopbackOnly: Bool
    /// The loop thread, known from the first call.
    private var ownerThread: pthread_t?
    private var multi: UnsafeMutableRawPointer?
    private let wakeable: LockedValue<MultiHandle>
    /// Set by `destroyAll`.
    private var destroyed = false
    private var transfers: [TransferID: CurlTransfer] = [:]
    private var byHandle: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    /// Creates the multi handle. If libcurl cannot, every transfer fails with
    /// ``CurlError/failedInit``.
    init(counters: CurlCounters, loopbackOnly: Bool) {
        self.counters = counters
        self.loopbackOnly = loopbackOnly
        // Before the loop runs: libcurl lets a handle move to another thread while it is not in use.
        let multi = curl_multi_init()
        self.multi = multi
        self.wakeable = LockedValue(MultiHandle(pointer: multi))
        if multi != nil {
            counters.multiHandlesCreated.increment()
        }
    }

    /// Makes a `curl_multi_poll` in progress (or the next one) return at once. Any thread.
    func wake() {
        wakeable.withLock { handle in
            if let multi = handle.pointer { _ = curl_multi_wakeup(multi) }
        }
    }

    /// Whether the caller runs on the loop thread; the first caller binds it.
    private func isOwnerThread() -> Bool {
        let current = pthread_self()
        guard let ownerThread else {
            ownerThread = current
            return true
        }
        return pthread_equal(current, ownerThread) != 0
    }

    /// Transfers not yet ended.
    var activeCount: Int { transfers.count }

    /// Counts a `curl_*` call and checks it is made on the loop thread.
    private func onLoop<T>(_ call: () -> T) -> T {
        if isOwnerThread() {
            counters.callsOnLoopThread.increment()
        } else {
            counters.callsOffLoopThread.increment()
            preconditionFailure("a libcurl call was made off its loop thread")
        }
        return call()
    }

    /// Counts a callback by the thread it runs on.
    fileprivate func countCallback() {
        if isOwnerThread() {
            counters.callbacksOnLoopThread.increment()
        } else {
            counters.callbacksOffLoopThread.increment()
        }
    }

    /// Starts a GET of `url`; its handlers run on this thread from now on.
    func start(id: TransferID, url: String, handlers: TransferHandlers) {
        guard !destroyed else {
            handlers.onEnd(.cancelled)  // posted after destroyAll, while the loop stops
            return
        }
        guard let multi else {
            handlers.onEnd(.failed(.failedInit))
            return
        }
        guard let easy = onLoop({ curl_easy_init() }) else {
            handlers.onEnd(.failed(.outOfMemory))
            return
        }
        counters.easyHandlesCreated.increment()
        let transfer = CurlTransfer(id: id, handlers: handlers, driver: self)
        transfer.easy = easy
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        var code = CURLE_OK
        func set(_ result: CURLcode) { if code == CURLE_OK { code = result } }
        onLoop {
            set(ccurl_easy_setopt_string(easy, CURLOPT_URL, url))
            set(ccurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
            set(ccurl_easy_setopt_string(easy, CURLOPT_PROXY, ""))  // ignore *_proxy variables
            set(ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
            set(ccurl_easy_setopt_long(easy, CURLOPT_FAILONERROR, 1))
            set(ccurl_easy_setopt_write_function(easy, writeTrampoline))
            set(ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
            set(ccurl_easy_setopt_opensocket_function(easy, openSocketTrampoline))
            set(ccurl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, context))
        }
        guard code == CURLE_OK else {
            onLoop { curl_easy_cleanup(easy) }
            counters.easyHandlesCleanedUp.increment()
            handlers.onEnd(.failed(CurlError(rawValue: Int32(bitPattern: code.rawValue))))
            return
        }
        let added = onLoop { curl_multi_add_handle(multi, easy) }
        guard added == CURLM_OK else {
            onLoop { curl_easy_cleanup(easy) }
            counters.easyHandlesCleanedUp.increment()
            handlers.onEnd(.failed(.outOfMemory))
            return
        }
        transfers[id] = transfer
        byHandle[easy] = transfer
    }

    /// Resumes a paused transfer (`curl_easy_pause(CURLPAUSE_CONT)`): libcurl may deliver the
    /// bytes it kept inside this call. Does nothing for a transfer that has ended.
    func resume(id: TransferID) {
        guard let transfer = transfers[id], let easy = transfer.easy else { return }
        counters.resumes.increment()
        _ = onLoop { curl_easy_pause(easy, ccurl_pause_continue) }
    }

    /// Ends a transfer now: removes and frees its easy handle and reports `.cancelled`. Does
    /// nothing for a transfer that has ended.
    func cancel(id: TransferID) {
        guard let transfer = transfers[id] else { return }
        finish(transfer, .cancelled)
    }

    /// Sleeps in `curl_multi_poll` (on libcurl's sockets) until `wake`, libcurl's own timeout or
    /// `maxWaitMilliseconds`, then lets libcurl work and reports ended transfers.
    func waitAndProcess(maxWaitMilliseconds: Int32) {
        guard let multi else {
            // Cleaned up: the loop is about to stop. Wait a little rather than spin.
            _ = poll(nil, 0, 10)
            return
        }
        var ready: Int32 = 0
        _ = onLoop { curl_multi_poll(multi, nil, 0, maxWaitMilliseconds, &ready) }
        var running: Int32 = 0
        _ = onLoop { curl_multi_perform(multi, &running) }
        var queued: Int32 = 0
        while let message = onLoop({ curl_multi_info_read(multi, &queued) }) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                let transfer = byHandle[easy]
            else { continue }
            let code = message.pointee.data.result
            var status = 0
            if code == CURLE_OK || code == CURLE_HTTP_RETURNED_ERROR {
                _ = onLoop { ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
            }
            if code == CURLE_OK {
                finish(transfer, .completed(status: status))
            } else if code == CURLE_HTTP_RETURNED_ERROR && status >= 400 {
                finish(transfer, .httpError(status: status))
            } else {
                finish(transfer, .failed(CurlError(rawValue: Int32(bitPattern: code.rawValue))))
            }
        }
    }

    /// Cancels every transfer and frees the multi handle. The loop calls this when it shuts down.
    func destroyAll() {
        destroyed = true
        for transfer in Array(transfers.values) {
            finish(transfer, .cancelled)
        }
        if let multi {
            wakeable.withLock { $0.pointer = nil }
            _ = onLoop { curl_multi_cleanup(multi) }
            counters.multiHandlesCleanedUp.increment()
            self.multi = nil
        }
    }

    /// Removes and frees the transfer's handle (never from inside one of its callbacks: every
    /// caller runs between libcurl calls), then reports how it ended.
    private func finish(_ transfer: CurlTransfer, _ end: TransferEnd) {
        guard let easy = transfer.easy else { return }
        transfer.easy = nil
        if let multi {
            _ = onLoop { curl_multi_remove_handle(multi, easy) }
        }
        onLoop { curl_easy_cleanup(easy) }
        counters.easyHandlesCleanedUp.increment()
        transfers[transfer.id] = nil
        byHandle[easy] = nil
        counters.transfersFinished.increment()
        if end == .cancelled {
            counters.transfersCancelled.increment()
        }
        transfer.handlers.onEnd(end)
    }
}
