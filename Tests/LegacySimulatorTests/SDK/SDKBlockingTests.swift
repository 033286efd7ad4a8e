import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("The SDK layer: blocking calls and interrupts", .onOwnThread)
struct SDKBlockingTests {
    @Test("blockingCall returns the key's documented result; interrupt(key:) ends a blocked one with .interrupted")
    func blockAndInterrupt() throws {
        let client = try SDKClient()
        #expect(try client.blockingCall(key: 5, durationMicroseconds: 500) == SDK.blockingResult(key: 5))
        #expect(try client.interrupt(key: 5) == false)  // nothing blocked

        let outcome = SDKTestCollector<Result<UInt64, LegacySDKError>>()
        Thread {
            outcome.append(
                Result { () throws(LegacySDKError) -> UInt64 in
                    try client.blockingCall(key: 6, durationMicroseconds: 60_000_000)
                })
        }.start()
        #expect(spinUntil { client.counters.blockingInFlight == 1 })
        #expect(try client.interrupt(key: 6) == true)
        #expect(outcome.wait { $0.values.count == 1 })
        #expect(throws: LegacySDKError.interrupted) { try outcome.values[0].get() }
        let counters = client.counters
        #expect(counters.blockingCalls == 2 && counters.blockingCallsInterrupted == 1)
        #expect(counters.blockingInFlight == 0 && counters.blockingInFlightPeak == 1)
        #expect(throws: LegacySDKError.outOfRange) { try client.blockingCall(key: 1, durationMicroseconds: 60_000_001) }
    }
}
