// Drives SharedDeliveryQueue the way SharedSubscriptionStorage does, through every interleaving
// of its threads at the granularity of the lock: producers that yield one element each and a
// thread that finishes. Each step is one hold of the lock or one hand-over to the consumers
// (outside the lock). At every step at most one thread delivers; after every interleaving the
// consumers got what was accepted, in the order it was accepted (the terminal last, if it was
// accepted), and nothing is left queued or delivering.

import Testing
@testable import LegacyBridge

private typealias Queue = SharedDeliveryQueue<Int, Int, String>

private enum Phase {
    /// Its first lock hold: accepted (or stale), then delivering or queued.
    case start
    /// Hands its own element or terminal to the consumers, outside the lock.
    case deliverOwn
    /// A yield that delivered its own: stops unless something was queued meanwhile.
    case afterOwn
    /// Takes the next queued delivery, or stops.
    case drain
    /// Hands a queued delivery to the consumers, outside the lock.
    case deliverQueued([String])
    case done

    /// The thread is the deliverer.
    var delivers: Bool {
        switch self {
        case .deliverOwn, .afterOwn, .drain, .deliverQueued: return true
        case .start, .done: return false
        }
    }
}

private struct Worker {
    /// The element it yields, or nil for the thread that finishes.
    let element: Int?
    var phase = Phase.start
    var own: [String] { element.map { [String($0)] } ?? ["end"] }
}

private struct World {
    var queue = Queue()
    var threads: [Worker]
    var ended = false
    var accepted: [String] = []
    var delivered: [String] = []
    var interleavings = 0
    var failure: String?

    mutating func step(_ index: Int) {
        var thread = threads[index]
        switch thread.phase {
        case .start:
            if ended {
                thread.phase = .done  // a stale yield, or a second terminal: ignored
            } else if let element = thread.element {
                accepted.append(String(element))
                let now = [element].withUnsafeBufferPointer { queue.admit($0, to: [0]) }
                thread.phase = now ? .deliverOwn : .done
            } else {
                ended = true
                accepted.append("end")
                thread.phase = queue.admit("end", to: [0]) ? .deliverOwn : .done
            }
        case .deliverOwn:
            delivered += thread.own
            // A yield checks whether anything was queued; a terminal goes straight to the queue.
            thread.phase = thread.element == nil ? .drain : .afterOwn
        case .afterOwn:
            thread.phase = queue.stopDeliveringIfNothingQueued() ? .done : .drain
        case .drain:
            switch queue.next() {
            case .elements(let elements, _)?: thread.phase = .deliverQueued(elements.map(String.init))
            case .terminal(let terminal, _)?: thread.phase = .deliverQueued([terminal])
            case nil: thread.phase = .done
            }
        case .deliverQueued(let items):
            delivered += items
            thread.phase = .drain
        case .done:
            preconditionFailure("a finished thread took a step")
        }
        threads[index] = thread
    }

    /// Every interleaving from here on; the first broken one is kept in `failure`.
    mutating func explore(_ trace: [Int] = []) {
        guard failure == nil else { return }
        let deliverers = threads.filter { $0.phase.delivers }.count
        if deliverers > 1 || deliverers != 0 && !queue.delivering {
            failure = "\(trace): \(deliverers) threads deliver, queue says \(queue.delivering)"
            return
        }
        let runnable = threads.indices.filter {
            if case .done = threads[$0].phase { return false }
            return true
        }
        guard !runnable.isEmpty else {
            interleavings += 1
            if delivered != accepted || queue.delivering || queue.queued != 0 {
                failure =
                    "\(trace): accepted \(accepted), delivered \(delivered), delivering \(queue.delivering), queued \(queue.queued)"
            }
            return
        }
        for index in runnable {
            var next = self
            next.step(index)
            next.explore(trace + [index])
            interleavings = next.interleavings
            failure = next.failure
            if failure != nil { return }
        }
    }
}

@Suite("SharedDeliveryQueue: one deliverer, the order of acceptance")
struct SharedDeliveryQueueTests {
    @Test(
        "every interleaving of two or three yielding threads, with and without a finishing one",
        arguments: [[1, 2], [1, 2, 3]], [false, true])
    func everyInterleaving(elements: [Int], finishes: Bool) {
        var world = World(threads: elements.map { Worker(element: $0) } + (finishes ? [Worker(element: nil)] : []))
        world.explore()
        #expect(world.failure == nil, "\(world.failure ?? "")")
        // The exploration is deterministic: these are its sizes (a yield that is queued takes one
        // step, so most interleavings are short). Fewer would mean it stopped early.
        let expected = [[1, 2]: [false: 6, true: 68], [1, 2, 3]: [false: 84, true: 1_176]]
        #expect(world.interleavings == expected[elements]?[finishes], "\(world.interleavings) interleavings explored")
    }

    @Test("a deliverer that queued nothing stops at once; one that did hands it over in order, then stops")
    func queuedDeliveriesAreHandedOver() {
        var queue = Queue()
        func yield(_ element: Int) -> Bool { [element].withUnsafeBufferPointer { queue.admit($0, to: [0]) } }
        let first = yield(1)
        let second = yield(2)
        let terminal = queue.admit("end", to: [0])
        #expect(first && !second && !terminal)
        let stops = queue.stopDeliveringIfNothingQueued()
        #expect(!stops)
        guard case .elements(let elements, _)? = queue.next() else {
            Issue.record("the queued element did not come first")
            return
        }
        #expect(Array(elements) == [2])
        guard case .terminal("end", _)? = queue.next() else {
            Issue.record("the queued terminal did not come second")
            return
        }
        let last = queue.next()
        #expect(last == nil && !queue.delivering && queue.queued == 0)
        let third = yield(3)
        let stopped = queue.stopDeliveringIfNothingQueued()
        #expect(third && stopped && !queue.delivering)
    }
}
