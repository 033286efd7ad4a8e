// The public face of a loop that waits on descriptors and timers: what a descriptor is ready
// for, a watch on one descriptor, a timer. The machinery is in DescriptorPoller.swift.

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a watched descriptor is ready for, or what happened to it.
///
/// As an interest (``SDKLoop/watch(_:for:_:)``, ``DescriptorWatch/update(interest:)``) only
/// ``readable`` and ``writable`` are meaningful. A handler may receive any of them: ``error``,
/// ``hangUp`` and ``invalid`` are reported whatever the interest, as `poll` does.
public struct DescriptorEvents: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The bits: one per member.
    public let rawValue: UInt8

    /// The events whose bits are set in `rawValue`.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Data can be read without blocking (or the peer closed its end: a read returns 0).
    public static let readable = DescriptorEvents(rawValue: 1 << 0)
    /// Data can be written without blocking.
    public static let writable = DescriptorEvents(rawValue: 1 << 1)
    /// An error condition on the descriptor (`POLLERR`), for example a failed connect.
    public static let error = DescriptorEvents(rawValue: 1 << 2)
    /// The peer hung up (`POLLHUP`).
    public static let hangUp = DescriptorEvents(rawValue: 1 << 3)
    /// The descriptor cannot be watched: it is not open. The handler receives this once; the
    /// watch then ends.
    ///
    /// Cancel a watch before its descriptor is closed (``DescriptorWatch/cancel(closingDescriptor:)``
    /// does both). A number that comes to name a new file under a live watch is not reported: the
    /// watch hears the new file once its handler has returned or its interest was updated.
    public static let invalid = DescriptorEvents(rawValue: 1 << 4)

    /// The members an interest may hold.
    public static let interests: DescriptorEvents = [.readable, .writable]

    /// The members, for example "[readable, hangUp]".
    public var description: String {
        let names: [(DescriptorEvents, String)] = [
            (.readable, "readable"), (.writable, "writable"), (.error, "error"), (.hangUp, "hangUp"),
            (.invalid, "invalid"),
        ]
        return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
    }
}

/// A descriptor watched by an ``SDKLoop``: its handler runs on the loop thread whenever the
/// descriptor is ready for what the watch is interested in.
///
/// The watch stays until ``cancel(closingDescriptor:)`` or the loop's shutdown; releasing this
/// object does not end it. Every method may be called from any thread, including from inside
/// a handler.
public final class DescriptorWatch: Sendable {
    /// The watched descriptor.
    public let descriptor: Int32
    let id: UInt64
    let core: SDKLoopCore
    let poller: DescriptorPoller
    /// Set by the first `cancel(closingDescriptor: true)`: the descriptor is closed once.
    private let closeClaimed = LockedBox(false)

    init(descriptor: Int32, id: UInt64, core: SDKLoopCore, poller: DescriptorPoller) {
        self.descriptor = descriptor
        self.id = id
        self.core = core
        self.poller = poller
    }

    deinit {
        poller.forgetHandle(id)
    }

    /// What the watch is interested in now; empty once it was cancelled.
    public var interest: DescriptorEvents { poller.interest(of: id) }

    /// Whether the watch is still registered: not cancelled, not ended by an invalid descriptor,
    /// a throwing handler or the loop's shutdown.
    public var isActive: Bool { poller.isWatching(id) }

    /// Changes what the watch waits for: ``DescriptorEvents/readable``, ``DescriptorEvents/writable``,
    /// both, or neither (the watch then only reports errors and hang-ups). The next wait uses it;
    /// a change from another thread wakes the loop. Does nothing once the watch ended.
    ///
    /// Call it after the SDK replaced the descriptor under the same number outside this watch's
    /// handler: the loop then hears the new file, whatever its backend.
    ///
    /// - Parameter interest: The new interest; only `.readable` and `.writable` are allowed.
    public func update(interest: DescriptorEvents) {
        precondition(
            DescriptorEvents.interests.isSuperset(of: interest),
            "DescriptorWatch.update(interest:): an interest holds only .readable and .writable, not \(interest)")
        if poller.update(id, interest: interest), !core.isCurrent { poller.wake() }
    }

    /// Has the loop ask the SDK's readiness query again soon, for a watch made with
    /// ``SDKLoop/watch(_:for:readiness:_:)``. Does nothing for other watches, or once the watch
    /// ended.
    ///
    /// The loop asks the query before each of its waits, so code on the loop thread (a handler,
    /// a timer, a posted job that sent a message) never needs it. Call it where the SDK's state
    /// changed on another thread, for an SDK whose calls are thread-safe: a send there may take
    /// the descriptor's signal while the loop waits, and only this wakes the loop to ask.
    public func recheck() {
        guard !core.isCurrent, poller.isQueried(id) else { return }
        poller.wake()
    }

    /// Ends the watch. Calling it again is harmless.
    ///
    /// When it returns, from any thread, the loop no longer waits on the descriptor: closing it
    /// next is safe, even while its open file lives on elsewhere (a duplicate, a forked child).
    /// Called on the loop thread (inside a handler, a posted job or a timer), the handler never
    /// runs again, not even for readiness the loop has already collected. Called from another
    /// thread, a handler call that the loop has already begun may still be running; no later one
    /// begins.
    ///
    /// - Parameter closingDescriptor: Also close the descriptor, exactly once, whether the watch
    ///   was live or had already ended (a handler threw, the loop shut down): on the loop thread
    ///   once no handler of this watch can be running (at once when called on the loop thread),
    ///   or at once when the loop has stopped. This is how another thread closes a watched
    ///   descriptor without racing its handler. A watch reported ``DescriptorEvents/invalid``
    ///   had no open descriptor: nothing is closed.
    public func cancel(closingDescriptor: Bool = false) {
        let removed = poller.remove(watch: id)
        let onLoop = core.isCurrent
        // The poll set is the loop's copy: the wait in progress ends, the next one leaves it out.
        if removed, !onLoop, poller.backend == .poll { poller.wake() }
        guard closingDescriptor else { return }
        let first = closeClaimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
        guard first, removed || !poller.endedInvalid(id) else { return }
        if onLoop {
            _ = close(descriptor)
            return
        }
        let poller = self.poller
        let descriptor = self.descriptor
        do {
            try core.post { _ = close(descriptor) }
        } catch {
            // Shutting down: the loop thread closes it when it leaves, or now if it has left.
            poller.closeAtExit(descriptor)
        }
    }
}

/// A timer on an ``SDKLoop``: its handler runs on the loop thread when it is due, once or
/// repeatedly.
///
/// The timer stays until it fired (a one-shot timer), ``cancel()`` or the loop's shutdown;
/// releasing this object does not end it.
public final class LoopTimer: Sendable {
    let id: UInt64
    let poller: DescriptorPoller

    init(id: UInt64, poller: DescriptorPoller) {
        self.id = id
        self.poller = poller
    }

    /// Whether the timer may still fire.
    public var isActive: Bool { poller.isScheduled(id) }

    /// Ends the timer. Calling it again is harmless.
    ///
    /// Called on the loop thread, the handler never runs again, not even when it is due in the
    /// same iteration. Called from another thread, a call the loop has already begun may still
    /// be running; no later one begins.
    public func cancel() {
        poller.remove(timer: id)
    }
}
