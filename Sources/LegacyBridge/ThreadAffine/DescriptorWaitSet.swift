// What a descriptor loop's thread waits on: its wake pipe and the watched descriptors, as a poll
// set rebuilt when a watch changes. Only the loop thread uses it.
//
// An epoll version (a wait that costs the same with 1 or 1,000 descriptors) is below, built only
// with -D LEGACY_BRIDGE_EPOLL: with it, the c-ares example's 400-lookup stress test times out
// lookups when the libcurl example's tests run in the same process, and the cause is not found
// yet (no entry is refused, no event arrives for an ended watch, no loop spins, and c-ares always
// ends a socket's watch before it closes it). Ended watches leave the epoll instance at once on
// the loop thread, while their descriptor is still open.

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A watch as the wait set needs it.
struct WatchedDescriptor {
    var id: UInt64
    var descriptor: Int32
    var interest: DescriptorEvents
}

struct DescriptorWaitSet {
    /// The registry version the set was last brought up to.
    var version: UInt64 = .max
    /// Filled by `wait`: the ready watches, in the order they were watched.
    private(set) var ready: [(id: UInt64, events: DescriptorEvents)] = []
    private let wakeDescriptor: Int32

    #if os(Linux) && LEGACY_BRIDGE_EPOLL
    private let epoll: Int32
    /// What the epoll instance holds, by watch id.
    private var registered: [UInt64: (descriptor: Int32, events: UInt32)] = [:]
    /// `epoll_wait`'s output: `Epoll.eventCapacity` events of `Epoll.eventSize` bytes.
    private let events: UnsafeMutableRawPointer
    /// The wake pipe's entry carries this id; watch ids start at 1.
    private static let wakeID: UInt64 = 0

    init(wakeDescriptor: Int32) throws(DescriptorLoopError) {
        self.wakeDescriptor = wakeDescriptor
        guard let functions = Epoll.functions else { throw .waitSetFailed(code: ENOSYS) }
        epoll = functions.create(Epoll.closeOnExec)
        guard epoll >= 0 else { throw .waitSetFailed(code: errno) }
        events = .allocate(byteCount: Epoll.eventSize * Epoll.eventCapacity, alignment: 8)
        guard Epoll.control(epoll, Epoll.add, wakeDescriptor, events: Epoll.readable, id: Self.wakeID) == 0 else {
            let code = errno
            Glibc.close(epoll)
            events.deallocate()
            throw .waitSetFailed(code: code)
        }
    }

    func close() {
        _ = Glibc.close(epoll)
        events.deallocate()
    }

    /// Brings the epoll instance up to `watches`; returns the ids it could not watch (a closed
    /// descriptor, or one epoll cannot watch such as a regular file).
    mutating func sync(to watches: [WatchedDescriptor], version: UInt64) -> [UInt64] {
        self.version = version
        var wanted: [UInt64: (descriptor: Int32, events: UInt32)] = [:]
        for watch in watches { wanted[watch.id] = (watch.descriptor, Epoll.events(for: watch.interest)) }
        for (id, entry) in registered where wanted[id]?.descriptor != entry.descriptor {
            // EBADF once the descriptor was closed: epoll dropped it by itself.
            _ = Epoll.control(epoll, Epoll.delete, entry.descriptor, events: 0, id: id)
            registered[id] = nil
        }
        var failed: [UInt64] = []
        for (id, entry) in wanted where registered[id]?.events != entry.events {
            let operation = registered[id] == nil ? Epoll.add : Epoll.modify
            if Epoll.control(epoll, operation, entry.descriptor, events: entry.events, id: id) == 0 {
                registered[id] = entry
            } else {
                registered[id] = nil
                failed.append(id)
            }
        }
        return failed.sorted()
    }

    /// Removes a watch from the epoll instance now, while its descriptor is still open.
    mutating func forget(_ id: UInt64) {
        guard let entry = registered.removeValue(forKey: id) else { return }
        _ = Epoll.control(epoll, Epoll.delete, entry.descriptor, events: 0, id: id)
    }

    /// Removes whatever watch holds `descriptor` from the epoll instance, before it is closed.
    mutating func forget(descriptor: Int32) {
        for (id, entry) in registered where entry.descriptor == descriptor { forget(id) }
    }

    /// Waits up to `milliseconds` (-1: no bound); returns whether the wake pipe was readable.
    mutating func wait(milliseconds: Int32) -> Bool {
        ready.removeAll(keepingCapacity: true)
        let count = Epoll.functions?.wait(epoll, events, Int32(Epoll.eventCapacity), milliseconds) ?? -1
        var woken = false
        for index in 0..<Int(max(count, 0)) {
            let (raw, id) = Epoll.event(at: index, in: events)
            if id == Self.wakeID {
                woken = true
            } else {
                ready.append((id, Epoll.events(from: raw)))
            }
        }
        if ready.count > 1 { ready.sort { $0.id < $1.id } }
        return woken
    }
    #else
    private var descriptors: [pollfd] = []
    private var owners: [UInt64] = []

