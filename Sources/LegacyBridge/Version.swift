/// The version of the legacy-bridge package.
public enum LegacyBridgeVersion {
    /// The version, as `major.minor.patch`.
    public static let string = "0.1.0"
}
