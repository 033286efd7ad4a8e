import LegacyBridgeConformance
import ToolSupport

/// The quick check's rendering of a conformance report, fitted to a width.
enum ConformanceText {
    /// `adapter (kind): 15/15 passed`, then one entry per scenario: its mark and name, then what
    /// it checks, continued under the name; a failure's detail follows, continued under itself.
    static func lines(_ report: ConformanceReport, width: Int) -> [String] {
        var lines = TextLayout.wrap(
            "\(report.adapter) (\(report.kind.rawValue)): \(report.counts)",
            width: width, hangingIndent: "  ")
        for result in report.results {
            let mark: String
            switch result.verdict {
            case .passed: mark = "ok"
            case .failed: mark = "FAIL"
            case .hung: mark = "HANG"
            case .crashed: mark = "CRASH"
            case .notChecked: mark = "SKIP"
            case .usageError: mark = "USAGE"
            }
            let head = "  " + TextLayout.pad(mark, to: 5) + " "
            lines += TextLayout.wrap(
                "\(result.name): \(result.summary)", width: width, indent: head,
                hangingIndent: String(repeating: " ", count: TextLayout.columns(head)))
            if !result.passed && !result.detail.isEmpty {
                lines += TextLayout.wrap(
                    "-> \(result.detail)", width: width, indent: "        ", hangingIndent: "           ")
            }
        }
        return lines
    }
}
