import Foundation
import LoopbackFixtures

/// A private mosquitto broker on 127.0.0.1 (listener on 127.0.0.1 only, anonymous clients, no
/// persistence), on a free port: a ``ServerProcess``. A paused broker holds every acknowledgement.
typealias MosquittoBroker = ServerProcess

extension ServerProcess {
    /// Starts `mosquitto` and waits until it accepts connections.
    static func start(lifetime: Int = 600) async throws -> ServerProcess {
        try await start(
            name: "mosquitto",
            // /usr/sbin is not on every user's PATH.
            executables: ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/opt/homebrew/sbin/mosquitto"],
            install: "mosquitto", lifetime: lifetime
        ) { port, directory in
            let configuration = directory.appendingPathComponent("mosquitto.conf")
            try "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\n"
                .write(to: configuration, atomically: true, encoding: .utf8)
            return ["-c", configuration.path]
        }
    }
}
