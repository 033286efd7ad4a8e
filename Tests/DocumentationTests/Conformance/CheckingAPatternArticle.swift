// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge
import LegacyBridgeConformance
import Testing

/// Scaffolding: the article CheckingAPattern defines this adapter in its crash-isolated example (compiled as the
/// MyAdapterConformance target); the in-process snippet below uses it.
nonisolated struct MyFetchAdapter: OneShotAdapter {
    var name: String { "my-fetch" }
    var summary: String { "withCallback around the SDK's completion callback" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

// snippet: Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc/CheckingAPattern.md
@Test func adapterConforms() async {
    // A patient watchdog: test runners share cores, and a real hang is still caught.
    let report = await ConformanceSuite.run(MyFetchAdapter(), options: .init(watchdog: .seconds(60)))
    #expect(report.failures.isEmpty, "\(report.rendered)")
}
// end snippet
