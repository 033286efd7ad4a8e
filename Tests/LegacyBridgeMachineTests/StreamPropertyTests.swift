import Foundation
import TestSupport
import Testing
@testable import LegacyBridge

// Property tests: the stream machine and the reorderer take their input from C (sequence numbers,
// yields, finishes) and from the consumer (next, cancel). A million random operation sequences,
// reproducible from a seed, are run against a plain reference model written separately from the
// implementation, and against invariants. Set LEGACY_BRIDGE_PROPERTY_SEED to replay a seed and
// LEGACY_BRIDGE_PROPERTY_SEQUENCES to run more (or fewer) sequences.

private let propertySeed: UInt64 =
    ProcessInfo.processInfo.environment["LEGACY_BRIDGE_PROPERTY_SEED"].flatMap { UInt64($0) } ?? 0x5EED_2026
/// A million in plain runs; under a sanitizer (every access instrumented, nothing here is
/// concurrent) a twentieth, so the sanitizer passes stay within CI time.
private let propertySequences: Int =
    ProcessInfo.processInfo.environment["LEGACY_BRIDGE_PROPERTY_SEQUENCES"].flatMap { Int($0) }
    ?? (testsUnderSanitizer ? 50_000 : 1_000_000)

// MARK: - Reference model of the reorderer

/// The reorderer's rules, written as plainly as possible: a dictionary of held elements, no ring,
/// no lazy storage, no fast paths.
struct ModelReorderer {
    let window: UInt64
    let policy: StreamOrdering.GapPolicy
    var next: UInt64
    var held: [UInt64: Int] = [:]
    var candidate: (sequence: UInt64, value: Int)?
    var stale = 0
    var skipped: UInt64 = 0

    var jumpLimit: UInt64 { max(window, 65_536) }
    var heldCount: Int { held.count + (candidate == nil ? 0 : 1) }

    init(window: Int, first: UInt64, policy: StreamOrdering.GapPolicy) {
        self.window = UInt64(window)
        self.policy = policy
        self.next = first
    }

    /// Distance ahead of `next`, or nil when behind.
    func ahead(_ sequence: UInt64) -> UInt64? {
        let distance = sequence &- next
        return distance < (1 << 63) ? distance : nil
    }

    mutating func releaseFrom(_ out: inout [Int]) {
        while let value = held.removeValue(forKey: next) {
            out.append(value)
            next &+= 1
        }
    }

    /// Releases every held element lowest first, counting the numbers between.
    mutating func releaseAll(_ out: inout [Int]) {
        for key in held.keys.sorted(by: { $0 &- next < $1 &- next }) {
            skipped &+= key &- next
            out.append(held.removeValue(forKey: key)!)
            next = key &+ 1
        }
    }

    mutating func put(_ value: Int, _ sequence: UInt64, _ out: inout [Int]) -> SequenceReorderer<Int>.Placement {
        if sequence == next {
            out.append(value)
            next &+= 1
            releaseFrom(&out)
            return .released
        }
        if held[sequence] != nil {
            stale += 1
            return .stale
        }
        held[sequence] = value
        return .held
    }

    mutating func insert(_ value: Int, _ sequence: UInt64, _ out: inout [Int]) -> SequenceReorderer<Int>.Placement {
        if let candidate {
            let forward = sequence &- candidate.sequence
            let backward = candidate.sequence &- sequence
            if forward == 0 {
                stale += 1
                return .stale
            }
            if forward <= window || backward < window {
                let base = forward < (1 << 63) ? candidate.sequence : sequence
                let jumpAhead = ahead(base) != nil
                if policy == .fail && (jumpAhead || !held.isEmpty) { return .rejected }
                self.candidate = nil
                releaseAll(&out)
                if jumpAhead { skipped &+= base &- next }
                next = base
                _ = put(candidate.value, candidate.sequence, &out)
                return put(value, sequence, &out)
            }
            self.candidate = nil
            stale += 1
        }
        guard let distance = ahead(sequence) else {
            if next &- sequence <= jumpLimit {
                stale += 1
                return .stale
            }
            candidate = (sequence, value)
            return .held
        }
        if distance >= window {
            if distance > jumpLimit {
                candidate = (sequence, value)
                return .held
            }
            if policy == .fail { return .rejected }
            let target = sequence &- window &+ 1
            for key in held.keys.filter({ $0 &- next < target &- next }).sorted(by: { $0 &- next < $1 &- next }) {
                skipped &+= key &- next
                out.append(held.removeValue(forKey: key)!)
                next = key &+ 1
            }
            skipped &+= target &- next
            next = target
            releaseFrom(&out)
        }
        return put(value, sequence, &out)
    }

