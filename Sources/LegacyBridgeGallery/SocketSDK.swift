// A test double of an SDK that opens a descriptor per request, the shape of libcurl's easy
// handles, c-ares's connections and most RPC clients that dial per call: the adapter watches each
// request's descriptor on the SDK's loop, reads the reply when it is readable, and lets the SDK
// close the descriptor when the request is done.
//
// `SocketClient` is the correct adapter: it cancels the request's watch before the SDK closes the
// descriptor. The gallery's `socket-sdk-closes-under-watch` lets the SDK close it first, inside
// the watch's handler: the loop finds the descriptor closed when it re-arms the watch and ends it
// as `.invalid`, but a request started before that (whose descriptor gets the same number) finds
// the number still watched, and the loop stops the process.

import Dispatch
import LegacyBridge
import LegacyBridgeConformance

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request-reply SDK on a loop thread of its own that opens a descriptor per request.
///
/// Rules, as a C header would state them:
/// - ``open(_:)``, ``read(_:)``, ``finish(_:)`` and ``cancel(_:)`` must be called on the loop
///   thread (``loop``); a call from elsewhere is counted in ``offLoopCalls`` (and still served).
/// - ``open(_:)`` starts a request and returns its descriptor, non-blocking, readable once the reply
///   is in: ``LoopSDKBehavior/value(_:)`` and ``LoopSDKBehavior/failure(_:)`` are answered on a
///   later iteration of the loop, ``LoopSDKBehavior/hang`` by ``releaseHeld()`` (with 42).
/// - ``read(_:)`` returns the reply once it is in.
/// - ``finish(_:)`` ends a request and closes its descriptor; ``cancel(_:)`` withdraws one not
///   answered yet and closes its descriptor. Stop watching the descriptor before either.
public final class SocketSDK: Sendable {
    /// The loop thread every SDK function must be called on.
    public let loop: SDKLoop

    private struct Request: Sendable {
        /// Tells this request from a later one given the same descriptor number.
        var id: UInt64
        /// The SDK's end of the request's socket pair.
        var peer: Int32
        var held: Bool
    }

    private struct State: Sendable {
        var nextID: UInt64 = 1
        var requests: [Int32: Request] = [:]
        var offLoopCalls = 0
    }
    private let state = LockedValue(State())

    /// Starts the SDK's loop thread.
    ///
    /// - Parameter name: The loop thread's name.
    /// - Throws: What `SDKLoop` throws when the thread cannot be created.
    public init(name: String = "socket-sdk") throws {
        loop = try SDKLoop(name: name)
        nextFreshNumber = nil
    }

    /// The SDK on a loop with a chosen backend, for the tests that run on each.
    ///
    /// - Parameters:
    ///   - name: The loop thread's name.
    ///   - backend: The loop's backend.
    ///   - freshNumbers: Give each request's descriptors numbers never used before (from
    ///     1,000 up), so that a closed number is not reused by the next request: a test of what the
    ///     loop sees when nothing reuses it.
    /// - Throws: What `SDKLoop` throws when the thread cannot be created.
    package init(name: String, backend: DescriptorBackend, freshNumbers: Bool = false) throws {
        loop = try SDKLoop(name: name, backend: backend)
        nextFreshNumber = freshNumbers ? LockedValue(1_000) : nil
    }

    /// The next number ``init(name:backend:freshNumbers:)`` gives, when it was asked to.
    private let nextFreshNumber: LockedValue<Int32>?

    /// Ends the SDK: the loop thread ends, then every request still open is closed. Test control,
    /// not an SDK function.
    public func shutdown() async {
        await loop.shutdown()
        let open = state.withLock { state in
            defer { state.requests.removeAll() }
            return state.requests
        }
        for (descriptor, request) in open {
            close(descriptor)
            close(request.peer)
        }
    }

    /// SDK calls made off the loop thread so far.
    public var offLoopCalls: Int { state.withLock { $0.offLoopCalls } }

    /// Requests open: started and not finished or cancelled.
    public var openRequests: Int { state.withLock { $0.requests.count } }

