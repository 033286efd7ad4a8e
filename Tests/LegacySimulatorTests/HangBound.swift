// The one bound every test in this module uses to tell "slow" from "hung".

/// How many seconds a test waits for something that must happen before it
/// reports a hang: 120, or 600 under ThreadSanitizer. Generous on purpose:
/// under ThreadSanitizer the burst suites put tens of thousands of jobs on a
/// two-core pool, and a task that suspends a few times waits its turn behind
/// them each time (CI saw a 300-event download consumer take over 120 s). A
/// real hang costs a failing run this long; a passing run never waits for it.
let testHangBoundSeconds = clientTestUnderThreadSanitizer ? 600 : 120
