// Test support for the simulator's own tests: a per-operation recorder behind C trampolines,
// a client scope, gates and polling. Trampolines are nonisolated file-level functions.

import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

// MARK: - Constants as the C types

/// Status codes as `lsdk_status_t` (the header's anonymous enums import as `Int`).
enum Status {
    static let ok = lsdk_status_t(LSDK_OK)
    static let nullArgument = lsdk_status_t(LSDK_ERR_NULL_ARGUMENT)
    static let outOfRange = lsdk_status_t(LSDK_ERR_OUT_OF_RANGE)
    static let unknownEnum = lsdk_status_t(LSDK_ERR_UNKNOWN_ENUM)
    static let clientDestroyed = lsdk_status_t(LSDK_ERR_CLIENT_DESTROYED)
    static let invalidHandle = lsdk_status_t(LSDK_ERR_INVALID_HANDLE)
    static let cancelled = lsdk_status_t(LSDK_ERR_CANCELLED)
    static let remote = lsdk_status_t(LSDK_ERR_REMOTE)
    static let busy = lsdk_status_t(LSDK_ERR_BUSY)
    static let wrongThread = lsdk_status_t(LSDK_ERR_WRONG_THREAD)
    static let resources = lsdk_status_t(LSDK_ERR_RESOURCES)
    static let notAStream = lsdk_status_t(LSDK_ERR_NOT_A_STREAM)
    static let noLoopThread = lsdk_status_t(LSDK_ERR_NO_LOOP_THREAD)
    static let interrupted = lsdk_status_t(LSDK_ERR_INTERRUPTED)
    static let notBlocked = lsdk_status_t(LSDK_ERR_NOT_BLOCKED)
}

extension lsdk_behavior_t {
    /// The documented defaults.
    static func defaults() -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t()
        lsdk_behavior_init(&behavior)
        return behavior
    }

    static func chaos(_ seed: UInt64) -> lsdk_behavior_t {
        var behavior = lsdk_behavior_t()
        lsdk_behavior_init_chaos(&behavior, seed)
        return behavior
    }

    var outcomeList: [Int32] {
        get { withUnsafeBytes(of: outcomes) { Array($0.bindMemory(to: Int32.self)) } }
        set {
            withUnsafeMutableBytes(of: &outcomes) { raw in
                let slots = raw.bindMemory(to: Int32.self)
                for i in slots.indices { slots[i] = i < newValue.count ? newValue[i] : Int32(LSDK_OUTCOME_SUCCESS) }
            }
        }
    }

    mutating func set(delivery: Int) { self.delivery = Int32(delivery) }
    mutating func set(cancelMode: Int) { self.cancel_mode = Int32(cancelMode) }
}

func counters(_ client: OpaquePointer) -> lsdk_counters_t {
    var out = lsdk_counters_t()
    #expect(lsdk_client_counters(client, &out) == Status.ok)
    return out
}

func globalCounters() -> lsdk_counters_t {
    var out = lsdk_counters_t()
    lsdk_global_counters(&out)
    return out
}

// MARK: - Waiting

/// How many seconds a wait for something that must happen lasts before the test calls it a hang.
/// Generous: under ThreadSanitizer these tests share two cores with the bridge's burst suites
/// (there it is 600 s). A passing run never waits for it.

/// A one-way gate: `open()` lets every current and future `wait()` through.
final class Gate: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var isOpen = false

    func open() {
        lock.lock()
        let wasOpen = isOpen
        isOpen = true
        lock.unlock()
        if !wasOpen { for _ in 0..<64 { semaphore.signal() } }
    }

    /// Waits until open (false after a generous timeout, so a broken test fails instead of hanging).
    @discardableResult
    func wait(timeout: Double = Double(testHangBoundSeconds)) -> Bool {
        lock.lock()
        let open = isOpen
        lock.unlock()
        if open { return true }
        let ok = semaphore.wait(timeout: .now() + timeout) == .success
        if ok { semaphore.signal() }
        return ok
    }
}

// MARK: - Recorder

/// One callback as the recorder saw it (payload copied inside the callback).
struct Entry: Sendable {
    enum Kind: Sendable, Equatable { case completion, progress, data, end }
    var kind: Kind
    var status: lsdk_status_t
    var attempt: UInt32 = 0
    var sequence: UInt64 = 0
    var bytesDone: UInt64 = 0
    var bytesTotal: UInt64 = 0
    var length: Int = 0
    /// Body/data bytes matched lsdk_content_byte.
    var bytesValid = true
    var message: String
    var requestID: UInt64
    var thread: pthread_t
    /// Callbacks of this operation running on this thread when this one started (1 = not nested).
    var depth: Int = 1
    /// Callbacks of this operation running on any thread when this one started.
    var concurrent: Int = 1
}

