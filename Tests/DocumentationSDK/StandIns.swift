// The stand-in SDKs the documentation's quick starts run over (QuickStartRunTests). Each calls
// back from CLegacySDK's threads through plain closures, not @Sendable ones. This module is
// compiled in the Swift 5 language mode, as most SDK modules and every C or Objective-C SDK
// imported into Swift are: the runtime then checks the isolation of a closure handed to it, and a
// closure isolated to the main actor traps when the SDK calls it from its own thread, exactly as
// in an app.

import CLegacySDK
import Dispatch
import LegacyBridge

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An SDK status that is not success.
package struct SDKStatusError: Error {
    package var status: Int32
}

/// An image as the loader hands it to its callback (valid only during the callback).
package struct LoaderImage {}

package final class LegacyImageLoader: Sendable {
    package static let shared = LegacyImageLoader()

    /// Calls back once from an SDK thread; the url "never" is answered only by a cancel.
    package func load(_ url: String, completion: @escaping (LoaderImage?, Int32?) -> Void) -> SDKOperation {
        DocSDK.request(url == "never" ? .never : .after(microseconds: 1_000)) { status in
            if status == 0 { completion(LoaderImage(), nil) } else { completion(nil, status) }
        }
    }
}

package struct DownloaderChunk {
    package var sequence: UInt64
}

package enum LegacyDownloader {
    /// How many chunks a download delivers, from SDK threads, before it ends.
    package static let chunkCount: UInt64 = 300

    package static func start(
        _ url: String, onChunk: @escaping (DownloaderChunk) -> Void, onDone: @escaping ((any Error)?) -> Void
    ) throws -> SDKOperation {
        DocSDK.stream(events: chunkCount) { event in
            if event.isEnd {
                onDone(event.status == 0 ? nil : SDKStatusError(status: event.status))
            } else {
                onChunk(DownloaderChunk(sequence: event.sequence))
            }
        }
    }
}

/// An MQTT client with one global publish-acknowledgement callback, like libmosquitto's.
package final class MQTTClient: @unchecked Sendable {
    // @unchecked Sendable: the callbacks are set once, before the first publish.
    package var onPublish: ((Int32) -> Void)?
    package var onDisconnect: ((Int32) -> Void)?
    private let lastID = LockedValue<Int32>(0)

    package init() {}

    /// Returns the message id; its acknowledgement comes later, from an SDK thread.
    package func publish(topic: String, payload: [UInt8], qos: Int32) throws -> Int32 {
        let mid = lastID.withLock { id in
            id += 1
            return id
        }
        _ = DocSDK.request(.after(microseconds: 500)) { [self] _ in onPublish?(mid) }
        return mid
    }
}

/// A search index with a cancellable query.
package struct Hit: Sendable {}

package final class SearchIndex: Sendable {
    /// Answers from an SDK thread; the text "never" is answered only by a cancel.
    package func search(_ text: String, _ done: @escaping (Result<[Hit], any Error>) -> Void) -> SDKOperation {
        DocSDK.request(text == "never" ? .never : .after(microseconds: 1_000)) { status in
            done(status == 0 ? .success([Hit()]) : .failure(SDKStatusError(status: status)))
        }
    }
}

package let searchIndex = SearchIndex()

/// A thumbnail decoder with a cancellable request.
package final class Thumbnail: Sendable {}

package final class ThumbnailDecoder: Sendable {
    /// Answers from an SDK thread.
    package func decode(_ url: String, _ done: @escaping (Thumbnail?, (any Error)?) -> Void) -> SDKOperation {
        DocSDK.request(.after(microseconds: 1_000)) { status in
            if status == 0 { done(Thumbnail(), nil) } else { done(nil, SDKStatusError(status: status)) }
        }
    }
}

package let decoder = ThumbnailDecoder()

package final class Ticker: Sendable {
    /// How many quotes a listener delivers, from SDK threads, before it ends.
    package static let quoteCount: UInt64 = 50
    private let lastTopic = LockedValue<UInt64>(0)

    package func listen(
        topic: String, onQuote: @escaping (Int32) -> Void, onEnd: @escaping (Int32) -> Void
    ) throws
        -> SDKOperation
    {
        let sdkTopic = lastTopic.withLock { last in
            last += 1
            return last
        }
        return DocSDK.stream(events: Self.quoteCount, listenerTopic: sdkTopic) { event in
            if event.isEnd { onEnd(event.status) } else { onQuote(Int32(truncatingIfNeeded: event.sequence)) }
        }
    }
}

package let ticker = Ticker()

package struct ResolvedAddress: Sendable {}

/// The loop thread's side, standing in for c-ares: a lookup is answered by the loop's next
/// iteration, through a plain closure (not @Sendable), as c-ares calls its callback from
/// `ares_process_fd`. Touched on the loop thread only.
package final class AresDriver: @unchecked Sendable {
    // @unchecked Sendable: every member is used on the loop thread only (the snippets' rule).
    private var pending: [(id: UInt64, onAnswer: (Result<[ResolvedAddress], any Error>) -> Void)] = []

    package init() {}

    package func start(id: UInt64, host: String, onAnswer: @escaping (Result<[ResolvedAddress], any Error>) -> Void) {
        pending.append((id, onAnswer))
    }

    package func cancel(id: UInt64) {
        pending.removeAll { $0.id == id }
    }

    /// Before each wait of the loop: answers every pending lookup (a real driver would watch
    /// the sockets c-ares waits on).
    package func prepareWait() {
        let answered = pending
        pending.removeAll()
        for lookup in answered { lookup.onAnswer(.success([ResolvedAddress()])) }
    }
}

/// A library with a loop function of its own, in the shape of libcurl's multi interface:
/// `waitAndProcess` waits until woken (or the bound passes), `wakeUp` wakes it from any thread.
package final class LoopFunctionDriver: Sendable {
    private let woken = DispatchSemaphore(value: 0)
    package init() {}
    package func waitAndProcess(maxWaitMilliseconds: Int32) {
        _ = woken.wait(timeout: .now() + .milliseconds(Int(maxWaitMilliseconds)))
    }
    package func wakeUp() { woken.signal() }
}

/// A sensor read in the shape of a C SDK: `callback` is called once, with `context`, from an SDK
/// thread.
// swift-format-ignore: AlwaysUseLowerCamelCase
package func sensor_read(
    _ id: Int32, _ callback: @escaping @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void,
    _ context: UnsafeMutableRawPointer?
) {
    let address = UInt(bitPattern: context)
    _ = DocSDK.request(.after(microseconds: 500)) { _ in
        callback(UnsafeMutableRawPointer(bitPattern: address), id * 10)
    }
}
