// swift-tools-version:6.0
import PackageDescription

/// An app target's default since Swift 6.2 (`.defaultIsolation(MainActor.self)`, which needs tools
/// 6.2): every declaration is `@MainActor` unless it says otherwise. The documentation's snippets
/// are compiled and run that way, because that is where most users copy them.
#if compiler(>=6.2)
let mainActorByDefault: [SwiftSetting] = [.unsafeFlags(["-default-isolation", "MainActor"])]
#else
let mainActorByDefault: [SwiftSetting] = []
#endif

let package = Package(
    name: "legacy-bridge",
    // The floors `Duration` sets for the public API (README "Platforms"; CI type-checks each one).
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "LegacyBridge", targets: ["LegacyBridge"]),
        .library(name: "LegacySimulator", targets: ["LegacySimulator"]),
        .library(name: "LegacyBridgeConformance", targets: ["LegacyBridgeConformance"]),
        .executable(name: "legacy-bridge", targets: ["legacy-bridge"]),
    ],
    targets: [
        // The simulated hostile SDK: plain C11 + pthreads.
        .target(
            name: "CLegacySDK",
            path: "CLegacySDK",
            cSettings: [
                .define("_GNU_SOURCE"),
                .define("LSDK_DEBUG", .when(configuration: .debug)),
            ],
            linkerSettings: [.linkedLibrary("pthread", .when(platforms: [.linux]))]
        ),
        // The core users ship: no C target, no simulator, no Foundation (LayeringTests checks it).
        .target(name: "LegacyBridge"),
        // The simulated SDK's Swift face (LegacyClient and friends), over the C simulator.
        .target(name: "LegacySimulator", dependencies: ["LegacyBridge", "CLegacySDK"]),
        // The conformance suite users import to check their own adapters. Its runner parses its
        // command line and fits its output with ToolSupport, as the executables do.
        .target(name: "LegacyBridgeConformance", dependencies: ["LegacyBridge", "LegacySimulator", "ToolSupport"]),
        // The bad-adapter gallery, wrong on purpose: no product exposes it; the CLI and tests run it.
        .target(name: "LegacyBridgeGallery", dependencies: ["LegacyBridge", "LegacyBridgeConformance"]),
        // What the executables and the conformance runner share: argument parsing, terminal width,
        // text layout, exit codes, and atomics at the package's platform floors (AtomicCell).
        .target(name: "ToolSupport", dependencies: ["LegacyBridge"]),
        .executableTarget(
            name: "legacy-bridge",
            dependencies: [
                "LegacyBridge", "LegacySimulator", "LegacyBridgeConformance", "LegacyBridgeGallery", "ToolSupport",
            ]
        ),
        // The benchmarks (swift run -c release legacy-bridge-bench): no product exposes them, and
        // they reach the C simulator only through LegacySimulator.
        .executableTarget(
            name: "legacy-bridge-bench",
            dependencies: ["LegacyBridge", "LegacySimulator", "LegacyBridgeConformance", "ToolSupport"]
        ),
        // The README's "Checking your own adapter" example, compiled (a test keeps the two in sync).
        .executableTarget(name: "MyAdapterConformance", dependencies: ["LegacyBridge", "LegacyBridgeConformance"]),
        // The README's real-adapter example (an adapter with the probe, over its SDK), compiled and run by a test.
        .executableTarget(name: "MyRealAdapterConformance", dependencies: ["LegacyBridge", "LegacyBridgeConformance"]),
        // What the test targets share: the hang bound, polling, a seeded generator.
        // It also checks, at the end of every test process, that no test left a client, thread, pool
        // or loop running (RunEndCheck.swift, installed by RunEndHook).
        .target(
            name: "TestSupport", dependencies: ["TSanDefaults", "RunEndHook", "LegacyBridge", "CLegacySDK"],
            path: "Tests/TestSupport"),
        .target(name: "RunEndHook", path: "Tests/RunEndHook"),
        // The test process's own ThreadSanitizer suppressions, so that `swift test --sanitize=thread`
        // runs as typed (the list and its reason: .ci/tsan-suppressions.txt).
        .target(name: "TSanDefaults", path: "Tests/TSanDefaults"),
        .testTarget(name: "CLegacySDKTests", dependencies: ["CLegacySDK", "TestSupport"]),
        // Both core test targets are optimized even in debug builds. The state machines' exhaustive
        // orderings and property tests (LegacyBridgeMachineTests) run a model and a generator per
        // step over machines that are mostly @inlinable, which -O specializes there: about half
        // the CPU of a quiet `swift test`, the same sequences checked. The thread tests
        // (LegacyBridgeTests) are optimized too: unoptimized under ThreadSanitizer on a busy
        // machine, their run took over 11 minutes and gates timed out. With -O the standard
        // library's collections are inlined into the test code, where ThreadSanitizer sees their
        // reads but not the reference counts that order them: a test must not read a copy of a
        // locked collection that its lock's owner may still be growing (copy it inside the lock).
        // (A test target's flags never reach a package that depends on this one.)
        .testTarget(
            name: "LegacyBridgeTests", dependencies: ["LegacyBridge", "TestSupport", "ToolSupport"],
            swiftSettings: [.unsafeFlags(["-O"])]
        ),
        .testTarget(
            name: "LegacyBridgeMachineTests", dependencies: ["LegacyBridge", "TestSupport"],
            swiftSettings: [.unsafeFlags(["-O"])]
        ),
        .testTarget(
            name: "LegacySimulatorTests",
            dependencies: ["LegacySimulator", "LegacyBridge", "CLegacySDK", "TestSupport", "ToolSupport"]
        ),
        .testTarget(
            name: "LegacyBridgeConformanceTests",
            dependencies: [
                "LegacyBridgeConformance", "LegacyBridgeGallery", "LegacyBridge", "legacy-bridge",
                "legacy-bridge-bench",
                "ToolSupport", "MyAdapterConformance", "MyRealAdapterConformance",
            ]
        ),
        // The Swift snippets of README.md and the DocC guide, compiled; a test keeps them in sync.
        // The stand-in SDKs the documentation's quick starts run over: plain (not @Sendable) callbacks
        // from CLegacySDK's threads, in the Swift 5 language mode of most SDK modules, so that the
        // runtime checks the isolation of the closures handed to them, as it does in an app.
        .target(
            name: "DocumentationSDK", dependencies: ["LegacyBridge", "CLegacySDK", "TestSupport"],
            path: "Tests/DocumentationSDK",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "DocumentationTests",
            dependencies: ["LegacyBridge", "LegacyBridgeConformance", "CLegacySDK", "DocumentationSDK", "TestSupport"],
            swiftSettings: mainActorByDefault
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Settings applied to every Swift target in one place.
for target in package.targets where target.name != "CLegacySDK" {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny")
        ]
}
