import TSanDefaults

/// The ThreadSanitizer suppressions this test process carries itself (`Tests/TSanDefaults`), one
/// rule per line.
public var embeddedThreadSanitizerSuppressions: [String] {
    String(cString: legacy_bridge_tsan_suppressions()).split(separator: "\n").map(String.init)
}
