// The kqueue backend of the descriptor loop (Apple platforms, the default there): a wait costs the
// same with one descriptor watched or thousands. It keeps the contract of the epoll backend:
// - A cancelled watch left in the kernel. kqueue keys a filter by the descriptor number, and
//   close() removes every filter of that number, so a duplicate or a forked child that keeps the
//   open file alive keeps nothing here. The registry still deletes the filters when a watch is
//   cancelled, before the cancel returns.
// - A stale filter that reports forever. Every filter is added with EV_DISPATCH, disabled once it
//   reported, and enabled again by the loop after the handler: one report per handler call.
// - A number that comes to name a new file under a live watch (libpq's socket switch, dup2). The
//   close of the old file removed its filters, and the re-arm after each handler call and each
//   interest update adds them again for whatever the number names: the new file is heard.
// - Ready descriptors left for a later wait. The event buffer is sized to the watches (two filters
//   each) and read again without blocking while it comes back full.
// The watch id travels in the 64-bit udata of kevent64, on every Apple architecture.
// Where kqueue differs from poll, and is not papered over: a watch with an empty interest has no
// filter, so its hang-up is heard only once it asks for readable or writable (the end of the
// stream comes with them, as EV_EOF); a regular file is readable while its offset is before its
// end, where poll calls it always ready.

#if canImport(Darwin)
import Darwin

/// One loop's kqueue.
///
/// `@unchecked Sendable`: `queue` never changes, and kevent64 may be called from any thread;
/// `buffer` and `capacity` are touched by `wait` only, which only the loop thread calls.
final class KqueueWaitSet: KernelWaitSet, @unchecked Sendable {
    private let queue: Int32
    private var buffer: UnsafeMutablePointer<kevent64_s>
    private var capacity: Int
    /// The wake descriptor's filter carries this id; watch ids start at 1.
    private static let wakeID: UInt64 = 0

    init(wakeDescriptor: Int32) throws(DescriptorLoopError) {
        // A kqueue is not inherited by a forked child: no close-on-exec needed.
        queue = kqueue()
        guard queue >= 0 else { throw .waitSetFailed(code: errno) }
        capacity = 64
        buffer = .allocate(capacity: capacity)
        // The wake descriptor stays level-triggered: it is read by the loop, not re-armed.
        var wake = Self.change(wakeDescriptor, filter: EVFILT_READ, flags: EV_ADD, id: Self.wakeID)
        guard kevent64(queue, &wake, 1, nil, 0, 0, nil) == 0 else {
            let code = errno
            _ = Darwin.close(queue)
            buffer.deallocate()
            throw .waitSetFailed(code: code)
        }
    }

    func close() {
        _ = Darwin.close(queue)
        buffer.deallocate()
    }

    func arm(descriptor: Int32, id: UInt64, interest: DescriptorEvents, adding: Bool) -> KernelArmResult {
        // Each filter of the interest is added (which enables it again), the other is deleted.
        let armed = EV_ADD | EV_ENABLE | EV_DISPATCH
        let read = interest.contains(.readable) ? armed : EV_DELETE
        let write = interest.contains(.writable) ? armed : EV_DELETE
        let codes = apply(descriptor, id: id, read: read, write: write)
        for (flags, code) in zip([read, write], [codes.read, codes.write]) where code != 0 {
            // ENOENT: deleting a filter that was not there. EBADF: the number is not open.
            if flags == EV_DELETE && code == ENOENT { continue }
            return .notOpen
        }
        return .armed
    }

    func disarm(descriptor: Int32, id: UInt64) {
        // ENOENT or EBADF when the filters are already gone: nothing to do.
        _ = apply(descriptor, id: id, read: EV_DELETE, write: EV_DELETE)
    }

