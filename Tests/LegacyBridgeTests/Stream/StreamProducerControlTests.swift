import Testing
@testable import LegacyBridge

private typealias Machine = ProducerControlStateMachine
private typealias Operation = ProducerControlStateMachine.Operation

private let control = StreamControl(cancel: {}, pause: {}, resume: {})

/// Drives the machine like the storage does, but lets the test decide when an
/// in-flight call completes.
private struct Driver {
    var machine = Machine()
    var inFlight: Operation?
    var delivered: [Operation] = []
    var version: UInt64 = 0

    /// A new pause decision, newer than every earlier one.
    mutating func want(_ paused: Bool) {
        version += 1
        take(machine.setPaused(paused, version: version))
    }

    mutating func take(_ delivery: Machine.Delivery?, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let delivery else { return }
        #expect(inFlight == nil, "a second call was handed out while one is in flight", sourceLocation: sourceLocation)
        inFlight = delivery.operation
        delivered.append(delivery.operation)
    }

    /// The deliverer's call returns.
    mutating func complete() {
        precondition(inFlight != nil)
        inFlight = nil
        take(machine.deliveryCompleted())
    }

    mutating func completeAll() {
        while inFlight != nil { complete() }
    }
}

@Suite("Stream: producer control deliverer")
struct StreamProducerControlTests {
    @Test("a resume decided before a newer pause lands first; the producer ends paused")
    func resumeCannotOvertakePause() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.complete()
        driver.want(false)  // consumer thread starts delivering resume…
        #expect(driver.inFlight == .resume)
        driver.want(true)   // …producer drives the buffer back to high meanwhile
        #expect(driver.delivered == [.pause, .resume], "the new pause must wait for the resume in flight")
        driver.complete()                               // resume returns; the same deliverer makes the pause
        #expect(driver.delivered == [.pause, .resume, .pause])
        driver.completeAll()
        #expect(driver.machine.pausedAsTold == true)
    }

    @Test("pause and resume wanted and unwanted while a call is in flight coalesce to nothing")
    func coalesces() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.want(false)
        driver.want(true)
        driver.completeAll()
        #expect(driver.delivered == [.pause])
        #expect(driver.machine.pausedAsTold == true)
    }

    @Test("a pause due before the handle arrives is made when it arrives; a cancel requested before it wins")
    func beforeControl() {
        var driver = Driver()
        driver.want(true)
        #expect(driver.delivered.isEmpty)
        driver.take(driver.machine.controlArrived(control))
        driver.completeAll()
        #expect(driver.delivered == [.pause])

        var cancelled = Driver()
        cancelled.want(true)
        cancelled.take(cancelled.machine.requestCancel())
        cancelled.take(cancelled.machine.requestCancel())
        cancelled.take(cancelled.machine.controlArrived(control))
        cancelled.completeAll()
        #expect(cancelled.delivered == [.cancel])
    }

    @Test("cancel supersedes pending pause/resume, is made once, and nothing follows it")
    func cancelIsLast() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.want(true)
        driver.want(false)
        driver.take(driver.machine.requestCancel())
        driver.complete()
        #expect(driver.delivered == [.pause, .cancel])
        driver.want(true)
        driver.take(driver.machine.requestCancel())
        driver.completeAll()
        #expect(driver.delivered == [.pause, .cancel])
    }

    @Test("a pause decision older than the newest one is ignored (decisions applied after the stream's lock was released may arrive out of order)")
    func staleDecisionIgnored() {
        var driver = Driver()
        driver.take(driver.machine.controlArrived(control))
        driver.take(driver.machine.setPaused(true, version: 1))
        driver.complete()
        // Decided under the stream's lock: resume (v2), then pause (v3); applied in the opposite order.
        driver.take(driver.machine.setPaused(true, version: 3))
        driver.take(driver.machine.setPaused(false, version: 2))
        driver.completeAll()
        #expect(driver.delivered == [.pause])
        #expect(driver.machine.pausedAsTold == true)
        #expect(driver.machine.pauses == 1)
        #expect(driver.machine.resumes == 0)
    }

    @Test("no handle, or a finished producer, means no calls at all")
    func noCalls() {
        var none = Driver()
        none.take(none.machine.requestCancel())
        none.take(none.machine.controlArrived(nil))
        #expect(none.delivered.isEmpty)

        var finished = Driver()
        finished.want(true)
        finished.machine.producerFinished()
        finished.take(finished.machine.requestCancel())
        finished.take(finished.machine.controlArrived(control))
        #expect(finished.delivered.isEmpty)
    }

    @Test("random event orders keep the invariants: one call in flight, alternating pause/resume, last wanted state reached, cancel once and last")
    func randomisedInvariants() {
        var generator = StreamSplitMix(seed: 42)
        for _ in 0..<3000 {
            var driver = Driver()
            var arrived = false
            var nilControl = false
            var wanted = false
            var cancelRequested = false
            var finished = false
            for _ in 0..<Int.random(in: 1...14, using: &generator) {
                switch Int.random(in: 0..<6, using: &generator) {
                case 0 where !arrived:
                    arrived = true
                    nilControl = Int.random(in: 0..<8, using: &generator) == 0
                    driver.take(driver.machine.controlArrived(nilControl ? nil : control))
                case 1:
                    wanted = true
                    driver.want(true)
                case 2:
                    wanted = false
                    driver.want(false)
                case 3:
                    if !finished { cancelRequested = true }
                    driver.take(driver.machine.requestCancel())
                case 4:
                    finished = true
                    driver.machine.producerFinished()
                default:
                    if driver.inFlight != nil { driver.complete() }
                }
            }
            if !arrived {
                arrived = true
                driver.take(driver.machine.controlArrived(control))
            }
            driver.completeAll()

            let calls = driver.delivered
            let cancels = calls.filter { $0 == .cancel }.count
            #expect(cancels == (cancelRequested && !nilControl ? 1 : 0), "\(calls)")
            if let index = calls.firstIndex(of: .cancel) { #expect(index == calls.count - 1, "\(calls)") }
            let toggles = calls.filter { $0 != .cancel }
            for (index, call) in toggles.enumerated() {
                #expect(call == (index % 2 == 0 ? .pause : .resume), "pause/resume must alternate: \(calls)")
            }
            if !cancelRequested && !finished && !nilControl {
                #expect(driver.machine.pausedAsTold == wanted, "the producer must end in the last wanted state: \(calls)")
            }
        }
    }
}
