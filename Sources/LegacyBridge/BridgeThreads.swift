#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The threads LegacyBridge starts for its own work, and their bound.
///
/// Besides the threads of the ``OffloadPool``s and ``SDKThreadExecutor``s you create, the library
/// runs one timer thread named `lbridge-timer`, which keeps every timeout, and a bounded set of
/// job threads named `lbridge-job`, which make the SDK calls that may block: a ``CancelHandle``, a stream's
/// `cancel` without a scheduler, an offload `interrupt`, a sequenced stream's gap timeout.
///
/// - At most ``limit`` job threads exist at once. They start when work comes and then stay,
///   parked, for later work.
/// - Work beyond the limit waits in first-in, first-out order. It delays no caller: a cancelled
///   or timed-out call resumes at once, and only the SDK's cancel waits for a thread.
/// - The timer thread never runs SDK or user code, so a timeout resumes its caller on time even
///   while every job thread is stuck in a slow SDK cancel.
/// - If the system refuses to start a thread, the process goes on and no work is lost: it runs
///   later on a job thread that exists. When none exists, the library tries again with the next
///   job and every 100 ms; a refused timer thread is tried again with the next timeout.
public enum BridgeThreads {
    /// The largest limit accepted, as for ``OffloadPool/maximumThreads``.
    public static let maximumLimit = 1024

    /// The limit a process starts with: 64, or the number of processors if that is more.
    ///
    /// The jobs mostly wait on an SDK rather than compute, so the processor count says little
    /// about how many may usefully wait at once. 64 keeps a storm of slow cancels moving while the
    /// threads kept for later cost a process little: parked, each holds only the stack pages it
    /// touched.
    public static let defaultLimit: Int = {
        #if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
        let processors = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #else
        let processors = 1
        #endif
        return max(64, processors)
    }()

    /// The most job threads alive at once; ``defaultLimit`` until set.
    ///
    /// Set it at start-up, before the first call that may need a job thread. A later change
    /// takes effect at once: a higher limit starts threads for the work that waits, a lower one
    /// ends the threads above it as they finish their current job (an ending thread may take a
    /// moment to be gone).
    ///
    /// Setting a value outside `1 ... BridgeThreads.maximumLimit` stops the program with a
    /// message saying what to pass.
    public static var limit: Int {
        get { BridgeThreadPool.shared.limit }
        set {
            precondition(
                newValue >= 1 && newValue <= maximumLimit,
                "BridgeThreads.limit must be between 1 and \(maximumLimit), not \(newValue)")
            BridgeThreadPool.shared.setLimit(newValue)
        }
    }
}
