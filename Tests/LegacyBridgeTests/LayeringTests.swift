// The core library is what users ship in their apps: it must not link the simulator, the C
// module or Foundation. These tests read the package's own sources, so a dependency or an import
// added by mistake fails the build's tests, not a user's app review.

import Foundation
import Testing

@Suite("Layering: the core ships no simulator, no C and no Foundation")
struct LayeringTests {
    /// The package root, found from this file's path (Tests/LegacyBridgeTests/LayeringTests.swift).
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Modules the core may import.
    static let allowedImports: Set<String> = ["Synchronization", "Dispatch", "Darwin", "Glibc", "Musl", "_Concurrency"]

    @Test("the LegacyBridge target declares no dependencies in Package.swift")
    func coreTargetHasNoDependencies() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declaration = try #require(
            Self.targetDeclaration(named: "LegacyBridge", in: manifest),
            "Package.swift has no .target(name: \"LegacyBridge\" ...)")
        #expect(!declaration.contains("dependencies"), "the core target must not depend on anything: \(declaration)")
    }

    @Test("no file of the core imports anything beyond the standard library, Synchronization and Dispatch")
    func coreImportsOnlyTheToolchainBasics() throws {
        let core = Self.root.appendingPathComponent("Sources/LegacyBridge")
        let files = try Self.swiftFiles(under: core)
        #expect(files.count > 10, "found only \(files.count) Swift files under \(core.path)")
        var offending: [String] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for module in Self.importedModules(in: text) where !Self.allowedImports.contains(module) {
                offending.append("\(file.lastPathComponent) imports \(module)")
            }
        }
        #expect(offending.isEmpty, "\(offending)")
    }

    @Test("under Sources/, only LegacySimulator/Internal/SDK.swift imports the C simulator")
    func oneSwiftFileCallsTheSimulatorsC() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        let files = try Self.swiftFiles(under: sources)
        #expect(files.count > 50, "found only \(files.count) Swift files under \(sources.path)")
        let importers = try files.filter {
            Self.importedModules(in: try String(contentsOf: $0, encoding: .utf8)).contains("CLegacySDK")
        }.map { $0.path.replacingOccurrences(of: sources.path + "/", with: "") }
        #expect(importers == ["LegacySimulator/Internal/SDK.swift"])
    }

    @Test("in Package.swift, no target but LegacySimulator and test targets (and test support) depends on C")
    func onlyTheSimulatorDependsOnC() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let names = Self.targetNames(in: manifest)
        #expect(names.contains("legacy-bridge") && names.contains("legacy-bridge-bench"), "\(names)")
        let dependents = try names.filter { name in
            let declaration = try #require(Self.targetDeclaration(named: name, in: manifest))
            // A target that lives under Tests/ is test support, like the test targets.
            return declaration.contains("dependencies") && declaration.contains("\"CLegacySDK\"")
                && !declaration.contains("path: \"Tests/")
        }
        #expect(dependents == ["LegacySimulator"])
    }

    @Test("no product exposes the benchmarks or what the two executables share")
    func toolingStaysOutOfTheProducts() throws {
        let products = try Self.products()
        #expect(products.contains("\"legacy-bridge\""), "\(products)")
        #expect(!products.contains("legacy-bridge-bench"), "a product exposes the benchmarks: \(products)")
        #expect(!products.contains("ToolSupport"), "a product exposes ToolSupport: \(products)")
    }

    @Test("no product exposes the gallery, and the conformance library holds no adapter wrong on purpose")
    func galleryStaysOutOfTheProducts() throws {
        let products = try Self.products()
        #expect(products.contains("\"LegacyBridgeConformance\""), "\(products)")
        #expect(!products.contains("LegacyBridgeGallery"), "a product exposes the gallery: \(products)")

        let wrongOnPurpose = "WRONG ON PURPOSE"
        let gallery = try Self.swiftFiles(under: Self.root.appendingPathComponent("Sources/LegacyBridgeGallery"))
        #expect(
            try gallery.contains { try String(contentsOf: $0, encoding: .utf8).contains(wrongOnPurpose) },
            "no gallery adapter found under Sources/LegacyBridgeGallery")
        let conformance = Self.root.appendingPathComponent("Sources/LegacyBridgeConformance")
        let files = try Self.swiftFiles(under: conformance)
        #expect(files.count > 10, "found only \(files.count) Swift files under \(conformance.path)")
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(!text.contains(wrongOnPurpose), "\(file.lastPathComponent) holds a gallery adapter")
        }
    }

    @Test("the conformance library's files sit in one folder per adapter kind, Engine/, Runner/ or Shared/")
    func conformanceIsGroupedByKind() throws {
        let conformance = Self.root.appendingPathComponent("Sources/LegacyBridgeConformance")
        let folders: Set<String> = [
            "OneShot", "Stream", "Blocking", "ThreadAffine", "Keyed", "SharedSubscription", "LatestWins", "Coalesced",
            "Engine",
            "Runner",
            "Shared",
        ]
        for file in try Self.swiftFiles(under: conformance) {
            let folder = file.deletingLastPathComponent().lastPathComponent
            #expect(folders.contains(folder), "\(file.path) is outside \(folders.sorted())")
        }
    }

    /// `Atomic` and `Mutex` need macOS 15 / iOS 18, above the package's floors. The Apple-platform
    /// typecheck covers LegacyBridge, where they are guarded; it cannot check targets that import
    /// Foundation or depend on C, so this scan stands in for it there.
    @Test("outside LegacyBridge, only AtomicCell names Synchronization's Atomic or Mutex (above the Apple floors)")
    func synchronizationTypesStayBehindTheirGuard() throws {
        var files: [URL] = []
        for folder in ["Sources", "Tests"] {
            files += try Self.swiftFiles(under: Self.root.appendingPathComponent(folder))
        }
        let exempt = ["Sources/LegacyBridge/", "Sources/ToolSupport/AtomicCell.swift"]
        let pattern = /\b(Atomic|Mutex)\s*</
        var offending: [String] = []
        for file in files {
            let path = file.path.replacingOccurrences(of: Self.root.path + "/", with: "")
            guard !exempt.contains(where: { path.hasPrefix($0) }) else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            if text.contains(pattern) { offending.append(path) }
        }
        #expect(files.count > 100, "found only \(files.count) Swift files")
        #expect(offending.isEmpty, "use AtomicCell (ToolSupport) or LockedValue instead: \(offending)")
        // The scan can fail (the sample is split so that this file does not match itself).
        #expect(("let x = Atomic" + "<Int>(0)").contains(pattern) && !"AtomicCell<Int>(0)".contains(pattern))
    }

    @Test("the import scan sees imports, so the check above can fail")
    func importScanFindsImports() {
        let text =
            "// import Nope\nimport Foundation\n@preconcurrency import CLegacySDK\nimport struct LegacySimulator.X\n"
        #expect(Self.importedModules(in: text) == ["Foundation", "CLegacySDK", "LegacySimulator"])
        #expect(
            Self.targetDeclaration(named: "A", in: ".target(name: \"A\", dependencies: [\"B\"]),")?.contains(
                "dependencies") == true)
    }

    /// The text of Package.swift's `products: [...]` list.
    static func products() throws -> String {
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        return try #require(bracketed(after: "products: ", in: manifest), "Package.swift has no products: [...] list")
    }

    /// The names of the manifest's library and executable targets (`.target(` and
    /// `.executableTarget(`; test targets are left out), in order.
    static func targetNames(in manifest: String) -> [String] {
        manifest.matches(of: /\.(?:target|executableTarget)\(\s*name:\s*"([^"]+)"/).map { String($0.1) }
    }

    /// The text of `.target(name: "<name>" ...)` or `.executableTarget(name: "<name>" ...)` up to its
    /// closing parenthesis.
    static func targetDeclaration(named name: String, in manifest: String) -> String? {
        let opening = try? Regex("\\.(target|executableTarget)\\(\\s*name:\\s*\"\(name)\"")
        guard let opening, let start = manifest.firstRange(of: opening) else { return nil }
        var depth = 0
        var index = start.lowerBound
        while index < manifest.endIndex {
            let character = manifest[index]
            if character == "(" { depth += 1 }
            if character == ")" {
                depth -= 1
                if depth == 0 { return String(manifest[start.lowerBound...index]) }
            }
            index = manifest.index(after: index)
        }
        return nil
    }

    /// The text of the `[...]` list that follows `label`, brackets included.
    static func bracketed(after label: String, in text: String) -> String? {
        guard let start = text.range(of: label + "[") else { return nil }
        var depth = 0
        var index = text.index(before: start.upperBound)
        while index < text.endIndex {
            if text[index] == "[" { depth += 1 }
            if text[index] == "]" {
                depth -= 1
                if depth == 0 { return String(text[text.index(before: start.upperBound)...index]) }
            }
            index = text.index(after: index)
        }
        return nil
    }

    /// Module names of every `import` line (attributes and `import struct M.X` forms included).
    static func importedModules(in text: String) -> [String] {
        text.split(separator: "\n").compactMap { line -> String? in
            var words = line.split(separator: " ").map(String.init)
            while let first = words.first, first.hasPrefix("@") { words.removeFirst() }
            guard words.first == "import", words.count >= 2 else { return nil }
            let kinds: Set<String> = ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"]
            let path = kinds.contains(words[1]) && words.count >= 3 ? words[2] : words[1]
            return String(path.split(separator: ".").first ?? "")
        }
    }

    @Test(
        "the core's test targets are optimized (-O), so their checks are #expect or precondition, never assert, which -O removes"
    )
    func noAssertInOptimizedTests() throws {
        let files =
            try Self.swiftFiles(under: Self.root.appendingPathComponent("Tests/LegacyBridgeMachineTests"))
            + Self.swiftFiles(under: Self.root.appendingPathComponent("Tests/LegacyBridgeTests"))
        #expect(files.count >= 50)
        // Spelled in two pieces, so that this file does not match itself.
        let calls = ["assert" + "(", "assertionFailure" + "("]
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1).first.map(String.init) ?? ""
                #expect(
                    !calls.contains { code.contains($0) },
                    "\(file.lastPathComponent):\(number + 1): an assert vanishes in the -O target; use #expect")
            }
        }
    }

    static func swiftFiles(under directory: URL) throws -> [URL] {
        guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
            return []
        }
        return walker.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
    }
}
