import LegacyBridgeConformance

/// Every adapter this package runs: the library's own, from `LegacyBridgeConformance`, and the
/// bad-adapter gallery.
///
/// The `legacy-bridge conformance` command runs entries by name; tests use it to check that the
/// library's adapters pass and every gallery adapter is flagged.
public enum AdapterCatalog {
    /// One adapter, type-erased for running by name.
    public typealias Entry = ConformanceSubject

    /// Every adapter, library first, then the gallery.
    public static let all: [Entry] = [
        Entry(WithCallbackAdapter(), gallery: false),
        Entry(WithCallbackContextAdapter(), gallery: false),
        Entry(CallbackStreamAdapter(), gallery: false),
        Entry(SDKThreadExecutorAdapter(), gallery: false),
        Entry(OffloadPoolAdapter(), gallery: false),
        Entry(
            NaiveContinuationAdapter(), gallery: true,
            flaggedBy: [
                "repeated-callback-same-outcome", "repeated-callback-success-then-error",
                "repeated-callback-error-then-success", "never-calls-back-then-cancel",
            ]),
        Entry(LockHeldGateAdapter(), gallery: true, flaggedBy: ["reentrant-cancel"]),
        Entry(
            NoCancellationHandlerAdapter(), gallery: true,
            flaggedBy: ["cancel-before-handle", "never-calls-back-then-cancel", "timeout-silent-operation"]),
        Entry(EarlyContextReleaseAdapter(), gallery: true, flaggedBy: ["context-released-once"]),
        Entry(CancelAfterSuccessAdapter(), gallery: true, flaggedBy: ["no-cancel-after-completion"]),
        Entry(
            PlainBoolGateAdapter(), gallery: true, flaggedBy: ["concurrent-callbacks"], onlyUnderThreadSanitizer: true),
        Entry(ContextReleasedOnCancelAdapter(), gallery: true, flaggedBy: ["context-released-once"]),
        Entry(FailureAsEmptySuccessAdapter(), gallery: true, flaggedBy: ["single-failure-throws"]),
        Entry(SemaphoreWaitAdapter(), gallery: true, flaggedBy: ["caller-not-blocked"]),
        Entry(
            AsyncStreamNoTerminationAdapter(), gallery: true,
            flaggedBy: ["consumer-cancel-stops-producer", "break-stops-producer"]),
        Entry(UnboundedAsyncStreamAdapter(), gallery: true, flaggedBy: ["slow-consumer-backpressure"]),
        Entry(NoReorderingStreamAdapter(), gallery: true, flaggedBy: ["out-of-order-restored"]),
        Entry(SelfRetainingSubscriptionAdapter(), gallery: true, flaggedBy: ["stream-resources-released"]),
        Entry(
            DispatchSemaphoreBlockingAdapter(), gallery: true,
            flaggedBy: ["blocking-leaves-pool-free", "blocking-cancel-interrupts"]),
        Entry(
            PlainActorAffineAdapter(), gallery: true,
            flaggedBy: ["thread-affine-calls-on-sdk-thread", "thread-affine-cancel-on-sdk-thread"]),
        Entry(ForeignThreadStreamControlAdapter(), gallery: true, flaggedBy: ["stream-controls-on-sdk-thread"]),
        Entry(CancelInYieldPathAdapter(), gallery: true, flaggedBy: ["stream-no-cancel-inside-callback"]),
        Entry(BlockingYieldStreamAdapter(), gallery: true, flaggedBy: ["stream-producer-not-blocked"]),
        Entry(
            CancelInCancellationHandlerAdapter(), gallery: true, flaggedBy: ["stream-slow-cancel-leaves-pool-free"]),
    ]

    /// The library's own adapters (the ones that must pass).
    public static var library: [Entry] { all.filter { !$0.isGallery } }

    /// The adapter called `name`, if any.
    /// - Parameter name: An adapter name.
    /// - Returns: Its entry, or `nil`.
    public static func entry(named name: String) -> Entry? {
        all.first { $0.name == name }
    }
}
