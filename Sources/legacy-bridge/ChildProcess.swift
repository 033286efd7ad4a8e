import LegacyBridgeConformance

// The CLI re-runs itself (the benchmarks' memory probes) with the conformance library's child
// process support; these names keep the call sites free of that module.

/// How a child process ended.
typealias ChildOutcome = LegacyBridgeConformance.ChildOutcome

/// The path of the running executable.
func currentExecutablePath() -> String {
    LegacyBridgeConformance.currentExecutablePath()
}

/// Runs `executable` with `arguments`, waits at most `bound` (then kills it), captures its output.
func runChild(
    executable: String, arguments: [String], bound: Duration, environment: [String: String] = [:]
) throws -> ChildOutcome {
    try LegacyBridgeConformance.runChild(
        executable: executable, arguments: arguments, bound: bound, environment: environment)
}
