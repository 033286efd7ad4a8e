// The wake-up of a poll-driven SDK loop: c-ares and libmosquitto (in a client it does not thread
// itself) have no wake call of their own, so the loop thread polls a self-pipe beside the SDK's
// sockets, and SDKLoop's `wake` makes it readable. libcurl needs none of this: it has
// curl_multi_wakeup.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A non-blocking self-pipe: any thread signals it, the loop thread polls its read end.
///
/// The descriptors are closed in deinit, so they live exactly as long as a thread can still signal.
public final class WakeupPipe: Sendable {
    /// The end the loop thread polls for readability.
    public let readDescriptor: Int32
    private let writeDescriptor: Int32

    /// Creates the pipe, or returns nil if the system has no descriptors left.
    public init?() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        self.readDescriptor = ends[0]
        self.writeDescriptor = ends[1]
    }

    deinit {
        close(readDescriptor)
        close(writeDescriptor)
    }

    /// Makes the read end readable. Never blocks: a full pipe is already readable.
    public func signal() {
        var byte: UInt8 = 1
        while write(writeDescriptor, &byte, 1) < 0 && errno == EINTR {}
    }

    /// Empties the pipe (the loop thread only, after polling showed it readable).
    public func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = read(readDescriptor, &buffer, buffer.count)
            if count > 0 { continue }
            if count < 0 && errno == EINTR { continue }
            return
        }
    }
}