/// Records every callback and the context release of one operation, and checks the context
/// contract as it goes: a callback after the release, a second release, or a release while a
/// callback is running are all counted as violations.
final class Recorder: @unchecked Sendable {
    typealias Hook = @Sendable (Recorder, Entry) -> Void
    /// Pull streams: the answer to each event (LSDK_PULL_*), asked after the hook ran.
    typealias Answer = @Sendable (Recorder, Entry) -> Int32

    private let lock = NSLock()
    private var _entries: [Entry] = []
    private var _releases = 0
    private var _violations: [String] = []
    private var _running = 0
    private var _handle: lsdk_handle_t = 0
    private var _maxConcurrent = 0
    private var nesting: [pthread_t: Int] = [:]
    private let hook: Hook?
    private let answer: Answer?
    private let releaseSemaphore = DispatchSemaphore(value: 0)

    init(hook: Hook? = nil, answer: Answer? = nil) {
        self.hook = hook
        self.answer = answer
    }

    var entries: [Entry] { lock.withLock { _entries } }
    var releases: Int { lock.withLock { _releases } }
    var violations: [String] { lock.withLock { _violations } }
    var maxConcurrent: Int { lock.withLock { _maxConcurrent } }
    /// Callbacks of this operation running right now (inside the recorder's hook).
    var runningNow: Int { lock.withLock { _running } }
    var isReleased: Bool { releases > 0 }

    /// The handle as published by the test after start returned (0 before).
    var handle: lsdk_handle_t {
        get { lock.withLock { _handle } }
        set { lock.withLock { _handle = newValue } }
    }

    /// Waits for the context release (false after the timeout).
    func waitReleased(timeout: Double = Double(testHangBoundSeconds)) -> Bool {
        if releaseSemaphore.wait(timeout: .now() + timeout) == .success {
            releaseSemaphore.signal()
            return true
        }
        return false
    }

    func waitEntries(_ count: Int, timeout: Double = Double(testHangBoundSeconds)) -> Bool {
        spinUntil(within: timeout) { entries.count >= count }
    }

    /// The opaque context that owns one retain of the recorder, given up in the release callback.
    func retainedContext() -> UnsafeMutableRawPointer { Unmanaged.passRetained(self).toOpaque() }

    /// Drops the retain of a context the SDK rejected (a failed start never releases it).
    static func dropContext(_ context: UnsafeMutableRawPointer) {
        Unmanaged<Recorder>.fromOpaque(context).release()
    }

    @discardableResult
    fileprivate func record(_ make: (Int, Int) -> Entry) -> Int32 {
        let me = pthread_self()
        var entry: Entry
        lock.lock()
        _running += 1
        let depth = (nesting[me] ?? 0) + 1
        nesting[me] = depth
        _maxConcurrent = max(_maxConcurrent, _running)
        entry = make(depth, _running)
        if _releases > 0 { _violations.append("callback after release: \(entry)") }
        _entries.append(entry)
        lock.unlock()

        hook?(self, entry)
        let answered = answer?(self, entry) ?? Int32(LSDK_PULL_CONTINUE)

        lock.lock()
        _running -= 1
        nesting[me] = depth - 1
        lock.unlock()
        return answered
    }

    fileprivate func recordRelease() {
        lock.lock()
        _releases += 1
        if _releases > 1 { _violations.append("context released \(_releases) times") }
        if _running > 0 { _violations.append("context released while \(_running) callback(s) run") }
        lock.unlock()
        releaseSemaphore.signal()
    }
}

func recorderCompletion(
    _ context: UnsafeMutableRawPointer?, _ status: lsdk_status_t, _ response: UnsafePointer<lsdk_response_t>?
) {
    let recorder = Unmanaged<Recorder>.fromOpaque(context!).takeUnretainedValue()
    let response = response!.pointee
    var valid = true
    if let body = response.body {
        for i in 0..<response.body_length where body[i] != lsdk_content_byte(response.request_id, UInt64(i)) {
            valid = false
        }
    } else if response.body_length != 0 {
        valid = false
    }
    let message = String(cString: response.message)
    let thread = pthread_self()
    recorder.record { depth, concurrent in
        Entry(
            kind: .completion, status: status, attempt: response.attempt, length: response.body_length,
            bytesValid: valid, message: message, requestID: response.request_id, thread: thread,
            depth: depth, concurrent: concurrent)
    }
}

func recorderEvent(_ context: UnsafeMutableRawPointer?, _ event: UnsafePointer<lsdk_event_t>?) {
    _ = recorderPullEvent(context, event)
}

