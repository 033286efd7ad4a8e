import Foundation

/// `python3 -m http.server`, bound to 127.0.0.1 on a free port, serving one generated file.
///
/// The server logs each request (with the client's address) to its log, read by ``log()``.
public final class LoopbackHTTPServer: Sendable {
    private let child: LoopbackChild
    /// The port the server listens on, on 127.0.0.1.
    public let port: Int
    /// The bytes of the file served.
    public let content: [UInt8]
    /// The file's URL: "http://127.0.0.1:port/name".
    public let url: String

    private init(child: LoopbackChild, port: Int, content: [UInt8], url: String) {
        self.child = child
        self.port = port
        self.content = content
        self.url = url
    }

    /// Generates `size` pseudo-random bytes from `seed`, writes them to a file and serves it.
    ///
    /// - Parameters:
    ///   - size: The file's size in bytes.
    ///   - seed: The generator's seed (the same seed gives the same bytes).
    ///   - lifetime: Seconds after which the server exits whatever happens.
    /// - Returns: The running server.
    /// - Throws: ``FixtureError`` if python3 is missing or the server does not start.
    public static func start(size: Int, seed: UInt64 = 1, lifetime: Int = 600) async throws -> LoopbackHTTPServer {
        let directory = try makeFixtureDirectory("http-server")
        let content = generatedBytes(count: size, seed: seed)
        let name = "payload-\(size).bin"
        try Data(content).write(to: directory.appendingPathComponent(name))
        let child = try await LoopbackChild.launch(
            arguments: ["-m", "http.server", "--bind", "127.0.0.1", "--directory", directory.path, "0"],
            directory: directory, lifetime: lifetime)
        // "Serving HTTP on 127.0.0.1 port 43567 (http://127.0.0.1:43567/) ..."
        let words = child.firstLine.split(separator: " ")
        guard let index = words.firstIndex(of: "port"), index + 1 < words.count, let port = Int(words[index + 1]),
            words.contains("127.0.0.1")
        else {
            await child.stop()
            throw FixtureError("http.server printed '\(child.firstLine)', not a 127.0.0.1 port")
        }
        return LoopbackHTTPServer(child: child, port: port, content: content, url: "http://127.0.0.1:\(port)/\(name)")
    }

    /// The server's request log so far.
    public func log() -> String {
        child.log()
    }

    /// Stops the server and removes the file.
    public func stop() async {
        await child.stop()
    }
}

/// Deterministic pseudo-random bytes (SplitMix64).
///
/// Written through a raw buffer, eight bytes at a time: the tests generate tens of MiB in debug
/// builds (and under ThreadSanitizer), where appending byte by byte costs seconds.
public func generatedBytes(count: Int, seed: UInt64) -> [UInt8] {
    guard count > 0 else { return [] }
    let words = (count + 7) / 8
    var state = seed
    let padded = [UInt8](unsafeUninitializedCapacity: words * 8) { buffer, initialized in
        let raw = UnsafeMutableRawBufferPointer(buffer)
        for word in 0..<words {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            raw.storeBytes(of: z.littleEndian, toByteOffset: word * 8, as: UInt64.self)
        }
        initialized = words * 8
    }
    return Array(padded[..<count])
}
