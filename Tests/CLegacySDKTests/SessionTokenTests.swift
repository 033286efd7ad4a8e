import CLegacySDK
import Dispatch
import Foundation
import TestSupport
import Testing

/// What the probe does and what it saw: on the first entry it makes a second thread call the
/// setter while the first call is still inside, and records that call's status.
final class TokenProbe: @unchecked Sendable {
    private let lock = NSLock()
    private var entries = 0
    private var _innerStatuses: [lsdk_status_t] = []
    var client: UInt = 0
    var innerStatuses: [lsdk_status_t] { lock.withLock { _innerStatuses } }
    var probeEntries: Int { lock.withLock { entries } }

    func entered() {
        let first = lock.withLock { () -> Bool in
            entries += 1
            return entries == 1
        }
        guard first else { return }
        let address = client
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let status = lsdk_client_set_session_token(OpaquePointer(bitPattern: address), "loser")
            self.lock.withLock { self._innerStatuses.append(status) }
            done.signal()
        }
        thread.start()
        done.wait()
    }
}

func tokenProbe(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<TokenProbe>.fromOpaque(context!).takeUnretainedValue().entered()
}

private func token(_ client: OpaquePointer, capacity: Int = 512) -> String {
    var buffer = [CChar](repeating: 0x7F, count: capacity)
    #expect(lsdk_client_get_session_token(client, &buffer, capacity) == Status.ok)
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

@Suite("Session token", .onOwnThread)
struct SessionTokenTests {
    @Test("The token is copied, truncated to 255 bytes, cleared by NULL, and read back truncated to capacity")
    func roundTrip() {
        withClient { client in
            #expect(token(client) == "")
            #expect(lsdk_client_set_session_token(client, "secret") == Status.ok)
            #expect(token(client) == "secret")
            #expect(token(client, capacity: 4) == "sec")
            #expect(lsdk_client_set_session_token(client, String(repeating: "a", count: 400)) == Status.ok)
            #expect(token(client) == String(repeating: "a", count: 255))
            #expect(lsdk_client_set_session_token(client, nil) == Status.ok)
            #expect(token(client) == "")
        }
    }

    @Test("A call entering while another is inside gets BUSY and changes nothing")
    func concurrentEntryDetected() {
        let probe = TokenProbe()
        let context = Unmanaged.passRetained(probe).toOpaque()
        defer { Unmanaged<TokenProbe>.fromOpaque(context).release() }
        withClient(probe: tokenProbe, probeContext: context) { client in
            probe.client = UInt(bitPattern: client)
            #expect(lsdk_client_set_session_token(client, "winner") == Status.ok)
            #expect(probe.innerStatuses == [Status.busy])
            #expect(probe.probeEntries == 1)  // the losing call never got inside
            #expect(token(client) == "winner")
            #expect(counters(client).bad_calls == 1)
            // Serial calls are fine.
            #expect(lsdk_client_set_session_token(client, "next") == Status.ok)
            #expect(token(client) == "next")
        }
    }
}
