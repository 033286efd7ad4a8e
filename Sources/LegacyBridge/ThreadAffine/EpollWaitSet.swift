// The epoll backend of the descriptor loop (Linux, the default there): a wait costs the same with
// one descriptor watched or thousands.
//
// Hazards it avoids:
// - A cancelled watch left in the kernel. epoll keys an entry by the open file, not the number: a
//   descriptor closed while its file lives on (a duplicate, a child between fork and exec) keeps
//   an entry no later call can remove. The registry therefore arms and disarms here, under its
//   lock, from whatever thread changes it: when a cancel returns the entry is gone.
// - A stale entry that reports forever. Every watch is one-shot (EPOLLONESHOT) and re-armed by
//   the loop after its handler, so an entry the loop could not remove reports at most once.
// - A number that comes to name a new file under a live watch (libpq's socket switch, dup2). The
//   re-arm after each handler call and each interest update finds the number's file missing
//   (ENOENT) and adds it: the new file is heard, as with poll.
// - Ready descriptors left for a later wait. `epoll_wait` fills at most the buffer it is given:
//   the buffer is sized to the watches, and read again without blocking while it comes back full,
//   so every ready handler of an iteration runs before its due timers.

#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One loop's epoll instance.
///
/// `@unchecked Sendable`: `epoll` never changes, and epoll_ctl may be called from any thread;
/// `buffer` and `capacity` are touched by `wait` only, which only the loop thread calls.
final class EpollWaitSet: KernelWaitSet, @unchecked Sendable {
    private let epoll: Int32
    private var buffer: UnsafeMutableRawPointer
    private var capacity: Int
    /// The wake descriptor's entry carries this id; watch ids start at 1.
    private static let wakeID: UInt64 = 0

    init(wakeDescriptor: Int32) throws(DescriptorLoopError) {
        guard let functions = Epoll.functions else { throw .waitSetFailed(code: ENOSYS) }
        epoll = functions.create(Epoll.closeOnExec)
        guard epoll >= 0 else { throw .waitSetFailed(code: errno) }
        capacity = 64
        buffer = .allocate(byteCount: Epoll.eventSize * capacity, alignment: 8)
        // The wake descriptor stays level-triggered: it is read by the loop, not re-armed.
        guard Epoll.control(epoll, Epoll.add, wakeDescriptor, events: Epoll.readable, id: Self.wakeID) == 0 else {
            let code = errno
            _ = Glibc.close(epoll)
            buffer.deallocate()
            throw .waitSetFailed(code: code)
        }
    }

    func close() {
        _ = Glibc.close(epoll)
        buffer.deallocate()
    }

    func arm(descriptor: Int32, id: UInt64, interest: DescriptorEvents, adding: Bool) -> KernelArmResult {
        let events = Epoll.events(for: interest) | Epoll.oneShot
        if !adding {
            if Epoll.control(epoll, Epoll.modify, descriptor, events: events, id: id) == 0 { return .armed }
            // ENOENT: the number names a file the set does not hold (a new one, or the old one was
            // removed when its last descriptor closed): watch what it names now.
            guard errno == ENOENT else { return Self.result(errno) }
        }
        if Epoll.control(epoll, Epoll.add, descriptor, events: events, id: id) == 0 { return .armed }
        if errno == EEXIST, Epoll.control(epoll, Epoll.modify, descriptor, events: events, id: id) == 0 {
            return .armed
        }
        return Self.result(errno)
    }

    func disarm(descriptor: Int32, id: UInt64) {
        // ENOENT or EBADF when the entry is already gone: nothing to do.
        _ = Epoll.control(epoll, Epoll.delete, descriptor, events: 0, id: id)
    }

    func wait(milliseconds: Int32, expected: Int, into ready: inout [(id: UInt64, events: DescriptorEvents)]) -> Bool {
        ready.removeAll(keepingCapacity: true)
        if expected > capacity {
            buffer.deallocate()
            capacity = max(expected, capacity * 2)
            buffer = .allocate(byteCount: Epoll.eventSize * capacity, alignment: 8)
        }
        guard let functions = Epoll.functions else { return false }
        var woken = false
        var timeout = milliseconds
        while true {
            let count = Int(functions.wait(epoll, buffer, Int32(clamping: capacity), timeout))
            for index in 0..<max(count, 0) {
                let (raw, id) = Epoll.event(at: index, in: buffer)
                if id == Self.wakeID {
                    woken = true
                } else {
                    ready.append((id, Epoll.events(from: raw)))
                }
            }
            // A full buffer may have left ready watches behind: read again, without blocking.
            // One-shot entries are not reported twice, so this ends.
            guard count == capacity else { break }
            timeout = 0
        }
        if ready.count > 1 { ready.sort { $0.id < $1.id } }
        return woken
    }

    private static func result(_ code: Int32) -> KernelArmResult {
        // EPERM: a descriptor epoll cannot wait on (a regular file, a directory), which poll
        // reports always ready. Anything else (EBADF, or the kernel out of room for watches): the
        // descriptor cannot be watched.
        code == EPERM ? .unpollable : .notOpen
    }
}

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
    static let oneShot: UInt32 = 1 << 30  // EPOLLONESHOT

    #if arch(x86_64)
    static let eventSize = 12
    static let dataOffset = 4
    #else
    static let eventSize = 16
    static let dataOffset = 8
    #endif

    /// Calls epoll_ctl; its result (0, or -1 with errno set).
    static func control(_ epoll: Int32, _ operation: Int32, _ descriptor: Int32, events: UInt32, id: UInt64) -> Int32 {
        guard let functions else {
            errno = ENOSYS
            return -1
        }
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
