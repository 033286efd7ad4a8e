// The one bound every test in this module uses to tell "slow" from "hung".

/// How many seconds a test waits for something that must happen before it
/// reports a hang. Generous on purpose: under ThreadSanitizer the burst suites
/// put tens of thousands of jobs on a two-core pool, and a 20 ms timer can wait
/// its turn behind them for tens of seconds. A real hang costs a failing run
/// this long; a passing run never waits for it.
let testHangBoundSeconds = 120
