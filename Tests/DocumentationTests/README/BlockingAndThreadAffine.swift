// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import LegacyBridge

/// Stand-ins for the SQLite and camera SDK calls the README's examples make.
enum ReadmeBlockingStubs {
    struct Database: Sendable {}
    struct Statement: Sendable {}
    struct Rows: Sendable {
        init(stepping statement: Statement) throws {}
        func free() {}
    }
    static let db = Database()
    static func sqlite3_interrupt(_ db: Database) {}

    static func query(_ statement: Statement) async throws -> Rows {
        // snippet: README.md
        let pool = try OffloadPool(threads: 4, queueLimit: 256)
        let rows = try await pool.run(cancel: CancelHandle { sqlite3_interrupt(db) },    // asks a blocked call to give up
                                      onDiscard: { $0.free() }) {                // a late result nobody awaits
            try Rows(stepping: statement)                                        // blocks a pool thread, not a task
        }
        // end snippet
        await pool.shutdown(.drain)
        return rows
    }
}

nonisolated func cam_open() throws -> OpaquePointer { OpaquePointer(bitPattern: 0x1000)! }
nonisolated func cam_exposure(_ device: OpaquePointer) -> Double { 1.0 / 60 }

enum ReadmeThreadAffine {
    // snippet: README.md
    struct Device: @unchecked Sendable { let handle: OpaquePointer }   // only used on the camera's thread

    actor Camera {
        private let executor: SDKThreadExecutor                 // a dedicated pthread, or the SDK's loop:
        private let device: Device                              // SDKThreadExecutor(scheduler:)
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        init() async throws {
            executor = try SDKThreadExecutor(name: "camera")
            device = try await executor.run { Device(handle: try cam_open()) }   // created on that thread
        }
        func exposure() -> Double { cam_exposure(device.handle) }               // called on that thread
    }
    // end snippet
}
