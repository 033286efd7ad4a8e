import Foundation
import LoopbackFixtures

extension ServerProcess {
    /// The newest PostgreSQL server binaries here (Debian keeps them per major version).
    static var postgresBinaries: String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted()
        if let newest = versions.last { return "\(root)/\(newest)/bin" }
        return ["/opt/homebrew/bin", "/usr/local/bin"].first {
            FileManager.default.isExecutableFile(atPath: "\($0)/postgres")
        } ?? "/usr/bin"
    }

    /// Starts a private PostgreSQL server on 127.0.0.1: a new cluster (`initdb`, trust
    /// authentication, user "postgres"), no Unix socket outside its directory, no fsync.
    /// As root, both run as the "postgres" user (the server refuses root).
    static func startPostgres(lifetime: Int = 600) async throws -> ServerProcess {
        let binaries = postgresBinaries
        return try await start(
            name: "postgres", executables: ["\(binaries)/postgres"], install: "postgresql", user: "postgres",
            lifetime: lifetime, isReady: { $0.contains("ready to accept connections") }
        ) { port, directory in
            let data = directory.appendingPathComponent("data").path
            try ServerProcess.run(
                [
                    "\(binaries)/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8",
                    "--locale=C",
                ], as: "postgres", in: directory)
            return [
                "-D", data, "-h", "127.0.0.1", "-p", String(port), "-k", directory.path, "-c", "fsync=off",
                "-c", "max_connections=50",
            ]
        }
    }
}
