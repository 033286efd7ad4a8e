/// How one scenario ended.
public enum ScenarioVerdict: String, Sendable, Hashable, Codable {
    /// The adapter met the contract the scenario checks.
    case passed
    /// The adapter broke the contract; `detail` says how.
    case failed
    /// The scenario did not finish within its watchdog bound.
    case hung
    /// The process running the scenario died (a trap, a signal); only reported by crash-isolated runs.
    case crashed
    /// The scenario could not run with what the fixture provides; `detail` says what it needs.
    /// Not a failure of the adapter.
    case notChecked
    /// The fixture contradicted its own declaration (a hanging call that returned before it was
    /// released, say); `detail` says how to fix it. A verdict about the fixture, not the adapter.
    case usageError
}

/// The result of running one scenario against one adapter.
public struct ScenarioResult: Sendable, Hashable, Codable {
    /// The scenario's name, e.g. `repeated-callback-success-then-error`.
    public var name: String
    /// One line saying what the scenario checks.
    public var summary: String
    /// How it ended.
    public var verdict: ScenarioVerdict
    /// What happened, in words a person can act on. Empty when there is nothing to add.
    public var detail: String

    /// Whether the adapter passed this scenario.
    public var passed: Bool { verdict == .passed }

    /// Whether the adapter failed this scenario: it failed, hung or crashed. A scenario that was not
    /// checked, or whose fixture was misused, is not a failure.
    public var isFailure: Bool {
        switch verdict {
        case .failed, .hung, .crashed: return true
        case .passed, .notChecked, .usageError: return false
        }
    }

    /// Creates a result.
    /// - Parameters:
    ///   - name: The scenario's name.
    ///   - summary: One line saying what the scenario checks.
    ///   - verdict: How it ended.
    ///   - detail: What happened.
    public init(name: String, summary: String, verdict: ScenarioVerdict, detail: String) {
        self.name = name
        self.summary = summary
        self.verdict = verdict
        self.detail = detail
    }
}

/// The kind of adapter a report is about.
public enum AdapterKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// Bridges a one-shot callback to an async value.
    case oneShot
    /// Bridges a multi-event callback to an async sequence.
    case stream
    /// Wraps an SDK that must only be called from one thread.
    case threadAffine
    /// Bridges a blocking call to an async call that does not block its caller.
    case blocking
    /// Turns requests answered through one global reply callback, matched by id, into async calls.
    case keyed
    /// Lets many consumers follow one SDK listener, each with a sequence of its own.
    case shared
    /// Lets a new call supersede the one in flight, whose late result never lands.
    case latestWins
    /// Lets concurrent callers with the same key share one SDK call.
    case coalesced
}

/// Everything one conformance run found out about one adapter.
public struct ConformanceReport: Sendable, Hashable, Codable {
    /// The adapter's name.
    public var adapter: String
    /// Whether it is a one-shot or a stream adapter.
    public var kind: AdapterKind
    /// One result per scenario, in the order they ran.
    public var results: [ScenarioResult]

    /// Creates a report.
    /// - Parameters:
    ///   - adapter: The adapter's name.
    ///   - kind: One-shot or stream.
    ///   - results: One result per scenario.
    public init(adapter: String, kind: AdapterKind, results: [ScenarioResult]) {
        self.adapter = adapter
        self.kind = kind
        self.results = results
    }

    /// The scenarios the adapter did not pass: failed, hung or crashed.
    public var failures: [ScenarioResult] { results.filter(\.isFailure) }

    /// The scenarios that could not run with what the fixture provides.
    public var notChecked: [ScenarioResult] { results.filter { $0.verdict == .notChecked } }

    /// The scenarios whose fixture contradicted its own declaration.
    public var usageErrors: [ScenarioResult] { results.filter { $0.verdict == .usageError } }

    /// The number of scenarios passed.
    public var passedCount: Int { results.filter(\.passed).count }

    /// `12/16 passed`, with the scenarios not checked and the usage errors when there are any.
    public var counts: String {
        var text = "\(passedCount)/\(results.count) passed"
        if !notChecked.isEmpty { text += ", \(notChecked.count) not checked" }
        if !usageErrors.isEmpty { text += ", \(usageErrors.count) usage error\(usageErrors.count == 1 ? "" : "s")" }
        return text
    }

    /// A multi-line, human-readable rendering: one line per scenario.
    public var rendered: String {
        let lines = ["\(adapter) (\(kind.rawValue)): \(counts)"] + results.map(\.renderedLines)
        return lines.joined(separator: "\n")
    }
}
