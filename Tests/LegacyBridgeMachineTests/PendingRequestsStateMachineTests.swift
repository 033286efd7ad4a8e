// Drives PendingRequestsStateMachine through every sequence of its events up to a length, with two
// ids, caller-assigned registrations, SDK-assigned starts (returning, throwing, overlapping),
// replies, failAll, timeouts and callers coming back. A model of the contract, written from the
// rules rather than from the implementation, says what each event must do; each request's
// one-shot gate is simulated (first outcome wins, a losing value goes to onDiscard). After every
// step the table must agree with the model, and after every sequence the world is run to rest and
// must be empty, with every value returned or discarded exactly once.

import Testing
import TestSupport
@testable import LegacyBridge

private struct Ticket: Equatable {
    let request: Int
}

private typealias Machine = PendingRequestsStateMachine<Int, Int, Ticket>

private let idA = 1
private let idB = 2

private enum Event: CaseIterable, CustomStringConvertible {
    /// A caller registers id A (or B) before its SDK call.
    case registerA
    case registerB
    /// An SDK-assigned request begins its start.
    case beginStart
    /// The oldest running start returns id A (or B); the newest returns A.
    case returnOldestA
    case returnOldestB
    case returnNewestA
    /// The oldest running start throws.
    case throwOldest
    /// The SDK replies for A with a fresh value, for B with a failure.
    case replyA
    case replyB
    /// The connection drops.
    case failAll
    /// The oldest waiting request times out (its gate decides).
    case timeOutOldest
    /// The oldest request whose outcome is decided comes back to its caller.
    case returnCaller
    /// The oldest timed-out request's cancel handle runs: it asks the table, then calls the SDK.
    case cancelBegins
    /// The oldest running SDK cancel returns.
    case cancelReturns

    var description: String {
        switch self {
        case .registerA: "registerA"
        case .registerB: "registerB"
        case .beginStart: "beginStart"
        case .returnOldestA: "returnOldestA"
        case .returnOldestB: "returnOldestB"
        case .returnNewestA: "returnNewestA"
        case .throwOldest: "throwOldest"
        case .replyA: "replyA"
        case .replyB: "replyB"
        case .failAll: "failAll"
        case .timeOutOldest: "timeOutOldest"
        case .returnCaller: "returnCaller"
        case .cancelBegins: "cancelBegins"
        case .cancelReturns: "cancelReturns"
        }
    }
}

/// One request as its caller and its gate see it.
private struct Request {
    var id: Int?
    var token: UInt64?
    /// Caller-assigned and registered, or SDK-assigned and registered when its start returned.
    var registered = false
    var startRunning = false
    /// The gate's outcome once decided.
    var outcome: Machine.Outcome?
    var value: Int?
    var exited = false
    /// How often the table handed this request out (to a reply, failAll or a takeover).
    var handedOut = 0
}

private struct ParkedReply {
    let value: Int?
    let arrival: Int
    /// The starts running when it arrived: only they may claim it.
    let runningAtArrival: Set<UInt64>
}

private struct World {
    var machine: Machine
    let checkClassification: Bool
    var requests: [Request] = []
    /// The model: which request owns each id in the table.
    var owner: [Int: Int] = [:]
    /// Running SDK-assigned starts: token → request.
    var running: [UInt64: Int] = [:]
    /// The step of the failAll that marked a running start.
    var failedAt: [UInt64: Int] = [:]
    var parked: [Int: ParkedReply] = [:]
    var lastEnding: [Int: Machine.Ending] = [:]
    var step = 0
    var nextValue = 100
    var successValuesSent: [Int] = []
    var returned: [Int] = []
    var discarded: [Int] = []
    var expected = Machine.Counters()
    var lostAtGate = 0
    /// Requests whose timeout decided them: their cancel handle is due, oldest first.
    var cancelsDue: [Int] = []
    /// SDK cancels running, by id: the request each one cancels.
    var cancelsRunning: [Int: Int] = [:]
    /// Requests whose SDK cancel ran to its end (or began): a cancel runs at most once.
    var cancelBegun: Set<Int> = []
    var cancelDone: Set<Int> = []
    /// Requests whose cancel ran while the SDK gave their id to a newer request: that is the
    /// SDK's own race, and the table forgets the running cancel.
    var forgottenCancels: Set<Int> = []

