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

    /// The scenarios the adapter did not pass (failed, hung or crashed).
    public var failures: [ScenarioResult] { results.filter { !$0.passed } }

    /// The number of scenarios passed.
    public var passedCount: Int { results.count - failures.count }

    /// A multi-line, human-readable rendering: one line per scenario.
    public var rendered: String {
        let lines =
            ["\(adapter) (\(kind.rawValue)): \(passedCount)/\(results.count) passed"] + results.map(\.renderedLines)
        return lines.joined(separator: "\n")
    }
}
