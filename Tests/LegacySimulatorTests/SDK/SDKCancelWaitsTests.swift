import CLegacySDK
import TestSupport
import Dispatch
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("The SDK layer: the cancel that waits, and cancels inside callbacks", .onOwnThread)
struct SDKCancelWaitsTests {
    @Test("cancel() with .waits returns only after the running callback returned; nothing comes after it")
    func waitsForCallback() throws {
        let client = try SDKClient()
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let cancelReturned = SDKTestCounter()
        let sawReturnedAtEnd = SDKTestCollector<Bool>()
        let events = SDKTestCollector<UInt64>()
        let handle = try SDK.startDownload(
            client: client, request: DownloadRequest(path: "/w", totalBytes: 1000),
            behavior: .wellBehaved.with {
                $0.cancelMode = .waits
                $0.chunkSize = 10
                $0.progressEvery = 0
            },
            onEvent: { event in
                events.append(event.sequence)
                guard event.sequence == 1 else { return }
                entered.signal()
                _ = gate.wait(timeout: .now() + .seconds(Int(testHangBoundSeconds)))
                sawReturnedAtEnd.append((cancelReturned.value > 0))
            },
            onRelease: { events.released() }
        ).get()
        #expect(entered.wait(timeout: .now() + .seconds(Int(testHangBoundSeconds))) == .success)
        Thread {
            handle.cancel()
            cancelReturned.increment()
        }.start()
        #expect(spinUntil { client.counters.cancels == 1 })
        #expect(!(cancelReturned.value > 0))
        gate.signal()
        #expect(events.waitReleased())
        #expect(spinUntil { (cancelReturned.value > 0) })
        #expect(sawReturnedAtEnd.values == [false])
        #expect(events.values == [0, 1])
        #expect(client.counters.cancelsInsideCallback == 0)
    }

    @Test("A cancel from inside the operation's own callback is counted in cancelsInsideCallback")
    func insideCallbackCounted() throws {
        let client = try SDKClient()
        let holder = SDKTestCollector<SDKHandle>()
        let done = SDKTestCollector<Int>()
        let ready = DispatchSemaphore(value: 0)
        let handle = try SDK.startRequest(
            client: client, request: FetchRequest(path: "/c"),
            behavior: .repeats([.success, .success]).with { $0.cancelMode = .silent },
            onCompletion: { _ in
                _ = ready.wait(timeout: .now() + .seconds(Int(testHangBoundSeconds)))
                holder.values.first?.cancel()
                ready.signal()
            },
            onRelease: { done.released() }
        ).get()
        holder.append(handle)
        ready.signal()
        #expect(done.waitReleased())
        #expect(client.counters.cancelsInsideCallback == 1)
        #expect(client.counters.cancelDeadlocks == 0)
    }
}