    /// A table without an SDK cancel: an abandoned id stays reserved until its late reply.
    let reserves: Bool
    /// Ids whose caller left while the SDK may still act on them, by the request they belong to:
    /// until its cancel ended or its late reply came (with an SDK cancel), or until its late
    /// reply (without one). A takeover by the SDK and failAll end a hold.
    var held: [Int: Int] = [:]

    init(rememberedEndings: Int = 128, reserves: Bool = false) {
        self.machine = Machine(rememberedEndings: rememberedEndings, reservesAbandonedIDs: reserves)
        self.checkClassification = rememberedEndings >= 64
        self.reserves = reserves
    }

    // MARK: The simulated gate

    /// First outcome wins; a losing value goes to onDiscard.
    mutating func decide(_ request: Int, _ outcome: Machine.Outcome, value: Int? = nil) -> Bool {
        if requests[request].outcome == nil {
            requests[request].outcome = outcome
            requests[request].value = value
            return true
        }
        if let value { discarded.append(value) }
        return false
    }

    // MARK: Events

    /// Applies `event`; returns a problem, or nil. Events that cannot happen now do nothing.
    mutating func apply(_ event: Event) -> String? {
        step += 1
        switch event {
        case .registerA: return register(idA)
        case .registerB: return register(idB)
        case .beginStart:
            let request = requests.count
            let token = machine.beginStart()
            requests.append(Request(token: token, startRunning: true))
            running[token] = request
        case .returnOldestA:
            guard let token = running.keys.min() else { return nil }
            return startReturned(token, idA)
        case .returnOldestB:
            guard let token = running.keys.min() else { return nil }
            return startReturned(token, idB)
        case .returnNewestA:
            guard let token = running.keys.max() else { return nil }
            return startReturned(token, idA)
        case .throwOldest:
            guard let token = running.keys.min() else { return nil }
            return startThrew(token)
        case .replyA: return reply(idA, success: true)
        case .replyB: return reply(idB, success: false)
        case .failAll: return failAll()
        case .timeOutOldest:
            guard
                let request = requests.indices.first(where: {
                    requests[$0].registered && requests[$0].outcome == nil && !requests[$0].exited
                })
            else { return nil }
            // Without an SDK cancel (reserves), a timeout calls no cancel.
            if decide(request, .timedOut) && !reserves { cancelsDue.append(request) }
        case .cancelBegins:
            guard !cancelsDue.isEmpty else { return nil }
            return cancelBegins(cancelsDue.removeFirst())
        case .cancelReturns:
            guard let id = cancelsRunning.keys.min() else { return nil }
            return cancelReturns(id)
        case .returnCaller:
            guard
                let request = requests.indices.first(where: {
                    requests[$0].outcome != nil && !requests[$0].exited && !requests[$0].startRunning
                })
            else { return nil }
            return callerReturned(request)
        }
        return check()
    }

    /// The cancel of `request` (timed out) asks the table before calling the SDK: only while the
    /// id still belongs to it, waiting or held, and only once.
    mutating func cancelBegins(_ request: Int) -> String? {
        guard let id = requests[request].id, let token = requests[request].token else {
            return "a timed-out request has no id"
        }
        let mayCancel = (owner[id] == request || held[id] == request) && !cancelBegun.contains(request)
        let allowed = machine.cancelBegins(id, token: token)
        if !allowed { expected.skippedCancels += 1 }
        if allowed && !mayCancel {
            let holder = owner[id].map { "request \($0)" } ?? "a request the SDK is done with"
            return
                "request \(request)'s cancel of id \(id) was made though the id is not its own: it would stop \(holder)"
        }
        if !allowed && mayCancel {
            return "request \(request)'s cancel of id \(id) was skipped though the id is its own"
        }
        if allowed {
            cancelsRunning[id] = request
            cancelBegun.insert(request)
        }
        return check()
    }

