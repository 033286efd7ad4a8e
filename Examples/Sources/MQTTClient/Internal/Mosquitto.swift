// The one file of MQTTClient that calls C (libmosquitto).
//
// It is the only place with Unmanaged, raw pointers and @convention(c) trampolines. Everything
// above it speaks Swift values: MosquittoDriver's connect/publish/subscribe/prepareWait/close,
// MQTTMessage, MQTTError.
//
// Threading: a mosquitto client is not thread-safe unless libmosquitto runs its own thread. A
// MosquittoDriver is used on its connection's SDKLoop thread only: the loop's handlers, posted
// jobs and the jobs of the actor whose executor is that loop. Every client call checks that it runs
// on the thread of the driver's first call and counts any that does not. libmosquitto calls every
// callback on that thread too, from inside the calls made here.
//
// The loop: libmosquitto's external-loop API (mosquitto_socket, mosquitto_want_write,
// mosquitto_loop_read/write/misc) on the library's descriptor loop: before each wait the driver
// sets what the loop watches the socket for, the socket's handler reads and writes, and a timer
// runs the housekeeping. A posted job wakes the wait at once; mosquitto_loop cannot be woken that
// way, so with it a job would wait for its timeout.

// Context lifetime: the client's userdata is the driver, unretained. The driver outlives the
// client: only `close` destroys the client, and the connection keeps the driver until its loop
// has run that job.

import CMosquitto
import LegacyBridge

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Library

enum Mosquitto {
    /// `mosquitto_lib_init`, run once per process on first use (Swift globals initialise once,
    /// thread-safely), before any client exists.
    private static let libraryStatus: Int32 = mosquitto_lib_init()

    /// Initialises the library once; throws its status if that failed.
    static func initializeLibrary() throws(MQTTError) {
        guard libraryStatus == success else { throw MQTTError(rawValue: libraryStatus) }
        precondition(
            MQTTError.noConnection.rawValue == Int32(MOSQ_ERR_NO_CONN.rawValue)
                && MQTTError.connectionLost.rawValue == Int32(MOSQ_ERR_CONN_LOST.rawValue)
                && MQTTError.connectionRefused.rawValue == Int32(MOSQ_ERR_CONN_REFUSED.rawValue)
                && MQTTError.invalidArgument.rawValue == Int32(MOSQ_ERR_INVAL.rawValue),
            "MQTTError's codes must be mosquitto.h's")
    }

    static let success = Int32(MOSQ_ERR_SUCCESS.rawValue)

    /// libmosquitto's text for a status code (`mosquitto_strerror`; static strings, any thread).
    static func statusString(_ code: Int32) -> String {
        String(cString: mosquitto_strerror(code))
    }

    /// The version of libmosquitto in use, e.g. "2.0.11".
    static var version: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var revision: Int32 = 0
        _ = mosquitto_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }
}

// MARK: - Trampolines (nonisolated, file-level; libmosquitto calls them on the loop thread)

private func driver(_ userdata: UnsafeMutableRawPointer?) -> MosquittoDriver? {
    userdata.map { Unmanaged<MosquittoDriver>.fromOpaque($0).takeUnretainedValue() }
}

private func connectTrampoline(_ client: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ code: Int32) {
    driver(userdata)?.connected(code: code)
}

private func disconnectTrampoline(_ client: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ code: Int32) {
    driver(userdata)?.lost(code == 0 ? MQTTError.noConnection : MQTTError.connectionLost)
}

private func publishTrampoline(_ client: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ mid: Int32) {
    driver(userdata)?.acknowledged(mid: mid)
}

private func subscribeTrampoline(
    _ client: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ mid: Int32, _ count: Int32,
    _ granted: UnsafePointer<Int32>?
) {
    driver(userdata)?.counters.subscribeAcknowledgements.add(1, ordering: .relaxed)
}

private func messageTrampoline(
    _ client: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ message: UnsafePointer<mosquitto_message>?
) {
    guard let message, let topic = message.pointee.topic else { return }
    // Copied here: libmosquitto frees the message when the callback returns.
    let count = Int(max(0, message.pointee.payloadlen))
    let payload =
        message.pointee.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    driver(userdata)?.received(
        MQTTMessage(
            topic: String(cString: topic), payload: payload, qos: Int(message.pointee.qos),
            retained: message.pointee.retain))
}

// MARK: - Driver (loop thread only)

/// Owns one mosquitto client. Every method but `init` is called on the connection's loop thread.
///
/// `@unchecked Sendable`: it is handed to the loop once and touched only there afterwards; its
/// `counters` and `publishes` are thread-safe.
final class MosquittoDriver: @unchecked Sendable {
    /// One publish waiting for its acknowledgement: how its acknowledgement reaches its caller.
    private struct Publish {
        let deliver: @Sendable (Result<Void, any Error>) -> Void
        let probe: CallProbe<Void>
    }

