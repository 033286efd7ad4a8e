// The SDK under the documentation's stand-ins (StandIns.swift): CLegacySDK, whose callbacks come
// from its own worker threads.

import CLegacySDK
import LegacyBridge
import TestSupport

/// The client every stand-in calls, created once.
package enum DocSDK {
    // nonisolated(unsafe): written once, by the lazy initializer; the SDK is thread-safe.
    nonisolated(unsafe) package static let client: OpaquePointer = {
        var client: OpaquePointer?
        precondition(lsdk_client_create(nil, &client) == 0 && client != nil, "CLegacySDK: client_create failed")
        // Destroyed at the end of the test process, before the run-end check counts what is left.
        let address = UInt(bitPattern: client)
        RunEnd.atEnd { _ = lsdk_client_destroy(OpaquePointer(bitPattern: address)) }
        return client!
    }()

    /// What a stand-in's request does.
    package enum Reply {
        /// One completion, after the delay, on a worker thread.
        case after(microseconds: UInt32)
        /// No completion until cancelled (the SDK then reports LSDK_ERR_CANCELLED from a worker).
        case never
    }

    /// Starts a request whose completions call `body` with the SDK's status on an SDK thread.
    package static func request(_ reply: Reply, _ body: @escaping (Int32) -> Void) -> SDKOperation {
        var behavior = lsdk_behavior_t()
        lsdk_behavior_init(&behavior)
        behavior.delivery = Int32(LSDK_DELIVERY_WORKER)
        switch reply {
        case .after(let microseconds): behavior.delay_us = microseconds
        case .never: behavior.completion_count = 0
        }
        let context = Unmanaged.passRetained(CallbackBox(body)).toOpaque()
        var handle: lsdk_handle_t = 0
        let status = lsdk_request_start(
            client, nil, &behavior,
            { context, status, _ in
                Unmanaged<CallbackBox<Int32>>.fromOpaque(context!).takeUnretainedValue().call(status)
            },
            context, { context in Unmanaged<CallbackBox<Int32>>.fromOpaque(context!).release() }, &handle)
        precondition(status == 0, "CLegacySDK: request_start failed with \(status)")
        return SDKOperation(handle)
    }

    /// What a stream's event says.
    package struct Event {
        var isEnd: Bool
        var sequence: UInt64
        var status: Int32
    }

    /// Starts a download (`topic` nil) or a listener of `events` data events, then an end; each
    /// event calls `body` on an SDK thread.
    package static func stream(
        events: UInt64, listenerTopic topic: UInt64? = nil, _ body: @escaping (Event) -> Void
    )
        -> SDKOperation
    {
        var behavior = lsdk_behavior_t()
        lsdk_behavior_init(&behavior)
        behavior.delivery = Int32(LSDK_DELIVERY_WORKER)
        behavior.chunk_size = 16
        behavior.progress_every = 0
        let context = Unmanaged.passRetained(CallbackBox(body)).toOpaque()
        let onEvent: lsdk_event_fn = { context, event in
            let event = event!.pointee
            Unmanaged<CallbackBox<Event>>.fromOpaque(context!).takeUnretainedValue().call(
                Event(isEnd: event.kind == Int32(LSDK_EVENT_END), sequence: event.sequence, status: event.status))
        }
        let release: lsdk_release_fn = { context in Unmanaged<CallbackBox<Event>>.fromOpaque(context!).release() }
        var handle: lsdk_handle_t = 0
        let status: lsdk_status_t
        if let topic {
            var request = lsdk_listen_request_t(topic: topic, event_count: events)
            status = lsdk_listen_start(client, &request, &behavior, onEvent, context, release, &handle)
        } else {
            var request = lsdk_download_request_t(path: nil, total_bytes: events * 16)
            status = lsdk_download_start(client, &request, &behavior, onEvent, context, release, &handle)
        }
        precondition(status == 0, "CLegacySDK: stream start failed with \(status)")
        return SDKOperation(handle)
    }
}

/// A closure the SDK holds as its context: not @Sendable, like what an imported SDK stores.
package final class CallbackBox<Argument>: @unchecked Sendable {
    // @unchecked Sendable: the closure is called from the SDK's threads, which is the point; it
    // is never mutated.
    package let call: (Argument) -> Void
    init(_ call: @escaping (Argument) -> Void) { self.call = call }
}

/// An operation's handle, released when the last owner lets go.
package final class SDKOperation: Sendable {
    package let handle: lsdk_handle_t
    init(_ handle: lsdk_handle_t) { self.handle = handle }
    deinit { lsdk_handle_release(handle) }
    package func cancel() { _ = lsdk_cancel(handle) }
    package func pause() { _ = lsdk_pause(handle) }
    package func resume() { _ = lsdk_resume(handle) }
}