    mutating func cancelReturns(_ id: Int) -> String? {
        let request = cancelsRunning.removeValue(forKey: id)!
        machine.cancelEnded(id, token: requests[request].token!)
        cancelDone.insert(request)
        // The SDK is done with an abandoned request once its cancel returned.
        if held[id] == request { held[id] = nil }
        return check()
    }

    mutating func register(_ id: Int) -> String? {
        let request = requests.count
        requests.append(Request(id: id))
        let inUse = owner[id] != nil || held[id] != nil
        switch machine.register(id, entry: Ticket(request: request)) {
        case .refused:
            if !inUse { return "register(\(id)) refused a free id" }
            expected.refused += 1
            requests[request].exited = true  // throws RequestIDError; never reaches the table again
        case .registered(let token):
            if inUse { return "register(\(id)) accepted an id in use" }
            requests[request].token = token
            requests[request].registered = true
            owner[id] = request
            lastEnding[id] = nil
        }
        return check()
    }

    mutating func startReturned(_ token: UInt64, _ id: Int) -> String? {
        let request = running[token]!
        // The SDK gave the id to a new request: it is done with the abandoned one.
        if let holder = held[id], cancelsRunning[id] == holder { forgottenCancels.insert(holder) }
        held[id] = nil
        let parkedReply = parked.removeValue(forKey: id)
        let failure = failedAt[token]
        let claims =
            parkedReply.map { reply in
                reply.runningAtArrival.contains(token) && (failure.map { $0 > reply.arrival } ?? true)
            } ?? false
        var expectedDiscards: [Int] = []
        if let parkedReply, !claims {
            classify(id)
            if let value = parkedReply.value { expectedDiscards.append(value) }
        }
        let formerOwner = owner[id]

        let action = machine.startReturned(token, id: id, entry: Ticket(request: request))
        running[token] = nil
        failedAt[token] = nil
        requests[request].startRunning = false
        requests[request].id = id

        switch action.outcome {
        case .claimed(let reply):
            guard claims, let parkedReply else { return "start \(token) claimed a reply it must not claim" }
            if (try? reply.get()) != parkedReply.value { return "start \(token) claimed the wrong reply" }
            lastEnding[id] = .replied
            if let value = parkedReply.value {
                _ = decide(request, .succeeded, value: value)
            } else {
                _ = decide(request, .failed)
            }
        case .failed:
            if claims { return "start \(token) failed instead of claiming its parked reply" }
            if failure == nil { return "start \(token) failed without a failAll" }
            lastEnding[id] = .abandoned
            _ = decide(request, .failed)
        case .registered:
            if claims { return "start \(token) registered instead of claiming its parked reply" }
            if failure != nil { return "start \(token) registered after a failAll failed it" }
            if action.takenOver.map(\.request) != formerOwner {
                return
                    "start \(token) took over \(String(describing: action.takenOver)), expected \(String(describing: formerOwner))"
            }
            if let formerOwner {
                if cancelsRunning[id] == formerOwner { forgottenCancels.insert(formerOwner) }
                requests[formerOwner].handedOut += 1
                _ = decide(formerOwner, .failed)
            }
            owner[id] = request
            requests[request].registered = true
            lastEnding[id] = nil
        }
        expectedDiscards += evict()
        if action.discarded.sorted() != expectedDiscards.sorted() {
            return "start \(token) discarded \(action.discarded), expected \(expectedDiscards)"
        }
        discarded += action.discarded
        return check()
    }

    mutating func startThrew(_ token: UInt64) -> String? {
        let request = running[token]!
        let values = machine.startThrew(token)
        running[token] = nil
        failedAt[token] = nil
        requests[request].startRunning = false
        _ = decide(request, .failed)
        let expectedDiscards = evict()
        if values.sorted() != expectedDiscards.sorted() {
            return "a throwing start discarded \(values), expected \(expectedDiscards)"
        }
        discarded += values
        return check()
    }

    /// Parked replies no running start can claim any more are dropped.
    mutating func evict() -> [Int] {
        var values: [Int] = []
        for (id, reply) in parked.sorted(by: { $0.key < $1.key })
        where reply.runningAtArrival.isDisjoint(with: running.keys) {
            parked[id] = nil
            classify(id)
            if let value = reply.value { values.append(value) }
        }
        return values
    }

