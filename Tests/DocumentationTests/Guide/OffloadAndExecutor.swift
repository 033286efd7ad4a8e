// swift-format-ignore-file
// (The snippets below are the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

/// Stand-ins for the SQLite and camera SDK calls the guide's examples make.
enum GuideBlockingStubs {
    nonisolated struct Statement: Sendable {}
    nonisolated struct Rows: Sendable {
        init(stepping statement: Statement) throws {}
        func free() {}
    }
    /// A query's remembered interrupt: a flag, and the connection to interrupt while it steps.
    nonisolated final class QueryInterrupt: Sendable {
        func request() {}
    }
    /// One pool thread's connection.
    nonisolated struct Connection {
        static func forCurrentThread() throws -> Connection { Connection() }
        func rows(_ sql: String, interrupt: QueryInterrupt) throws -> Rows { try Rows(stepping: Statement()) }
    }

    static func example() async throws {
        // snippet: Sources/LegacyBridge/LegacyBridge.docc/BlockingCalls.md
        let pool = try OffloadPool(threads: 4, queueLimit: 256)    // pthreads of their own

        func query(_ sql: String) async throws -> Rows {
            let interrupt = QueryInterrupt()                          // this query's own, remembered
            return try await pool.run(
                cancel: CancelHandle { interrupt.request() },         // sets its flag, sqlite3_interrupt on its connection
                onDiscard: { rows in rows.free() }                    // a result nobody waits for any more
            ) {
                let db = try Connection.forCurrentThread()            // one connection per pool thread
                return try db.rows(sql, interrupt: interrupt)         // blocks a pool thread, not a task
            }
        }
        // end snippet
        _ = try await query("select 1")
        await pool.shutdown(.drain)
    }
}

enum GuideThreadAffine {
    // snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
    /// The camera SDK's handle: not thread-safe, so it only ever crosses into the camera's thread.
    nonisolated struct Device: @unchecked Sendable { let handle: OpaquePointer }

    actor Camera {
        private let executor: SDKThreadExecutor
        private let device: Device
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        init() async throws {
            let executor = try SDKThreadExecutor(name: "camera")               // one dedicated pthread
            self.executor = executor
            self.device = try await executor.run { Device(handle: try cam_open()) }   // created on that thread
        }

        func exposure() -> Double { cam_exposure(device.handle) }             // runs on that thread
    }
    // end snippet
}

nonisolated func cam_open() throws -> OpaquePointer { OpaquePointer(bitPattern: 0x1000)! }
nonisolated func cam_exposure(_ device: OpaquePointer) -> Double { 1.0 / 60 }
