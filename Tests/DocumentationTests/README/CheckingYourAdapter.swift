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
    let report = await ConformanceSuite.run(MyAdapter())
    #expect(report.failures.isEmpty, "\(report.rendered)")
}
// end snippet
