import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("The SDK layer: starts, callbacks, handles")
struct SDKOperationTests {
    @Test(
        "A request's completions are copied into Swift values; onRelease comes once, after the last, then the closures are freed"
    )
    func requestCompletions() throws {
        let client = try SDKClient()
        let results = SDKTestCollector<Result<FetchResponse, LegacySDKError>>()
        let freed = SDKTestCounter()
        let countAtRelease = SDKTestCounter()
        let behavior = SimulatedBehavior.repeats([.success, .failure, .success]).with {
            $0.errorMessage = "flaky"
        }
        let started = SDK.startRequest(
            client: client, request: FetchRequest(path: "/a", responseSize: 32), behavior: behavior,
            onCompletion: { [token = SDKTestLifetimeToken(freed)] result in
                withExtendedLifetime(token) { results.append(result) }
            },
            onRelease: {
                countAtRelease.increment(by: results.values.count)
                results.released()
            })
        let handle = try started.get()
        #expect(results.waitReleased())
        #expect(spinUntil { freed.value == 1 })  // closures (and the token) gone with the context
        let values = results.values
        #expect(values.count == 3)
        let first = try values[0].get()
        #expect(first.attempt == 1 && first.message == "/a")
        #expect(first.body == (0..<32).map { SDK.contentByte(requestID: first.requestID, offset: UInt64($0)) })
        #expect(throws: LegacySDKError.remote) { try values[1].get() }
        if case .failure(let error) = values[1] { #expect(error.message == "flaky") }
        #expect(try values[2].get().attempt == 3)
        #expect(results.releaseCount == 1)
        #expect(countAtRelease.value == 3)  // released after the last completion
        withExtendedLifetime(handle) {}
    }

    @Test(
        "A bare request resumes its continuation with the request's number from a worker, keeps no handle, and is released by the SDK"
    )
    func bareRequest() async throws {
        var client: SDKClient? = try SDKClient(workerThreads: 1)
        let requests = [SDKBareRequest(), SDKBareRequest(), SDKBareRequest()]
        var numbers: [UInt64] = []
        for request in requests {
            let sdk = try #require(client)
            numbers.append(
                await withUnsafeContinuation { SDK.startBareRequest(client: sdk, path: "/bare", request, resuming: $0) }
            )
        }
        #expect(numbers == [1, 2, 3])  // the client numbers its requests from 1
        let counters = try #require(client).counters
        #expect(counters.operationsStarted == 3 && counters.callbacksWorker == 3)
        #expect(counters.contextsCreated == 3 && counters.handlesOutstanding == 0)
        client = nil  // the destroy releases every context before it returns
        #expect(requests.map(\.isReleased) == [true, true, true])
    }

    @Test("A download's events are copied, data included; one end, then onRelease")
    func downloadEvents() throws {
        let client = try SDKClient()
        let events = SDKTestCollector<RawDownloadEvent>()
        let behavior = SimulatedBehavior.wellBehaved.with {
            $0.chunkSize = 100
            $0.progressEvery = 1
        }
        let handle = try SDK.startDownload(
            client: client, request: DownloadRequest(path: "/f", totalBytes: 250), behavior: behavior,
            onEvent: { events.append($0) }, onRelease: { events.released() }
        ).get()
        #expect(events.waitReleased())
        let values = events.values
        #expect(values.map(\.kind) == [.data, .progress, .data, .progress, .data, .progress, .end])
        #expect(values.map(\.sequence) == Array(0..<7))
        let data = values.filter { $0.kind == .data }
        #expect(data.map(\.data.count) == [100, 100, 50])
        for event in data {
            #expect(
                event.data
                    == (0..<event.data.count).map {
                        SDK.contentByte(requestID: event.requestID, offset: event.bytesDone + UInt64($0))
                    })
        }
        #expect(values.last?.error == nil && values.last?.status == 0)
        #expect(values.allSatisfy { $0.bytesTotal == 250 })
        withExtendedLifetime(handle) {}
    }

    @Test("An invalid behaviour or request fails the start with the SDK's error: no callback, closures freed")
    func invalidInput() throws {
        let client = try SDKClient()
        let called = SDKTestCounter()
        let freed = SDKTestCounter()
        let cases: [(SimulatedBehavior, FetchRequest, LegacySDKError)] = [
            (.repeats(Array(repeating: .success, count: 9)), FetchRequest(path: "/"), .outOfRange),
            (.wellBehaved.with { $0.chunkSize = 0 }, FetchRequest(path: "/"), .outOfRange),
            (.wellBehaved.with { $0.delayMicroseconds = 20_000_000 }, FetchRequest(path: "/"), .outOfRange),
            (.wellBehaved.with { $0.streamConcurrency = 9 }, FetchRequest(path: "/"), .outOfRange),
            (.failing(.cancelled), FetchRequest(path: "/"), .outOfRange),
            (.wellBehaved, FetchRequest(path: "/", responseSize: -1), .outOfRange),
            (.wellBehaved, FetchRequest(path: "/", responseSize: 2 << 20), .outOfRange),
        ]
        for (behavior, request, expected) in cases {
            let result = SDK.startRequest(
                client: client, request: request, behavior: behavior,
                onCompletion: { [token = SDKTestLifetimeToken(freed)] _ in
                    withExtendedLifetime(token) { called.increment() }
                },
                onRelease: { called.increment() })
            #expect(throws: expected) { try result.get() }
        }
        let download = SDK.startDownload(
            client: client, request: DownloadRequest(path: "/", totalBytes: -1), behavior: .wellBehaved,
            onEvent: { _ in called.increment() }, onRelease: { called.increment() })
        #expect(throws: LegacySDKError.outOfRange) { try download.get() }
        #expect(called.value == 0)
        #expect(freed.value == cases.count)
        let counters = client.counters
        #expect(counters.contextsCreated == 0)
        #expect(counters.badCalls == UInt64(cases.count + 1))
    }