    mutating func classify(_ id: Int) {
        switch lastEnding[id] {
        case .replied: expected.duplicateReplies += 1
        case .abandoned: expected.lateReplies += 1
        case nil: expected.unknownReplies += 1
        }
    }

    mutating func reply(_ id: Int, success: Bool) -> String? {
        let value = nextValue
        nextValue += 1
        if success { successValuesSent.append(value) }
        let reply: Result<Int, any Error> = success ? .success(value) : .failure(TestFailure())
        let action = machine.complete(id, with: reply)
        if let request = owner[id] {
            guard case .deliver(let ticket) = action, ticket.request == request else {
                return "reply(\(id)) should go to request \(request), got \(action)"
            }
            owner[id] = nil
            // A cancel that runs keeps the id until it returns.
            if cancelsRunning[id] == request { held[id] = request }
            requests[request].handedOut += 1
            lastEnding[id] = .replied
            let won = decide(request, success ? .succeeded : .failed, value: success ? value : nil)
            if !won {
                lostAtGate += 1
                machine.deliveredReplyLost()
            }
        } else if let holder = held[id] {
            guard case .dropped(.late, let dropped) = action else {
                return "reply(\(id)) for a held abandoned id should be dropped as late, got \(action)"
            }
            // The SDK is done with the request; a cancel that runs keeps the id until it returns.
            if cancelsRunning[id] != holder { held[id] = nil }
            expected.lateReplies += 1
            lastEnding[id] = .replied
            if let dropped { discarded.append(dropped) }
        } else if !running.isEmpty {
            if parked[id] != nil {
                guard case .dropped(.duplicate, let dropped) = action else {
                    return "a second reply(\(id)) while one is parked should be a duplicate, got \(action)"
                }
                expected.duplicateReplies += 1
                if let dropped { discarded.append(dropped) }
            } else {
                guard case .parked = action else { return "reply(\(id)) during a start should park, got \(action)" }
                parked[id] = ParkedReply(
                    value: success ? value : nil, arrival: step, runningAtArrival: Set(running.keys))
            }
        } else {
            guard case .dropped(_, let dropped) = action else {
                return "reply(\(id)) for no request should be dropped, got \(action)"
            }
            classify(id)
            if let dropped { discarded.append(dropped) }
        }
        return check()
    }

    mutating func failAll() -> String? {
        for token in running.keys where failedAt[token] == nil {
            failedAt[token] = step
        }
        let entries = machine.failAll(TestFailure())
        if Set(entries.map(\.request)) != Set(owner.values) || entries.count != owner.count {
            return "failAll took \(entries.map(\.request)), expected \(owner.values.sorted())"
        }
        // Holds end, except those of cancels that run now: they keep the id until they return.
        held = held.filter { cancelsRunning[$0.key] == $0.value }
        for (id, request) in owner {
            if cancelsRunning[id] == request { held[id] = request }
            lastEnding[id] = .abandoned
            requests[request].handedOut += 1
            _ = decide(request, .failed)
        }
        owner = [:]
        return check()
    }

    mutating func callerReturned(_ request: Int) -> String? {
        let outcome = requests[request].outcome!
        requests[request].exited = true
        switch outcome {
        case .succeeded: expected.succeeded += 1
        case .failed: expected.failed += 1
        case .timedOut: expected.timedOut += 1
        case .cancelled: expected.cancelled += 1
        }
        if let value = requests[request].value { returned.append(value) }
        let registration: (id: Int, token: UInt64)? =
            requests[request].registered ? (requests[request].id!, requests[request].token!) : nil
        let removed = machine.requestEnded(registration, outcome: outcome)
        let id = requests[request].id
        let ownsID = id.map { owner[$0] == request } ?? false
        if ownsID != (removed != nil) || (removed.map { $0.request != request } ?? false) {
            return
                "request \(request) came back: removed \(String(describing: removed)), expected it \(ownsID ? "" : "not ")"
        }
        if ownsID, let id {
            owner[id] = nil
            lastEnding[id] = .abandoned
            if outcome == .cancelled || outcome == .timedOut {
                if reserves || !cancelDone.contains(request) { held[id] = request }
            }
        }
        return check()
    }

