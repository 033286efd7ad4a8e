import CLegacySDK
import Dispatch
import Foundation
import TestSupport
import Testing

@Suite("Delivery: where, when and how often callbacks come", .onOwnThread)
struct DeliveryTests {
    @Test(
        "Synchronous delivery calls back on the caller's thread before start returns, and writes the handle only after")
    func synchronousDelivery() throws {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_SYNC)
            behavior.completion_count = 3
            behavior.delay_us = 5_000_000  // ignored by synchronous delivery

            let out = UnsafeMutablePointer<lsdk_handle_t>.allocate(capacity: 1)
            defer { out.deallocate() }
            out.pointee = 0xDEAD
            let address = UInt(bitPattern: out)
            let seenHandles = LockedList<lsdk_handle_t>()
            let recorder = Recorder { _, _ in
                seenHandles.append(UnsafeMutablePointer<lsdk_handle_t>(bitPattern: address)!.pointee)
            }
            let caller = pthread_self()
            let context = recorder.retainedContext()
            var request = lsdk_request_t(path: nil, response_size: 4)
            let status = lsdk_request_start(
                client, &request, &behavior, recorderCompletion, context, recorderRelease, out)
            #expect(status == Status.ok)
            // Everything happened inside start, on this thread.
            let entries = recorder.entries
            #expect(entries.count == 3)
            #expect(entries.allSatisfy { isSameThread($0.thread, caller) })
            #expect(entries.map(\.attempt) == [1, 2, 3])
            #expect(recorder.releases == 1)
            // The handle was not yet written while the callbacks ran.
            #expect(seenHandles.values == [0xDEAD, 0xDEAD, 0xDEAD])
            #expect(out.pointee != 0xDEAD && out.pointee != 0)
            let counted = counters(client)
            #expect(counted.callbacks_sync == 3)
            #expect(counted.callbacks_worker == 0)
            #expect(counted.callbacks_fresh_thread == 0)
            #expect(lsdk_handle_release(out.pointee) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("Worker delivery calls back on a pool thread, never the caller's")
    func workerDelivery() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_WORKER)
            behavior.completion_count = 2
            let recorder = Recorder()
            let caller = pthread_self()
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.count == 2)
            #expect(recorder.entries.allSatisfy { !isSameThread($0.thread, caller) })
            let counted = counters(client)
            #expect(counted.callbacks_worker == 2)
            #expect(counted.callbacks_sync == 0)
            #expect(counted.callbacks_fresh_thread == 0)
            #expect(counted.threads_created == 0)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("Fresh-thread delivery creates one new thread per callback, neither the caller nor a worker")
    func freshThreadDelivery() {
        withClient(workers: 1) { client in
            // The only worker's thread, for comparison.
            let workerProbe = Recorder()
            var worker = lsdk_behavior_t.defaults()
            worker.set(delivery: LSDK_DELIVERY_WORKER)
            let (_, workerHandle) = startRequest(client, worker, recorder: workerProbe)
            #expect(workerProbe.waitReleased())
            let workerThread = workerProbe.entries[0].thread

            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_FRESH_THREAD)
            behavior.completion_count = 3
            let recorder = Recorder()
            let caller = pthread_self()
            let (status, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.count == 3)
            #expect(
                recorder.entries.allSatisfy {
                    !isSameThread($0.thread, caller) && !isSameThread($0.thread, workerThread)
                })
            let counted = counters(client)
            #expect(counted.callbacks_fresh_thread == 3)
            #expect(counted.threads_created == 3)
            #expect(counted.callbacks_worker == 1)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(workerHandle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    /// Runs `count` MIXED requests on a client seeded with `seed`; returns the counters, per
    /// operation how many callbacks ran on the caller's thread, and how many of those ran after
    /// start had returned.
    private func runMixed(seed: UInt64, count: Int) -> (lsdk_counters_t, [Int], Int) {
        withClient(seed: seed) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.set(delivery: LSDK_DELIVERY_MIXED)
            behavior.completion_count = 4
            let caller = pthread_self()
            var onCaller: [Int] = []
            let lateOnCaller = LockedList<Bool>()
            var recorders: [(Recorder, lsdk_handle_t)] = []
            for _ in 0..<count {
                let returned = Flag()
                let recorder = Recorder { _, entry in
                    if isSameThread(entry.thread, caller) && returned.isSet { lateOnCaller.append(true) }
                }
                let (status, handle) = startRequest(client, behavior, recorder: recorder)
                returned.set()
                #expect(status == Status.ok)
                recorders.append((recorder, handle))
                #expect(recorder.waitReleased())
                onCaller.append(recorder.entries.filter { isSameThread($0.thread, caller) }.count)
            }
            for (recorder, handle) in recorders {
                #expect(lsdk_handle_release(handle) == Status.ok)
                expectContractKept(recorder)
            }
            return (counters(client), onCaller, lateOnCaller.values.count)
        }
    }

    @Test("Mixed delivery draws every kind from the seed, reproducibly, and is synchronous only inside start")
    func mixedDelivery() {
        let (first, firstOps, firstLate) = runMixed(seed: 42, count: 16)
        let (second, secondOps, _) = runMixed(seed: 42, count: 16)
        #expect(first.callbacks_sync > 0)
        #expect(first.callbacks_worker > 0)
        #expect(first.callbacks_fresh_thread > 0)
        #expect(first.callbacks_sync + first.callbacks_worker + first.callbacks_fresh_thread == 64)
        // Same client seed, same draws.
        #expect(first.callbacks_sync == second.callbacks_sync)
        #expect(first.callbacks_worker == second.callbacks_worker)
        #expect(first.callbacks_fresh_thread == second.callbacks_fresh_thread)
        #expect(firstOps == secondOps)
        #expect(firstOps.reduce(0, +) == Int(first.callbacks_sync))
        // A callback on the caller's thread only ever happened before start returned.
        #expect(firstLate == 0)
    }

    @Test("Repeated completions arrive in the order of the outcome list, numbered by attempt")
    func repeatsInOrder() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 5
            behavior.outcomeList = [
                Int32(LSDK_OUTCOME_SUCCESS), Int32(LSDK_OUTCOME_ERROR), Int32(LSDK_OUTCOME_ERROR),
                Int32(LSDK_OUTCOME_SUCCESS), Int32(LSDK_OUTCOME_ERROR),
            ]
            behavior.error_status = 4242  // an unknown status is allowed and carried as is
            let recorder = Recorder()
            let (status, handle) = startRequest(
                client, behavior, recorder: recorder, responseSize: 32, path: "/repeat", errorMessage: "injected")
            #expect(status == Status.ok)
            #expect(recorder.waitReleased())
            let entries = recorder.entries
            #expect(entries.map(\.status) == [Status.ok, 4242, 4242, Status.ok, 4242])
            #expect(entries.map(\.attempt) == [1, 2, 3, 4, 5])
            #expect(entries.map(\.message) == ["/repeat", "injected", "injected", "/repeat", "injected"])
            #expect(entries.map(\.length) == [32, 0, 0, 32, 0])
            #expect(entries.allSatisfy { $0.bytesValid })
            #expect(Set(entries.map(\.requestID)).count == 1)
            #expect(counters(client).callbacks_repeated == 4)
            #expect(lsdk_handle_release(handle) == Status.ok)
            expectContractKept(recorder)
        }
    }

    @Test("An error outcome without a message carries the default message and LSDK_ERR_REMOTE")
    func defaultError() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.outcomeList = [Int32(LSDK_OUTCOME_ERROR)]
            let recorder = Recorder()
            let (_, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(recorder.waitReleased())
            #expect(recorder.entries.map(\.status) == [Status.remote])
            #expect(recorder.entries.first?.message.isEmpty == false)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("completion_count 0 never calls back; the operation stays in flight until cancelled")
    func neverCompletes() {
        withClient(workers: 1) { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.completion_count = 0
            behavior.set(cancelMode: LSDK_CANCEL_SILENT)
            let silent = Recorder()
            let (status, handle) = startRequest(client, behavior, recorder: silent)
            #expect(status == Status.ok)
            // A later operation on the only worker completes: the first had its turn and made no callback.
            let later = Recorder()
            let (_, laterHandle) = startRequest(client, .defaults(), recorder: later)
            #expect(later.waitReleased())
            #expect(silent.entries.isEmpty)
            #expect(!silent.isReleased)
            #expect(counters(client).operations_finished == 1)
            // Cancel ends it: the context is released, still without a callback.
            #expect(lsdk_cancel(handle) == Status.ok)
            #expect(silent.waitReleased())
            #expect(silent.entries.isEmpty)
            #expect(lsdk_handle_release(handle) == Status.ok)
            #expect(lsdk_handle_release(laterHandle) == Status.ok)
            expectContractKept(silent)
        }
    }

    @Test("delay_us holds each completion back at least that long")
    func delay() {
        withClient { client in
            var behavior = lsdk_behavior_t.defaults()
            behavior.delay_us = 30_000
            behavior.completion_count = 2
            let recorder = Recorder()
            let started = DispatchTime.now()
            let (_, handle) = startRequest(client, behavior, recorder: recorder)
            #expect(recorder.waitReleased())
            let elapsed = DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds
            // A guaranteed lower bound (two delays), not a performance expectation.
            #expect(elapsed >= 60_000_000)
            #expect(recorder.entries.count == 2)
            #expect(lsdk_handle_release(handle) == Status.ok)
        }
    }

    @Test("jitter_us reorders operations that a single worker would otherwise complete in start order")
    func jitter() {
        func completionOrder(jitter: UInt32) -> [UInt64] {
            withClient(workers: 1, seed: 7) { client in
                var behavior = lsdk_behavior_t.defaults()
                behavior.jitter_us = jitter
                let order = LockedList<UInt64>()
                var started: [(Recorder, lsdk_handle_t)] = []
                for _ in 0..<12 {
                    let recorder = Recorder { _, entry in order.append(entry.requestID) }
                    started.append((recorder, startRequest(client, behavior, recorder: recorder).handle))
                }
                for (recorder, handle) in started {
                    #expect(recorder.waitReleased())
                    #expect(lsdk_handle_release(handle) == Status.ok)
                }
                return order.values
            }
        }
        #expect(completionOrder(jitter: 0) == Array(1...12))
        #expect(completionOrder(jitter: 40_000) != Array(1...12))
    }

    @Test("Content bytes are a deterministic function of request and offset")
    func contentBytes() {
        #expect(lsdk_content_byte(1, 0) == lsdk_content_byte(1, 0))
        let row = (0..<64).map { lsdk_content_byte(3, UInt64($0)) }
        #expect(Set(row).count > 16)
        #expect(row != (0..<64).map { lsdk_content_byte(4, UInt64($0)) })
    }
}

/// A flag set once, read from SDK threads.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// A list appended to from SDK threads.
final class LockedList<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Element] = []
    func append(_ element: Element) { lock.withLock { storage.append(element) } }
    var values: [Element] { lock.withLock { storage } }
}
