// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import Foundation
import DocumentationSDK
import LegacyBridge

// Stand-ins for the c-ares example's types (the real ones live in Examples/, which links c-ares):
// enough for the guide's two snippets to compile against LegacyBridge as written.

nonisolated struct AresError: Error, Sendable {
    var rawValue: Int32
    init(rawValue: Int32) { self.rawValue = rawValue }
}

nonisolated let ARES_SUCCESS: Int32 = 0

nonisolated struct ares_addrinfo {}
nonisolated func ares_freeaddrinfo(_ result: UnsafeMutablePointer<ares_addrinfo>) {}
nonisolated func copyAddresses(_ result: UnsafeMutablePointer<ares_addrinfo>) -> [ResolvedAddress] { [] }

/// A lookup's context, as the loop's table keeps it.
nonisolated final class Query {
    var answered = false
    let onAnswer: (Result<[ResolvedAddress], any Error>) -> Void
    init(onAnswer: @escaping (Result<[ResolvedAddress], any Error>) -> Void) { self.onAnswer = onAnswer }
}

func guideMakeLoop(driver: AresDriver) throws -> SDKLoop {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    let loop = try SDKLoop(name: "c-ares", beforeWait: { driver.prepareWait() })
    // end snippet
    return loop
}

/// A socket-driven library's calls, on the loop thread: it reads what there is and counts it.
nonisolated let socketBytesRead = LockedValue(0)
nonisolated let socketTicks = LockedValue(0)

// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func sdk_process(_ socket: Int32, _ readable: Bool, _ writable: Bool) {
    guard readable else { return }
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(socket, &buffer, buffer.count)
    if count > 0 { socketBytesRead.withLock { $0 += count } }
}

// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func sdk_tick() { socketTicks.withLock { $0 += 1 } }

func guideWatchSocket(loop: SDKLoop, socket: Int32) throws -> (DescriptorWatch, LoopTimer) {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    let watch = try loop.watch(socket, for: .readable) { events in
        sdk_process(socket, events.contains(.readable), events.contains(.writable))   // on the loop thread
    }
    watch.update(interest: [.readable, .writable])      // the library has something to send
    let ticks = try loop.schedule(after: .seconds(1), repeating: .seconds(1)) { sdk_tick() }
    // end snippet
    return (watch, ticks)
}

/// A message-queue library whose descriptor only signals a change (ZeroMQ's shape), as the guide's
/// recipe uses it: a queue of messages, and a pipe as its signal.
nonisolated final class MessageQueueSocket: Sendable {
    let messages = LockedValue<[Int]>([])
    let signal: Int32
    let raise: Int32
    init() {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0)
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        (signal, raise) = (ends[0], ends[1])
    }
}

nonisolated let mqDelivered = LockedValue<[Int]>([])

// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func mq_signal(_ socket: MessageQueueSocket) -> Int32 { socket.signal }

// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func mq_events(_ socket: MessageQueueSocket) -> DescriptorEvents {
    var byte: UInt8 = 0
    while read(socket.signal, &byte, 1) == 1 {}
    return socket.messages.withLock { $0.isEmpty } ? [] : .readable
}

// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func mq_receive(_ socket: MessageQueueSocket) -> Int? {
    socket.messages.withLock { $0.isEmpty ? nil : $0.removeFirst() }
}

// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func mq_deliver(_ message: Int) { mqDelivered.withLock { $0.append(message) } }

/// The library's send takes the signal of whatever arrived before it, as ZeroMQ's does: the
/// reply is queued and the descriptor stays quiet.
// swift-format-ignore: AlwaysUseLowerCamelCase
nonisolated func mq_send(_ socket: MessageQueueSocket, _ request: Int) {
    socket.messages.withLock { $0.append(request + 1) }
}

func guideWatchMessageQueue(loop: SDKLoop, socket: MessageQueueSocket, request: Int) throws -> DescriptorWatch {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    let watch = try loop.watch(mq_signal(socket), for: .readable, readiness: {
        mq_events(socket)                    // the library's own state; asking takes the signal
    }) { events in
        while let message = mq_receive(socket) { mq_deliver(message) }   // on the loop thread
    }
    try loop.post { mq_send(socket, request) }   // the loop asks mq_events before it waits again
    // end snippet
    return watch
}

func guideLoopBound(loop: SDKLoop, socket: Int32) throws -> (LoopBound<[UInt64: String]>, DescriptorWatch) {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    let pending = LoopBound([UInt64: String](), on: loop.scheduler)   // the loop thread's own table
    try loop.post { pending.value[7] = "GET /" }
    let replies = try loop.watch(socket, for: .readable) { _ in
        sdk_process(socket, true, false)                              // reads the reply
        pending.value[7] = nil                                        // on the loop thread too
    }
    // end snippet
    return (pending, replies)
}

func guideMakeDrivenLoop(driver: LoopFunctionDriver) throws -> SDKLoop {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    let loop = try SDKLoop(name: "curl", driver: .iterating(
        runOnce: { driver.waitAndProcess(maxWaitMilliseconds: 1000) },
        wake: { driver.wakeUp() }))
    // end snippet
    return loop
}

nonisolated struct GuideResolver: Sendable {
    let loop: SDKLoop
    let driver: AresDriver
    func nextID() -> UInt64 { 1 }

    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    public func resolve(host: String, timeout: Duration? = nil,
                        isolation: isolated (any Actor)? = #isolation) async throws -> [ResolvedAddress] {
        let id = nextID()
        return try await withCallback(isolation: isolation, timeout: timeout, scheduler: loop.scheduler) { completion in
            driver.start(id: id, host: host, onAnswer: { completion($0) })   // on the loop thread
            return CancelHandle { driver.cancel(id: id) }                     // on the loop thread too
        }
    }
    // end snippet
}

/// Only touched on the loop thread, like everything in the c-ares example's driver.
nonisolated(unsafe) var repeatedCallbacks = 0

// snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
nonisolated private func onAnswer(_ argument: UnsafeMutableRawPointer?, _ status: Int32, _ timeouts: Int32,
                                  _ result: UnsafeMutablePointer<ares_addrinfo>?) {
    let unmanaged = Unmanaged<Query>.fromOpaque(argument!)
    let query = unmanaged.takeUnretainedValue()            // still owned by the loop's table
    let addresses = result.map(copyAddresses) ?? []        // copy now: the answer dies here
    if let result { ares_freeaddrinfo(result) }
    guard !query.answered else { repeatedCallbacks += 1; return }   // a broken contract, counted
    query.answered = true
    unmanaged.release()                                    // the one callback: give the retain back
    query.onAnswer(status == ARES_SUCCESS ? .success(addresses) : .failure(AresError(rawValue: status)))
}
// end snippet

/// Keeps `onAnswer` used (it is the C callback in the real example).
nonisolated func guideAresCallback() -> (UnsafeMutableRawPointer?, Int32, Int32, UnsafeMutablePointer<ares_addrinfo>?) -> Void {
    onAnswer
}
