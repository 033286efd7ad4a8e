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
    public static let all: [Entry] = simulatorPath + realAdapterPath

    /// The adapters over `LoopSDK`, a C-like SDK on a loop of its own, checked through fixtures
    /// the way a user checks a real adapter: the correct client, then one mistake each.
    static var realAdapterPath: [Entry] {
        var entries = [
            Entry(
                LoopSDKFixtures.correctOneShot(), gallery: false,
                summary: "LoopSDKClient.fetch: withCallback over a C-like SDK on its own loop (real-adapter path)"),
            Entry(
                LoopSDKFixtures.correctBlocking(), gallery: false,
                summary: "LoopSDKClient.query: OffloadPool.run over a blocking SDK call (real-adapter path)"),
            Entry(
                MailboxFixtures.oneShot(), gallery: false,
                summary:
                    "MailboxClient.fetch: a watch with the SDK's readiness query, over a descriptor that only says \"go look\""
            ),
            Entry(
                SocketFixtures.oneShot(), gallery: false,
                summary: "SocketClient.fetch: a descriptor per request, its watch cancelled before the SDK closes it"),
        ]
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            entries.append(
                Entry(
                    LoopSDKFixtures.correctStream(), gallery: false,
                    summary:
                        "LoopSDKClient.events: CallbackStream over a C-like SDK on its own loop (real-adapter path)"))
            entries.append(
                Entry(
                    LoopSDKFixtures.correctDroppingStream(), gallery: false,
                    summary:
                        "LoopSDKClient.latestEvents: a dropping CallbackStream over an SDK it never pauses (real-adapter path)"
                ))
        }
        entries.append(
            Entry(
                KeyedDoubleFixtures.pendingRequests(canCancel: true), gallery: false,
                summary:
                    "PendingRequests over a request/reply SDK double that can withdraw a request (real-adapter path)"))
        entries.append(
            Entry(
                KeyedDoubleFixtures.pendingRequests(canCancel: false), gallery: false,
                summary:
                    "PendingRequests over a request/reply SDK double that cannot withdraw a request (real-adapter path)"
            ))
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            entries.append(
                Entry(
                    ListenerDoubleFixtures.sharedSubscription(), gallery: false,
                    summary: "SharedSubscription over an SDK double with listeners (real-adapter path)"))
            for mistake in ListenerDoubleMistake.allCases {
                entries.append(
                    Entry(mistake.fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
            }
        }
        for canCancel in [true, false] {
            entries.append(
                Entry(
                    CallDoubleFixtures.latestWins(canCancel: canCancel), gallery: false,
                    summary:
                        "LatestWins over a one-shot SDK call double that \(canCancel ? "can" : "cannot") withdraw a request (real-adapter path)"
                ))
            entries.append(
                Entry(
                    CallDoubleFixtures.coalescedCalls(canCancel: canCancel), gallery: false,
                    summary:
                        "CoalescedCalls over a one-shot SDK call double that \(canCancel ? "can" : "cannot") withdraw a request (real-adapter path)"
                ))
        }
        for mistake in LatestWinsDoubleMistake.allCases {
            entries.append(
                Entry(mistake.fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        for mistake in CoalescedDoubleMistake.allCases {
            entries.append(
                Entry(mistake.fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        for mistake in KeyedDoubleMistake.allCases {
            entries.append(
                Entry(mistake.fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        for (mistake, fixture) in LoopSDKGallery.fixtures() {
            entries.append(Entry(fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            for (mistake, fixture) in LoopSDKStreamMistake.fixtures() {
                entries.append(Entry(fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
            }
        }
        for (mistake, fixture) in LoopSDKBlockingMistake.fixtures() {
            entries.append(Entry(fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        for (mistake, fixture) in MailboxMistake.fixtures() {
            entries.append(Entry(fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        for (mistake, fixture) in SocketMistake.fixtures() {
            entries.append(Entry(fixture, gallery: true, summary: mistake.summary, flaggedBy: mistake.flaggedBy))
        }
        return entries
    }

    /// The adapters over the simulated SDK: the library's own, then the gallery.
    static let simulatorPath: [Entry] = [
        Entry(WithCallbackAdapter(), gallery: false),
        Entry(WithCallbackContextAdapter(), gallery: false),
        Entry(CallbackStreamAdapter(), gallery: false),
        Entry(SDKThreadExecutorAdapter(), gallery: false),
        Entry(OffloadPoolAdapter(), gallery: false),
        Entry(PendingRequestsAdapter(), gallery: false),
        Entry(SharedSubscriptionLibraryAdapter(), gallery: false),
        Entry(LatestWinsLibraryAdapter(), gallery: false),
        Entry(CoalescedCallsAdapter(), gallery: false),
        Entry(
            NaiveContinuationAdapter(), gallery: true,
            flaggedBy: [
                "repeated-callback-same-outcome", "repeated-callback-success-then-error",
                "repeated-callback-error-then-success", "cancel-in-flight",
            ]),
        Entry(LockHeldGateAdapter(), gallery: true, flaggedBy: ["callback-inside-cancel"]),
        Entry(
            NoCancellationHandlerAdapter(), gallery: true,
            flaggedBy: ["cancel-before-handle", "cancel-in-flight", "timeout"]),
        Entry(EarlyContextReleaseAdapter(), gallery: true, flaggedBy: ["context-released-once"]),
        Entry(CancelAfterSuccessAdapter(), gallery: true, flaggedBy: ["no-cancel-after-completion"]),
        Entry(
            PlainBoolGateAdapter(), gallery: true, flaggedBy: ["concurrent-callbacks"], onlyUnder: .thread),
        Entry(ContextReleasedOnCancelAdapter(), gallery: true, flaggedBy: ["context-released-once"]),
        Entry(FailureAsEmptySuccessAdapter(), gallery: true, flaggedBy: ["failure-throws"]),
        Entry(SemaphoreWaitAdapter(), gallery: true, flaggedBy: ["caller-not-blocked"]),
        Entry(LateRetryCancelAdapter(), gallery: true, flaggedBy: ["cancel-in-flight"]),
        Entry(
            ContextUsedAfterReleaseAdapter(), gallery: true, flaggedBy: ["context-unused-after-release"],
            onlyUnder: .address),
        Entry(TaskForwardedCallbackAdapter(), gallery: true, flaggedBy: ["outcome-decided-in-callback"]),
        Entry(QueueForwardedCallbackAdapter(), gallery: true, flaggedBy: ["outcome-decided-in-callback"]),
        Entry(MainActorCallbackAdapter(), gallery: true, flaggedBy: ["foreign-thread-callback"]),
        Entry(
            AsyncStreamNoTerminationAdapter(), gallery: true,
            flaggedBy: ["stream-consumer-cancel", "stream-break"]),
        Entry(UnboundedAsyncStreamAdapter(), gallery: true, flaggedBy: ["stream-stalled-consumer"]),
        Entry(NoReorderingStreamAdapter(), gallery: true, flaggedBy: ["out-of-order-restored"]),
        Entry(SelfRetainingSubscriptionAdapter(), gallery: true, flaggedBy: ["stream-resources-released"]),
        Entry(
            DispatchSemaphoreBlockingAdapter(), gallery: true,
            flaggedBy: ["blocking-leaves-pool-free", "blocking-cancel-interrupts"]),
        Entry(RetryAfterInterruptAdapter(), gallery: true, flaggedBy: ["blocking-cancel-interrupts"]),
        Entry(
            PlainActorAffineAdapter(), gallery: true,
            flaggedBy: ["thread-affine-calls-on-sdk-thread", "thread-affine-cancel-on-sdk-thread"]),
        Entry(SemaphorePostAffineAdapter(), gallery: true, flaggedBy: ["thread-affine-caller-not-blocked"]),
        Entry(ForeignThreadStreamControlAdapter(), gallery: true, flaggedBy: ["stream-thread-affinity"]),
        Entry(CancelInYieldPathAdapter(), gallery: true, flaggedBy: ["stream-no-cancel-inside-callback"]),
        Entry(BlockingYieldStreamAdapter(), gallery: true, flaggedBy: ["stream-producer-not-blocked"]),
        Entry(BlockingStartStreamAdapter(), gallery: true, flaggedBy: ["stream-consumer-not-blocked"]),
        Entry(FixedWindowStreamAdapter(), gallery: true, flaggedBy: ["reordered-across-window"]),
        Entry(
            CancelInCancellationHandlerAdapter(), gallery: true, flaggedBy: ["stream-slow-cancel-leaves-pool-free"]),
        Entry(ContinuationDictionaryAdapter(), gallery: true, flaggedBy: ["keyed-disconnect-fails-all"]),
        Entry(LeakingTableAdapter(), gallery: true, flaggedBy: ["keyed-timeout-and-cancel-leave-nothing"]),
        Entry(RegisterAfterSendAdapter(), gallery: true, flaggedBy: ["keyed-synchronous-reply"]),
        Entry(SharedAsyncStreamAdapter(), gallery: true, flaggedBy: ["shared-every-consumer-every-event"]),
        Entry(ListenerPerConsumerAdapter(), gallery: true, flaggedBy: ["shared-one-listener"]),
        Entry(NeverStopsListenerAdapter(), gallery: true, flaggedBy: ["shared-consumer-leaves"]),
        Entry(CancelsEndedListenerAdapter(), gallery: true, flaggedBy: ["shared-every-consumer-every-event"]),
        Entry(RevisionWithoutCancelAdapter(), gallery: true, flaggedBy: ["latest-superseded-let-go"]),
        Entry(CurrentContinuationAdapter(), gallery: true, flaggedBy: ["latest-late-answer-never-lands"]),
        Entry(CancelOnFirstLeaveAdapter(), gallery: true, flaggedBy: ["coalesced-first-leaver-keeps-call"]),
        Entry(KeptFailureAdapter(), gallery: true, flaggedBy: ["coalesced-failure-not-kept"]),
    ]

    /// The adapters that must pass: the library's own, and the correct client over `LoopSDK`.
    public static var library: [Entry] { all.filter { !$0.isGallery } }

    /// The adapter called `name`, if any.
    /// - Parameter name: An adapter name.
    /// - Returns: Its entry, or `nil`.
    public static func entry(named name: String) -> Entry? {
        all.first { $0.name == name }
    }
}
