import Foundation
import LoopbackFixtures

extension ServerProcess {
    /// Starts a private `redis-server` on 127.0.0.1 (no persistence, no protected mode) and waits
    /// until it accepts connections.
    static func startRedis(lifetime: Int = 600) async throws -> ServerProcess {
        try await start(
            name: "redis-server", executables: ["/usr/bin/redis-server", "/usr/local/bin/redis-server", "/opt/homebrew/bin/redis-server"],
            install: "redis-server", lifetime: lifetime
        ) { port, directory in
            [
                "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", directory.path, "--protected-mode", "no",
            ]
        }
    }
}