    init(wakeDescriptor: Int32) throws(DescriptorLoopError) {
        self.wakeDescriptor = wakeDescriptor
    }

    func close() {}

    /// Nothing to do: the poll set is rebuilt from the registry before the next wait.
    mutating func forget(_ id: UInt64) {}
    mutating func forget(descriptor: Int32) {}

    /// Rebuilds the poll set from `watches`; every descriptor can be polled.
    mutating func sync(to watches: [WatchedDescriptor], version: UInt64) -> [UInt64] {
        self.version = version
        descriptors.removeAll(keepingCapacity: true)
        owners.removeAll(keepingCapacity: true)
        descriptors.append(pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0))
        owners.append(0)
        for watch in watches {
            descriptors.append(pollfd(fd: watch.descriptor, events: Self.pollEvents(watch.interest), revents: 0))
            owners.append(watch.id)
        }
        return []
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
    #endif
}

#if os(Linux) && LEGACY_BRIDGE_EPOLL
/// epoll, which the toolchain's Glibc module does not declare (sys/epoll.h is not in it): its
/// three functions are found in the C library by name, and `struct epoll_event` is read and
/// written as bytes with the kernel's layout (packed, 12 bytes, on x86-64; 16 bytes elsewhere).
private enum Epoll {
    typealias Create = @convention(c) (Int32) -> Int32
    typealias Control = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias Wait = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32

    struct Functions {
        var create: Create
        var control: Control
        var wait: Wait
    }

    /// The C library's epoll functions; nil where they cannot be found.
    static let functions: Functions? = {
        guard let library = dlopen(nil, RTLD_NOW),
            let create = dlsym(library, "epoll_create1"), let control = dlsym(library, "epoll_ctl"),
            let wait = dlsym(library, "epoll_wait")
        else { return nil }
        return Functions(
            create: unsafeBitCast(create, to: Create.self), control: unsafeBitCast(control, to: Control.self),
            wait: unsafeBitCast(wait, to: Wait.self))
    }()

    static let add: Int32 = 1  // EPOLL_CTL_ADD
    static let delete: Int32 = 2  // EPOLL_CTL_DEL
    static let modify: Int32 = 3  // EPOLL_CTL_MOD
    static let closeOnExec: Int32 = 0o2_000_000  // EPOLL_CLOEXEC, which is O_CLOEXEC
    static let readable: UInt32 = 0x001  // EPOLLIN
    static let writable: UInt32 = 0x004  // EPOLLOUT
    static let error: UInt32 = 0x008  // EPOLLERR
    static let hangUp: UInt32 = 0x010  // EPOLLHUP
    static let eventCapacity = 64

    #if arch(x86_64)
    static let eventSize = 12
    static let dataOffset = 4
    #else
    static let eventSize = 16
    static let dataOffset = 8
    #endif

    static func control(_ epoll: Int32, _ operation: Int32, _ descriptor: Int32, events: UInt32, id: UInt64) -> Int32 {
        guard let functions else { return -1 }
        var bytes: (UInt64, UInt64) = (0, 0)  // 16 bytes, 8-aligned: room for either layout
        return withUnsafeMutableBytes(of: &bytes) { event in
            event.storeBytes(of: events, toByteOffset: 0, as: UInt32.self)
            event.storeBytes(of: id, toByteOffset: dataOffset, as: UInt64.self)
            return functions.control(epoll, operation, descriptor, event.baseAddress)
        }
    }

    /// The events and the id of the `index`th event of an `epoll_wait` output.
    static func event(at index: Int, in buffer: UnsafeMutableRawPointer) -> (events: UInt32, id: UInt64) {
        let start = buffer + index * eventSize
        return (start.loadUnaligned(as: UInt32.self), (start + dataOffset).loadUnaligned(as: UInt64.self))
    }

    static func events(for interest: DescriptorEvents) -> UInt32 {
        (interest.contains(.readable) ? readable : 0) | (interest.contains(.writable) ? writable : 0)
    }

    static func events(from raw: UInt32) -> DescriptorEvents {
        var events: DescriptorEvents = []
        if raw & readable != 0 { events.insert(.readable) }
        if raw & writable != 0 { events.insert(.writable) }
        if raw & error != 0 { events.insert(.error) }
        if raw & hangUp != 0 { events.insert(.hangUp) }
        return events
    }
}
#endif
