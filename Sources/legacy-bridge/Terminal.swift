import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Output helpers: progress bars only when standard output is a terminal.
enum Terminal {
    static let isInteractive: Bool = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"

    /// Writes `text` to standard error.
    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Redraws a one-line progress bar in place: `label [#####.....] 50% suffix`.
    static func progressBar(label: String, fraction: Double, suffix: String = "") {
        let width = 30
        let clamped = min(max(fraction, 0), 1)
        let filled = Int((clamped * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let percent = Int((clamped * 100).rounded(.down))
        print("\r\u{1B}[2K\(label) [\(bar)] \(String(format: "%3d", percent))% \(suffix)", terminator: "")
        fflush(nil)
    }

    /// Ends a progress bar line.
    static func endProgress() {
        print("\r\u{1B}[2K", terminator: "")
        fflush(nil)
    }
}

/// Encodes a value as pretty, key-sorted JSON for `--json` output.
func jsonString(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    guard let data = try? encoder.encode(value), let text = String(data: data, encoding: .utf8) else {
        return "{}"
    }
    return text
}
