// Helpers of the LegacyClient tests (prefixed `ClientTest`: the test module is shared).

import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

/// How a call ended, in a form that `#expect` can compare and print.
enum ClientTestOutcome: Sendable, Equatable, CustomStringConvertible {
    case success(FetchResponse)
    /// An SDK error: its status and message.
    case sdkError(Int32, String?)
    case cancelled
    case timedOut(Duration)
    case other(String)
    /// The call did not end within the test's hang bound.
    case hung

    init(_ result: Result<FetchResponse, any Error>?) {
        switch result {
        case nil: self = .hung
        case .success(let response): self = .success(response)
        case .failure(let error as LegacySDKError): self = .sdkError(error.rawValue, error.message)
        case .failure(is CancellationError): self = .cancelled
        case .failure(let error as BridgeTimeoutError): self = .timedOut(error.timeout)
        case .failure(let error): self = .other("\(type(of: error)): \(error)")
        }
    }

    var description: String {
        switch self {
        case .success(let response):
            "success(request \(response.requestID), attempt \(response.attempt), \(response.body.count) bytes)"
        case .sdkError(let status, let message): "sdkError(\(status), \(message ?? "nil"))"
        case .cancelled: "cancelled"
        case .timedOut(let timeout): "timedOut(\(timeout))"
        case .other(let text): "other(\(text))"
        case .hung: "hung"
        }
    }

    var isCancelled: Bool { self == .cancelled }
}

/// A call run in its own task, so the test can cancel it and await its end with an upper bound:
/// a call that never ends becomes a reported failure instead of a hung run (the task is then
/// left behind).
final class ClientTestCall<Value: Sendable>: Sendable {
    private let task: Task<Void, Never>
    private let slot: LockedBox<Result<Value, any Error>?>

    init(_ body: @escaping @Sendable () async throws -> Value) {
        let slot = LockedBox<Result<Value, any Error>?>(nil)
        self.slot = slot
        self.task = Task {
            let result: Result<Value, any Error>
            do {
                result = .success(try await body())
            } catch {
                result = .failure(error)
            }
            slot.withLock { $0 = result }
        }
    }

    func cancel() { task.cancel() }

    var hasEnded: Bool { slot.withLock { $0 != nil } }

    /// The call's result, or `nil` if it did not end within `seconds` (an upper bound only).
    func result(
        isolation: isolated (any Actor)? = #isolation, within seconds: Double = Double(testHangBoundSeconds)
    ) async -> Result<Value, any Error>? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var attempt = 0
        while ContinuousClock.now < deadline {
            if let result = slot.withLock({ $0 }) { return result }
            await pollPause(attempt)
            attempt += 1
        }
        return slot.withLock { $0 }
    }
}

extension ClientTestCall where Value == FetchResponse {
    func outcome(
        isolation: isolated (any Actor)? = #isolation, within seconds: Double = Double(testHangBoundSeconds)
    ) async -> ClientTestOutcome {
        ClientTestOutcome(await result(within: seconds))
    }
}

/// Runs `body` on the caller's isolation and captures how it ended.
func clientTestResult<Value: Sendable>(
    isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Value
) async -> Result<Value, any Error> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

/// Waits until the SDK is done with every operation of `client` (every context released) and
/// every handle was released, then returns the counters (also when the bound expired: the
/// caller's expectations then show what is missing).
func clientTestSettledCounters(
    isolation: isolated (any Actor)? = #isolation, _ client: LegacyClient,
    seconds: Double = Double(testHangBoundSeconds)
) async -> SDKCounters {
    _ = await eventually(within: seconds) {
        let counters = client.counters
        return counters.contextsCreated == counters.contextsReleased && counters.handlesOutstanding == 0
    }
    return client.counters
}

/// Whether the process runs under ThreadSanitizer (stress sizes scale down, never below the
/// minimum each test names).

/// Callbacks the SDK made, of every kind.
extension SDKCounters {
    var clientTestAllCallbacks: UInt64 {
        callbacksSync + callbacksWorker + callbacksFreshThread + callbacksLoop + callbacksReentrantCancel
    }
}

