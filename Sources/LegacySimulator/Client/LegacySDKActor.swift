import LegacyBridge

/// The global actor that serialises the SDK calls documented as not thread-safe.
///
/// Some legacy APIs must never be entered concurrently (the simulated SDK detects it and fails
/// with ``LegacySDKError/busy``). Isolating every such call to one global actor makes concurrent
/// entry impossible by construction, at the price of a hop: use it only for those calls.
@globalActor
public actor LegacySDKActor {
    /// The one instance.
    public static let shared = LegacySDKActor()

    private init() {}
}
