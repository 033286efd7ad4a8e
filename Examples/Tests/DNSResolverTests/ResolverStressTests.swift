import DNSResolver
import LegacyBridge
import LoopbackFixtures
import Testing

@Suite("c-ares resolver under load")
struct ResolverStressTests {
    /// What one lookup asks for and may legitimately end in.
    enum Kind: CaseIterable {
        case hostsFile, localhostV6, numericV4, numericUnspecified, answered, missing, silent
    }

    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("400 lookups with random cancels and timeouts: every context released once, every channel freed")
    func fourHundredLookups() async throws {
        let responder = try await LoopbackDNSResponder.start()
        let resolver = try Resolver(
            configuration: .init(
                servers: [responder.server], attemptTimeout: .milliseconds(150), attempts: 1))
        #expect(resolver.servers == [responder.server])
        let hostsNames = loopbackNamesInHostsFile()
        var generator = SplitMix(state: 0x5EED)
        struct Plan: Sendable {
            var index: Int
            var kind: Kind
            var host: String
            var family: ResolvedAddress.Family?
            var timeout: Duration?
            var cancelAfterYields: Int?
        }
        var plans: [Plan] = []
        for index in 0..<400 {
            let kind = Kind.allCases.randomElement(using: &generator)!
            let (host, family): (String, ResolvedAddress.Family?) =
                switch kind {
                case .hostsFile: (hostsNames.randomElement(using: &generator) ?? "localhost", .ipv4)
                case .localhostV6: ("::1", .ipv6)
                case .numericV4: ("127.0.0.\(Int.random(in: 1...254, using: &generator))", .ipv4)
                case .numericUnspecified: ("127.0.0.1", nil)
                case .answered: ("n\(index).answer.test", .ipv4)
                case .missing: ("n\(index).missing.test", nil)
                case .silent: ("n\(index).silent.test", nil)
                }
            let roll = Int.random(in: 0..<4, using: &generator)
            plans.append(
                Plan(
                    index: index, kind: kind, host: host, family: family,
                    timeout: roll == 1 ? .milliseconds(Int.random(in: 1...40, using: &generator)) : nil,
                    cancelAfterYields: roll == 2 ? Int.random(in: 0...20, using: &generator) : nil))
        }

        enum Outcome: Sendable {
            case addresses([ResolvedAddress])
            case ares(AresError)
            case cancelled, timedOut
            case other(String)
        }
        let outcomes = await withTaskGroup(of: (Plan, Outcome).self) { group in
            for plan in plans {
                group.addTask {
                    let lookup = Task {
                        try await resolver.resolve(host: plan.host, family: plan.family, timeout: plan.timeout)
                    }
                    if let yields = plan.cancelAfterYields {
                        for _ in 0..<yields { await Task.yield() }
                        lookup.cancel()
                    }
                    do {
                        return (plan, .addresses(try await lookup.value))
                    } catch let error as AresError {
                        return (plan, .ares(error))
                    } catch is CancellationError {
                        return (plan, .cancelled)
                    } catch is BridgeTimeoutError {
                        return (plan, .timedOut)
                    } catch {
                        return (plan, .other("\(error)"))
                    }
                }
            }
            var all: [(Plan, Outcome)] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.count == 400)
        var cancelled = 0
        var timedOut = 0
        var answered = 0
        for (plan, outcome) in outcomes {
            switch outcome {
            case .cancelled:
                cancelled += 1
                #expect(plan.cancelAfterYields != nil, "only a cancelled task throws CancellationError")
            case .timedOut:
                timedOut += 1
                #expect(plan.timeout != nil, "only a lookup with a timeout times out")
            case .addresses(let addresses):
                answered += 1
                switch plan.kind {
                case .hostsFile, .numericV4, .numericUnspecified, .answered:
                    #expect(
                        addresses.allSatisfy { $0.family == .ipv4 && $0.bytes.first == 127 },
                        "\(plan.host): \(addresses)")
                    #expect(!addresses.isEmpty)
                case .localhostV6:
                    #expect(addresses.map(\.description) == ["::1"])
                case .missing, .silent:
                    Issue.record("\(plan.host) resolved to \(addresses)")
                }
            case .ares(let error):
                switch plan.kind {
                case .missing: #expect(error == .notFound)
                case .silent: #expect(error == .timeout)
                default: Issue.record("\(plan.host) failed: \(error)")
                }
            case .other(let description):
                Issue.record("\(plan.host): unexpected error \(description)")
            }
        }
        await resolver.shutdown()
        let s = resolver.statistics
        // withCallback(scheduler:) skips the posted start of a lookup cancelled or timed out before it ran.
        #expect(
            s.queriesStarted >= 400 - cancelled - timedOut && s.queriesStarted <= 400,
            "every lookup that was neither cancelled nor timed out started, and none twice")
        #expect(s.contextsRetained == s.queriesStarted)
        #expect(s.contextsReleased == s.contextsRetained, "every context released")
        #expect(s.contextsFreed == s.contextsRetained, "every context deallocated")
        #expect(s.channelsDestroyed == s.channelsCreated, "every channel destroyed")
        #expect(s.repeatedCallbacks == 0)
        #expect(s.callsOffLoopThread == 0)
        #expect(
            s.answersInsideStart + s.answersFromEventLoop + s.answersInsideCancel + s.answersInsideDestroy
                == s.contextsReleased, "each context was released by exactly one answer")
        let queries = responder.queries()
        #expect(queries.allSatisfy { $0.peer == "127.0.0.1" })
        print(
            "resolve stress: \(answered) answered, \(cancelled) cancelled, \(timedOut) timed out; \(s); responder saw \(queries.count) queries"
        )
        await responder.stop()
    }
}
