import CLegacySDK
import TestSupport
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("LegacySDKError", .onOwnThread)
struct SDKErrorTests {
    @Test("Static members carry the SDK's status codes")
    func codes() {
        let members: [(LegacySDKError, Int)] = [
            (.nullArgument, LSDK_ERR_NULL_ARGUMENT), (.outOfRange, LSDK_ERR_OUT_OF_RANGE),
            (.unknownEnum, LSDK_ERR_UNKNOWN_ENUM), (.clientDestroyed, LSDK_ERR_CLIENT_DESTROYED),
            (.invalidHandle, LSDK_ERR_INVALID_HANDLE), (.cancelled, LSDK_ERR_CANCELLED),
            (.remote, LSDK_ERR_REMOTE), (.busy, LSDK_ERR_BUSY), (.wrongThread, LSDK_ERR_WRONG_THREAD),
            (.resources, LSDK_ERR_RESOURCES), (.notAStream, LSDK_ERR_NOT_A_STREAM),
            (.noLoopThread, LSDK_ERR_NO_LOOP_THREAD), (.interrupted, LSDK_ERR_INTERRUPTED),
            (.notBlocked, LSDK_ERR_NOT_BLOCKED),
        ]
        for (error, code) in members { #expect(error.rawValue == Int32(code)) }
        #expect(Set(members.map(\.0)).count == members.count)
    }

    @Test("The description is the SDK's status string, plus the message when there is one")
    func descriptions() {
        let sdkText = String(cString: lsdk_status_string(Int32(LSDK_ERR_REMOTE)))
        #expect(LegacySDKError.remote.description == "\(sdkText) (7)")
        let withMessage = LegacySDKError(rawValue: 7, message: "refused by peer")
        #expect(withMessage.description == "\(sdkText) (7): refused by peer")
        #expect(LegacySDKError(rawValue: 4242).description == "unknown status (4242)")
        #expect(LegacySDKError.cancelled.description.contains("cancelled"))
        #expect(LegacySDKError.noLoopThread.description == "the client has no loop thread (12)")
        #expect(LegacySDKError.interrupted.description == "the blocking call was interrupted (13)")
        #expect(LegacySDKError.notBlocked.description == "no call is blocked with that key (14)")
    }

    @Test("Equality and hashing use the status code only")
    func equality() {
        let a = LegacySDKError(rawValue: 7, message: "one")
        let b = LegacySDKError(rawValue: 7, message: "two")
        #expect(a == b)
        #expect(a == .remote)
        #expect(a.hashValue == b.hashValue)
        #expect(Set([a, b, .remote]).count == 1)
        #expect(a != .busy)
        #expect(a.message == "one")
    }
}