    // MARK: Invariants

    func check() -> String? {
        for id in [idA, idB] {
            let cancelling = cancelsRunning[id].flatMap { forgottenCancels.contains($0) ? nil : requests[$0].token }
            if machine.cancelRunning(id) != cancelling {
                return "id \(id): the running cancel disagrees with the model"
            }
            if machine.holder(of: id) != held[id].flatMap({ requests[$0].token }) {
                return
                    "id \(id) is held by \(String(describing: machine.holder(of: id))), expected request \(String(describing: held[id]))"
            }
            let expectedToken = owner[id].flatMap { requests[$0].token }
            if machine.token(of: id) != expectedToken {
                return
                    "id \(id) is pending under \(String(describing: machine.token(of: id))), expected \(String(describing: expectedToken))"
            }
            if machine.isParked(id) != (parked[id] != nil) { return "id \(id): parked disagrees with the model" }
            if checkClassification && machine.ending(of: id) != lastEnding[id] {
                return
                    "id \(id) remembered as \(String(describing: machine.ending(of: id))), expected \(String(describing: lastEnding[id]))"
            }
        }
        if machine.startingCount != running.count { return "starting \(machine.startingCount) != \(running.count)" }
        if running.isEmpty && machine.parkedCount != 0 { return "a reply stays parked while no start runs" }
        if machine.parkedOrderBacklog > 16 { return "the parked queue grows: \(machine.parkedOrderBacklog)" }
        if let twice = requests.firstIndex(where: { $0.handedOut > 1 }) { return "request \(twice) handed out twice" }
        for request in requests where request.exited && request.registered {
            if let id = request.id, machine.token(of: id) == request.token {
                return "request \(request) came back but stays in the table"
            }
        }
        if checkClassification {
            var counters = machine.counters
            counters.lateReplies -= lostAtGate
            if counters != expected { return "counters \(machine.counters), expected \(expected) + \(lostAtGate) lost" }
        }
        return nil
    }

    /// Lets every start end, every waiting request time out and every caller come back; then
    /// nothing may be left and every success value must have reached exactly one place.
    mutating func runToRest() -> String? {
        while let token = running.keys.min() {
            if let problem = startThrew(token) { return problem }
        }
        for request in requests.indices where requests[request].outcome == nil && !requests[request].exited {
            if decide(request, .timedOut) { cancelsDue.append(request) }
        }
        for request in requests.indices where !requests[request].exited {
            if let problem = callerReturned(request) { return problem }
        }
        while !cancelsDue.isEmpty {
            if let problem = cancelBegins(cancelsDue.removeFirst()) { return problem }
        }
        while let id = cancelsRunning.keys.min() {
            if let problem = cancelReturns(id) { return problem }
        }
        if !reserves && machine.heldCount != 0 { return "ids stay held after every cancel returned: \(held)" }
        // The late replies of abandoned ids come: each frees its id.
        for id in held.keys.sorted() {
            if let problem = reply(id, success: true) { return problem }
        }
        if machine.heldCount != 0 { return "ids stay reserved after their late replies" }
        if machine.pendingCount != 0 || machine.startingCount != 0 || machine.parkedCount != 0 {
            return
                "left in the table: \(machine.pendingCount) pending, \(machine.startingCount) starting, \(machine.parkedCount) parked"
        }
        if machine.parkedOrderBacklog != 0 { return "the parked queue keeps \(machine.parkedOrderBacklog) entries" }
        if (returned + discarded).sorted() != successValuesSent.sorted() {
            return "values returned \(returned) + discarded \(discarded) != sent \(successValuesSent)"
        }
        return nil
    }
}

private struct TestFailure: Error {}

