// A test double of an SDK whose descriptor only says "go look", the shape of ZeroMQ's ZMQ_FD and
// ZMQ_EVENTS: the descriptor is a signal raised when messages arrive in an empty mailbox, and
// every call into the SDK (asking its events, receiving, sending) processes the mailbox, which
// takes the signal. A send can therefore take the signal of a message that arrived just before
// it, and the descriptor stays quiet while a message waits to be received.

import ToolSupport
import Foundation
@testable import LegacyBridge

final class EdgeTriggeredQueue: Sendable {
    private struct State {
        var mailbox: [Int] = []
        var receivable: [Int] = []
        var raised = false
        var sent: [Int] = []
    }

    /// The descriptor to watch: readable while the signal is raised.
    let signal: Int32
    private let raise: Int32
    private let state = LockedBox(State())
    /// How many times `events()` finished: a test waits on it to know the loop asked.
    let asked = AtomicCell<Int>(0)

    init() {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0)
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        (signal, raise) = (ends[0], ends[1])
    }

    /// A message arrives from the peer, on any thread: the signal is raised if it was not.
    func arrive(_ message: Int) {
        state.withLock { state in
            state.mailbox.append(message)
            if !state.raised { raiseSignal(&state) }
        }
    }

    /// The signal is raised with no message: a change of state that makes nothing receivable.
    func signalOnly() {
        state.withLock { state in raiseSignal(&state) }
    }

    /// What the SDK is ready for (ZMQ_EVENTS): it processes the mailbox first.
    func events() -> DescriptorEvents {
        let ready = state.withLock { state -> Bool in
            process(&state)
            return !state.receivable.isEmpty
        }
        asked.add(1, ordering: .releasing)
        return ready ? .readable : []
    }

    /// The next message, or nil (EAGAIN).
    func receive() -> Int? {
        state.withLock { state in
            process(&state)
            return state.receivable.isEmpty ? nil : state.receivable.removeFirst()
        }
    }

    /// Sends a message: like every call, it processes the mailbox and so takes the signal.
    func send(_ message: Int) {
        state.withLock { state in
            process(&state)
            state.sent.append(message)
        }
    }

    /// Sends a message while a reply arrives, as ZeroMQ's send takes in the I/O thread's command
    /// that carries the reply: the reply becomes receivable and the descriptor never signals.
    func send(_ message: Int, replyArriving reply: Int) {
        state.withLock { state in
            process(&state)
            state.receivable.append(reply)
            state.sent.append(message)
        }
    }

    /// Whether the descriptor is readable now.
    var signalPending: Bool { state.withLock { $0.raised } }

    func close() {
        _ = Foundation.close(signal)
        _ = Foundation.close(raise)
    }

    // The pipe is read and written under the lock, so that `raised` and the pipe agree (a test
    // double: the library's own code never calls C under a lock).
    private func raiseSignal(_ state: inout State) {
        var byte: UInt8 = 1
        precondition(write(raise, &byte, 1) == 1)
        state.raised = true
    }

    private func process(_ state: inout State) {
        guard state.raised else { return }
        var byte: UInt8 = 0
        while read(signal, &byte, 1) == 1 {}
        state.raised = false
        state.receivable += state.mailbox
        state.mailbox = []
    }
}
