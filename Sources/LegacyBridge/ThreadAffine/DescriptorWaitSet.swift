// What a descriptor loop's thread waits on, one kind per kernel interface:
// - epoll (Linux, the default there; EpollWaitSet.swift) and kqueue (Apple platforms, the default
//   there; KqueueWaitSet.swift) keep the watched descriptors in the kernel. They are changed from
//   any thread, so that a cancel is final when it returns; only the loop thread waits on them.
// - poll (every platform, the fallback) is a poll set rebuilt from the registry when a watch
//   changed. Only the loop thread uses it.
// Both give the loop the same contract (DescriptorPoller.swift says how).

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The kernel interface a descriptor-watching ``SDKLoop`` waits with.
package enum DescriptorBackend: Sendable, Hashable, CustomStringConvertible {
    /// `poll`: every platform has it; a wait costs more the more descriptors are watched.
    case poll
    #if os(Linux)
    /// `epoll`: a wait costs the same with one descriptor watched or thousands.
    case epoll
    #endif
    #if canImport(Darwin)
    /// `kqueue`: a wait costs the same with one descriptor watched or thousands.
    case kqueue
    #endif

    /// The backend a loop uses unless told otherwise: epoll on Linux, kqueue on Apple platforms,
    /// poll elsewhere.
    package static var platformDefault: DescriptorBackend {
        #if os(Linux)
        return .epoll
        #elseif canImport(Darwin)
        return .kqueue
        #else
        return .poll
        #endif
    }

    /// Every backend this platform can run, the default first (tests run the loop on each).
    package static var available: [DescriptorBackend] {
        #if os(Linux)
        return [.epoll, .poll]
        #elseif canImport(Darwin)
        return [.kqueue, .poll]
        #else
        return [.poll]
        #endif
    }

    /// The interface's name, for example "epoll".
    package var description: String {
        switch self {
        case .poll: return "poll"
        #if os(Linux)
        case .epoll: return "epoll"
        #endif
        #if canImport(Darwin)
        case .kqueue: return "kqueue"
        #endif
        }
    }
}

/// What happened when a kernel wait set was told to watch a descriptor.
enum KernelArmResult: Equatable {
    /// The descriptor is watched for the interest given.
    case armed
    /// The descriptor is not open: the watch is reported `.invalid`.
    case notOpen
    /// The descriptor is open, but the kernel set cannot wait on it (a regular file under epoll):
    /// it is always ready, as `poll` reports it.
    case unpollable
}

/// A wait set whose watched descriptors live in the kernel (epoll, kqueue).
///
/// `arm` and `disarm` are called from any thread, with the poller's registry lock held, so that the
/// kernel's set and the registry change together; `wait` is called by the loop thread only.
/// Every watch is one-shot in the kernel: once reported it stays quiet until the loop arms it
/// again after its handler. A stale entry (a descriptor closed under its watch while its open
/// file lives on elsewhere) can therefore never report more than once.
protocol KernelWaitSet: AnyObject, Sendable {
    /// Watches `descriptor` for `interest` under `id`, or changes what it is watched for. When
    /// the number names a file the set does not hold (a new file under a live watch), that file
    /// is watched from now on.
    func arm(descriptor: Int32, id: UInt64, interest: DescriptorEvents, adding: Bool) -> KernelArmResult
    /// Stops watching `descriptor`; harmless when it is not watched.
    func disarm(descriptor: Int32, id: UInt64)
    /// Waits up to `milliseconds` (-1: no bound, 0: not at all) and fills `ready` with every watch
    /// reported, however many (`expected` sizes the first read). Returns whether the wake
    /// descriptor was readable.
    func wait(milliseconds: Int32, expected: Int, into ready: inout [(id: UInt64, events: DescriptorEvents)]) -> Bool
    /// Closes the set (the poller's deinit).
    func close()
}

/// A watch as the poll set needs it.
struct WatchedDescriptor {
    var id: UInt64
    var descriptor: Int32
    var interest: DescriptorEvents
}

/// The poll backend: the loop thread's poll set, rebuilt from the registry when a watch changed.
struct PollWaitSet {
    /// The registry version the set was last brought up to.
    var version: UInt64 = .max
    /// Filled by `wait`: the ready watches, in the order they were watched.
    private(set) var ready: [(id: UInt64, events: DescriptorEvents)] = []
    private let wakeDescriptor: Int32
    private var descriptors: [pollfd] = []
    private var owners: [UInt64] = []

    init(wakeDescriptor: Int32) {
        self.wakeDescriptor = wakeDescriptor
    }

    /// Rebuilds the poll set from `watches`, sorted by id; every descriptor can be polled.
    mutating func sync(to watches: [WatchedDescriptor], version: UInt64) {
        self.version = version
        descriptors.removeAll(keepingCapacity: true)
        owners.removeAll(keepingCapacity: true)
        descriptors.append(pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0))
        owners.append(0)
        for watch in watches {
            descriptors.append(pollfd(fd: watch.descriptor, events: Self.pollEvents(watch.interest), revents: 0))
            owners.append(watch.id)
        }
    }

    /// Waits up to `milliseconds` (-1: no bound); returns whether the wake pipe was readable.
    mutating func wait(milliseconds: Int32) -> Bool {
        ready.removeAll(keepingCapacity: true)
        guard poll(&descriptors, nfds_t(descriptors.count), milliseconds) > 0 else { return false }
        for index in 1..<descriptors.count where descriptors[index].revents != 0 {
            ready.append((owners[index], Self.events(descriptors[index].revents)))
            descriptors[index].revents = 0
        }
        defer { descriptors[0].revents = 0 }
        return descriptors[0].revents != 0
    }

    private static func pollEvents(_ interest: DescriptorEvents) -> Int16 {
        (interest.contains(.readable) ? Int16(POLLIN) : 0) | (interest.contains(.writable) ? Int16(POLLOUT) : 0)
    }

    private static func events(_ revents: Int16) -> DescriptorEvents {
        var events: DescriptorEvents = []
        if revents & Int16(POLLIN) != 0 { events.insert(.readable) }
        if revents & Int16(POLLOUT) != 0 { events.insert(.writable) }
        if revents & Int16(POLLERR) != 0 { events.insert(.error) }
        if revents & Int16(POLLHUP) != 0 { events.insert(.hangUp) }
        if revents & Int16(POLLNVAL) != 0 { events.insert(.invalid) }
        return events
    }
}