/// Every sequence of `Event.allCases` up to `length`, depth first; checks each prefix run to rest.
private func exploreAll(length: Int, reserves: Bool = false) -> (checked: Int, problems: [String]) {
    // Without an SDK cancel there is no cancel event.
    let events = Event.allCases.filter { !reserves || ($0 != .cancelBegins && $0 != .cancelReturns) }
    var checked = 0
    var problems: [String] = []
    func explore(_ world: World, _ prefix: [Event]) {
        var rest = world
        checked += 1
        if let problem = rest.runToRest() {
            problems.append("\(prefix) then run to rest: \(problem)")
            return
        }
        guard prefix.count < length, problems.count < 8 else { return }
        for event in events {
            var next = world
            if let problem = next.apply(event) {
                problems.append("\(prefix + [event]): \(problem)")
                continue
            }
            explore(next, prefix + [event])
        }
    }
    explore(World(reserves: reserves), [])
    return (checked, problems)
}

@Suite(
    "Keyed: PendingRequests state machine, every ordering",
    .disabled(
        if: testsUnderSanitizer,
        "a pure value on one thread: nothing for a sanitizer to see; the plain run checks every ordering")
)
struct PendingRequestsStateMachineTests {
    @Test(
        "every sequence of registrations, starts, replies, failAll, timeouts, cancels by id and returns up to length 5 keeps the contract"
    )
    func everyOrdering() async {
        // Seconds of CPU: on a thread of its own, so the cooperative pool stays free for the
        // tests that wait with a bound.
        await onOwnThread {
            let (checked, problems) = exploreAll(length: 5)
            #expect(problems.isEmpty, "\(problems.prefix(8).joined(separator: "\n"))")
            let events = Event.allCases.count
            #expect(
                checked
                    == (0...5).reduce(0) { total, length in
                        total + (0..<length).reduce(1) { product, _ in product * events }
                    })
        }
    }

    @Test(
        "without an SDK cancel, every sequence up to length 4 keeps the contract, and an abandoned id stays reserved until its late reply"
    )
    func everyOrderingReservingAbandonedIDs() async {
        await onOwnThread {
            let (checked, problems) = exploreAll(length: 4, reserves: true)
            #expect(problems.isEmpty, "\(problems.prefix(8).joined(separator: "\n"))")
            #expect(checked == 1 + 12 + 144 + 1_728 + 20_736)
        }
    }

    @Test(
        "without an SDK cancel, a caller-assigned id whose caller left is refused until its late reply, which is counted late and frees it"
    )
    func abandonedIDStaysReserved() {
        var machine = Machine(rememberedEndings: 8, reservesAbandonedIDs: true)
        guard case .registered(let token) = machine.register(idA, entry: Ticket(request: 0)) else {
            Issue.record("a free id was refused")
            return
        }
        #expect(machine.requestEnded((idA, token), outcome: .cancelled) == Ticket(request: 0))
        #expect(machine.awaitingLateReplyCount == 1)
        guard case .refused = machine.register(idA, entry: Ticket(request: 1)) else {
            Issue.record("the id of a request whose reply is still to come was given to a newer request")
            return
        }
        guard case .dropped(.late, discard: 42?) = machine.complete(idA, with: .success(42)) else {
            Issue.record("the late reply was not dropped as late")
            return
        }
        #expect(machine.awaitingLateReplyCount == 0 && machine.counters.lateReplies == 1)
        guard case .registered = machine.register(idA, entry: Ticket(request: 2)) else {
            Issue.record("the id stayed reserved after its late reply")
            return
        }
    }

    @Test("random sequences of 40 events, with a memory of 2 ids so that old ids are forgotten (supplement)")
    func randomLongSequences() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        var problems: [String] = []
        for _ in 0..<2_000 where problems.isEmpty {
            let small = Bool.random(using: &generator)
            var world = World(rememberedEndings: small ? 2 : 128, reserves: Bool.random(using: &generator))
            var sequence: [Event] = []
            for _ in 0..<40 {
                let event = Event.allCases.randomElement(using: &generator)!
                sequence.append(event)
                if let problem = world.apply(event) {
                    problems.append("seed \(seed), \(sequence): \(problem)")
                    break
                }
            }
            if problems.isEmpty, let problem = world.runToRest() {
                problems.append("seed \(seed), \(sequence) then run to rest: \(problem)")
            }
        }
        #expect(problems.isEmpty, "\(problems.first ?? "")")
    }

    @Test("a reply that arrives while an SDK-assigned start runs is claimed by the start that returns its id")
    func parkedReplyIsClaimed() {
        var machine = Machine(rememberedEndings: 8)
        let token = machine.beginStart()
        guard case .parked = machine.complete(7, with: .success(70)) else {
            Issue.record("a reply during a start must be parked")
            return
        }
        let action = machine.startReturned(token, id: 7, entry: Ticket(request: 0))
        guard case .claimed(.success(70)) = action.outcome else {
            Issue.record("the start that returns 7 must claim the parked reply, got \(action.outcome)")
            return
        }
        #expect(machine.parkedCount == 0 && machine.pendingCount == 0)
    }

    @Test("a reply parked for an id no start returns is counted once the last start that could claim it ends")
    func unclaimedParkedReplyIsDropped() {
        var machine = Machine(rememberedEndings: 8)
        let first = machine.beginStart()
        _ = machine.complete(9, with: .success(90))
        let second = machine.beginStart()
        #expect(machine.startReturned(second, id: 1, entry: Ticket(request: 1)).discarded.isEmpty)
        #expect(machine.parkedCount == 1, "the first start may still return 9")
        #expect(machine.startThrew(first) == [90])
        #expect(machine.parkedCount == 0)
        #expect(machine.counters.unknownReplies == 1)
    }

    @Test("the memory of ended ids is bounded and forgets the oldest first")
    func recentEndingsAreBounded() {
        var endings = RecentEndings<Int, Machine.Ending>(capacity: 3)
        for id in 1...5 { endings.record(id, .replied) }
        #expect(endings.count == 3)
        #expect(endings.ending(of: 1) == nil && endings.ending(of: 2) == nil)
        #expect(endings.ending(of: 5) == .replied)
        endings.record(3, .abandoned)  // re-recorded: its old slot is stale, not a second entry
        endings.record(6, .replied)
        endings.record(7, .replied)
        #expect(endings.ending(of: 3) == .abandoned)
        #expect(endings.count == 3)
    }
}

