// swift-tools-version:6.0
import PackageDescription

// Six real C libraries wrapped with LegacyBridge: c-ares (one-shot DNS lookups through
// `withCallback(scheduler:)`), libcurl (streaming downloads), libmosquitto (MQTT publishes matched
// by message id, shared subscriptions), hiredis (Redis commands matched by request id, pub/sub)
// and libpq (a PostgreSQL pool, PQcancel, LISTEN/NOTIFY), each on an `SDKLoop`, and SQLite
// (blocking queries on an `OffloadPool`, interrupted on cancel).
// Kept out of the main package on purpose: building and testing it needs libc-ares-dev,
// libcurl4-openssl-dev, libsqlite3-dev, libmosquitto-dev, libhiredis-dev, libpq-dev and
// pkg-config (and python3, mosquitto, redis-server and postgresql for the tests' servers on
// 127.0.0.1), which the main package must not require.
//
// The main package is a path dependency, and SwiftPM names a path dependency after its directory:
// the repository must not be checked out in a directory called "examples" (any case), or its
// identity clashes with this package's own. `.ci/run` says so when that happens.
let package = Package(
    name: "legacy-bridge-examples",
    products: [
        .library(name: "DNSResolver", targets: ["DNSResolver"]),
        .library(name: "HTTPDownloader", targets: ["HTTPDownloader"]),
        .library(name: "SQLiteDatabase", targets: ["SQLiteDatabase"]),
        .library(name: "MQTTClient", targets: ["MQTTClient"]),
        .library(name: "RedisClient", targets: ["RedisClient"]),
        .library(name: "PostgresClient", targets: ["PostgresClient"]),
    ],
    dependencies: [
        .package(name: "legacy-bridge", path: ".."),
    ],
    targets: [
        .systemLibrary(
            name: "CAres",
            path: "Sources/CAres",
            pkgConfig: "libcares",
            providers: [.apt(["libc-ares-dev"]), .brew(["c-ares"])]
        ),
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // No pkgConfig: hiredis's .pc file adds -D_FILE_OFFSET_BITS=64, which SwiftPM refuses with
        // a warning. The shim includes <hiredis/…> from the compiler's default include path (with
        // Homebrew, build with -Xcc -I/opt/homebrew/include -Xlinker -L/opt/homebrew/lib).
        .systemLibrary(
            name: "CHiredis",
            path: "Sources/CHiredis",
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]
        ),
        .systemLibrary(
            name: "CLibpq",
            path: "Sources/CLibpq",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .systemLibrary(
            name: "CMosquitto",
            path: "Sources/CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"]), .brew(["mosquitto"])]
        ),
        // c-ares and libmosquitto wait on the library's descriptor loop (SDKLoop(name:)); libcurl
        // runs its own loop function on an SDKLoop driver.
        .target(name: "DNSResolver", dependencies: ["CAres", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        .target(name: "HTTPDownloader", dependencies: ["CCurl", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        // Blocking queries on an OffloadPool, one connection per pool thread.
        .target(name: "SQLiteDatabase", dependencies: ["CSQLite", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        // libmosquitto on an SDKLoop: QoS 1 publishes awaited by message id (PendingRequests),
        // one broker subscription per topic shared by its consumers (SharedSubscription).
        .target(name: "MQTTClient", dependencies: ["CMosquitto", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        // hiredis's async API on the descriptor loop, driven by its event hooks: commands matched
        // by request id (PendingRequests), one SUBSCRIBE per channel (SharedSubscription).
        .target(name: "RedisClient", dependencies: ["CHiredis", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        // libpq's non-blocking API on the descriptor loop: a pool of connections, PQcancel on an
        // OffloadPool thread, LISTEN/NOTIFY through SharedSubscription.
        .target(name: "PostgresClient", dependencies: ["CLibpq", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        // Loopback servers for the tests (python3): nothing the tests do leaves the machine.
        .target(name: "LoopbackFixtures", dependencies: [.product(name: "LegacyBridge", package: "legacy-bridge")]),
        // The tests also run the conformance suite on the shipped adapters (its real-adapter path).
        .testTarget(name: "DNSResolverTests", dependencies: ["DNSResolver", "LoopbackFixtures", .product(name: "LegacyBridge", package: "legacy-bridge"), .product(name: "LegacyBridgeConformance", package: "legacy-bridge")]),
        .testTarget(name: "SQLiteDatabaseTests", dependencies: ["SQLiteDatabase", .product(name: "LegacyBridge", package: "legacy-bridge")]),
        // Each suite starts its own mosquitto broker on 127.0.0.1.
        .testTarget(name: "MQTTClientTests", dependencies: ["MQTTClient", "LoopbackFixtures", .product(name: "LegacyBridge", package: "legacy-bridge"), .product(name: "LegacyBridgeConformance", package: "legacy-bridge")]),
        // Each suite starts its own redis-server on 127.0.0.1.
        .testTarget(name: "RedisClientTests", dependencies: ["RedisClient", "LoopbackFixtures", .product(name: "LegacyBridge", package: "legacy-bridge"), .product(name: "LegacyBridgeConformance", package: "legacy-bridge")]),
        // Each test starts its own PostgreSQL server (initdb, then postgres) on 127.0.0.1.
        .testTarget(name: "PostgresClientTests", dependencies: ["PostgresClient", "LoopbackFixtures", .product(name: "LegacyBridge", package: "legacy-bridge"), .product(name: "LegacyBridgeConformance", package: "legacy-bridge")]),
        .testTarget(name: "HTTPDownloaderTests", dependencies: ["HTTPDownloader", "LoopbackFixtures", .product(name: "LegacyBridge", package: "legacy-bridge"), .product(name: "LegacyBridgeConformance", package: "legacy-bridge")]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("ExistentialAny"),
    ]
}
