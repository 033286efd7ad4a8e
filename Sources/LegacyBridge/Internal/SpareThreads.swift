// Threads of the library's own for short calls that may block: a stream's default `cancel`, an
// offload pool's `interrupt`.
//
// Not Dispatch: on Linux the cooperative pool *is* Dispatch's default global queue, so a
// `DispatchQueue.global().async` job that blocks for the seconds an SDK's cancel can take holds a
// thread the pool needs, and two of them stop every task on a 2-core machine. Here each job that
// finds no idle thread gets a new one, so a slow job never delays another or any task; at most
// `keptIdle` finished threads stay parked for reuse, the others end.

/// A process-wide elastic set of library-owned threads for short jobs that may block.
enum SpareThreads {
    /// Parked threads kept for reuse; a thread that finds no work while this many wait ends.
    static let keptIdle = 2

    private struct State {
        var jobs: [() -> Void] = []
        var head = 0
        /// Parked threads not yet claimed by a job.
        var idle = 0
        /// Wake-ups handed to parked threads and not yet taken (each paired with one `idle`).
        var wakeups = 0

        mutating func pop() -> (() -> Void)? {
            guard head < jobs.count else { return nil }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            return job
        }
    }

    // nonisolated(unsafe): `state` is only read or written with `parking` locked.
    nonisolated(unsafe) private static var state = State()
    private static let parking = ThreadParking(conditionCount: 1)

    /// Runs `job` soon on a library-owned thread; never runs it inline and never blocks.
    static func run(_ job: @escaping @Sendable () -> Void) {
        parking.lock()
        state.jobs.append(job)
        let wakeParked = state.idle > 0
        if wakeParked {
            state.idle -= 1
            state.wakeups += 1
            parking.signal(0)
        }
        parking.unlock()
        if !wakeParked {
            let rc = startDetachedThread(name: "legacy-bridge") { work() }
            precondition(rc == 0, "LegacyBridge could not start a thread (pthread_create: \(rc))")
        }
    }

    private static func work() {
        parking.lock()
        while true {
            if let job = state.pop() {
                parking.unlock()
                job()
                parking.lock()
                continue
            }
            if state.idle >= keptIdle {
                parking.unlock()
                return
            }
            state.idle += 1
            while state.wakeups == 0 { parking.wait(0) }
            state.wakeups -= 1
        }
    }
}