    /// Starts a request (loop thread only).
    ///
    /// - Parameter behavior: How the request is answered.
    /// - Returns: The request's descriptor, to watch for readable; -1 when no socket could be made.
    public func open(_ behavior: LoopSDKBehavior) -> Int32 {
        countCall()
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, socketStreamType, 0, &ends) == 0 else { return -1 }
        for index in ends.indices {
            if let nextFreshNumber {
                // Above every number given before: the lowest free one at or above a fixed floor
                // may be one given earlier and closed since, in a process with many open.
                let fresh = nextFreshNumber.withLock { floor -> Int32 in
                    let fresh = fcntl(ends[index], F_DUPFD_CLOEXEC, floor)
                    if fresh >= 0 { floor = fresh + 1 }
                    return fresh
                }
                if fresh >= 0 {
                    close(ends[index])
                    ends[index] = fresh
                }
            }
            _ = fcntl(ends[index], F_SETFL, fcntl(ends[index], F_GETFL) | O_NONBLOCK)
            _ = fcntl(ends[index], F_SETFD, FD_CLOEXEC)
        }
        let (descriptor, peer) = (ends[0], ends[1])
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.requests[descriptor] = Request(id: state.nextID, peer: peer, held: behavior == .hang)
            return state.nextID
        }
        switch behavior {
        case .value(let value): answerLater(descriptor, id, status: LoopSDK.okStatus, value: value)
        case .failure(let status): answerLater(descriptor, id, status: status, value: 0)
        case .hang: break
        }
        return descriptor
    }

    /// The reply of the request on `descriptor`, once it is in (loop thread only).
    public func read(_ descriptor: Int32) -> (status: Int32, value: Int64)? {
        countCall()
        var reply = (Int32(0), Int64(0))
        let count = withUnsafeMutableBytes(of: &reply.0) { status in
            withUnsafeMutableBytes(of: &reply.1) { value in
                var parts = [
                    iovec(iov_base: status.baseAddress, iov_len: status.count),
                    iovec(iov_base: value.baseAddress, iov_len: value.count),
                ]
                return readv(descriptor, &parts, 2)
            }
        }
        return count == 12 ? reply : nil
    }

    /// Ends the request on `descriptor` and closes the descriptor (loop thread only).
    public func finish(_ descriptor: Int32) {
        countCall()
        guard let request = state.withLock({ $0.requests.removeValue(forKey: descriptor) }) else { return }
        close(descriptor)
        close(request.peer)
    }

    /// Withdraws the request on `descriptor` and closes the descriptor (loop thread only).
    public func cancel(_ descriptor: Int32) {
        finish(descriptor)
    }

    /// Answers every held request with 42. Any thread; test control, not an SDK function.
    public func releaseHeld() {
        let held = state.withLock { state -> [(Int32, UInt64)] in
            let held = state.requests.filter(\.value.held)
            for descriptor in held.keys { state.requests[descriptor]?.held = false }
            return held.map { ($0.key, $0.value.id) }
        }
        for (descriptor, id) in held { answer(descriptor, id, status: LoopSDK.okStatus, value: 42) }
    }

    private func countCall() {
        if !loop.isCurrent { state.withLock { $0.offLoopCalls += 1 } }
    }

    private func answerLater(_ descriptor: Int32, _ id: UInt64, status: Int32, value: Int64) {
        try? loop.post { [self] in answer(descriptor, id, status: status, value: value) }
    }

    /// Writes the reply into the request's socket, if that request is still open: the number may
    /// belong to a later request by now.
    private func answer(_ descriptor: Int32, _ id: UInt64, status: Int32, value: Int64) {
        state.withLock { state in
            guard let request = state.requests[descriptor], request.id == id else { return }
            var reply = (status, value)
            _ = withUnsafeBytes(of: &reply.0) { status in
                withUnsafeBytes(of: &reply.1) { value in
                    var parts = [
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: status.baseAddress), iov_len: status.count),
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: value.baseAddress), iov_len: value.count),
                    ]
                    return writev(request.peer, &parts, 2)
                }
            }
        }
    }
}

#if canImport(Glibc)
private let socketStreamType = Int32(SOCK_STREAM.rawValue)
#else
private let socketStreamType = SOCK_STREAM
#endif

/// An async face for ``SocketSDK``: one-shot requests, a descriptor each.
public struct SocketClient: Sendable {
    /// The SDK.
    public let sdk: SocketSDK
    /// Whether the watch is cancelled before the SDK closes the descriptor: false only for the
    /// gallery's mistake.
    let cancelsWatchFirst: Bool

    /// Creates the client.
    /// - Parameter sdk: The SDK.
    public init(sdk: SocketSDK) {
        self.init(sdk: sdk, cancelsWatchFirst: true)
    }

    /// With `cancelsWatchFirst` false, the gallery's mistake: WRONG ON PURPOSE.
    package init(sdk: SocketSDK, cancelsWatchFirst: Bool) {
        self.sdk = sdk
        self.cancelsWatchFirst = cancelsWatchFirst
    }

    /// One process-wide client, created on first use (the adapter catalog's fixture uses it).
    public static let shared: SocketClient = {
        do {
            return SocketClient(sdk: try SocketSDK(name: "socket-sdk"))
        } catch {
            preconditionFailure("SocketSDK could not start its loop thread: \(error)")
        }
    }()

