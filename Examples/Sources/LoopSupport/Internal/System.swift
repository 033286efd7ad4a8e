// The one file of LoopSupport that calls the C library (pthreads, pipes).
//
// It is the only place with Unmanaged and a @convention(c) trampoline. What it offers above:
// `spawnDetachedThread` (a thread of our own that nobody joins), `currentThreadID`, and
// `WakeupPipe`, a non-blocking self-pipe a loop thread polls to learn that jobs were posted.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a spawned thread runs; handed to pthread_create retained and released by the thread.
private final class ThreadBody {
    let run: @Sendable () -> Void
    init(run: @escaping @Sendable () -> Void) {
        self.run = run
    }
}

/// The thread's entry point: nonisolated and file-level, as every trampoline here.
private func threadTrampoline(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    let body = Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue()
    body.run()
    return nil
}

/// Starts a detached thread of our own that runs `run` and ends when it returns.
///
/// (Glibc's module does not export `pthread_setname_np`, so the thread keeps the process's name.)
///
/// - Parameter run: What the thread does.
/// - Throws: ``SystemError`` if the system refused to create a thread (`run` is then dropped).
package func spawnDetachedThread(run: @escaping @Sendable () -> Void) throws(SystemError) {
    let context = Unmanaged.passRetained(ThreadBody(run: run)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    #if canImport(Darwin)
    var thread: pthread_t?
    #else
    var thread = pthread_t()
    #endif
    let rc = pthread_create(&thread, &attributes, threadTrampoline, context)
    if rc != 0 {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        throw SystemError(code: rc, call: "pthread_create")
    }
}

/// A number identifying the calling thread, comparable with `==` while both threads live.
package func currentThreadID() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}

/// A non-blocking self-pipe: any thread signals it, the loop thread polls its read end.
///
/// The descriptors are closed in deinit, so they live exactly as long as a thread can still signal.
package final class WakeupPipe: Sendable {
    /// The end the loop thread polls for readability.
    package let readDescriptor: Int32
    private let writeDescriptor: Int32

    /// Creates the pipe.
    ///
    /// - Throws: The `errno` of a failed `pipe` call, as a ``SystemError``.
    package init() throws(SystemError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SystemError(code: errno, call: "pipe") }
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
    package func signal() {
        var byte: UInt8 = 1
        while write(writeDescriptor, &byte, 1) < 0 && errno == EINTR {}
    }

    /// Empties the pipe (the loop thread only, after polling showed it readable).
    package func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = read(readDescriptor, &buffer, buffer.count)
            if count > 0 { continue }
            if count < 0 && errno == EINTR { continue }
            return
        }
    }
}

/// A failed system call: its name and `errno`.
package struct SystemError: Error, CustomStringConvertible, Sendable {
    /// The `errno` value.
    package var code: Int32
    /// The call that failed.
    package var call: String

    package init(code: Int32, call: String) {
        self.code = code
        self.call = call
    }

    package var description: String {
        "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// Runs `body` with no signal blocked on the calling thread, then restores the thread's mask.
///
/// A child process inherits the signal mask of the thread that starts it, and threads created from
/// the cooperative pool inherit the pool's mask, which blocks almost every signal: a child started
/// there ignores SIGTERM, and `timeout(1)` never receives its SIGALRM. Start children inside this.
package func withSignalsUnblocked<T>(_ body: () throws -> T) rethrows -> T {
    var empty = sigset_t()
    var saved = sigset_t()
    sigemptyset(&empty)
    pthread_sigmask(SIG_SETMASK, &empty, &saved)
    defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
    return try body()
}