func recorderPullEvent(_ context: UnsafeMutableRawPointer?, _ event: UnsafePointer<lsdk_event_t>?) -> Int32 {
    let recorder = Unmanaged<Recorder>.fromOpaque(context!).takeUnretainedValue()
    let event = event!.pointee
    let kind: Entry.Kind
    switch Int(event.kind) {
    case LSDK_EVENT_PROGRESS: kind = .progress
    case LSDK_EVENT_DATA: kind = .data
    default: kind = .end
    }
    var valid = true
    if kind == .data {
        if let data = event.data {
            for i in 0..<event.length
            where data[i] != lsdk_content_byte(event.request_id, event.bytes_done + UInt64(i)) {
                valid = false
            }
        } else {
            valid = event.length == 0
        }
    }
    let message = String(cString: event.message)
    let thread = pthread_self()
    return recorder.record { depth, concurrent in
        Entry(
            kind: kind, status: event.status, sequence: event.sequence, bytesDone: event.bytes_done,
            bytesTotal: event.bytes_total, length: event.length, bytesValid: valid, message: message,
            requestID: event.request_id, thread: thread, depth: depth, concurrent: concurrent)
    }
}

func recorderRelease(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<Recorder>.fromOpaque(context!).takeRetainedValue().recordRelease()
}

// MARK: - Client and starts

/// Creates a client (on the calling thread: its creator), runs `body`, destroys it (expecting success).
func withClient<R>(
    workers: UInt32 = 4, seed: UInt64 = 0, loopThread: Bool = false, affinity: Int = LSDK_AFFINITY_ANY,
    probe: (@convention(c) (UnsafeMutableRawPointer?) -> Void)? = nil,
    probeContext: UnsafeMutableRawPointer? = nil, _ body: (OpaquePointer) throws -> R
) rethrows -> R {
    var config = lsdk_client_config_t()
    lsdk_client_config_init(&config)
    config.worker_threads = workers
    config.seed = seed
    config.loop_thread = loopThread
    config.affinity = Int32(affinity)
    config.session_token_probe = probe
    config.probe_context = probeContext
    var client: OpaquePointer?
    let status = lsdk_client_create(&config, &client)
    precondition(status == Status.ok && client != nil, "lsdk_client_create failed: \(status)")
    defer {
        let destroyed = lsdk_client_destroy(client)
        #expect(destroyed == Status.ok)
    }
    return try body(client!)
}

/// Starts a request recorded by `recorder`. On success the handle is published to the recorder
/// (after start returned) and returned; on failure the recorder's retain is dropped.
@discardableResult
func startRequest(
    _ client: OpaquePointer?, _ behavior: lsdk_behavior_t, recorder: Recorder, responseSize: UInt32 = 16,
    path: String = "/item", errorMessage: String? = nil, keepHandle: Bool = true
) -> (status: lsdk_status_t, handle: lsdk_handle_t) {
    startRecorded(behavior, recorder: recorder, path: path, errorMessage: errorMessage, keepHandle: keepHandle) {
        cPath, behavior, context, out in
        var request = lsdk_request_t(path: cPath, response_size: responseSize)
        return lsdk_request_start(client, &request, behavior, recorderCompletion, context, recorderRelease, out)
    }
}

/// Starts a download recorded by `recorder` (same rules as `startRequest`).
@discardableResult
func startDownload(
    _ client: OpaquePointer?, _ behavior: lsdk_behavior_t, recorder: Recorder, totalBytes: UInt64,
    path: String = "/file", errorMessage: String? = nil, keepHandle: Bool = true
) -> (status: lsdk_status_t, handle: lsdk_handle_t) {
    startRecorded(behavior, recorder: recorder, path: path, errorMessage: errorMessage, keepHandle: keepHandle) {
        cPath, behavior, context, out in
        var request = lsdk_download_request_t(path: cPath, total_bytes: totalBytes)
        return lsdk_download_start(client, &request, behavior, recorderEvent, context, recorderRelease, out)
    }
}

/// Starts a pull-style download recorded by `recorder` (its `answer` decides; same rules as `startRequest`).
@discardableResult
func startPullDownload(
    _ client: OpaquePointer?, _ behavior: lsdk_behavior_t, recorder: Recorder, totalBytes: UInt64,
    path: String = "/pull", keepHandle: Bool = true
) -> (status: lsdk_status_t, handle: lsdk_handle_t) {
    startRecorded(behavior, recorder: recorder, path: path, errorMessage: nil, keepHandle: keepHandle) {
        cPath, behavior, context, out in
        var request = lsdk_download_request_t(path: cPath, total_bytes: totalBytes)
        return lsdk_download_start_pull(client, &request, behavior, recorderPullEvent, context, recorderRelease, out)
    }
}

