import ToolSupport
import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

/// Watches the SDK's session-token setter from its probe: how many calls are inside at once.
private final class SDKTestTokenProbe: Sendable {
    let inside = AtomicCell<Int>(0)
    let maxInside = AtomicCell<Int>(0)
    let entries = AtomicCell<Int>(0)
    /// Callers that have made (or are about to make) their call.
    let arrived = AtomicCell<Int>(0)
    let firstEntry = AtomicCell<Bool>(true)

    func entered() {
        entries.add(1, ordering: .relaxed)
        let now = inside.add(1, ordering: .sequentiallyConsistent).newValue
        var seen = maxInside.load(ordering: .relaxed)
        while now > seen {
            let (exchanged, original) = maxInside.compareExchange(
                expected: seen, desired: now, ordering: .relaxed)
            if exchanged { break }
            seen = original
        }
        // Widen the window so an unserialised caller would overlap.
        for _ in 0..<50 { sched_yield() }
        inside.subtract(1, ordering: .sequentiallyConsistent)
    }
}

/// On its first entry, makes another thread call the raw C setter while this call is inside.
private final class SDKTestProvokingProbe: @unchecked Sendable {
    private let lock = NSLock()
    private var raw: UInt = 0
    private var statuses: [Int32] = []
    private var fired = false

    func arm(_ client: SDKClient) { lock.withLock { raw = UInt(bitPattern: client.raw) } }
    var innerStatuses: [Int32] { lock.withLock { statuses } }

    func entered() {
        let address = lock.withLock { () -> UInt? in
            guard !fired, raw != 0 else { return nil }
            fired = true
            return raw
        }
        guard let address else { return }
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let status = lsdk_client_set_session_token(OpaquePointer(bitPattern: address), "intruder")
            self.lock.withLock { self.statuses.append(status) }
            done.signal()
        }
        thread.start()
        done.wait()
    }
}

@Suite("LegacyClient")
struct SDKClientTests {
    @Test("A client is created with its configuration; invalid worker counts are the SDK's outOfRange")
    func creation() throws {
        let client = try LegacyClient(configuration: .init(workerThreads: 2, seed: 9))
        #expect(client.configuration == .init(workerThreads: 2, seed: 9))
        #expect(client.counters == SDKCounters())
        #expect(throws: LegacySDKError.outOfRange) { try LegacyClient(configuration: .init(workerThreads: 0)) }
        #expect(throws: LegacySDKError.outOfRange) { try LegacyClient(configuration: .init(workerThreads: 65)) }
        #expect(throws: LegacySDKError.outOfRange) { try LegacyClient(configuration: .init(workerThreads: -1)) }
    }

    @Test("Counters are readable from the client and process-wide")
    func counters() throws {
        let client = try LegacyClient()
        let events = SDKTestCollector<RawDownloadEvent>()
        let handle = try SDK.startDownload(
            client: client.sdk, request: DownloadRequest(path: "/", totalBytes: 10),
            behavior: .wellBehaved.with { $0.chunkSize = 5 }, onEvent: { events.append($0) },
            onRelease: { events.released() }
        ).get()
        #expect(events.waitReleased())
        let counters = client.counters
        #expect(counters.operationsStarted == 1 && counters.operationsFinished == 1)
        #expect(counters.streamEvents == 5)
        #expect(counters.contextsCreated == 1 && counters.contextsReleased == 1)
        #expect(counters.handlesOutstanding == 1)
        #expect(SDKCounters.processWide.operationsStarted >= 1)
        withExtendedLifetime(handle) {}
        _ = consume handle
        #expect(client.counters.handlesOutstanding == 0)
    }

    @Test("The session token round-trips through the actor; nil clears it")
    func sessionToken() async throws {
        let client = try LegacyClient()
        #expect(try await client.sessionToken() == nil)
        try await client.setSessionToken("abc")
        #expect(try await client.sessionToken() == "abc")
        try await client.setSessionToken(String(repeating: "x", count: 300))
        #expect(try await client.sessionToken() == String(repeating: "x", count: 255))
        try await client.setSessionToken(nil)
        #expect(try await client.sessionToken() == nil)
    }

    @Test("The SDK detects concurrent entry into the setter: a second caller gets BUSY")
    func sdkDetectsConcurrentEntry() async throws {
        let probe = SDKTestProvokingProbe()
        let sdk = try SDKClient(sessionTokenProbe: { probe.entered() })
        probe.arm(sdk)
        let client = try LegacyClient(sdk: sdk)
        try await client.setSessionToken("mine")
        #expect(probe.innerStatuses == [Int32(LSDK_ERR_BUSY)])
        #expect(try await client.sessionToken() == "mine")
        #expect(client.counters.badCalls == 1)
    }

    @Test("Through LegacySDKActor, concurrent callers take turns: zero BUSY")
    func actorSerialises() async throws {
        let callers = 64
        let probe = SDKTestTokenProbe()
        let client = try LegacyClient(
            sdk: try SDKClient(sessionTokenProbe: {
                probe.entered()
                // The first call stays inside until every caller has made its call: unserialised
                // callers would now collide with it (and get BUSY) rather than wait.
                if probe.firstEntry.exchange(false, ordering: .relaxed) {
                    _ = spinUntil { probe.arrived.load(ordering: .relaxed) == callers }
                }
            }))
        let failures = await withTaskGroup(of: Int.self) { group in
            for index in 0..<callers {
                group.addTask {
                    probe.arrived.add(1, ordering: .relaxed)
                    do {
                        try await client.setSessionToken("token-\(index)")
                        return 0
                    } catch {
                        return 1
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
        #expect(probe.entries.load(ordering: .relaxed) == callers)
        #expect(probe.maxInside.load(ordering: .relaxed) == 1)
        #expect(client.counters.badCalls == 0)
        #expect(try await client.sessionToken()?.hasPrefix("token-") == true)
    }
}
