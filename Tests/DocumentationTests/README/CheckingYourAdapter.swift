// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
// snippet: README.md
import LegacyBridge
import LegacyBridgeConformance
import Testing

struct MyAdapter: OneShotAdapter {
    var name: String { "mine" }
    var summary: String { "withCallback around the raw callback" }
    func value(of operation: LegacyOperation, isolation: isolated (any Actor)?) async throws -> LegacyPayload {
        try await withCallback(isolation: isolation, timeout: operation.timeout) { completion in
            operation.start { completion($0) }.map(CancelHandle.init)
        }
    }
}

@Test func adapterConforms() async {
    // A patient watchdog: test runners share cores, and a real hang is still caught.
    let report = await ConformanceSuite.run(MyAdapter(), options: .init(watchdog: .seconds(60)))
    #expect(report.failures.isEmpty, "\(report.rendered)")
}
// end snippet
