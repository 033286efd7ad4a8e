// Test support for RPC connections: a recorder of every reply and disconnect behind C
// trampolines (nonisolated file-level functions), and a connection scope.

import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

extension Status {
    static let disconnected = lsdk_status_t(LSDK_ERR_DISCONNECTED)
    static let duplicateID = lsdk_status_t(LSDK_ERR_DUPLICATE_ID)
    static let unknownID = lsdk_status_t(LSDK_ERR_UNKNOWN_ID)
    static let alreadyListening = lsdk_status_t(LSDK_ERR_ALREADY_LISTENING)
}

/// One reply as the recorder saw it (payload copied inside the callback).
struct Reply: Sendable, Equatable {
    var id: UInt64
    var status: lsdk_status_t
    var attempt: UInt32
    /// The request's number within its client (0 for an unknown id).
    var requestID: UInt64
    var length: Int
    var bytesValid: Bool
    var message: String
    var onCallerThread: Bool
}

/// Records the replies and disconnects of one callback set, and checks its release contract: a
/// callback after the release, a second release, or a release while a callback runs are violations.
final class ReplyRecorder: @unchecked Sendable {
    typealias Hook = @Sendable (ReplyRecorder, Reply) -> Void

    private let lock = NSLock()
    private var _replies: [Reply] = []
    private var _disconnects: [(spontaneous: Bool, dropped: UInt64)] = []
    private var _releases = 0
    private var _running = 0
    private var _violations: [String] = []
    private let hook: Hook?
    /// The thread that counts as "the caller" for `Reply.onCallerThread`.
    private let caller = pthread_self()

    init(hook: Hook? = nil) { self.hook = hook }

    var replies: [Reply] { lock.withLock { _replies } }
    var disconnects: [(spontaneous: Bool, dropped: UInt64)] { lock.withLock { _disconnects } }
    var releases: Int { lock.withLock { _releases } }
    var violations: [String] { lock.withLock { _violations } }
    var runningNow: Int { lock.withLock { _running } }

    func waitReplies(_ count: Int) -> Bool { spinUntil { replies.count >= count } }
    func waitReleased() -> Bool { spinUntil { releases > 0 } }

    /// A callback set whose context owns one retain of the recorder, given up in its release.
    func callbacks(onReply: Bool = true, onDisconnect: Bool = true) -> lsdk_rpc_callbacks_t {
        lsdk_rpc_callbacks_t(
            on_reply: onReply ? replyRecorderReply : nil,
            on_disconnect: onDisconnect ? replyRecorderDisconnect : nil,
            context: Unmanaged.passRetained(self).toOpaque(),
            release_context: replyRecorderRelease)
    }

    /// Drops the retain of a set the SDK refused (its release is never called).
    static func dropRefused(_ callbacks: lsdk_rpc_callbacks_t) {
        Unmanaged<ReplyRecorder>.fromOpaque(callbacks.context!).release()
    }

    fileprivate func record(_ reply: Reply) {
        lock.withLock {
            _running += 1
            if _releases > 0 { _violations.append("reply after release: \(reply)") }
            _replies.append(reply)
        }
        hook?(self, reply)
        lock.withLock { _running -= 1 }
    }

    fileprivate func recordDisconnect(spontaneous: Bool, dropped: UInt64) {
        lock.withLock {
            if _releases > 0 { _violations.append("disconnect after release") }
            _disconnects.append((spontaneous, dropped))
        }
    }

    fileprivate func recordRelease() {
        lock.withLock {
            _releases += 1
            if _releases > 1 { _violations.append("released \(_releases) times") }
            if _running > 0 { _violations.append("released while \(_running) callback(s) run") }
        }
    }

    fileprivate var callerThread: pthread_t { caller }
}