/// The expected body of a response of request `requestID`.
func clientTestContent(requestID: UInt64, offset: UInt64 = 0, count: Int) -> [UInt8] {
    (0..<UInt64(count)).map { SDK.contentByte(requestID: requestID, offset: offset + $0) }
}

/// The index of the first byte of `bytes` that is not the SDK's content of request `requestID`
/// at `offset + index`, or `nil` when every byte is right. A plain loop over the buffer: it runs
/// over millions of bytes, also under ThreadSanitizer.
func clientTestFirstMismatch(_ bytes: [UInt8], requestID: UInt64, offset: UInt64 = 0) -> Int? {
    bytes.withUnsafeBufferPointer { buffer in
        var index = 0
        while index < buffer.count {
            if buffer[index] != SDK.contentByte(requestID: requestID, offset: offset &+ UInt64(index)) { return index }
            index &+= 1
        }
        return nil
    }
}

/// Occupies every worker thread of a client (created with `workerThreads: 1`) inside an SDK
/// callback until `open()`: worker-delivered callbacks of other operations cannot run meanwhile.
/// An explicit gate, so a test can act while an operation is provably still in flight.
final class ClientTestWorkerBlocker: Sendable {
    private let entered = LockedBox(false)
    private let gate = DispatchSemaphore(value: 0)
    private let handle: LockedBox<SDKHandle?> = LockedBox(nil)

    /// Starts the blocking request (it takes the next request id of `client`); its callback
    /// occupies the worker as soon as the worker gets to it. Callable from any thread.
    init(starting client: LegacyClient) throws {
        let entered = self.entered
        let gate = self.gate
        let started = SDK.startRequest(
            client: client.sdk, request: FetchRequest(path: "/blocker"), behavior: .wellBehaved,
            onCompletion: { _ in
                entered.withLock { $0 = true }
                // Opened by the test, or by the blocker's deinit if the test gave up early; the
                // bound is only a last resort (a loaded sanitizer run can take minutes to get a
                // test's next step scheduled, so a short bound would release the worker early).
                _ = gate.wait(timeout: .now() + .seconds(5 * testHangBoundSeconds))
            })
        handle.withLock { $0 = try? started.get() }
        _ = try started.get()
    }

    /// Starts the blocking request and waits until its callback occupies the worker.
    convenience init(_ client: LegacyClient) async throws {
        try self.init(starting: client)
        try #require(await eventually { self.isInside }, "the blocking callback never ran")
    }

    /// Whether the blocking callback occupies the worker.
    var isInside: Bool { entered.withLock { $0 } }

    deinit { gate.signal() }

    /// Lets the worker go.
    func open() {
        gate.signal()
        _ = handle.withLock { slot -> SDKHandle? in
            defer { slot = nil }
            return slot
        }
    }
}

/// Checks a download's events as they arrive: every data byte against the SDK's content, the
/// order of offsets, and progress that never goes backwards. Records the first few problems
/// (checking millions of bytes with `#expect` each would be too slow).
struct ClientTestDownloadCheck: Sendable {
    let requestID: UInt64
    let totalBytes: UInt64
    /// Live streams may drop events while paused: offsets then may jump forward.
    let gapsAllowed: Bool

    /// The offset right after the last data event received.
    private(set) var nextOffset: UInt64 = 0
    private(set) var receivedBytes: UInt64 = 0
    private(set) var dataEvents = 0
    private(set) var progressEvents = 0
    private(set) var lastProgress: UInt64 = 0
    /// Offsets where received data did not continue the previous data (live streams).
    private(set) var gaps = 0
    private(set) var problems: [String] = []

    init(requestID: UInt64, totalBytes: UInt64, gapsAllowed: Bool = false) {
        self.requestID = requestID
        self.totalBytes = totalBytes
        self.gapsAllowed = gapsAllowed
    }

    var receivedEverything: Bool { receivedBytes == totalBytes && nextOffset == totalBytes && gaps == 0 }

    private mutating func problem(_ text: String) {
        if problems.count < 10 { problems.append(text) }
    }

