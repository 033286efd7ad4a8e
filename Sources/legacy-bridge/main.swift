import LegacyBridge
print("legacy-bridge \(LegacyBridgeVersion.string)")
