// SDKThreadExecutor: an actor using it runs every call on one thread; code the SDK calls on that
// thread enters the actor with assumeIsolated; closures posted with execute run in order with the
// actor's jobs.

import ToolSupport
import Dispatch
import TestSupport
import Foundation
import Testing
@testable import LegacyBridge

/// A stand-in for a thread-affine SDK object: it remembers the thread that created it and counts
/// every call made from another thread.
///
/// Every field is an atomic, the owner too: the object is made on one thread and handed to others
/// through `SDKThreadExecutor.run`'s continuation, a hand-off ThreadSanitizer on this toolchain
/// does not always see (others report the same around continuations on recent toolchains): a
/// plain `let owner` written in init was reported as racing with its read, once, in CI on
/// 2026-12-01 (after many clean runs).
private final class OffloadAffineResource: Sendable {
    let owner = AtomicCell<Int>(Int(bitPattern: offloadThreadIdentity()))
    let calls = AtomicCell<Int>(0)
    let violations = AtomicCell<Int>(0)

    init() {}

    func call() {
        calls.add(1, ordering: .relaxed)
        if owner.load(ordering: .acquiring) != Int(bitPattern: offloadThreadIdentity()) {
            violations.add(1, ordering: .relaxed)
        }
    }
}

/// The calling thread's identity as a number (`pthread_t` is an integer on glibc, a pointer on
/// Darwin).
private func offloadThreadIdentity() -> UInt {
    #if canImport(Darwin)
    UInt(bitPattern: pthread_self())
    #else
    UInt(pthread_self())
    #endif
}

/// An actor whose executor is an SDKThreadExecutor, owning an affine resource created on its thread.
private actor OffloadAffineActor {
    let executor: SDKThreadExecutor
    let resource: OffloadAffineResource
    var count = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(executor: SDKThreadExecutor) async throws {
        self.executor = executor
        self.resource = try await executor.run { OffloadAffineResource() }
    }

    func call() -> Bool {
        resource.call()
        count += 1
        return executor.isCurrentThread
    }

    func increment() { count += 1 }
}

@Suite("Offload: SDKThreadExecutor")
struct SDKThreadExecutorTests {
    @Test("every call on an actor using the executor runs on its one thread, from any caller")
    func callsStayOnThread() async throws {
        let executor = try SDKThreadExecutor(name: "affine")
        let actor = try await OffloadAffineActor(executor: executor)
        let onThread = OneShotCounter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let result =
                        index.isMultiple(of: 4)
                        ? await Task { @MainActor in await actor.call() }.value
                        : await actor.call()
                    if result { onThread.increment() }
                }
            }
        }
        #expect(onThread.value == 64)
        #expect(actor.resource.calls.load(ordering: .relaxed) == 64)
        #expect(actor.resource.violations.load(ordering: .relaxed) == 0)
        #expect(!executor.isCurrentThread)
        #expect(executor.isIsolatingCurrentContext() == false)
        let name = try await executor.run { offloadCurrentThreadName() }
        #expect(name == "affine")
    }

    @Test("the check can fail: the same resource called from a plain actor counts violations")
    func plainActorViolates() async throws {
        // The resource is created on a thread of our own, so no cooperative thread is its owner.
        let executor = try SDKThreadExecutor()
        let resource = try await executor.run { OffloadAffineResource() }
        resource.call()  // from this task's thread, never the executor's
        #expect(resource.violations.load(ordering: .relaxed) == 1)
    }

    @Test("code the SDK runs on the executor's thread enters the actor with assumeIsolated, without a hop")
    func assumeIsolatedFromCallback() async throws {
        let executor = try SDKThreadExecutor()
        let actor = try await OffloadAffineActor(executor: executor)
        let entered = OffloadFlag()
        let offThread = OffloadFlag()
        executor.execute {
            // As an SDK callback would: plain synchronous code on the thread, outside any task.
            actor.assumeIsolated { isolated in isolated.increment() }
            entered.set()
        }
        DispatchQueue.global().async {
            if !executor.isCurrentThread && executor.isIsolatingCurrentContext() == false { offThread.set() }
        }
        #expect(await eventually { entered.isSet })
        #expect(await eventually { offThread.isSet })
        #expect(await actor.count == 1)
    }

    @Test("posted closures run in the order they were posted")
    func executeIsFIFO() async throws {
        let executor = try SDKThreadExecutor()
        let order = OneShotRecorder<Int>()
        let blocker = OffloadLatch()
        executor.execute { blocker.wait() }
        for index in 0..<20 { executor.execute { order.append(index) } }
        blocker.open()
        let last = try await executor.run { order.values.count }
        #expect(last == 20)
        #expect(order.values == Array(0..<20))
    }

    @Test("run returns the closure's value and throws its error")
    func runResults() async throws {
        let executor = try SDKThreadExecutor()
        #expect(try await executor.run { executor.isCurrentThread })
        await #expect(throws: OneShotTestError(code: 3)) {
            try await executor.run { () throws -> Int in throw OneShotTestError(code: 3) }
        }
    }

    @Test("an executor over a thread the SDK gives runs the actor's jobs through the SDK's post function")
    func postingExecutor() async throws {
        // The "SDK loop": a thread of our own with a post function and a thread check.
        let loop = try SDKThreadExecutor(name: "sdk-loop")
        let posts = OneShotCounter()
        let executor = SDKThreadExecutor(
            scheduler: SDKScheduler(
                post: { work in
                    posts.increment()
                    loop.execute(work)
                },
                isCurrent: { loop.isCurrentThread }))
        let actor = try await OffloadAffineActor(executor: executor)
        #expect(await actor.call())
        #expect(await actor.call())
        #expect(actor.resource.violations.load(ordering: .relaxed) == 0)
        #expect(posts.value >= 3)  // creation + two calls (plus hops)
        let entered = OffloadFlag()
        loop.execute {
            actor.assumeIsolated { $0.increment() }
            entered.set()
        }
        #expect(await eventually { entered.isSet })
    }

    @Test("releasing the executor ends its thread after the closures already posted have run")
    func releaseEndsThread() async throws {
        let ran = OneShotCounter()
        let blocker = OffloadLatch()
        let core: OneShotWeak
        do {
            let executor = try SDKThreadExecutor()
            core = OneShotWeak(try #require(executor.dedicatedCore))
            executor.execute {
                blocker.wait(); ran.increment()
            }
            executor.execute { ran.increment() }
        }
        blocker.open()
        #expect(await eventually { ran.value == 2 })
        #expect(await eventually { core.object == nil })
    }
}
