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

/// A self-pipe the loop polls.
nonisolated final class WakeupPipe: Sendable {
    let readDescriptor: Int32
    private let writeDescriptor: Int32

    init() {
        var descriptors: [Int32] = [0, 0]
        precondition(pipe(&descriptors) == 0, "pipe failed")
        readDescriptor = descriptors[0]
        writeDescriptor = descriptors[1]
        _ = fcntl(readDescriptor, F_SETFL, fcntl(readDescriptor, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close(readDescriptor)
        close(writeDescriptor)
    }

    func signal() {
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
    }

    func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while read(readDescriptor, &bytes, bytes.count) > 0 {}
    }
}

func guideMakeLoop(driver: AresDriver) throws -> SDKLoop {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    let wakeup = WakeupPipe()
    let loop = try SDKLoop(name: "c-ares", driver: .iterating(
        runOnce: { if driver.waitAndProcess(wakeup: wakeup.readDescriptor) { wakeup.drain() } },
        wake: { wakeup.signal() }))
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
