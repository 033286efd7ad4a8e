import Foundation

/// Runs `body` on a new thread of its own, outside both the cooperative pool and Dispatch's global
/// queues.
///
/// On Linux the cooperative pool *is* Dispatch's default global queue: a `DispatchQueue.global()`
/// or `DispatchQueue(label:)` job that waits (for a child process, a verdict, a cancel that
/// deadlocks) holds one of the pool's few threads, and a handful of them stall every task in the
/// process. Whatever in the suite waits on purpose runs here instead.
/// - Parameters:
///   - name: The thread's name, for debuggers and sanitizer reports.
///   - body: The work; it may block.
package func onDedicatedThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread { body() }
    thread.name = name
    thread.start()
}