    func wait(milliseconds: Int32, expected: Int, into ready: inout [(id: UInt64, events: DescriptorEvents)]) -> Bool {
        ready.removeAll(keepingCapacity: true)
        if 2 * expected > capacity {
            buffer.deallocate()
            capacity = max(2 * expected, capacity * 2)
            buffer = .allocate(capacity: capacity)
        }
        var woken = false
        var timeout = milliseconds
        while true {
            let count: Int32
            if timeout < 0 {
                count = kevent64(queue, nil, 0, buffer, Int32(clamping: capacity), 0, nil)
            } else {
                var span = timespec(tv_sec: Int(timeout / 1_000), tv_nsec: Int(timeout % 1_000) * 1_000_000)
                count = kevent64(queue, nil, 0, buffer, Int32(clamping: capacity), 0, &span)
            }
            for index in 0..<Int(max(count, 0)) {
                let event = buffer[index]
                if event.udata == Self.wakeID {
                    woken = true
                } else {
                    ready.append((event.udata, Self.events(of: event)))
                }
            }
            // A full buffer may have left ready filters behind: read again, without blocking.
            // Dispatched filters are not reported twice, so this ends.
            guard Int(count) == capacity else { break }
            timeout = 0
        }
        guard ready.count > 1 else { return woken }
        // A watch's two filters report separately: one entry per watch, in id order.
        ready.sort { $0.id < $1.id }
        var merged = 0
        for index in 1..<ready.count {
            if ready[index].id == ready[merged].id {
                ready[merged].events.formUnion(ready[index].events)
            } else {
                merged += 1
                ready[merged] = ready[index]
            }
        }
        ready.removeLast(ready.count - merged - 1)
        return woken
    }

    /// Applies one change to each filter of `descriptor`; the error number of each (0: done).
    private func apply(_ descriptor: Int32, id: UInt64, read: Int32, write: Int32) -> (read: Int32, write: Int32) {
        // EV_RECEIPT: each change answers with its own error number, and no event is taken.
        var changes = (
            Self.change(descriptor, filter: EVFILT_READ, flags: read | EV_RECEIPT, id: id),
            Self.change(descriptor, filter: EVFILT_WRITE, flags: write | EV_RECEIPT, id: id)
        )
        var receipts = (kevent64_s(), kevent64_s())
        let count = withUnsafeMutablePointer(to: &changes) { changes in
            withUnsafeMutablePointer(to: &receipts) { receipts in
                changes.withMemoryRebound(to: kevent64_s.self, capacity: 2) { changes in
                    receipts.withMemoryRebound(to: kevent64_s.self, capacity: 2) { receipts in
                        kevent64(queue, changes, 2, receipts, 2, 0, nil)
                    }
                }
            }
        }
        guard count >= 0 else { return (errno, errno) }
        var codes: (read: Int32, write: Int32) = (0, 0)
        for receipt in [receipts.0, receipts.1].prefix(Int(count)) where receipt.flags & UInt16(EV_ERROR) != 0 {
            if Int32(receipt.filter) == EVFILT_READ {
                codes.read = Int32(truncatingIfNeeded: receipt.data)
            } else {
                codes.write = Int32(truncatingIfNeeded: receipt.data)
            }
        }
        return codes
    }

    private static func change(_ descriptor: Int32, filter: Int32, flags: Int32, id: UInt64) -> kevent64_s {
        kevent64_s(
            ident: UInt64(UInt32(bitPattern: descriptor)), filter: Int16(filter),
            flags: UInt16(truncatingIfNeeded: flags), fflags: 0, data: 0, udata: id, ext: (0, 0))
    }

    /// What a reported filter means: readable or writable, and the end of the stream or an error
    /// as `poll` reports them.
    private static func events(of event: kevent64_s) -> DescriptorEvents {
        var events: DescriptorEvents = Int32(event.filter) == EVFILT_READ ? .readable : .writable
        if event.flags & UInt16(EV_EOF) != 0 {
            events.insert(.hangUp)
            if event.fflags != 0 { events.insert(.error) }  // the socket's pending error
        }
        if event.flags & UInt16(EV_ERROR) != 0 { events.insert(.error) }
        return events
    }
}
#endif
