import Foundation

// Thread hand-offs measured with every thread of the process on one CPU.
//
// On the VM these figures come from (cpuidle driver haltpoll, guest_halt_poll_ns=0) an idle vCPU
// halts at once, and waking a thread there costs an exit to the hypervisor and an interrupt: tens
// of µs. Whether a woken thread runs on the waker's CPU (a plain context switch, ~10 µs) or on the
// other, halted one is the scheduler's call, made anew at every wake-up, so the same hand-off took
// 10 µs in one run and 60 µs in the next, and floor and bridge landed on different sides at random
// (a third variant added to the offload section flipped every ratio). With all threads on one
// CPU every hand-off is the same context switch, and the ratio shows what the library adds.

/// Puts every thread of the process (and, by inheritance, the threads they create) on one CPU,
/// and returns a function that gives them all CPUs back. A no-op returning a no-op where the
/// platform or the process does not allow it.
func benchPinProcessToOneCPU() -> () -> Void {
    #if os(Linux)
    guard ProcessInfo.processInfo.activeProcessorCount > 1 else { return {} }
    var one = cpu_set_t()
    withUnsafeMutableBytes(of: &one) { $0.storeBytes(of: UInt64(1), as: UInt64.self) }
    var all = cpu_set_t()
    let count = min(ProcessInfo.processInfo.activeProcessorCount, 64)
    withUnsafeMutableBytes(of: &all) {
        $0.storeBytes(of: count == 64 ? UInt64.max : (UInt64(1) << UInt64(count)) - 1, as: UInt64.self)
    }
    // A GNU extension the Glibc module does not import: look it up.
    typealias SetAffinity = @convention(c) (Int32, Int, UnsafeRawPointer) -> Int32
    guard let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "sched_setaffinity") else { return {} }
    let setAffinity = unsafeBitCast(symbol, to: SetAffinity.self)
    func apply(_ set: cpu_set_t) -> Bool {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return false }
        var set = set
        var applied = true
        for task in tasks {
            guard let tid = Int32(task) else { continue }
            if setAffinity(tid, MemoryLayout<cpu_set_t>.size, &set) != 0 { applied = false }
        }
        return applied
    }
    guard apply(one) else {
        _ = apply(all)
        return {}
    }
    return { _ = apply(all) }
    #else
    return {}
    #endif
}

/// Runs `body` with the process pinned to one CPU (``benchPinProcessToOneCPU()``) and gives every
/// CPU back when it returns or throws, so a failing section does not leave the rest of the run
/// on one CPU.
func pinnedToOneCPU<Value>(
    isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Value
) async rethrows -> Value {
    let unpin = benchPinProcessToOneCPU()
    defer { unpin() }
    return try await body()
}
