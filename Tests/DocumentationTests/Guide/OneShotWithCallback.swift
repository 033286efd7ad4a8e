// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import CLegacySDK
import DocumentationSDK
import LegacyBridge

// snippet: Sources/LegacyBridge/LegacyBridge.docc/OneShotCalls.md
nonisolated final class RequestContext {
    let completion: Completion<Response>
    init(_ completion: Completion<Response>) { self.completion = completion }
}

// Nonisolated, file-level: the SDK calls these from its own threads.
nonisolated private func onComplete(_ context: UnsafeMutableRawPointer?, _ status: Int32, _ payload: UnsafePointer<lsdk_response_t>?) {
    let box = Unmanaged<RequestContext>.fromOpaque(context!).takeUnretainedValue()
    if status == 0, let payload {
        box.completion.succeed(Response(copying: payload.pointee))   // copy now: the pointer dies
    } else {
        box.completion.fail(SDKError(status))
    }
}
nonisolated private func onRelease(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<RequestContext>.fromOpaque(context!).release()       // the SDK is done with it
}

nonisolated final class OwnedHandle: Sendable {
    let raw: lsdk_handle_t
    init(_ raw: lsdk_handle_t) { self.raw = raw }
    deinit { lsdk_handle_release(raw) }
}

func fetch(_ request: Request, timeout: Duration? = nil,
           isolation: isolated (any Actor)? = #isolation) async throws -> Response {
    try await withCallback(isolation: isolation, timeout: timeout) { completion in
        let context = Unmanaged.passRetained(RequestContext(completion)).toOpaque()
        var c = request.c
        var raw: lsdk_handle_t = 0
        let status = lsdk_request_start(client, &c, nil, onComplete, context, onRelease, &raw)
        guard status == 0 else {
            Unmanaged<RequestContext>.fromOpaque(context).release()  // a failed start keeps nothing
            throw SDKError(status)
        }
        let handle = OwnedHandle(raw)
        return CancelHandle { lsdk_cancel(handle.raw) }
    }
}
// end snippet
