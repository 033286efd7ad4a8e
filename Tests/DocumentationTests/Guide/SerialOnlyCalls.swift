// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import CLegacySDK

// snippet: Sources/LegacyBridge/LegacyBridge.docc/SingleThreadedLibraries.md
@globalActor public actor LegacySDKActor { public static let shared = LegacySDKActor() }

@LegacySDKActor func setSessionToken(_ token: String) throws {
    let status = lsdk_client_set_session_token(client, token)   // documented: not thread-safe
    guard status == 0 else { throw SDKError(status) }
}
// end snippet
