// LegacyAffineClient over a thread-affine simulated SDK: every SDK call comes from the owner
// thread, cancellation included, for both owners; and the SDK's violation counter can fail.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing

import LegacyBridge
@testable import LegacySimulator

@Suite("LegacyAffineClient: every SDK call on the owner thread")
struct ClientAffineTests {
    static let owners: [LegacyAffineClient.Owner] = [.dedicatedThread, .sdkLoopThread]

    @Test("fetches from many tasks and the main actor all succeed with no affinity violation", arguments: owners)
    func fetchesStayOnOwner(owner: LegacyAffineClient.Owner) async throws {
        let client = try await LegacyAffineClient(owner: owner, workerThreads: 2, seed: 7)
        let behaviors: [SimulatedBehavior] =
            owner == .sdkLoopThread
            ? [.wellBehaved, .synchronous, .wellBehaved.with { $0.delivery = .loop }]
            : [.wellBehaved, .synchronous, .freshThread]
        let succeeded = AtomicCell<Int>(0)
        await withTaskGroup(of: Bool.self) { group in
            for index in 0..<48 {
                let behavior = behaviors[index % behaviors.count]
                group.addTask {
                    let request = FetchRequest(path: "/affine/\(index)", responseSize: 8)
                    if index.isMultiple(of: 5) {
                        return await Task { @MainActor in (try? await client.fetch(request, behavior: behavior)) != nil
                        }.value
                    }
                    return (try? await client.fetch(request, behavior: behavior)) != nil
                }
            }
            for await ok in group where ok { succeeded.add(1, ordering: .relaxed) }
        }
        #expect(succeeded.load(ordering: .relaxed) == 48)
        #expect(try await client.sessionToken() == nil)
        let counters = client.counters
        #expect(counters.operationsStarted == 48)
        #expect(counters.affinityViolations == 0)
        if owner == .sdkLoopThread { #expect(counters.callbacksLoop > 0) }
    }

    @Test("cancelling a fetch posts the SDK's cancel to the owner thread", arguments: owners)
    func cancelOnOwner(owner: LegacyAffineClient.Owner) async throws {
        let client = try await LegacyAffineClient(owner: owner, workerThreads: 1)
        let call = ClientTestCall { try await client.fetch(FetchRequest(path: "/never"), behavior: .neverCompletes) }
        #expect(await eventually { client.counters.operationsStarted == 1 })
        call.cancel()
        #expect(await call.outcome() == .cancelled)
        #expect(await eventually { client.counters.cancels == 1 })
        #expect(client.counters.affinityViolations == 0)
    }

    @Test("a callback on the SDK's loop thread enters the actor with assumeIsolated")
    func loopCallbackEntersActor() async throws {
        let client = try await LegacyAffineClient(owner: .sdkLoopThread)
        let entered = LockedBox(false)
        #expect(!client.isOwnerThread)
        try client.sdk.post {
            // Plain code the SDK runs on its loop thread, outside any task.
            let token = client.assumeIsolated { isolated in try? isolated.sessionToken() }
            entered.withLock { $0 = token == nil }
        }
        #expect(await eventually { entered.withLock { $0 } })
        #expect(client.counters.affinityViolations == 0)
    }

    @Test("the check can fail: a covered call from another thread is counted as a violation", arguments: owners)
    func violationIsCounted(owner: LegacyAffineClient.Owner) async throws {
        let client = try await LegacyAffineClient(owner: owner)
        _ = try client.sdk.sessionToken()  // from this test's thread, not the owner
        #expect(client.counters.affinityViolations == 1)
    }
}
