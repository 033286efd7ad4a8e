// The shared-subscription kind: an SDK that takes ONE listener per topic, which several consumers
// of the program want to follow. The hazards an adapter must survive: consumers that split one
// stream's events among them, a listener started once per consumer, a listener nobody stops.

import LegacyBridge
import LegacySimulator

/// A simulated SDK listener on one topic, as a shared-subscription scenario hands it to an adapter.
///
/// - The SDK takes one listener per topic: ``start(onEvent:onEnd:)`` while a listener runs throws
///   ``LegacySDKError/alreadyListening``. A listener runs from its start until its cancel or its end.
/// - Events come from the SDK's threads, one at a time, in sequence order from 0, as for
///   ``LegacyEventSource``. The end comes through `onEnd`: `nil` or the SDK's error.
/// - Cancel, pause and resume may be called from any thread.
public struct LegacyListener: Sendable {
    let client: SDKClient
    let topic: UInt64
    let eventCount: UInt64
    let behavior: SimulatedBehavior
    let probe: ListenerProbe

    /// Starts the SDK's listener on the topic.
    ///
    /// - Parameters:
    ///   - onEvent: Called for each event, from SDK threads.
    ///   - onEnd: Called with `nil` for a normal end, or the error that ended the listener:
    ///     ``LegacySDKError/cancelled`` after its cancel.
    /// - Returns: The listener's cancel, pause and resume functions.
    /// - Throws: ``LegacySDKError/alreadyListening`` when a listener of the topic runs, or another
    ///   ``LegacySDKError``. No callback comes for a refused start.
    public func start(
        onEvent: @escaping @Sendable (LegacyEvent) -> Void, onEnd: @escaping @Sendable ((any Error)?) -> Void
    ) throws -> LegacySourceControl {
        let probe = self.probe
        // Set before the end is delivered: from then on the SDK has ended the listener itself, and
        // a cancel is refused (not passed to the SDK) and counted, inside `onEnd` too.
        let ended = LockedBox(false)
        let started = SDK.startListener(
            client: client, topic: topic, eventCount: eventCount, behavior: behavior,
            onEvent: { raw in
                switch raw.kind {
                case .data:
                    probe.beforeEvent(raw.sequence)
                    onEvent(
                        LegacyEvent(sequence: raw.sequence, kind: .data, bytes: raw.bytesDone, length: raw.data.count))
                case .end:
                    ended.withLock { $0 = true }
                    onEnd(raw.error)
                case .progress:
                    break  // listeners send none
                }
            })
        switch started {
        case .success(let handle):
            return LegacySourceControl(
                cancel: {
                    if ended.withLock({ $0 }) {
                        probe.noteCancelAfterEnd()
                    } else {
                        handle.cancel()
                    }
                },
                pause: { try? handle.pause() }, resume: { try? handle.resume() })
        case .failure(let error):
            throw error
        }
    }
}

/// Something that lets many consumers follow one SDK listener, each with a sequence of its own.
///
/// Each consumer should get every event from the moment it joined, in order, then the listener's
/// end; the SDK should see one listener however many consumers follow it, and the listener should
/// stop when the last consumer leaves. Conform in a few lines with the library's
/// `SharedSubscription`:
/// ```swift
/// struct MyAdapter: SharedSubscriptionAdapter {
///     var name: String { "mine" }
///     var summary: String { "SharedSubscription over the listener" }
///     func share(_ listener: LegacyListener) -> @Sendable () -> CallbackStream<LegacyEvent> {
///         let shared = SharedSubscription(of: LegacyEvent.self, restart: .automatic) { sink in
///             let control = try listener.start(
///                 onEvent: { sink.yield($0) },
///                 onEnd: { error in if let error { sink.finish(throwing: error) } else { sink.finish() } })
///             return StreamControl(cancel: CancelHandle(control.cancel))
///         }
///         return { shared.subscribe() }
///     }
/// }
/// ```
public protocol SharedSubscriptionAdapter: Sendable {
    /// The sequence one consumer iterates.
    associatedtype Consumer: AsyncSequence where Consumer.Element == LegacyEvent
    /// A short name, unique among the adapters being compared (letters, digits, dashes).
    var name: String { get }
    /// One line saying what the adapter is.
    var summary: String { get }
    /// Shares `listener` among consumers. A consumer joins when its first `next()` suspends, and
    /// leaves when its task is cancelled or it leaves its loop.
    ///
    /// - Parameter listener: The SDK listener; the SDK takes one per topic.
    /// - Returns: A function that gives one more consumer its sequence, callable from any task.
    func share(_ listener: LegacyListener) -> @Sendable () -> Consumer
}

/// What the SDK side of a shared-subscription scenario saw, and the gate holding its first event.
final class ListenerProbe: Sendable {
    /// Opened by the scenario once every consumer joined; event 0 waits for it on the SDK's thread.
    let firstEvent = LabGate()
    private let patience: Duration

    init(patience: Duration, holdFirstEvent: Bool) {
        self.patience = patience
        if !holdFirstEvent { firstEvent.open() }
    }

    private let lateCancels = LockedBox(0)

    /// Cancels of the SDK listener made after the SDK itself had ended it (refused).
    var cancelsAfterEnd: Int { lateCancels.withLock { $0 } }

    func noteCancelAfterEnd() { lateCancels.withLock { $0 += 1 } }

    func beforeEvent(_ sequence: UInt64) {
        if sequence == 0 { _ = firstEvent.wait(upTo: patience) }
    }
}