    /// One broker subscription: the run of the shared subscription it feeds.
    private struct Subscription {
        let run: UInt64
        let sink: EventSink<MQTTMessage>
    }

    let counters: MQTTCounters
    /// Publishes waiting for their acknowledgement, by message id: completed from `on_publish`.
    let publishes: PendingRequests<Int32, Void>
    private var client: OpaquePointer?
    private var ownerThread: pthread_t?
    private var isConnected = false
    private var connectCompletion: Completion<Void>?
    /// Publishes in flight whose id the driver knows.
    private var inFlight: [Int32: Publish] = [:]
    /// Set while `mosquitto_publish` runs: an acknowledgement then may come before its id is known.
    private var insidePublish = false
    /// Ids acknowledged inside `mosquitto_publish`, before it returned them.
    private var acknowledgedEarly: Set<Int32> = []
    private var subscriptions: [String: Subscription] = [:]
    /// The connection's loop, weakly (the loop holds this driver), its watch of the client's
    /// socket and its housekeeping timer.
    private weak var loop: SDKLoop?
    private var socketWatch: DescriptorWatch?
    private var housekeeping: LoopTimer?

    init(counters: MQTTCounters, publishes: PendingRequests<Int32, Void>) {
        self.counters = counters
        self.publishes = publishes
    }

    /// Counts a client call made off the loop thread.
    private func checkThread() {
        let current = pthread_self()
        guard let owner = ownerThread else {
            ownerThread = current
            return
        }
        if pthread_equal(owner, current) == 0 {
            counters.callsOffLoopThread.add(1, ordering: .relaxed)
        }
    }

    // MARK: Connection

    /// Creates the client and connects; `completion` gets the broker's CONNACK.
    func connect(_ configuration: MQTTConnection.Configuration, completion: Completion<Void>) {
        checkThread()
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        guard let client = mosquitto_new(configuration.clientID, true, userdata) else {
            _ = completion.fail(MQTTError.noMemory)
            return
        }
        self.client = client
        mosquitto_connect_callback_set(client, connectTrampoline)
        mosquitto_disconnect_callback_set(client, disconnectTrampoline)
        mosquitto_publish_callback_set(client, publishTrampoline)
        mosquitto_subscribe_callback_set(client, subscribeTrampoline)
        mosquitto_message_callback_set(client, messageTrampoline)
        connectCompletion = completion
        let code = mosquitto_connect(
            client, configuration.host, Int32(clamping: configuration.port),
            Int32(clamping: configuration.keepAlive.components.seconds))
        if code != Mosquitto.success {
            connectCompletion = nil
            _ = completion.fail(MQTTError(rawValue: code))
        }
    }

    /// `on_connect`: the broker's CONNACK.
    fileprivate func connected(code: Int32) {
        if code == 0 { isConnected = true }
        let completion = connectCompletion
        connectCompletion = nil
        _ = completion?(code == 0 ? .success(()) : .failure(MQTTError.connectionRefused))
    }

    /// The connection is gone: every pending publish and every subscription fails with `error`.
    func lost(_ error: MQTTError) {
        if isConnected { counters.disconnects.add(1, ordering: .relaxed) }
        isConnected = false
        inFlight.removeAll()
        acknowledgedEarly.removeAll()
        let ended = subscriptions.values
        subscriptions.removeAll()
        let completion = connectCompletion
        connectCompletion = nil
        _ = completion?.fail(error)
        publishes.failAll(error)
        for subscription in ended { subscription.sink.finish(throwing: error) }
    }

    /// Disconnects and destroys the client; everything pending fails with `error`.
    func close(_ error: MQTTError) {
        guard let client else { return }
        checkThread()
        if isConnected { mosquitto_disconnect(client) }
        lost(error)
        mosquitto_destroy(client)
        self.client = nil
    }

    // MARK: Publishing

    /// `mosquitto_publish`; returns the message id. The acknowledgement goes through `probe`.
    func publish(topic: String, payload: [UInt8], qos: Int32, retain: Bool, probe: CallProbe<Void>) throws -> Int32 {
        guard let client, isConnected else { throw MQTTError.noConnection }
        checkThread()
        var mid: Int32 = 0
        insidePublish = true
        let code = payload.withUnsafeBytes { bytes in
            mosquitto_publish(client, &mid, topic, Int32(clamping: bytes.count), bytes.baseAddress, qos, retain)
        }
        insidePublish = false
        guard code == Mosquitto.success else {
            acknowledgedEarly.remove(mid)
            throw MQTTError(rawValue: code)
        }
        counters.publishes.add(1, ordering: .relaxed)
        let publishes = self.publishes
        let id = mid
        let deliver = probe.callback { result in publishes.complete(id, with: result) }
        // An acknowledgement that came inside mosquitto_publish went to the table already, which
        // keeps it for the request whose start returns this id.
        if acknowledgedEarly.remove(id) == nil {
            inFlight[id] = Publish(deliver: deliver, probe: probe)
        }
        return id
    }