    @Test("SDKHandle: cancel re-enters from inside a callback; pause on a request is notAStream; deinit releases")
    func handles() throws {
        let client = try SDKClient()
        let results = SDKTestCollector<Result<FetchResponse, LegacySDKError>>()
        let box = SDKTestHandleBox()
        let nestedBeforeReturn = SDKTestCounter()
        let behavior = SimulatedBehavior.repeats([.success, .success]).with {
            $0.cancelMode = .callbackSynchronously
        }
        let handle = try SDK.startRequest(
            client: client, request: FetchRequest(path: "/"), behavior: behavior,
            onCompletion: { result in
                results.append(result)
                if case .success = result {
                    // The handle is published once start returned.
                    _ = spinUntil { box.handle != nil }
                    box.handle?.cancel()
                    // The cancellation arrived inside cancel().
                    nestedBeforeReturn.increment(by: results.values.count)
                }
            },
            onRelease: { results.released() }
        ).get()
        box.handle = handle
        #expect(results.waitReleased())
        #expect(results.values.count == 2)
        #expect(throws: LegacySDKError.cancelled) { try results.values[1].get() }
        #expect(nestedBeforeReturn.value == 2)
        #expect(throws: LegacySDKError.notAStream) { try handle.pause() }
        #expect(throws: LegacySDKError.notAStream) { try handle.resume() }
        #expect(client.counters.callbacksReentrantCancel == 1)
        #expect(client.counters.handlesOutstanding == 1)
        box.handle = nil
        _ = consume handle
        #expect(client.counters.handlesOutstanding == 0)
        #expect(client.counters.handlesReleased == 1)
    }

    @Test("Destroying the client (deinit) cancels what is in flight and releases every context before it returns")
    func clientDeinitCancels() throws {
        var client: SDKClient? = try SDKClient()
        let results = SDKTestCollector<Result<FetchResponse, LegacySDKError>>()
        let handle = try SDK.startRequest(
            client: client!, request: FetchRequest(path: "/"), behavior: .neverCompletes,
            onCompletion: { results.append($0) }, onRelease: { results.released() }
        ).get()
        #expect(results.releaseCount == 0)
        client = nil
        // Synchronously done by the time deinit returned.
        #expect(results.releaseCount == 1)
        #expect(results.values.count == 1)
        #expect(throws: LegacySDKError.cancelled) { try results.values[0].get() }
        handle.cancel()  // harmless after destroy
        let dead = try SDKTestDeadClient.make()
        #expect(throws: LegacySDKError.clientDestroyed) {
            _ = try SDK.startRequest(
                client: dead, request: FetchRequest(path: "/"), behavior: .wellBehaved,
                onCompletion: { _ in }
            ).get()
        }
    }

    @Test("If the last reference goes away inside a callback, the destroy is handed to another thread")
    func deinitOnSDKThread() throws {
        let client = try SDKClient()
        let raw = UInt(bitPattern: client.raw)
        let holder = SDKTestClientHolder(client)
        let released = SDKTestCounter()
        let dropped = SDKTestCounter()
        let handle = try SDK.startRequest(
            client: client, request: FetchRequest(path: "/"), behavior: .wellBehaved,
            onCompletion: { _ in
                // Once the test let go, drop the last reference here, on a worker.
                _ = spinUntil { dropped.value == 1 }
                holder.client = nil
            },
            onRelease: { released.increment() }
        ).get()
        _ = consume client
        dropped.increment()
        #expect(spinUntil { released.value == 1 })
        // The shell of a destroyed client stays valid: it reports the destroy once done.
        #expect(
            spinUntil {
                lsdk_client_set_session_token(OpaquePointer(bitPattern: raw), nil) == Int32(LSDK_ERR_CLIENT_DESTROYED)
            })
        withExtendedLifetime(handle) {}
    }
}

/// Publishes a handle to callbacks.
private final class SDKTestHandleBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: SDKHandle?
    var handle: SDKHandle? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// Holds a client so a callback can drop the last reference.
private final class SDKTestClientHolder: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: SDKClient?
    init(_ client: SDKClient) { stored = client }
    var client: SDKClient? {
        get { lock.withLock { stored } }
        set {
            // Take the old value out under the lock; drop it outside (its deinit calls the SDK).
            let old = lock.withLock { () -> SDKClient? in
                let old = stored
                stored = newValue
                return old
            }
            _ = old
        }
    }
}

/// A client already destroyed.
private enum SDKTestDeadClient {
    static func make() throws -> SDKClient {
        let client = try SDKClient(workerThreads: 1)
        _ = lsdk_client_destroy(client.raw)
        return client
    }
}