    mutating func flush(_ out: inout [Int]) {
        releaseAll(&out)
        if let candidate {
            self.candidate = nil
            if let distance = ahead(candidate.sequence) { skipped &+= distance }
            out.append(candidate.value)
            next = candidate.sequence &+ 1
        }
    }
}

// MARK: - Tests

@Suite("Stream: property tests against a reference model")
struct StreamPropertyTests {
    /// A sequence number drawn to hit every rule: in window, just behind, the sentinel, far jumps
    /// both ways, garbage, and the 2^64 and 2^32 wraps.
    static func hostileSequence(_ random: inout SplitMix64, next: UInt64, window: Int) -> UInt64 {
        switch random.next() % 10 {
        case 0: return random.next()
        case 1: return UInt64.max
        case 2: return next &- 1 &- random.next() % 4
        case 3: return next &+ UInt64(window) &+ random.next() % 70_000
        case 4: return next &+ (1 << 40) &+ random.next() % 4
        case 5: return next &- (1 << 32) &+ random.next() % 3
        default: return next &+ random.next() % UInt64(window &+ 1)
        }
    }

    @Test("SequenceReorderer matches the reference model on a million random hostile sequences (seeded)")
    func reordererMatchesModel() async {
        // Minutes of CPU under sanitizers: run where it cannot hold a cooperative thread.
        let mismatches = await onOwnThread { () -> [String] in
            var random = SplitMix64(seed: propertySeed)
            let windows = [1, 2, 3, 8, 64, 1_024, 1_025, 100_000]
            var mismatches: [String] = []
            for index in 0..<propertySequences {
                let window = windows[Int(random.next() % UInt64(windows.count))]
                let policy: StreamOrdering.GapPolicy = random.next() % 4 == 0 ? .fail : .skip
                let first = random.next() % 3 == 0 ? UInt64.max &- random.next() % 4 : random.next() % 8
                var real = SequenceReorderer<Int>(window: window, firstSequence: first, gapPolicy: policy)
                var model = ModelReorderer(window: window, first: first, policy: policy)
                let steps = 1 + Int(random.next() % 12)
                for step in 0..<steps {
                    let sequence = Self.hostileSequence(&random, next: model.next, window: window)
                    var released: [Int] = []
                    var expected: [Int] = []
                    let placement: SequenceReorderer<Int>.Placement
                    if step == steps - 1 && random.next() % 3 == 0 {
                        real.flush { released.append($0) }
                        model.flush(&expected)
                        placement = .released
                    } else {
                        placement = real.insert(step, sequence: sequence) { released.append($0) }
                        let modelPlacement = model.insert(step, sequence, &expected)
                        if placement != modelPlacement {
                            mismatches.append(
                                "sequence \(index) step \(step): placement \(placement) != model \(modelPlacement)")
                        }
                    }
                    if released != expected || real.nextSequence != model.next || real.heldCount != model.heldCount
                        || real.droppedStale != model.stale || real.skippedSequences != model.skipped
                    {
                        mismatches.append(
                            "sequence \(index) (seed \(propertySeed)) step \(step), window \(window), \(policy), insert \(sequence): released \(released) vs \(expected), next \(real.nextSequence) vs \(model.next), held \(real.heldCount) vs \(model.heldCount), stale \(real.droppedStale) vs \(model.stale), skipped \(real.skippedSequences) vs \(model.skipped)"
                        )
                    }
                    if placement == .rejected { break }
                }
                if mismatches.count > 5 { break }
            }
            return mismatches
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5).joined(separator: "\n"))")
    }

    @Test(
        "the stream machine keeps its contract on a million random event sequences: order, drops, answers, terminal once, watermarks, control calls (seeded)"
    )
    func streamMachineInvariants() async {
        let failures = await onOwnThread { () -> [String] in
            var random = SplitMix64(seed: propertySeed ^ 0xABCD)
            let policies: [StreamBuffering] = [
                .unbounded, .bufferingOldest(1), .bufferingOldest(3), .bufferingNewest(2),
                .backpressure(low: 0, high: 1), .backpressure(low: 1, high: 3), .backpressure(low: 2, high: 5),
            ]
            let handles = [
                StreamControl(cancel: CancelHandle {}, pause: {}, resume: {}),
                StreamControl(cancel: CancelHandle {}, pause: {}),
                StreamControl(scheduler: SDKScheduler { _ in }, cancel: CancelHandle {}, pause: {}, resume: {}),
            ]
            var failures: [String] = []
            for index in 0..<propertySequences {
                let buffering = policies[Int(random.next() % UInt64(policies.count))]
                let window = random.next() % 3 == 0 ? 1 + Int(random.next() % 4) : 0
                let ordering: StreamOrdering = window > 0 ? .sequenced(window: window) : .arrival
                var machine = CallbackStreamStateMachine<Int>(buffering: buffering, ordering: ordering)
                var model = ModelReorderer(window: max(window, 1), first: 0, policy: .skip)
                var accepted: [Int] = []  // values the machine took (after reordering), in order
                var delivered: [Int] = []
                var batch = RingBuffer<Int>()
                var terminals = 0
                var cancels = 0
                var lastCall: ProducerControlStateMachine.Operation?
                var closed = false  // producer finished or consumer stopped: no more pause/resume
                var problem: String?
                var held: Int { machine.handoff.held }
                /// Makes every call handed out at once, checking alternation and what may follow a close.
                func run(_ action: ProducerControlStateMachine.Action, _ what: String) {
                    var next = action
                    while case .make(let call) = next, problem == nil {
                        switch call.operation {
                        case .pause, .resume:
                            if closed { problem = "\(what): \(call.operation) after the stream closed" }
                            if lastCall == call.operation || (lastCall == nil && call.operation == .resume) {
                                problem = "\(what): \(call.operation) does not alternate"
                            }
                            lastCall = call.operation
                        case .cancel:
                            cancels += 1
                        }
                        next = machine.callReturned(call.operation)
                    }
                }
                /// A change of the wanted state must happen at the watermarks.
                func checkWatermarks(wanted before: Bool, _ what: String) {
                    guard problem == nil, case .backpressure(let low, let high) = buffering.kind else { return }
                    let after = machine.wantsPause
                    if !before && after && held < high {
                        problem = "\(what): pause wanted with \(held) held, below high \(high)"
                    }
                    if before && !after && held > low && machine.isStreaming {
                        problem = "\(what): resume wanted with \(held) held, above low \(low)"
                    }
                }
                func checkAnswer(_ outcome: YieldOutcome, _ what: String) {
                    guard problem == nil, outcome != .terminated, outcome != .dropped else { return }
                    let wantsStop = machine.wantsPause && machine.producer.acceptsStopAnswers
                    if (outcome == .stopProducing) != wantsStop {
                        problem = "\(what): answered \(outcome) while a pause is \(wantsStop ? "" : "not ")wanted"
                    }
                    if machine.statistics.peakBuffered < held {
                        problem = "\(what): peak \(machine.statistics.peakBuffered) below held \(held)"
                    }
                    if case .backpressure(_, let high) = buffering.kind,
                        machine.statistics.peakBuffered > high + machine.statistics.acceptedWhilePaused
                    {
                        problem = "\(what): peak \(machine.statistics.peakBuffered) beyond high plus the overshoot"
                    }
                }
                func answer(_ action: CallbackStreamStateMachine<Int>.YieldAction, _ what: String) -> YieldOutcome {
                    switch action {
                    case .answer(let outcome): return outcome
                    case .evicted: return .dropped
                    case .perform(let effects, let outcome):
                        run(effects.producer, what)
                        return outcome
                    }
                }
                func perform(_ action: CallbackStreamStateMachine<Int>.EffectsAction, _ what: String) {
                    switch action {
                    case .none: break
                    case .perform(let effects): run(effects.producer, what)
                    }
                }
                var value = 0
                var arrived = false
                let steps = 1 + Int(random.next() % 16)
                for step in 0..<steps where problem == nil {
                    let streaming = machine.isStreaming
                    let wanted = machine.wantsPause
                    switch random.next() % 9 {
                    case 0, 1, 2:
                        value += 1
                        if window > 0 {
                            let sequence = model.next &+ random.next() % UInt64(window + 1)
                            if streaming {
                                var released: [Int] = []
                                _ = model.insert(value, sequence, &released)
                                accepted += released
                            }
                            let outcome = answer(machine.yield(value, sequence: sequence), "yield #\(step)")
                            checkWatermarks(wanted: wanted, "yield #\(step)")
                            checkAnswer(outcome, "yield #\(step)")
                        } else {
                            if streaming { accepted.append(value) }
                            let outcome = answer(machine.yield(value), "yield #\(step)")
                            checkWatermarks(wanted: wanted, "yield #\(step)")
                            checkAnswer(outcome, "yield #\(step)")
                        }
                    case 3:
                        guard window == 0 else { continue }
                        let values = (0..<Int(random.next() % 4)).map { offset in value + 1 + offset }
                        value += values.count
                        if streaming { accepted += values }
                        let action = values.withUnsafeBufferPointer { machine.yield(contentsOf: $0) }
                        let outcome = answer(action, "yield(contentsOf:) #\(step)")
                        checkWatermarks(wanted: wanted, "yield(contentsOf:) #\(step)")
                        checkAnswer(outcome, "yield(contentsOf:) #\(step)")
                    case 4:
                        guard !arrived else { continue }
                        arrived = true
                        let handle = random.next() % 4 == 0 ? nil : handles[Int(random.next() % 3)]
                        run(machine.handleArrived(handle), "handle #\(step)")
                    case 5:
                        if streaming, window > 0 {
                            var flushed: [Int] = []
                            model.flush(&flushed)
                            accepted += flushed
                        }
                        if streaming { closed = true }
                        perform(machine.finish(nil), "finish #\(step)")
                    case 6:
                        if streaming { closed = true }
                        perform(machine.consumerTerminated(cancelled: random.next() % 2 == 0), "stop #\(step)")
                    default:
                        while let element = batch.popFirst() { delivered.append(element) }
                        switch machine.next(into: &batch) {
                        case .batch(let resume), .suspend(let resume):
                            if let resume { run(.make(resume), "next #\(step)") }
                        case .end, .fail, .cancelled:
                            terminals += 1
                        }
                        checkWatermarks(wanted: wanted, "next #\(step)")
                    }
                }
                if !arrived { run(machine.handleArrived(handles[0]), "handle at the end") }
                while let element = batch.popFirst() { delivered.append(element) }
                if problem == nil, cancels > 1 { problem = "cancel made \(cancels) times" }
                if problem == nil, terminals > 0 {
                    var extra = RingBuffer<Int>()
                    if case .batch = machine.next(into: &extra) { problem = "a batch after the terminal" }
                }
                if problem == nil {
                    // Delivered in accepted order (a subsequence: policies and termination may drop),
                    // never twice; exactly a prefix when nothing was dropped.
                    var remaining = accepted.makeIterator()
                    for element in delivered where problem == nil {
                        var found = false
                        while !found, let candidate = remaining.next() { found = candidate == element }
                        if !found { problem = "delivered \(delivered) is not in accepted order \(accepted)" }
                    }
                    let statistics = machine.statistics
                    if problem == nil, statistics.dropped == 0, statistics.discardedAtTermination == 0,
                        delivered != Array(accepted.prefix(delivered.count))
                    {
                        problem = "nothing dropped, yet delivered \(delivered) is not a prefix of accepted \(accepted)"
                    }
                }
                if let problem {
                    failures.append(
                        "sequence \(index) (seed \(propertySeed)), \(buffering), window \(window): \(problem)")
                    if failures.count > 5 { break }
                }
            }
            return failures
        }
        #expect(failures.isEmpty, "\(failures.prefix(5).joined(separator: "\n"))")
    }
}
