// The stand-in for "your SDK" in the README's real-adapter example: a callback file loader with a
// cancellable request, like GIO's `g_file_load_contents_async` or a C library's async read. It
// runs its requests on a loop thread of its own (an `SDKLoop`) and calls back from there. Loads of
// `heldPath` wait until `releaseHeld()`: the test double's way to make a call hang.

import Foundation
import LegacyBridge

/// A callback file loader: the SDK the README's adapter wraps.
final class FileSDK: Sendable {
    /// A load of this path completes only when ``releaseHeld()`` runs.
    static let heldPath = "/held/by/the/test/double"

    /// The error a cancelled load reports.
    struct Cancelled: Error {}

    /// One load in flight; cancel it from any thread.
    final class Request: Sendable {
        fileprivate let id: Int
        fileprivate let sdk: FileSDK
        fileprivate init(id: Int, sdk: FileSDK) {
            self.id = id
            self.sdk = sdk
        }

        /// Stops the load: its callback reports ``Cancelled`` unless it already came.
        func cancel() {
            try? sdk.loop.post { [sdk, id] in sdk.finish(id, with: .failure(Cancelled())) }
        }
    }

    private typealias Callback = @Sendable ([UInt8]?, (any Error)?) -> Void
    private let loop: SDKLoop
    private let pending = LockedValue<[Int: (path: String, callback: Callback)]>([:])
    private let nextID = LockedValue(0)

    init() throws {
        let wakeups = DispatchSemaphore(value: 0)
        loop = try SDKLoop(
            name: "file-sdk", driver: .iterating(runOnce: { wakeups.wait() }, wake: { wakeups.signal() }))
    }

    /// Loads under way: requests made and not yet called back.
    var openRequests: Int { pending.withLock { $0.count } }

    /// Starts loading `path`; `callback` comes once, from the SDK's thread.
    func load(_ path: String, callback: @escaping @Sendable ([UInt8]?, (any Error)?) -> Void) throws -> Request {
        let id = nextID.withLock {
            $0 += 1
            return $0
        }
        pending.withLock { $0[id] = (path, callback) }
        guard path != Self.heldPath else { return Request(id: id, sdk: self) }
        try loop.post { [self] in
            finish(id, with: Result { Array(try Data(contentsOf: URL(fileURLWithPath: path))) })
        }
        return Request(id: id, sdk: self)
    }

    /// Completes every held load (with no bytes).
    func releaseHeld() {
        try? loop.post { [self] in
            for id in pending.withLock({ $0.filter { $0.value.path == Self.heldPath }.map(\.key) }) {
                finish(id, with: .success([]))
            }
        }
    }

    private func finish(_ id: Int, with result: Result<[UInt8], any Error>) {
        guard let request = pending.withLock({ $0.removeValue(forKey: id) }) else { return }
        switch result {
        case .success(let bytes): request.callback(bytes, nil)
        case .failure(let error): request.callback(nil, error)
        }
    }
}
