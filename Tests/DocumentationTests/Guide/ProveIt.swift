// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import LegacyBridgeConformance
import Testing

/// The snippet has statements, so it lives in a function body. (README's `adapterConforms` runs
/// the same check as a test; this copy is only compiled.)
func guideProveIt() async {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/WrappingACallbackSDK.md
    let report = await ConformanceSuite.run(MyFetchAdapter())
    #expect(report.failures.isEmpty, "\(report.rendered)")
    // end snippet
}
