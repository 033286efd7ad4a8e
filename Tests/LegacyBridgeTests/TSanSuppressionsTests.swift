import Foundation
import TestSupport
import Testing

@Suite("ThreadSanitizer: the test process carries the same suppressions as CI's file")
struct TSanSuppressionsTests {
    @Test(
        "the rules compiled into the tests (so that `swift test --sanitize=thread` runs as typed) are the rules of .ci/tsan-suppressions.txt"
    )
    func embeddedRulesMatchTheFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".ci/tsan-suppressions.txt")
        let rules = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        #expect(!rules.isEmpty, "no rule in \(file.path)")
        #expect(embeddedThreadSanitizerSuppressions == rules)
    }
}