    mutating func check(_ event: DownloadEvent) {
        switch event {
        case .data(let offset, let bytes):
            dataEvents += 1
            if bytes.isEmpty { problem("empty data event at \(offset)") }
            if offset != nextOffset {
                if gapsAllowed && offset > nextOffset {
                    gaps += 1
                } else {
                    problem("data at offset \(offset), expected \(nextOffset)")
                }
            }
            if offset < lastProgress { problem("data at offset \(offset) after progress \(lastProgress)") }
            if offset + UInt64(bytes.count) > totalBytes {
                problem("data \(offset)..<\(offset + UInt64(bytes.count)) past the end \(totalBytes)")
            }
            if let index = clientTestFirstMismatch(bytes, requestID: requestID, offset: offset) {
                let expected = SDK.contentByte(requestID: requestID, offset: offset + UInt64(index))
                problem("byte at \(offset + UInt64(index)) is \(bytes[index]), expected \(expected)")
            }
            nextOffset = offset + UInt64(bytes.count)
            receivedBytes += UInt64(bytes.count)
        case .progress(let done, let total):
            progressEvents += 1
            if total != totalBytes { problem("progress total \(total), expected \(totalBytes)") }
            if done < lastProgress { problem("progress went back from \(lastProgress) to \(done)") }
            // Progress counts what the SDK produced: exactly the data received so far, or more
            // when a live stream dropped events.
            if gapsAllowed ? done < nextOffset : done != nextOffset {
                problem("progress \(done) after data up to \(nextOffset)")
            }
            lastProgress = done
        }
    }
}

/// How a download's consumption ended.
enum ClientTestStreamEnd: Sendable, Equatable, CustomStringConvertible {
    case finished
    case sdkError(Int32, String?)
    case cancelled
    /// The consumer left the loop on purpose (`break`).
    case stopped
    case other(String)

    init(_ error: (any Error)?) {
        switch error {
        case nil: self = .finished
        case let error as LegacySDKError: self = .sdkError(error.rawValue, error.message)
        case is CancellationError: self = .cancelled
        case let error?: self = .other("\(type(of: error)): \(error)")
        }
    }

    var description: String {
        switch self {
        case .finished: "finished"
        case .sdkError(let status, let message): "sdkError(\(status), \(message ?? "nil"))"
        case .cancelled: "cancelled"
        case .stopped: "stopped"
        case .other(let text): "other(\(text))"
        }
    }
}

/// What consuming a download produced.
struct ClientTestDownloadResult: Sendable {
    var end: ClientTestStreamEnd
    var check: ClientTestDownloadCheck
    var statistics: StreamStatistics
    /// Whether `next()` returned `nil` again after the end (the stream ends once). True when the
    /// consumer stopped on purpose (not asked then).
    var endsOnce: Bool

    var problems: [String] { check.problems }
    var receivedEverything: Bool { check.receivedEverything }
}

/// Consumes `stream`, checking every event, until it ends or `afterEach` (called after each
/// event with the check so far) returns `false`; then the iterator is dropped, as a `break`
/// out of a `for try await` loop drops it.
func clientTestConsume(
    isolation: isolated (any Actor)? = #isolation,
    _ stream: CallbackStream<DownloadEvent>, requestID: UInt64, totalBytes: Int, gapsAllowed: Bool = false,
    afterEach: (ClientTestDownloadCheck) async -> Bool = { _ in true }
) async -> ClientTestDownloadResult {
    var check = ClientTestDownloadCheck(requestID: requestID, totalBytes: UInt64(totalBytes), gapsAllowed: gapsAllowed)
    var iterator = stream.makeAsyncIterator()
    var end: ClientTestStreamEnd
    do {
        end = .finished
        while let event = try await iterator.next(isolation: isolation) {
            check.check(event)
            if await !afterEach(check) {
                end = .stopped
                break
            }
        }
    } catch {
        end = ClientTestStreamEnd(error)
    }
    var endsOnce = true
    if end != .stopped {
        do {
            if try await iterator.next(isolation: isolation) != nil { endsOnce = false }
        } catch {
            endsOnce = false
        }
    }
    return ClientTestDownloadResult(end: end, check: check, statistics: iterator.statistics, endsOnce: endsOnce)
}

/// A small deterministic random generator (splitmix64), so stress runs are reproducible.
struct ClientTestRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
