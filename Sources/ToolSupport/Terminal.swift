import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where output goes and how wide it may be. Layout itself is in ``TextLayout`` (pure, testable).
///
/// Every line the tools print fits ``width``: the terminal's width when standard output is a
/// terminal, else the `COLUMNS` environment variable when it holds a number, else 80. Progress
/// bars redraw in place only on a terminal; elsewhere commands print plain progress lines.
package enum Terminal {
    /// Whether standard output is a terminal that understands redrawing a line in place.
    package static let isInteractive: Bool =
        isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"

    /// The width output must fit, read again on every call (so a resized terminal is followed).
    package static var width: Int {
        columns(
            terminal: isatty(STDOUT_FILENO) == 1 ? terminalColumns() : nil,
            environment: ProcessInfo.processInfo.environment)
    }

    /// The width rule, pure: the terminal's columns if known, else `COLUMNS`, else 80; never less
    /// than ``TextLayout/minimumWidth``.
    package static func columns(terminal: Int?, environment: [String: String]) -> Int {
        if let terminal, terminal > 0 { return max(terminal, TextLayout.minimumWidth) }
        if let text = environment["COLUMNS"], let value = Int(text), value > 0 {
            return max(value, TextLayout.minimumWidth)
        }
        return 80
    }

    /// The columns of the terminal on standard output, or `nil` when it does not say.
    private static func terminalColumns() -> Int? {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// Prints `text` (one or more lines) fitted to ``width``: lines that fit are printed as they
    /// are, longer ones are wrapped under their own text (``TextLayout/fit(_:width:)``).
    package static func write(_ text: String) {
        print(TextLayout.fit(text, width: width).joined(separator: "\n"))
    }

    /// Prints already laid-out lines.
    package static func write(lines: [String]) {
        for line in lines { print(line) }
    }

    /// Writes `text` to standard error, fitted to ``width``.
    package static func error(_ text: String) {
        let fitted = TextLayout.fit(text, width: width).joined(separator: "\n")
        FileHandle.standardError.write(Data((fitted + "\n").utf8))
    }

    /// Redraws a one-line progress bar in place (`label [#####.....]  50% suffix`), fitted to
    /// the terminal. Call only when ``isInteractive``.
    package static func progressBar(label: String, fraction: Double, suffix: String = "") {
        let line = TextLayout.progressLine(label: label, fraction: fraction, suffix: suffix, width: width)
        print("\r\u{1B}[2K\(line)", terminator: "")
        fflush(nil)
    }

    /// Erases the progress bar line, leaving the cursor at its start.
    package static func endProgress() {
        print("\r\u{1B}[2K", terminator: "")
        fflush(nil)
    }
}

/// Encodes a value as pretty, key-sorted JSON for `--json` output.
package func jsonString(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    guard let data = try? encoder.encode(value), let text = String(data: data, encoding: .utf8) else {
        return "{}"
    }
    return text
}
