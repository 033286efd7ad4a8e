import Foundation
import Testing

/// The Swift snippets of README.md and the DocC catalog are compiled by this test target: each
/// one is copied, unchanged, between `// snippet: <markdown file>` and `// end snippet` in a file
/// of this folder, with whatever scaffolding it needs around it (stub SDK types, a function body
/// for snippets that contain statements). These tests keep the copies and the documents equal,
/// so a snippet that no longer compiles fails the build and one that was edited fails here.
///
/// A snippet that cannot compile on purpose (an excerpt) is marked in the markdown with
/// `<!-- snippet: partial -->` on the line before its fence; keep those few.
@Suite("documentation snippets: every Swift snippet in the docs is a compiled copy")
struct SnippetSyncTests {
    /// The package root (this file is Tests/DocumentationTests/SnippetSyncTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The documents whose snippets must compile, relative to the root: the README and the DocC
    /// catalogs' articles.
    static func documents() throws -> [String] {
        var documents = ["README.md"]
        for catalog in [
            "Sources/LegacyBridge/LegacyBridge.docc", "Sources/LegacyBridgeConformance/LegacyBridgeConformance.docc",
        ] {
            documents += try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(catalog).path)
                .filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
        }
        return documents
    }

    /// Where compiled copies live: this folder, and the example targets that are copies themselves
    /// (their snippet runs as a program, checked by the conformance tests).
    static let copyFolders = ["Tests/DocumentationTests", "Sources/MyRealAdapterConformance"]

    @Test(
        "every ```swift block of README.md and the DocC guide has an identical compiled copy, and every copy has its block"
    )
    func snippetsMatchTheirCopies() throws {
        let blocks = try Self.documents().flatMap { try Snippets.blocks(inMarkdown: $0, root: Self.root) }
        let copies = try Self.copyFolders.flatMap { try Snippets.copies(inDirectory: $0, root: Self.root) }
        #expect(blocks.count >= 7, "expected the README's and the guide's snippets, found \(blocks.count)")

        var usedCopies = Set<Int>()
        for block in blocks where !block.isPartial {
            let sameDocument = copies.indices.filter { copies[$0].document == block.document }
            if let match = sameDocument.first(where: { copies[$0].text == block.text }) {
                usedCopies.insert(match)
                continue
            }
            let nearest = sameDocument.min {
                Snippets.distance(copies[$0].text, block.text) < Snippets.distance(copies[$1].text, block.text)
            }
            var message =
                "\(block.document):\(block.line) (\(block.heading)): this ```swift block has no identical copy in \(Self.copyFolders.joined(separator: " or ")). "
                + "Copy it between `// snippet: \(block.document)` and `// end snippet` in a file there and make it compile "
                + "(fix the snippet if it is the documentation that is wrong), or mark it <!-- snippet: partial --> if it is an excerpt."
            if let nearest {
                let copy = copies[nearest]
                message +=
                    "\nNearest copy: \(copy.file):\(copy.line). "
                    + Snippets.firstDifference(document: block.text, copy: copy.text)
            }
            Issue.record(Comment(rawValue: message))
        }
        for index in copies.indices where !usedCopies.contains(index) {
            let copy = copies[index]
            Issue.record(
                "\(copy.file):\(copy.line): this copy of a \(copy.document) snippet matches no ```swift block there any more; update or delete it."
            )
        }
    }

    @Test("only a few snippets are marked partial")
    func fewPartialSnippets() throws {
        let blocks = try Self.documents().flatMap { try Snippets.blocks(inMarkdown: $0, root: Self.root) }
        let partial = blocks.filter(\.isPartial)
        // The Package.swift excerpts, and the crash-isolated runner example, which is compiled as
        // the package's own MyAdapterConformance target (ReadmeExampleTests keeps it in sync).
        #expect(partial.count <= 3, "partial snippets: \(partial.map { "\($0.document):\($0.line)" })")
    }

    @Test("the extraction finds fenced blocks, their headings and partial marks, and compares modulo indentation")
    func extraction() {
        let markdown = """
            # Title
            ## Section one
            ```swift
            let a = 1
            ```
            <!-- snippet: partial -->
            ```swift
            func f() { ... }
            ```
            ```sh
            swift test
            ```
            ## Section two
                ```swift
                struct S {}
                ```
            """
        let blocks = Snippets.blocks(in: markdown, document: "X.md")
        #expect(blocks.map(\.text) == ["let a = 1", "func f() { ... }", "struct S {}"])
        #expect(blocks.map(\.isPartial) == [false, true, false])
        #expect(blocks.map(\.heading) == ["## Section one", "## Section one", "## Section two"])
        #expect(blocks.map(\.line) == [4, 8, 15])

        let source = """
            import Foundation
            func wrapper() {
                // snippet: X.md
                let a = 1
                // end snippet
            }
            // snippet: X.md
            struct S {}
            // end snippet
            """
        let copies = Snippets.copies(in: source, file: "Copy.swift")
        #expect(copies.map(\.text) == ["let a = 1", "struct S {}"])
        #expect(copies.map(\.document) == ["X.md", "X.md"])
        #expect(copies.map(\.line) == [4, 8])
        #expect(Snippets.firstDifference(document: "a\nb\nc", copy: "a\nB\nc").contains("line 2"))
    }
}

