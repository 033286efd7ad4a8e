import Foundation

// How many threads the library runs, seen from outside: `bench --only scale` and
// `stress --scale` check the peak against `BridgeThreads.limit`.

/// Counts the process's threads, and those named like the library's job threads, every few
/// milliseconds on a thread of its own, keeping the peaks (Linux; zero where /proc is missing).
package final class LibraryThreadCensus: @unchecked Sendable {
    // @unchecked Sendable: the peaks are atomics; `running` is an atomic flag.
    private let running = AtomicCell<Bool>(true)
    private let peakLibrary = AtomicCell<Int>(0)
    private let peakProcess = AtomicCell<Int>(0)
    private let done = DispatchSemaphore(value: 0)

    /// The name of the library's job threads, as /proc shows it.
    package static let libraryThreadName = "lbridge-job"

    package init(name: String = LibraryThreadCensus.libraryThreadName, interval: Duration = .milliseconds(5)) {
        let (seconds, attoseconds) = interval.components
        let micros = UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
        let thread = Thread { [self] in
            while running.load(ordering: .relaxed) {
                let (library, process) = Self.count(name: name)
                _ = peakLibrary.max(library, ordering: .relaxed)
                _ = peakProcess.max(process, ordering: .relaxed)
                usleep(micros)
            }
            done.signal()
        }
        thread.start()
    }

    /// Stops counting; the peaks (library threads, all threads).
    package func stop() -> (library: Int, process: Int) {
        running.store(false, ordering: .relaxed)
        done.wait()
        return (peakLibrary.load(ordering: .relaxed), peakProcess.load(ordering: .relaxed))
    }

    /// Threads of this process whose name is `name`, and all of them (0, 0 where /proc is missing).
    package static func count(name: String) -> (Int, Int) {
        guard let directory = opendir("/proc/self/task") else { return (0, 0) }
        defer { closedir(directory) }
        var named = 0
        var all = 0
        let wanted = Array(name.utf8) + [UInt8(ascii: "\n")]
        var buffer = [UInt8](repeating: 0, count: 32)
        while let entry = readdir(directory) {
            let id = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard id.first?.isNumber == true else { continue }
            all += 1
            guard !name.isEmpty else { continue }
            let descriptor = open("/proc/self/task/\(id)/comm", O_RDONLY)
            guard descriptor >= 0 else { continue }
            let length = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
            if length == wanted.count && buffer.prefix(length).elementsEqual(wanted) { named += 1 }
        }
        return (named, all)
    }
}

/// A counter shared between tasks.
package final class AtomicCounter: Sendable {
    private let storage = AtomicCell<Int>(0)
    package init() {}
    package var value: Int { storage.load(ordering: .acquiring) }
    /// Adds one; returns the value before.
    @discardableResult
    package func increment() -> Int { storage.add(1, ordering: .acquiringAndReleasing).oldValue }
}