func replyRecorderReply(
    _ context: UnsafeMutableRawPointer?, _ id: UInt64, _ status: lsdk_status_t,
    _ response: UnsafePointer<lsdk_response_t>?
) {
    let recorder = Unmanaged<ReplyRecorder>.fromOpaque(context!).takeUnretainedValue()
    let response = response!.pointee
    var valid = true
    if let body = response.body {
        for i in 0..<response.body_length where body[i] != lsdk_content_byte(response.request_id, UInt64(i)) {
            valid = false
        }
    } else if response.body_length != 0 {
        valid = false
    }
    recorder.record(
        Reply(
            id: id, status: status, attempt: response.attempt, requestID: response.request_id,
            length: response.body_length, bytesValid: valid, message: String(cString: response.message),
            onCallerThread: pthread_equal(pthread_self(), recorder.callerThread) != 0))
}

func replyRecorderDisconnect(_ context: UnsafeMutableRawPointer?, _ spontaneous: Bool, _ dropped: UInt64) {
    Unmanaged<ReplyRecorder>.fromOpaque(context!).takeUnretainedValue().recordDisconnect(
        spontaneous: spontaneous, dropped: dropped)
}

func replyRecorderRelease(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<ReplyRecorder>.fromOpaque(context!).takeRetainedValue().recordRelease()
}

extension lsdk_rpc_config_t {
    static func defaults() -> lsdk_rpc_config_t {
        var config = lsdk_rpc_config_t()
        lsdk_rpc_config_init(&config)
        return config
    }
}

/// Creates a connection on `client` with `recorder`'s callbacks (or none), runs `body`, and
/// destroys the connection unless `body` did (a second destroy answers CLIENT_DESTROYED).
func withRPC<R>(
    _ client: OpaquePointer, config: lsdk_rpc_config_t = .defaults(), recorder: ReplyRecorder?,
    _ body: (OpaquePointer) throws -> R
) rethrows -> R {
    var config = config
    var callbacks = recorder?.callbacks()
    var rpc: OpaquePointer?
    let status: lsdk_status_t
    if callbacks != nil {
        status = lsdk_rpc_create(client, &config, &callbacks!, &rpc)
    } else {
        status = lsdk_rpc_create(client, &config, nil, &rpc)
    }
    precondition(status == Status.ok && rpc != nil, "lsdk_rpc_create failed: \(status)")
    defer { _ = lsdk_rpc_destroy(rpc) }
    return try body(rpc!)
}

/// Sends one request; returns the status and the id (assigned or the caller's).
@discardableResult
func send(
    _ rpc: OpaquePointer?, id: UInt64 = 0, behavior: lsdk_behavior_t = .defaults(), responseSize: UInt32 = 8,
    path: String = "/rpc", wantID: Bool = true
) -> (status: lsdk_status_t, id: UInt64) {
    var behavior = behavior
    var out: UInt64 = 0
    let status = path.withCString { cPath in
        var request = lsdk_request_t(path: cPath, response_size: responseSize)
        return wantID
            ? lsdk_rpc_send(rpc, &request, &behavior, id, &out)
            : lsdk_rpc_send(rpc, &request, &behavior, id, nil)
    }
    return (status, out)
}

extension lsdk_behavior_t {
    /// A request that is never answered (until cancelled or dropped).
    static func neverReplies() -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t.defaults()
        behavior.completion_count = 0
        return behavior
    }
}

// MARK: - Listeners

/// Starts a listener recorded by `recorder` (same rules as `startRequest`).
@discardableResult
func startListener(
    _ client: OpaquePointer?, _ behavior: lsdk_behavior_t, recorder: Recorder, topic: UInt64, count: UInt64,
    keepHandle: Bool = true
) -> (status: lsdk_status_t, handle: lsdk_handle_t) {
    var behavior = behavior
    var request = lsdk_listen_request_t(topic: topic, event_count: count)
    let context = recorder.retainedContext()
    var handle: lsdk_handle_t = 0
    let status =
        keepHandle
        ? lsdk_listen_start(client, &request, &behavior, recorderEvent, context, recorderRelease, &handle)
        : lsdk_listen_start(client, &request, &behavior, recorderEvent, context, recorderRelease, nil)
    if status == Status.ok {
        recorder.handle = handle
    } else {
        Recorder.dropContext(context)
    }
    return (status, handle)
}
