import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("The SDK layer: loop thread, posted jobs, affinity", .onOwnThread)
struct SDKLoopTests {
    @Test("post runs each job once on the loop thread, in order, and frees its closure after it ran")
    func postRunsOnLoop() throws {
        let client = try SDKClient(loopThread: true)
        #expect(client.hasLoopThread && client.affinity == .any)
        #expect(!client.isLoopThread)
        let order = SDKTestCollector<Int>()
        let onLoop = SDKTestCollector<Bool>()
        let freed = SDKTestCounter()
        for index in 0..<50 {
            try client.post { [token = SDKTestLifetimeToken(freed)] in
                withExtendedLifetime(token) {
                    onLoop.append(client.isLoopThread)
                    order.append(index)
                }
            }
        }
        #expect(order.wait { $0.values.count == 50 })
        #expect(order.values == Array(0..<50))
        #expect(onLoop.values.allSatisfy { $0 })
        #expect(spinUntil { freed.value == 50 })
        #expect(client.counters.loopJobs == 50)
    }

    @Test("post on a client without a loop thread throws noLoopThread and frees the job at once, unrun")
    func postWithoutLoop() throws {
        let client = try SDKClient()
        let freed = SDKTestCounter()
        let ran = SDKTestCounter()
        #expect(throws: LegacySDKError.noLoopThread) {
            try client.post { [token = SDKTestLifetimeToken(freed)] in
                withExtendedLifetime(token) { ran.increment() }
            }
        }
        #expect(freed.value == 1)
        #expect(ran.value == 0)
        #expect(client.counters.badCalls == 1)
    }

    @Test("Loop affinity needs a loop thread: outOfRange")
    func loopAffinityNeedsLoop() {
        #expect(throws: LegacySDKError.outOfRange) { try SDKClient(affinity: .loop) }
        #expect(
            SDKClient.Affinity.allCases.map(\.rawValue) == [
                Int32(LSDK_AFFINITY_ANY), Int32(LSDK_AFFINITY_CREATOR), Int32(LSDK_AFFINITY_LOOP),
            ])
    }

    @Test("Loop delivery: every event of a download arrives on the loop thread; counted as loop callbacks")
    func loopDelivery() throws {
        let client = try SDKClient(loopThread: true)
        let events = SDKTestCollector<Bool>()
        let handle = try SDK.startDownload(
            client: client, request: DownloadRequest(path: "/l", totalBytes: 40),
            behavior: .wellBehaved.with {
                $0.delivery = .loop
                $0.chunkSize = 10
            },
            onEvent: { _ in events.append(client.isLoopThread) }, onRelease: { events.released() }
        ).get()
        #expect(events.waitReleased())
        #expect(events.values == Array(repeating: true, count: 9))
        #expect(client.counters.callbacksLoop == 9)
        withExtendedLifetime(handle) {}

        let plain = try SDKClient()
        let refused = SDK.startDownload(
            client: plain, request: DownloadRequest(path: "/l", totalBytes: 40),
            behavior: .wellBehaved.with { $0.delivery = .loop }, onEvent: { _ in })
        #expect(throws: LegacySDKError.noLoopThread) { try refused.get() }
    }

    @Test("Creator affinity: a start from another thread is counted in affinityViolations and still works")
    func creatorAffinity() throws {
        let client = try SDKClient(affinity: .creator)
        let results = SDKTestCollector<Bool>()
        let handle = try SDK.startRequest(
            client: client, request: FetchRequest(path: "/mine"), behavior: .wellBehaved,
            onCompletion: { results.append((try? $0.get()) != nil) }
        ).get()
        #expect(results.wait { $0.values.count == 1 })
        #expect(client.counters.affinityViolations == 0)

        let done = DispatchSemaphore(value: 0)
        let foreign = SDKTestCollector<SDKHandle>()
        Thread {
            if let handle = try? SDK.startRequest(
                client: client, request: FetchRequest(path: "/theirs"), behavior: .wellBehaved,
                onCompletion: { results.append((try? $0.get()) != nil) }
            ).get() {
                foreign.append(handle)
            }
            done.signal()
        }.start()
        #expect(done.wait(timeout: .now() + .seconds(Int(testHangBoundSeconds))) == .success)
        #expect(results.wait { $0.values.count == 2 })
        #expect(results.values == [true, true])
        #expect(foreign.values.count == 1)
        #expect(client.counters.affinityViolations == 1)
        withExtendedLifetime(handle) {}
    }
}