/// Extraction and comparison of snippets.
enum Snippets {
    struct Block {
        var document: String
        /// The line of the first line of code (1-based).
        var line: Int
        var heading: String
        var isPartial: Bool
        var text: String
    }

    struct Copy {
        var file: String
        var line: Int
        var document: String
        var text: String
    }

    static let partialMark = "<!-- snippet: partial -->"

    static func blocks(inMarkdown document: String, root: URL) throws -> [Block] {
        let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
        return blocks(in: text, document: document)
    }

    /// The ```swift blocks of a markdown text, in order.
    static func blocks(in markdown: String, document: String) -> [Block] {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var blocks: [Block] = []
        var heading = "top"
        var index = 0
        while index < lines.count {
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") {
                heading = trimmed
            } else if trimmed.hasPrefix("```") {
                let language = trimmed.dropFirst(3).trimmingCharacters(in: .whitespaces)
                let previous = lines[..<index].last { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
                var end = index + 1
                while end < lines.count, !lines[end].trimmingCharacters(in: .whitespaces).hasPrefix("```") { end += 1 }
                if language == "swift" {
                    blocks.append(
                        Block(
                            document: document, line: index + 2, heading: heading,
                            isPartial: previous?.trimmingCharacters(in: .whitespaces).hasPrefix("<!-- snippet: partial")
                                == true,
                            text: normalized(lines[(index + 1)..<min(end, lines.count)])))
                }
                index = end
            }
            index += 1
        }
        return blocks
    }

    static func copies(inDirectory directory: String, root: URL) throws -> [Copy] {
        let folder = root.appendingPathComponent(directory)
        guard let enumerator = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        var copies: [Copy] = []
        // This file's own examples of the markers are not copies.
        for case let path as String in enumerator
        where path.hasSuffix(".swift") && !path.hasSuffix("SnippetSyncTests.swift") {
            let text = try String(contentsOf: folder.appendingPathComponent(path), encoding: .utf8)
            copies += Snippets.copies(in: text, file: "\(directory)/\(path)")
        }
        return copies
    }

    /// The copies in a Swift source: the lines between `// snippet: <document>` and `// end snippet`.
    static func copies(in source: String, file: String) -> [Copy] {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var copies: [Copy] = []
        var index = 0
        while index < lines.count {
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// snippet: ") {
                let document = String(trimmed.dropFirst("// snippet: ".count))
                var end = index + 1
                while end < lines.count, lines[end].trimmingCharacters(in: .whitespaces) != "// end snippet" {
                    end += 1
                }
                copies.append(
                    Copy(
                        file: file, line: index + 2, document: document,
                        text: normalized(lines[(index + 1)..<min(end, lines.count)])))
                index = end
            }
            index += 1
        }
        return copies
    }

    /// The lines without their common indentation and trailing spaces, joined.
    static func normalized(_ lines: ArraySlice<String>) -> String {
        let trimmed = lines.map { line -> String in
            var line = line
            while line.last == " " || line.last == "\t" { line.removeLast() }
            return line
        }
        let indent = trimmed.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return trimmed.map { String($0.dropFirst(min(indent, $0.count))) }.joined(separator: "\n")
    }

    /// How many lines differ (a rough distance, to name the nearest copy).
    static func distance(_ a: String, _ b: String) -> Int {
        let left = a.split(separator: "\n", omittingEmptySubsequences: false)
        let right = Set(b.split(separator: "\n", omittingEmptySubsequences: false))
        return left.filter { !right.contains($0) }.count + abs(left.count - right.count)
    }

    /// Where two snippets first differ, in words.
    static func firstDifference(document: String, copy: String) -> String {
        let left = document.split(separator: "\n", omittingEmptySubsequences: false)
        let right = copy.split(separator: "\n", omittingEmptySubsequences: false)
        for index in 0..<max(left.count, right.count) {
            let l = index < left.count ? String(left[index]) : "(end of snippet)"
            let r = index < right.count ? String(right[index]) : "(end of copy)"
            if l != r {
                return "First difference at snippet line \(index + 1):\n  document: \(l)\n  copy:     \(r)"
            }
        }
        return "They are equal."
    }
}