/// What both start helpers share: the C strings, the retained context, the handle out-parameter
/// (or NULL), publishing the handle on success and dropping the retain on failure.
private func startRecorded(
    _ behavior: lsdk_behavior_t, recorder: Recorder, path: String, errorMessage: String?, keepHandle: Bool,
    _ start: (
        UnsafePointer<CChar>, UnsafeMutablePointer<lsdk_behavior_t>, UnsafeMutableRawPointer,
        UnsafeMutablePointer<lsdk_handle_t>?
    ) -> lsdk_status_t
) -> (status: lsdk_status_t, handle: lsdk_handle_t) {
    var behavior = behavior
    let context = recorder.retainedContext()
    var handle: lsdk_handle_t = 0
    let status = path.withCString { cPath in
        withOptionalCString(errorMessage) { cMessage in
            if let cMessage { behavior.error_message = cMessage }
            return withUnsafeMutablePointer(to: &behavior) { behaviorPointer in
                withUnsafeMutablePointer(to: &handle) { out in
                    start(cPath, behaviorPointer, context, keepHandle ? out : nil)
                }
            }
        }
    }
    if status == Status.ok {
        recorder.handle = handle
    } else {
        Recorder.dropContext(context)
    }
    return (status, handle)
}

func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

/// Expects a finished operation to have honoured the context contract.
func expectContractKept(_ recorder: Recorder, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(recorder.releases == 1, sourceLocation: sourceLocation)
    #expect(recorder.violations.isEmpty, "\(recorder.violations)", sourceLocation: sourceLocation)
}

func isSameThread(_ a: pthread_t, _ b: pthread_t) -> Bool { pthread_equal(a, b) != 0 }

// MARK: - Posted jobs and other threads

/// A job for lsdk_client_post: the closure runs once on the loop thread; the box's retain is given
/// up by the trampoline (or by `dropRefused` when the post failed). `runs` and `releases` prove it.
final class PostedJob: @unchecked Sendable {
    private let lock = NSLock()
    private var _runs = 0
    private var _onLoop: [Bool] = []
    private let body: @Sendable () -> Void
    private let client: OpaquePointer
    private let lifetime: JobLifetime?

    init(client: OpaquePointer, lifetime: JobLifetime? = nil, _ body: @escaping @Sendable () -> Void = {}) {
        self.client = client
        self.body = body
        self.lifetime = lifetime
        lifetime?.created()
    }

    deinit { lifetime?.released() }

    var runs: Int { lock.withLock { _runs } }
    /// Whether lsdk_client_is_loop_thread held on each run.
    var ranOnLoop: [Bool] { lock.withLock { _onLoop } }

    fileprivate func run() {
        let onLoop = lsdk_client_is_loop_thread(client)
        lock.withLock {
            _runs += 1
            _onLoop.append(onLoop)
        }
        body()
    }

    /// Posts the job; on failure the retain is dropped at once (the SDK never runs it).
    @discardableResult
    func post(to client: OpaquePointer? = nil) -> lsdk_status_t {
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = lsdk_client_post(client ?? self.client, postedJobTrampoline, context)
        if status != Status.ok { Unmanaged<PostedJob>.fromOpaque(context).release() }
        return status
    }
}

/// Counts job boxes created and freed (a leak or a double release shows as a mismatch).
final class JobLifetime: @unchecked Sendable {
    private let lock = NSLock()
    private var _created = 0
    private var _released = 0
    func created() { lock.withLock { _created += 1 } }
    func released() { lock.withLock { _released += 1 } }
    var counts: (created: Int, released: Int) { lock.withLock { (_created, _released) } }
}

func postedJobTrampoline(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<PostedJob>.fromOpaque(context!).takeRetainedValue().run()
}

/// Runs `body` on a new thread (not one of the SDK's) and waits for it (bounded).
func onOtherThread<R: Sendable>(_ body: @escaping @Sendable () -> R) -> R? {
    let box = LockedList<R>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        box.append(body())
        done.signal()
    }
    thread.start()
    guard done.wait(timeout: .now() + Double(testHangBoundSeconds)) == .success else { return nil }
    return box.values.first
}

/// A client pointer that may cross into @Sendable closures (the SDK's functions are thread-safe;
/// the test keeps the client alive while other threads use it).
struct ClientRef: @unchecked Sendable {
    let raw: OpaquePointer
    init(_ raw: OpaquePointer) { self.raw = raw }
}

/// A behaviour that may cross into @Sendable closures (its error_message, if any, must outlive them).
struct SendableBehavior: @unchecked Sendable {
    let value: lsdk_behavior_t
    init(_ value: lsdk_behavior_t) { self.value = value }
}

/// The NUL-terminated string in a C buffer.
func cString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