/// The three events that race once a caller left (timed out) with its request's cancel queued on
/// the SDK's thread: that cancel runs, a newer request takes the same id, the old request's late
/// reply comes; and the old caller coming back. Every order of them, for caller-assigned and for
/// SDK-assigned ids (whose newer start begins, and returns the id, in two steps).
@Suite("Keyed: a stale cancel, a newer request on the same id and a late reply, in every order")
struct PendingRequestsStaleCancelTests {
    private enum Step: Hashable, CustomStringConvertible {
        case cancelRuns, oldCallerBack, lateReply, newerRegisters, newerBegins, newerReturns

        var description: String {
            switch self {
            case .cancelRuns: "cancelRuns"
            case .oldCallerBack: "oldCallerBack"
            case .lateReply: "lateReply"
            case .newerRegisters: "newerRegisters"
            case .newerBegins: "newerBegins"
            case .newerReturns: "newerReturns"
            }
        }
    }

    private static func permutations(_ steps: [Step]) -> [[Step]] {
        guard steps.count > 1 else { return [steps] }
        return steps.indices.flatMap { index -> [[Step]] in
            var rest = steps
            let first = rest.remove(at: index)
            return permutations(rest).map { [first] + $0 }
        }
    }

    /// Runs one order; returns a problem or nil.
    private static func run(_ order: [Step]) -> String? {
        let id = 1
        var machine = Machine(rememberedEndings: 16)
        // The old request: registered (caller-assigned or returned by its start), then timed out.
        let oldToken: UInt64
        if order.contains(.newerRegisters) {
            guard case .registered(let token) = machine.register(id, entry: Ticket(request: 0)) else {
                return "the old request was refused"
            }
            oldToken = token
        } else {
            let token = machine.beginStart()
            guard case .registered = machine.startReturned(token, id: id, entry: Ticket(request: 0)).outcome else {
                return "the old request's start did not register"
            }
            oldToken = token
        }
        var newerToken: UInt64?
        var newerRegistered = false
        var newerRefused = false
        var sdkDone = false  // the SDK is done with the old request: its cancel ran or its late reply came
        var lateReplyCame = false
        var cancelRan = false
        var oldCallerBack = false
        for step in order {
            switch step {
            case .cancelRuns:
                let allowed = machine.cancelBegins(id, token: oldToken)
                if allowed && newerRegistered {
                    return "\(order): the old cancel was made while the newer request held the id"
                }
                if allowed && newerToken != nil && lateReplyCame {
                    return
                        "\(order): the old cancel was made while the newer start ran after the SDK was done with the old request: it may stop the newer one"
                }
                if !allowed && !sdkDone && !newerRegistered {
                    return "\(order): the old cancel was skipped though the id was still the old request's"
                }
                if allowed {
                    machine.cancelEnded(id, token: oldToken)
                    sdkDone = true
                    cancelRan = true
                }
            case .oldCallerBack:
                _ = machine.requestEnded((id, oldToken), outcome: .timedOut)
                oldCallerBack = true
            case .lateReply:
                // An SDK done with the old request (its cancel ran, or it gave the id out again)
                // sends no reply for it any more: a reply now is the newer request's.
                if sdkDone { continue }
                lateReplyCame = true
                switch machine.complete(id, with: .success(10)) {
                case .deliver(let ticket):
                    if ticket.request != 0 {
                        return "\(order): the old request's late reply completed the newer request"
                    }
                    machine.deliveredReplyLost()
                case .parked:
                    return "\(order): the old request's late reply was parked for the newer start to claim"
                case .dropped: break
                }
                sdkDone = true
            case .newerRegisters:
                // Free once the late reply took the old request, or once its cancel ran and its
                // caller is back.
                let free = lateReplyCame || (cancelRan && oldCallerBack)
                switch machine.register(id, entry: Ticket(request: 1)) {
                case .registered(let token):
                    if !free { return "\(order): the id was given to a newer request before the SDK was done with it" }
                    newerToken = token
                    newerRegistered = true
                case .refused:
                    if free { return "\(order): the id was refused after the SDK was done with the old request" }
                    newerRefused = true
                }
            case .newerBegins:
                newerToken = machine.beginStart()
            case .newerReturns:
                let action = machine.startReturned(newerToken!, id: id, entry: Ticket(request: 1))
                guard case .registered = action.outcome else { return "\(order): the newer start did not register" }
                newerRegistered = true
                // The SDK gave the id out again: it is done with the old request.
                sdkDone = true
            }
        }
        if newerRefused {
            // Refused while the id was the old request's: once the SDK is done, it is free.
            guard case .registered(let token) = machine.register(id, entry: Ticket(request: 1)) else {
                return "\(order): the id stays refused after the SDK was done with the old request"
            }
            newerToken = token
            newerRegistered = true
        }
        guard newerRegistered, let newerToken else { return "\(order): the newer request never got the id" }
        guard case .deliver(let ticket) = machine.complete(id, with: .success(20)), ticket.request == 1 else {
            return "\(order): the newer request's reply did not reach it"
        }
        _ = machine.requestEnded((id, newerToken), outcome: .succeeded)
        if machine.heldCount != 0 || machine.pendingCount != 0 || machine.startingCount != 0 {
            return "\(order): left in the table: \(machine.heldCount) held, \(machine.pendingCount) pending"
        }
        return nil
    }

    @Test(
        "caller-assigned ids: every order of the old cancel, the newer registration, the late reply and the old caller's return"
    )
    func callerAssigned() {
        let orders = Self.permutations([.cancelRuns, .oldCallerBack, .lateReply, .newerRegisters])
        #expect(orders.count == 24)
        let problems = orders.compactMap(Self.run)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test(
        "SDK-assigned ids: every order of the old cancel, the newer start's begin and return, the late reply and the old caller's return"
    )
    func sdkAssigned() {
        let withReply = Self.permutations([.cancelRuns, .oldCallerBack, .lateReply, .newerBegins, .newerReturns])
        // And an SDK that dropped the old request: no late reply at all.
        let withoutReply = Self.permutations([.cancelRuns, .oldCallerBack, .newerBegins, .newerReturns])
        let orders = (withReply + withoutReply).filter {
            $0.firstIndex(of: .newerBegins)! < $0.firstIndex(of: .newerReturns)!
        }
        #expect(orders.count == 60 + 12)
        let problems = orders.compactMap(Self.run)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}
