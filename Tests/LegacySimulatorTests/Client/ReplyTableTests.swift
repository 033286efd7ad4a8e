// The reply client's id table, driven directly: every rule of ReplyTable, no threads.

import Testing

@testable import LegacySimulator

private func reply(_ id: UInt64, attempt: Int = 1) -> RawReply {
    RawReply(id: id, status: 0, requestID: id * 10, attempt: attempt, body: [], message: "")
}

private func waiter<W>(_ action: ReplyTable<W>.ReplyAction) -> W? {
    if case .complete(let waiter) = action { return waiter }
    return nil
}

@Suite("ReplyTable: waiters by id")
struct ReplyTableTests {
    @Test("A reply completes the waiter of its id, which leaves the table; the id can be used again")
    func matches() {
        var table = ReplyTable<String>()
        let first = table.register(7, "a")
        let completed = waiter(table.reply(reply(7)))
        #expect(first && completed == "a")
        #expect(table.count == 0)
        let again = table.register(7, "b")
        #expect(again)
        #expect(table.statistics.matched == 1)
    }

    @Test("A second waiter for an id is refused and the first keeps it")
    func duplicateRegistration() {
        var table = ReplyTable<String>()
        let first = table.register(1, "a")
        let second = table.register(1, "b")
        let completed = waiter(table.reply(reply(1)))
        #expect(first && !second && completed == "a")
    }

    @Test("A reply with attempt above 1 never completes a waiter, even one waiting on its id")
    func duplicatesNeverMatch() {
        var table = ReplyTable<String>()
        _ = table.register(3, "new")
        guard case .unmatched = table.reply(reply(3, attempt: 2)) else {
            Issue.record("a duplicate completed a waiter")
            return
        }
        #expect(table.count == 1)
        #expect(table.statistics.duplicates == 1 && table.statistics.unmatched == 1)
    }

    @Test("Without an assigned-id send in flight, a reply nobody waits for is unmatched")
    func unmatched() {
        var table = ReplyTable<String>()
        guard case .unmatched = table.reply(reply(9)) else {
            Issue.record("not unmatched")
            return
        }
        #expect(table.statistics.unmatched == 1)
    }

    @Test("A reply that comes before its assigned id is known is parked and claimed by the send that returns it")
    func parkedAndClaimed() {
        var table = ReplyTable<String>()
        table.assignedSendStarted()
        guard case .parked = table.reply(reply(5)) else {
            Issue.record("not parked")
            return
        }
        guard case .claimed(let claimed) = table.assignedSendEnded(5, "w") else {
            Issue.record("not claimed")
            return
        }
        #expect(claimed.id == 5)
        #expect(table.count == 0)
        #expect(table.statistics.claimedParked == 1 && table.statistics.matched == 1)
    }

    @Test("An assigned-id send with no parked reply registers its waiter")
    func assignedRegisters() {
        var table = ReplyTable<String>()
        table.assignedSendStarted()
        guard case .registered = table.assignedSendEnded(4, "w") else {
            Issue.record("not registered")
            return
        }
        let completed = waiter(table.reply(reply(4)))
        #expect(completed == "w")
    }

    @Test("Parked replies nobody claims are counted unmatched when the last assigned-id send ends")
    func unclaimedParked() {
        var table = ReplyTable<String>()
        table.assignedSendStarted()
        table.assignedSendStarted()
        _ = table.reply(reply(1))
        _ = table.reply(reply(2))
        _ = table.assignedSendEnded(1, "a")
        #expect(table.statistics.unmatched == 0)  // one send is still in flight: 2 may be its
        guard case .failed = table.assignedSendEnded(nil, "b") else {
            Issue.record("a failed send registered")
            return
        }
        #expect(table.statistics.unmatched == 1)
        // Nothing parked is left for a later send.
        table.assignedSendStarted()
        guard case .registered = table.assignedSendEnded(2, "c") else {
            Issue.record("claimed a reply dropped before it started")
            return
        }
    }

    @Test("An assigned id that a chosen waiter holds is a collision: the chosen waiter keeps it")
    func collision() {
        var table = ReplyTable<String>()
        _ = table.register(12, "chosen")
        table.assignedSendStarted()
        guard case .collision = table.assignedSendEnded(12, "assigned") else {
            Issue.record("not a collision")
            return
        }
        let completed = waiter(table.reply(reply(12)))
        #expect(completed == "chosen")
        #expect(table.statistics.collisions == 1)
    }

    @Test("Only the first reply per id is parked")
    func firstParkedOnly() {
        var table = ReplyTable<String>()
        table.assignedSendStarted()
        _ = table.reply(reply(6))
        guard case .unmatched = table.reply(reply(6)) else {
            Issue.record("a second reply was parked")
            return
        }
        _ = table.assignedSendEnded(nil, "x")
        #expect(table.statistics.unmatched == 2)
    }

    @Test("remove hands back the waiter once; removeAll hands back every waiter and counts them")
    func removal() {
        var table = ReplyTable<String>()
        for (id, name) in [(1, "a"), (2, "b"), (3, "c")] { _ = table.register(UInt64(id), name) }
        let removed = table.remove(2)
        let removedAgain = table.remove(2)
        let all = table.removeAll()
        #expect(removed == "b" && removedAgain == nil)
        #expect(Set(all) == ["a", "c"])
        #expect(table.count == 0)
        #expect(table.statistics.failedByDisconnect == 2)
        guard case .unmatched = table.reply(reply(1)) else {
            Issue.record("a removed waiter was completed")
            return
        }
    }
}
