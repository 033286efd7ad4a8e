// The README's real-adapter example, compiled: a shipped adapter with the conformance probe, and
// the fixture that points the suite at it over its SDK, each scenario run in a child process.
import LegacyBridge
import LegacyBridgeConformance

// snippet: README.md
/// Your shipped adapter, with the probe threaded through: `.off` in production.
func loadContents(
    _ path: String, from sdk: FileSDK, probe: CallProbe<[UInt8]> = .off,
    isolation: isolated (any Actor)? = #isolation
) async throws -> [UInt8] {
    try await withCallback(isolation: isolation) { completion in
        try probe.start {
            let deliver = probe.callback { completion($0) }
            let request = try sdk.load(path) { bytes, error in
                deliver(error.map { .failure($0) } ?? .success(bytes ?? []))
            }
            return CancelHandle { probe.cancel { request.cancel() } }
        }
    }
}

let sdk = try FileSDK()  // your SDK, or a test double of it
await ConformanceRunner.main([
    .oneShot(
        OneShotFixture(
            name: "load-contents",
            succeeding: { probe in try await loadContents("/etc/hostname", from: sdk, probe: probe) },
            failing: { probe in try await loadContents("/no/such/file", from: sdk, probe: probe) },
            hanging: .init(
                start: { probe in try await loadContents(FileSDK.heldPath, from: sdk, probe: probe) },
                release: { sdk.releaseHeld() }),
            liveResources: { sdk.openRequests }))
])
// end snippet
