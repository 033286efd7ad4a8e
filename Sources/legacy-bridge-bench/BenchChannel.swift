import LegacyBridge

// The practical ceiling of a lock-based hand-off, as a baseline for CallbackStream: a hand-written
// channel (a pthread mutex, an array, one waiting continuation) whose consumer swaps the whole
// array out under the lock and then hands elements out without locking. No policy, no
// cancellation, no ordering, no producer control: everything CallbackStream adds is absent. The
// targets compare against it with a default pthread mutex; an information line also shows it with
// the spinning mutex CallbackStream itself uses, the same lock on both sides.

/// A single-producer, single-consumer channel of `Int`s: the bench's locked-channel baseline.
final class BenchLockedChannel: Sendable {
    private struct State {
        var buffer: [Int] = []
        var waiter: UnsafeContinuation<Void, Never>?
        var finished = false
    }

    private let state: LockedBox<State>

    /// `spinning`: the mutex spins briefly before it sleeps, as CallbackStream's own lock does
    /// (glibc's adaptive mutex); otherwise a default pthread mutex, the baseline the targets use.
    init(spinning: Bool = false) {
        state = LockedBox(spinning: spinning) { State() }
    }

    /// Appends one element; wakes the consumer if it waits.
    func send(_ value: Int) {
        let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
            state.buffer.append(value)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Appends a batch under one lock.
    func send(contentsOf values: UnsafeBufferPointer<Int>) {
        let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
            state.buffer.append(contentsOf: values)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func finish() {
        let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The consumer's end: swaps the buffer out, hands elements out from its own copy.
    struct Consumer {
        let channel: BenchLockedChannel
        var local: [Int] = []
        var index = 0

        /// Inlined into the consumer's loop (as CallbackStream's iterator is): a non-inlined async
        /// call per element would cost more than the whole hand-off.
        @inline(__always)
        mutating func next() async -> Int? {
            if index < local.count {
                defer { index += 1 }
                return local[index]
            }
            return await refill()
        }

        @inline(never)
        mutating func refill() async -> Int? {
            while true {
                if index < local.count {
                    defer { index += 1 }
                    return local[index]
                }
                local.removeAll(keepingCapacity: true)
                index = 0
                let ended = channel.state.withLock { state -> Bool in
                    swap(&state.buffer, &local)
                    return local.isEmpty && state.finished
                }
                if ended { return nil }
                if !local.isEmpty { continue }
                await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                    let ready = channel.state.withLock { state -> Bool in
                        if !state.buffer.isEmpty || state.finished { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
        }
    }
}
