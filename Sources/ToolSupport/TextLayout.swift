// Pure text layout for both executables: every function takes the width it must fit and returns
// lines, so tests drive it at any width without a terminal (see Terminal for where the width comes
// from).
//
// A column is one Character: everything the tools print is single-width text (ASCII, dashes,
// arrows, "×"), so counting grapheme clusters is exact here. Wide (CJK) or zero-width characters
// would need a wcwidth table; the tools print none.

package enum TextLayout {
    /// The narrowest width the layout functions honour; narrower requests are treated as this.
    package static let minimumWidth = 20

    /// The number of terminal columns `text` takes.
    package static func columns(_ text: some StringProtocol) -> Int { text.count }

    /// `text` padded with spaces to `width` columns (unchanged when already as wide).
    package static func pad(_ text: String, to width: Int) -> String {
        let missing = width - columns(text)
        return missing > 0 ? text + String(repeating: " ", count: missing) : text
    }

    /// `text` cut to at most `width` columns, ending with "…" when something was cut.
    package static func truncate(_ text: String, to width: Int) -> String {
        guard columns(text) > width else { return text }
        guard width > 1 else { return String(text.prefix(max(width, 0))) }
        return String(text.prefix(width - 1)) + "…"
    }

    /// Word-wraps one paragraph.
    ///
    /// The first line starts with `indent`, the following ones with `hangingIndent` (default:
    /// `indent`). Words are split at spaces; a word longer than a whole line is cut into pieces.
    /// Runs of spaces inside the text are kept where no break happens.
    /// - Returns: At least one line, none longer than `width` (or `minimumWidth`, if larger).
    package static func wrap(_ text: String, width: Int, indent: String = "", hangingIndent: String? = nil) -> [String]
    {
        let width = max(width, minimumWidth)
        let hanging = hangingIndent ?? indent
        // An indent that leaves no room for text is reduced so that at least 8 columns remain.
        let first = String(indent.prefix(max(0, width - 8)))
        let rest = String(hanging.prefix(max(0, width - 8)))
        var lines: [String] = []
        var current = first
        var currentHasWord = false
        var pendingSpaces = ""
        for token in tokens(text) {
            if token.allSatisfy({ $0 == " " }) {
                pendingSpaces += token
                continue
            }
            var word = Substring(token)
            while !word.isEmpty {
                let separator = currentHasWord ? pendingSpaces : ""
                let room = width - columns(current) - columns(separator)
                if columns(word) <= room {
                    current += separator + word
                    currentHasWord = true
                    word = ""
                } else if currentHasWord {
                    lines.append(current)
                    current = rest
                    currentHasWord = false
                } else {
                    // A word longer than a whole line: cut it.
                    let piece = word.prefix(max(room, 1))
                    current += piece
                    word = word.dropFirst(piece.count)
                    lines.append(current)
                    current = rest
                }
            }
            pendingSpaces = ""
        }
        if currentHasWord || lines.isEmpty { lines.append(currentHasWord ? current : first) }
        return lines.map { trimTrailingSpaces($0) }
    }

    /// Fits preformatted text (help, reports) to `width`.
    ///
    /// The text is read as paragraphs: a line, followed by the lines indented to where its text
    /// continues ("under the text": the column after its leading spaces; for a two-column line
    /// such as `  --ops N    Operations to run`, the column where the second column starts; for
    /// a `USAGE:` line, the column of its first `[`).
    /// A paragraph whose lines all fit is kept exactly as it is; otherwise its words are wrapped
    /// again to `width`, continuation lines under the text.
    package static func fit(_ block: String, width: Int) -> [String] {
        let width = max(width, minimumWidth)
        let lines = block.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var result: [String] = []
        var index = 0
        while index < lines.count {
            let first = lines[index]
            let leading = first.prefix { $0 == " " }.count
            let body = String(first.dropFirst(leading))
            let hanging = leading + (usageOffset(body) ?? secondColumnOffset(body))
            var paragraph = [first]
            index += 1
            if body.isEmpty {
                result.append(first)
                continue
            }
            // Continuation lines: indented exactly to the hanging column, with text of their own.
            while index < lines.count {
                let next = lines[index]
                let nextLeading = next.prefix { $0 == " " }.count
                guard nextLeading == hanging, nextLeading < next.count else { break }
                paragraph.append(next)
                index += 1
            }
            if paragraph.allSatisfy({ columns($0) <= width }) {
                result += paragraph
                continue
            }
            let text = ([body] + paragraph.dropFirst().map { String($0.drop { $0 == " " }) }).joined(separator: " ")
            result += wrap(
                text, width: width, indent: String(repeating: " ", count: leading),
                hangingIndent: String(repeating: " ", count: hanging))
        }
        return result
    }

    /// One line of a table with a label column: `indent`, the label padded to `labelWidth`, two
    /// spaces, then `text` wrapped in the remaining columns. A label wider than its column, or a
    /// text column narrower than 24 columns, puts the text on the following lines instead,
    /// indented by `indent` + 4.
    package static func labelled(
        _ label: String, _ text: String, labelWidth: Int, width: Int, indent: String = "  "
    ) -> [String] {
        let width = max(width, minimumWidth)
        let textColumn = columns(indent) + labelWidth + 2
        if columns(label) <= labelWidth, width - textColumn >= 24 {
            let narrow = wrap(text, width: width - textColumn)
            let pad = String(repeating: " ", count: textColumn)
            return narrow.enumerated().map { index, line in
                index == 0
                    ? trimTrailingSpaces(indent + self.pad(label, to: labelWidth) + "  " + line)
                    : trimTrailingSpaces(pad + line)
            }
        }
        let deeper = indent + "    "
        return wrap(label, width: width, indent: indent, hangingIndent: deeper)
            + wrap(text, width: width, indent: deeper)
    }

    /// A progress line, `label [#####.....]  50% suffix`, at most `width` - 1 columns (a line
    /// that fills the last column makes some terminals wrap before the next redraw).
    ///
    /// The bar has 10 to 30 cells; when the line is too long the suffix is shortened first, then
    /// the label; the percentage is always shown.
    package static func progressLine(label: String, fraction: Double, suffix: String = "", width: Int) -> String {
        let budget = max(width, minimumWidth) - 1
        let clamped = fraction.isFinite ? min(max(fraction, 0), 1) : 0
        let percent = Int((clamped * 100).rounded(.down))
        let percentText = String(repeating: " ", count: 3 - String(percent).count) + "\(percent)%"
        func bar(_ cells: Int) -> String {
            let filled = Int((clamped * Double(cells)).rounded(.down))
            return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: cells - filled) + "]"
        }
        // label + " " + [bar] + " " + percent + (" " + suffix)
        let fixed = columns(percentText) + 4
        var cells = min(30, budget - fixed - columns(label) - (suffix.isEmpty ? 0 : columns(suffix) + 1))
        var label = label
        var suffix = suffix
        if cells < 10 {
            cells = 10
            var room = budget - fixed - cells
            if !suffix.isEmpty {
                let suffixRoom = room - columns(label) - 1
                suffix = suffixRoom >= 4 ? truncate(suffix, to: suffixRoom) : ""
            }
            room -= suffix.isEmpty ? 0 : columns(suffix) + 1
            label = truncate(label, to: max(room, 0))
        }
        if budget < fixed + 10 {
            // Too narrow for any bar: the label and the percentage.
            return truncate(label, to: max(budget - columns(percentText) - 1, 0)) + " " + percentText
        }
        var line = label + " " + bar(cells) + " " + percentText
        if !suffix.isEmpty { line += " " + suffix }
        return line
    }

    /// `value` with a comma between groups of three digits: 4194304 → "4,194,304".
    package static func grouped(_ value: some BinaryInteger) -> String {
        let digits = String(value.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return (value < 0 ? "-" : "") + result
    }

    /// `count` and the noun, plural unless the count is one: "1 gap", "3 gaps".
    package static func counted(_ count: some BinaryInteger, _ singular: String, _ plural: String? = nil) -> String {
        "\(grouped(count)) \(count == 1 ? singular : plural ?? singular + "s")"
    }

    // MARK: - Helpers

    /// Splits `text` into alternating runs of spaces and runs of other characters.
    private static func tokens(_ text: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        var currentIsSpace = false
        for character in text {
            let isSpace = character == " "
            if !current.isEmpty && isSpace != currentIsSpace {
                tokens.append(current)
                current = ""
            }
            current.append(character)
            currentIsSpace = isSpace
        }
        if !current.isEmpty { tokens.append(current) }
        return tokens
    }

    /// Where the second column of a two-column line starts (0 when the line has one column, or
    /// when its second column would leave too little room to be worth aligning under).
    private static func secondColumnOffset(_ body: String) -> Int {
        let characters = Array(body)
        var index = 0
        while index < characters.count {
            if characters[index] == " " {
                var end = index
                while end < characters.count && characters[end] == " " { end += 1 }
                if end - index >= 2 && end < characters.count { return end <= 40 ? end : 0 }
                index = end
            } else {
                index += 1
            }
        }
        return 0
    }

    /// For a usage line (`USAGE: tool command [--a] [--b]`), the column of its first option, so
    /// that wrapped options line up under it.
    private static func usageOffset(_ body: String) -> Int? {
        guard body.hasPrefix("USAGE:"), let bracket = body.firstIndex(of: "[") else { return nil }
        let offset = body.distance(from: body.startIndex, to: bracket)
        return offset <= 40 ? offset : nil
    }

    private static func trimTrailingSpaces(_ line: String) -> String {
        var line = line
        while line.last == " " { line.removeLast() }
        return line
    }
}
