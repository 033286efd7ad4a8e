import LegacyBridge
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `MailboxSDK`, the double whose descriptor only says "go look", and the correct adapter over it.
/// The gallery's level-triggered adapter is proven flagged by `GalleryProofTests`.
@Suite("MailboxSDK: a reply that lands during its send raises no signal, and the readiness watch still receives it")
struct MailboxSDKTests {
    @Test("the reply of a send is receivable at once, and the descriptor stays quiet")
    func replyDuringSendRaisesNothing() async throws {
        let sdk = try MailboxSDK(name: "mailbox-test")
        let seen = LockedValue<(events: DescriptorEvents, signalled: Bool, reply: Int64?)?>(nil)
        try await sdk.loop.run {
            sdk.send(1, .value(7))
            var poll = pollfd(fd: sdk.signal, events: Int16(POLLIN), revents: 0)
            let signalled = withUnsafeMutablePointer(to: &poll) { pollDescriptors($0, 1, 0) } > 0
            let events = sdk.events()
            seen.withLock { $0 = (events, signalled, sdk.receive()?.value) }
        }
        let result = try #require(seen.withLock { $0 })
        #expect(result.events == .readable)
        #expect(!result.signalled)
        #expect(result.reply == 7)
        await sdk.shutdown()
    }

    @Test("MailboxClient gets that reply, and a held one released later, and leaves nothing behind")
    func clientReceivesBoth() async throws {
        let sdk = try MailboxSDK(name: "mailbox-test")
        let client = try MailboxClient(sdk: sdk)
        #expect(try await client.fetch(.value(7)) == 7)
        await #expect(throws: LoopSDKError(status: LoopSDK.failedStatus)) {
            try await client.fetch(.failure(LoopSDK.failedStatus))
        }
        async let held = client.fetch(.hang)
        try await eventuallyHeld(sdk)
        sdk.releaseHeld()
        #expect(try await held == 42)
        #expect(client.liveResources == 0)
        #expect(sdk.offLoopCalls == 0)
        await sdk.shutdown()
    }

    /// Waits until the SDK holds a request: the posted send has run. Each look is a round trip
    /// through the loop thread, after every job posted before it.
    private func eventuallyHeld(_ sdk: MailboxSDK) async throws {
        for _ in 0..<100_000 where sdk.liveRequests == 0 { try await sdk.loop.run {} }
        try #require(sdk.liveRequests == 1)
    }
}

/// `poll(2)`, under a name the test's own `poll` variable does not hide.
private let pollDescriptors = poll
