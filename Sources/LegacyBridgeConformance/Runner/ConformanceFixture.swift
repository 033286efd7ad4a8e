import LegacyBridge

/// Your adapter over your SDK, as the conformance suite checks it: ``OneShotFixture``,
/// ``StreamFixture``, ``BlockingFixture``, ``SharedSubscriptionFixture``, and ``KeyedCallFixture``
/// (``KeyedFixture``, ``LatestWinsFixture``, ``CoalescedFixture``).
///
/// One `ConformanceSuite.run(_:options:)` takes any of them, and ``conformanceSubject`` makes one
/// a subject for ``ConformanceRunner``. Scenarios a fixture gives
/// the suite no means for are reported as not checked, with the reason.
public protocol ConformanceFixture: Sendable {
    /// The fixture as a subject the suite runs, expected to pass every scenario it makes possible.
    var conformanceSubject: ConformanceSubject { get }
}

extension OneShotFixture: ConformanceFixture {
    /// The fixture as a subject the suite runs, expected to pass every scenario it makes possible.
    public var conformanceSubject: ConformanceSubject {
        subject(.oneShot, "one-shot", OneShotFixtureScenarios<Value>.all)
    }
}

extension BlockingFixture: ConformanceFixture {
    /// The fixture as a subject the suite runs, expected to pass every scenario it makes possible.
    public var conformanceSubject: ConformanceSubject {
        subject(.blocking, "blocking-call", BlockingFixtureScenarios<Value>.all)
    }
}

@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension StreamFixture: ConformanceFixture {
    /// The fixture as a subject the suite runs, expected to pass every scenario it makes possible.
    public var conformanceSubject: ConformanceSubject {
        subject(.stream, "stream", StreamFixtureScenarios<Element>.all)
    }
}

@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension SharedSubscriptionFixture: ConformanceFixture {
    /// The fixture as a subject the suite runs, expected to pass every scenario it makes possible.
    public var conformanceSubject: ConformanceSubject {
        subject(.shared, "shared-subscription", SharedSubscriptionFixtureScenarios<Element>.all)
    }
}

extension KeyedCallFixture: ConformanceFixture {
    /// The kind's scenarios: keyed requests, latest-wins or coalesced calls.
    public var conformanceSubject: ConformanceSubject {
        switch Kind.self {
        case is KeyedCallKind.LatestWins.Type:
            return (retyped() as LatestWinsFixture<Value>).subject(
                .latestWins, "latest-wins", LatestWinsFixtureScenarios<Value>.all)
        case is KeyedCallKind.Coalesced.Type:
            return (retyped() as CoalescedFixture<Value>).subject(
                .coalesced, "coalesced-call", CoalescedFixtureScenarios<Value>.all)
        default:
            return (retyped() as KeyedFixture<Value>).subject(.keyed, "keyed-request", KeyedFixtureScenarios<Value>.all)
        }
    }

    /// The same fixture under another kind.
    func retyped<Other>() -> KeyedCallFixture<Value, Other> {
        KeyedCallFixture<Value, Other>(
            common: common, call: call, answer: answer, token: token, failing: failing, strayReply: strayReply)
    }
}

// Where the scenarios read a fixture's declarations (`threading`, `liveResources`, ...).
extension OneShotFixture: DeclaresCommon {}
extension BlockingFixture: DeclaresCommon {}
extension KeyedCallFixture: DeclaresCommon {}
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension StreamFixture: DeclaresCommon {}
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension SharedSubscriptionFixture: DeclaresCommon {}

extension DeclaresCommon where Self: Sendable {
    /// This fixture as a subject: `scenarios` run over it, as "a `what` adapter over its SDK".
    func subject(
        _ kind: AdapterKind, _ what: String, _ scenarios: [Scenario<Self, FixtureContext>]
    ) -> ConformanceSubject {
        ConformanceSubject(
            fixture: self, name: common.name, kind: kind, summary: "a \(what) adapter over its SDK (fixture)",
            common: common, scenarios: scenarios)
    }
}
