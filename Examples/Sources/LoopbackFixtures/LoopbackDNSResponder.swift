import Foundation

/// A tiny DNS responder on 127.0.0.1 (UDP, python3), for tests that must never query a real server.
///
/// It answers by the name asked:
/// - `*.answer.test`: an A record `127.0.0.53` (AAAA queries get no record, `NOERROR`);
/// - `*.silent.test`: no reply at all (the lookup times out);
/// - anything else: `NXDOMAIN`.
///
/// It also reports ``deadPort``: a loopback UDP port it bound and released at start, where nothing
/// listens (a lookup against it is refused or times out).
///
/// Every query is logged as "`peer name type`"; ``queries()`` reads them back, so a test can show
/// where its queries went. The child exits when the test closes its input (or dies), and after
/// `lifetime` seconds in any case.
public final class LoopbackDNSResponder: Sendable {
    private let child: LoopbackChild
    /// The UDP port the responder listens on, on 127.0.0.1.
    public let port: Int
    /// A loopback UDP port where nothing listens.
    public let deadPort: Int

    /// The responder as a c-ares server: "127.0.0.1:port".
    public var server: String { "127.0.0.1:\(port)" }
    /// The dead port as a c-ares server: "127.0.0.1:deadPort".
    public var deadServer: String { "127.0.0.1:\(deadPort)" }

    private init(child: LoopbackChild, port: Int, deadPort: Int) {
        self.child = child
        self.port = port
        self.deadPort = deadPort
    }

    /// Starts a responder.
    ///
    /// - Parameter lifetime: Seconds after which the responder exits whatever happens.
    /// - Throws: ``FixtureError`` if python3 is missing or the responder does not start.
    public static func start(lifetime: Int = 600) async throws -> LoopbackDNSResponder {
        let directory = try makeFixtureDirectory("dns-responder")
        try script.write(to: directory.appendingPathComponent("responder.py"), atomically: true, encoding: .utf8)
        let child = try await LoopbackChild.launch(
            arguments: ["responder.py"], directory: directory, lifetime: lifetime)
        let numbers = child.firstLine.split(separator: " ").compactMap { Int($0) }
        guard numbers.count == 2 else {
            await child.stop()
            throw FixtureError("the DNS responder printed '\(child.firstLine)', not two ports")
        }
        return LoopbackDNSResponder(child: child, port: numbers[0], deadPort: numbers[1])
    }

    /// One query the responder received.
    public struct Query: Hashable, Sendable {
        /// The sender's address (always 127.0.0.1 here).
        public var peer: String
        /// The name asked, lowercased.
        public var name: String
        /// The query type (1 = A, 28 = AAAA).
        public var type: Int
    }

    /// Every query received so far.
    public func queries() -> [Query] {
        child.log().split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[0] != "ERR", let type = Int(fields[2]) else { return nil }
            return Query(peer: String(fields[0]), name: String(fields[1]), type: type)
        }
    }

    /// Stops the responder and removes its files.
    public func stop() async {
        await child.stop()
    }

    private static let script = #"""
        import os, socket, struct, sys, threading

        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        dead = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dead.bind(("127.0.0.1", 0))
        dead_port = dead.getsockname()[1]
        dead.close()
        print(sock.getsockname()[1], dead_port, flush=True)

        def exit_when_input_closes():
            sys.stdin.read()
            os._exit(0)

        threading.Thread(target=exit_when_input_closes, daemon=True).start()

        while True:
            data, peer = sock.recvfrom(4096)
            try:
                ident, flags = struct.unpack("!HH", data[:4])
                i, labels = 12, []
                while data[i] != 0:
                    length = data[i]
                    labels.append(data[i + 1:i + 1 + length].decode("ascii", "replace"))
                    i += 1 + length
                i += 1
                qtype, _ = struct.unpack("!HH", data[i:i + 4])
                question = data[12:i + 4]
            except Exception as error:
                print("ERR", repr(error), file=sys.stderr, flush=True)
                continue
            name = ".".join(labels).lower()
            print(peer[0], name, qtype, file=sys.stderr, flush=True)
            if name.endswith(".silent.test"):
                continue
            answers = b""
            count = 0
            rcode = 3
            if name.endswith(".answer.test"):
                rcode = 0
                if qtype == 1:
                    answers = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + bytes([127, 0, 0, 53])
                    count = 1
            reply_flags = 0x8000 | 0x0400 | (flags & 0x0100) | 0x0080 | rcode
            sock.sendto(struct.pack("!HHHHHH", ident, reply_flags, 1, count, 0, 0) + question + answers, peer)
        """#
}
