public enum LegacyBridgeVersion { public static let string = "0.1.0" }
