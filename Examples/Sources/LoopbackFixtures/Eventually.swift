/// How many seconds a test waits for something that must happen before it reports a hang
/// (the main package's bound). Generous on purpose: a passing run never waits for it.
public let testHangBoundSeconds = 120

/// Polls `condition` every millisecond or so until it holds or `bound` seconds pass.
///
/// A sleep here is only an upper bound while waiting for something that must happen.
///
/// - Returns: Whether the condition held in time.
public func eventually(
    bound seconds: Int = testHangBoundSeconds, _ condition: () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