    /// `on_publish`: the broker acknowledged `mid` (QoS 1), or a QoS 0 message was written.
    fileprivate func acknowledged(mid: Int32) {
        counters.acknowledgements.add(1, ordering: .relaxed)
        if let publish = inFlight.removeValue(forKey: mid) {
            publish.deliver(.success(()))
            return
        }
        if insidePublish {
            counters.acknowledgementsInsidePublish.add(1, ordering: .relaxed)
            acknowledgedEarly.insert(mid)
        }
        publishes.complete(mid, with: .success(()))
    }

    /// The caller of publish `mid` left (cancelled or timed out). libmosquitto has no call that
    /// withdraws a message: it stays in the client's queue, and its late acknowledgement is
    /// counted by the table as late.
    func abandon(mid: Int32) {
        guard let publish = inFlight.removeValue(forKey: mid) else { return }
        publish.probe.cancel {}
    }

    // MARK: Subscriptions

    /// `mosquitto_subscribe` for a new run of a topic's shared subscription.
    func subscribe(topic: String, run: UInt64, sink: EventSink<MQTTMessage>) {
        guard let client, isConnected else {
            sink.finish(throwing: MQTTError.noConnection)
            return
        }
        checkThread()
        let code = mosquitto_subscribe(client, nil, topic, 1)
        guard code == Mosquitto.success else {
            sink.finish(throwing: MQTTError(rawValue: code))
            return
        }
        counters.subscribes.add(1, ordering: .relaxed)
        subscriptions[topic] = Subscription(run: run, sink: sink)
    }

    /// `mosquitto_unsubscribe` once the last consumer of that run left.
    func unsubscribe(topic: String, run: UInt64) {
        guard subscriptions[topic]?.run == run else { return }
        subscriptions[topic] = nil
        guard let client, isConnected else { return }
        checkThread()
        if mosquitto_unsubscribe(client, nil, topic) == Mosquitto.success {
            counters.unsubscribes.add(1, ordering: .relaxed)
        }
    }

    /// `on_message`: hands a copy to every subscription whose filter matches.
    fileprivate func received(_ message: MQTTMessage) {
        counters.messages.add(1, ordering: .relaxed)
        for (filter, subscription) in subscriptions {
            var matches = false
            mosquitto_topic_matches_sub(filter, message.topic, &matches)
            if matches { _ = subscription.sink.yield(message) }
        }
    }

    // MARK: Loop glue

    /// Tells the driver its loop, and starts libmosquitto's housekeeping (keep-alive pings,
    /// retries): `mosquitto_loop_misc` every second. A job on that loop, before any other call.
    func attach(to loop: SDKLoop) {
        checkThread()
        self.loop = loop
        housekeeping = try? loop.schedule(after: .seconds(1), repeating: .seconds(1)) { [unowned self] in
            if let client, mosquitto_socket(client) >= 0 { _ = mosquitto_loop_misc(client) }
        }
    }

    /// Before each wait of the connection's loop: the loop watches the client's socket for
    /// reading, and for writing while libmosquitto has something to send (`mosquitto_want_write`).
    func prepareWait() {
        guard let loop else { return }  // not attached yet: no client either
        let socket = client.map { mosquitto_socket($0) } ?? -1
        if let watch = socketWatch, watch.descriptor != socket || socket < 0 {
            watch.cancel()  // closed or replaced: its number may be reused
            socketWatch = nil
        }
        guard let client, socket >= 0 else { return }
        checkThread()
        let interest: DescriptorEvents = mosquitto_want_write(client) ? [.readable, .writable] : .readable
        if let socketWatch {
            socketWatch.update(interest: interest)
        } else {
            socketWatch = try? loop.watch(socket, for: interest) { [unowned self] events in self.process(events) }
        }
    }

    /// The socket is ready: libmosquitto reads and writes it, and calls its callbacks inside.
    private func process(_ events: DescriptorEvents) {
        guard let client, mosquitto_socket(client) >= 0 else { return }
        checkThread()
        if !events.isDisjoint(with: [.readable, .error, .hangUp, .invalid]) {
            let code = mosquitto_loop_read(client, 1)
            if code != Mosquitto.success { lost(MQTTError(rawValue: code)) }
        }
        if events.contains(.writable), mosquitto_socket(client) >= 0 {
            let code = mosquitto_loop_write(client, 1)
            if code != Mosquitto.success { lost(MQTTError(rawValue: code)) }
        }
    }
}