    /// Runs one request to its reply.
    ///
    /// - Parameters:
    ///   - behavior: How the SDK answers.
    ///   - timeout: How long to wait, or `nil`.
    ///   - probe: The conformance probe; `.off` in production.
    ///   - isolation: The caller's isolation; leave the default.
    /// - Returns: The reply's value.
    /// - Throws: ``LoopSDKError``, `CancellationError` or `BridgeTimeoutError`.
    public func fetch(
        _ behavior: LoopSDKBehavior, timeout: Duration? = nil, probe: CallProbe<Int64> = .off,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Int64 {
        let sdk = self.sdk
        let cancelsWatchFirst = self.cancelsWatchFirst
        let request = SocketRequest()
        return try await withCallback(isolation: isolation, timeout: timeout) { completion in
            let deliver = probe.callback { completion($0) }
            try sdk.loop.post {
                probe.start {
                    let descriptor = sdk.open(behavior)
                    guard descriptor >= 0 else {
                        deliver(.failure(LoopSDKError(status: LoopSDK.failedStatus)))
                        return
                    }
                    let watch = try? sdk.loop.watch(descriptor, for: .readable) { _ in
                        guard let reply = sdk.read(descriptor), request.end() != nil else { return }
                        if cancelsWatchFirst {
                            request.watch?.cancel()
                            sdk.finish(descriptor)
                        } else {
                            sdk.finish(descriptor)  // WRONG: the descriptor is closed under its live watch
                        }
                        deliver(
                            reply.status == LoopSDK.okStatus
                                ? .success(reply.value) : .failure(LoopSDKError(status: reply.status)))
                    }
                    request.begin(descriptor, watch)
                }
            }
            return CancelHandle {
                // Posted after the start, so it runs after it, on the loop thread.
                try? sdk.loop.post {
                    guard let (descriptor, watch) = request.end() else { return }
                    watch?.cancel()
                    probe.cancel { sdk.cancel(descriptor) }
                }
            }
        }
    }
}

/// One request's descriptor and watch, ended once: by its reply or by its cancel.
final class SocketRequest: Sendable {
    private struct State: Sendable {
        var descriptor: Int32 = -1
        var watch: DescriptorWatch?
        var begun = false
        var ended = false
    }
    private let state = LockedValue(State())

    func begin(_ descriptor: Int32, _ watch: DescriptorWatch?) {
        state.withLock { state in
            state.descriptor = descriptor
            state.watch = watch
            state.begun = true
        }
    }

    var watch: DescriptorWatch? { state.withLock { $0.watch } }

    /// The request's descriptor and watch, the first time only; nil before it began or once ended.
    func end() -> (Int32, DescriptorWatch?)? {
        state.withLock { state in
            guard state.begun, !state.ended else { return nil }
            state.ended = true
            return (state.descriptor, state.watch)
        }
    }
}

/// Fixtures over ``SocketSDK``.
public enum SocketFixtures {
    /// A one-shot fixture of `client`'s ``SocketClient/fetch(_:timeout:probe:isolation:)``,
    /// declared `.sdkLoop` so that the suite counts the loop's watches and timers.
    public static func oneShot(
        name: String = "socket-sdk-client", client: @escaping @Sendable () -> SocketClient = { .shared }
    ) -> OneShotFixture<Int64> {
        OneShotFixture(
            name: name,
            threading: .sdkLoop { client().sdk.loop },
            succeeding: { probe in try await client().fetch(.value(7), probe: probe) },
            expecting: 7,
            failing: { probe in try await client().fetch(.failure(LoopSDK.failedStatus), probe: probe) },
            hanging: .init(
                start: { probe in try await client().fetch(.hang, probe: probe) },
                release: { client().sdk.releaseHeld() }),
            timingOut: .init { probe, timeout in try await client().fetch(.hang, timeout: timeout, probe: probe) },
            liveResources: { client().sdk.openRequests },
            offThreadCalls: { client().sdk.offLoopCalls })
    }
}

/// One mistake of an adapter over ``SocketSDK``: WRONG ON PURPOSE.
public enum SocketMistake: String, CaseIterable, Sendable {
    /// Lets the SDK close a request's descriptor while its watch is live. The loop ends such a
    /// watch as `.invalid` once it finds the descriptor closed; until then the number may name the
    /// next request's descriptor, which then cannot be watched (the loop stops the process), or,
    /// closed outside a handler under epoll, the watch stays in the loop, deaf.
    case closesUnderWatch = "socket-sdk-closes-under-watch"

    /// The scenarios that must flag the mistake.
    public var flaggedBy: [String] {
        switch self {
        case .closesUnderWatch: return ["loop-watches-released"]
        }
    }

    /// One line saying what is wrong.
    public var summary: String {
        switch self {
        case .closesUnderWatch:
            return "WRONG ON PURPOSE: over SocketSDK, the SDK closes a request's descriptor under its live watch"
        }
    }

    private static let closesUnderWatchClient: SocketClient = {
        do {
            return SocketClient(sdk: try SocketSDK(name: "socket-sdk-cuw"), cancelsWatchFirst: false)
        } catch {
            preconditionFailure("SocketSDK could not start its loop thread: \(error)")
        }
    }()

    /// The fixture of every mistake.
    public static func fixtures() -> [(SocketMistake, OneShotFixture<Int64>)] {
        allCases.map { mistake in
            (mistake, SocketFixtures.oneShot(name: mistake.rawValue) { Self.closesUnderWatchClient })
        }
    }
}
