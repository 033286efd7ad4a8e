// SDKContext: a retained context is read in callbacks, released once, and freed then; in debug
// builds every misuse stops the process with a message (checked in child processes).

import ToolSupport
import Foundation
import Testing
@testable import LegacyBridge

/// Counts instances alive, to see the context's value freed.
private final class Tracked: Sendable {
    static let alive = AtomicCell<Int>(0)
    let number: Int
    init(_ number: Int) {
        self.number = number
        Self.alive.add(1, ordering: .relaxed)
    }
    deinit { Self.alive.subtract(1, ordering: .relaxed) }
}

@Suite("Support: SDKContext", .serialized)
struct SDKContextTests {
    @Test("a context read in callbacks keeps its value until the release callback, which frees it")
    func readThenRelease() {
        let before = Tracked.alive.load(ordering: .relaxed)
        let context = SDKContext.retain(Tracked(7))
        // Two callbacks (a repeated one) read it; it stays alive.
        #expect(SDKContext.value(of: context, as: Tracked.self).number == 7)
        #expect(SDKContext.value(of: context, as: Tracked.self).number == 7)
        #expect(Tracked.alive.load(ordering: .relaxed) == before + 1)
        SDKContext.release(context, as: Tracked.self)
        #expect(Tracked.alive.load(ordering: .relaxed) == before)
    }

    @Test("a count of its own sees its contexts only: up at each retain, down at each release or take")
    func countedContexts() {
        let mine = SDKContextCount()
        let other = SDKContextCount()
        let first = SDKContext.retain(Tracked(1), countedIn: mine)
        let second = SDKContext.retain(Tracked(2), countedIn: mine)
        let elsewhere = SDKContext.retain(Tracked(3), countedIn: other)
        let uncounted = SDKContext.retain(Tracked(4))
        #expect(mine.live == 2 && other.live == 1)
        #expect(SDKContext.value(of: first, as: Tracked.self).number == 1)
        #expect(mine.live == 2, "reading a context does not end it")
        SDKContext.release(first, as: Tracked.self)
        #expect(mine.live == 1)
        #expect(SDKContext.take(second, as: Tracked.self).number == 2)
        #expect(mine.live == 0 && other.live == 1)
        SDKContext.release(uncounted, as: Tracked.self)
        #expect(mine.live == 0 && other.live == 1, "a context retained without a count moves none")
        SDKContext.release(elsewhere, as: Tracked.self)
        #expect(other.live == 0)
    }

    @Test("take returns the value and releases the context in one step")
    func take() {
        let before = Tracked.alive.load(ordering: .relaxed)
        let context = SDKContext.retain(Tracked(9))
        let value = SDKContext.take(context, as: Tracked.self)
        #expect(value.number == 9)
        #expect(Tracked.alive.load(ordering: .relaxed) == before + 1, "the caller's reference keeps it")
        _ = consume value
        #expect(Tracked.alive.load(ordering: .relaxed) == before)
    }

    @Test("a context holds any Sendable value, for example a Completion, and hands it back from another thread")
    func completionAcrossThreads() async throws {
        let value = try await withCallback { (completion: Completion<Int>) in
            let context = SDKContext.retain(completion)
            let raw = UInt(bitPattern: context)  // as a C SDK would carry it to its thread
            Thread.detachNewThread {
                let context = UnsafeRawPointer(bitPattern: raw)
                SDKContext.value(of: context, as: Completion<Int>.self).succeed(42)
                SDKContext.release(context, as: Completion<Int>.self)
            }
            return nil
        }
        #expect(value == 42)
    }

    #if DEBUG
    @Test("debug builds count what is retained and not released")
    func registryCounts() {
        // Each context on its own: tests running beside this one retain and release theirs. The
        // test keeps each box alive itself, so no other test's context can take its address.
        let first = SDKContext.retain(1)
        let second = SDKContext.retain("two")
        let keptFirst = Unmanaged<SDKContextBox<Int>>.fromOpaque(first).retain()
        let keptSecond = Unmanaged<SDKContextBox<String>>.fromOpaque(second).retain()
        defer {
            keptFirst.release()
            keptSecond.release()
        }
        #expect(SDKContextRegistry.isLive(first) && SDKContextRegistry.isLive(second))
        SDKContext.release(first, as: Int.self)
        #expect(!SDKContextRegistry.isLive(first) && SDKContextRegistry.isLive(second))
        _ = SDKContext.take(second, as: String.self)
        #expect(!SDKContextRegistry.isLive(first) && !SDKContextRegistry.isLive(second))
    }

    @Test("debug builds stop with a message on a use after release, a second release, a wrong type, a nil context")
    func misuseStops() async {
        await #expect(processExitsWith: .failure) {
            let context = SDKContext.retain(1)
            SDKContext.release(context, as: Int.self)
            _ = SDKContext.value(of: context, as: Int.self)
        }
        await #expect(processExitsWith: .failure) {
            let context = SDKContext.retain(1)
            SDKContext.release(context, as: Int.self)
            SDKContext.release(context, as: Int.self)
        }
        await #expect(processExitsWith: .failure) {
            let context = SDKContext.retain(1)
            _ = SDKContext.value(of: context, as: String.self)
        }
        await #expect(processExitsWith: .failure) {
            _ = SDKContext.value(of: nil, as: Int.self)
        }
    }
    #endif
}
