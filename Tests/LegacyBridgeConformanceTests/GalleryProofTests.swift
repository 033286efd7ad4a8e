import Foundation
import LegacyBridgeConformance
import LegacyBridgeGallery
import Testing

/// Every gallery adapter is flagged, crash-isolated, by each scenario its documentation names, on
/// every seed tried — and for the reason the documentation gives, not by accident (a hang from a
/// loaded machine, say). Only the flagging scenarios run, to keep this to a minute or two.
@Suite("Gallery: each adapter is flagged by its documented scenarios, for its documented mistake, on every seed")
struct GalleryProofTests {
    static let seeds: [UInt64] = [1, 2, 3, 4]

    /// What the flagging scenario's result must show, per adapter: the verdicts it may have and
    /// pieces of its detail that name the mistake (one of them must appear).
    struct Evidence: Sendable {
        var verdicts: Set<String>
        var details: [String]

        init(verdicts: Set<String>, detail: String...) {
            self.verdicts = verdicts
            self.details = detail
        }
    }

    static let evidence: [String: Evidence] = [
        "naive-continuation": Evidence(verdicts: ["crashed", "hung"], detail: "CONTINUATION MISUSE", "did not finish"),
        "lock-held-gate": Evidence(verdicts: ["crashed", "hung"], detail: "re-entrant locking", "did not finish"),
        "no-cancellation-handler": Evidence(verdicts: ["hung"], detail: "did not finish"),
        "early-context-release": Evidence(verdicts: ["failed"], detail: "released its context"),
        "cancel-after-success": Evidence(verdicts: ["failed"], detail: "called its cancel function"),
        "context-released-on-cancel": Evidence(verdicts: ["failed"], detail: "released"),
        "failure-as-empty-success": Evidence(verdicts: ["failed"], detail: "must reach the caller as a thrown error"),
        "semaphore-wait": Evidence(verdicts: ["failed"], detail: "could not run anything"),
        "asyncstream-no-ontermination": Evidence(verdicts: ["failed"], detail: "kept running"),
        "unbounded-asyncstream": Evidence(verdicts: ["failed"], detail: "buffered for a stalled consumer"),
        "no-reordering-stream": Evidence(verdicts: ["failed"], detail: "sequence number"),
        "self-retaining-subscription": Evidence(verdicts: ["failed"], detail: "still holds the source's controls"),
        "dispatch-semaphore-blocking": Evidence(
            verdicts: ["failed"], detail: "the caller's thread ran nothing else", "was not resumed within"),
        "plain-actor-affine": Evidence(
            verdicts: ["failed"], detail: "other than its loop thread", "other than the SDK's loop thread"),
        "foreign-thread-stream-control": Evidence(
            verdicts: ["failed"], detail: "from a thread other than its loop thread"),
        "cancel-in-yield-path": Evidence(verdicts: ["failed"], detail: "from inside one of its own callbacks"),
        "blocking-yield-stream": Evidence(verdicts: ["failed"], detail: "did not return for"),
        "cancel-in-cancellation-handler": Evidence(
            verdicts: ["failed"], detail: "cancelled consumers resumed within", "an unrelated task did not start"),
        // Seen after the SDK's release when the retry comes late; counted at once when a loaded
        // machine delays the release past the retry.
        "late-retry-cancel": Evidence(
            verdicts: ["failed"], detail: "after the SDK had released the operation",
            "called 2 times, expected exactly once"),
        "task-forwarded-callback": Evidence(verdicts: ["failed"], detail: "had not been resumed"),
        "queue-forwarded-callback": Evidence(verdicts: ["failed"], detail: "had not been resumed"),
        "main-actor-callback": Evidence(verdicts: ["crashed"], detail: "in Swift's actor-isolation check"),
        "retry-after-interrupt": Evidence(verdicts: ["failed"], detail: "after it had interrupted it"),
        "blocking-start-stream": Evidence(verdicts: ["failed"], detail: "the consumer's thread ran nothing else"),
        "semaphore-post-affine": Evidence(verdicts: ["failed"], detail: "the caller's thread ran nothing else"),
        "fixed-window-stream": Evidence(verdicts: ["failed"], detail: "reordered no further"),
        "continuation-dictionary": Evidence(verdicts: ["crashed"], detail: "CONTINUATION MISUSE"),
        "leaking-request-table": Evidence(verdicts: ["failed"], detail: "an entry of its id table leaked"),
        "register-after-send": Evidence(verdicts: ["failed"], detail: "registered the id after sending"),
        "one-asyncstream-shared": Evidence(
            verdicts: ["crashed"], detail: "attempt to await next() on more than one task"),
        "listener-per-consumer": Evidence(verdicts: ["failed"], detail: "share one listener among the consumers"),
        "never-stops-listener": Evidence(verdicts: ["failed"], detail: "stop it when the last consumer leaves"),
        "cancels-ended-listener": Evidence(verdicts: ["failed"], detail: "after the SDK itself had ended it"),
        "revision-without-cancel": Evidence(verdicts: ["failed"], detail: "cancel the superseded call"),
        "current-continuation": Evidence(verdicts: ["failed"], detail: "late result must never land"),
        "cancel-on-first-leave": Evidence(verdicts: ["failed"], detail: "only when its last waiter leaves"),
        "kept-failure": Evidence(verdicts: ["failed"], detail: "the failure was kept for the key"),
        // The real-adapter path: adapters over LoopSDK, checked through fixtures.
        "loop-sdk-resume-every-callback": Evidence(verdicts: ["crashed"], detail: "CONTINUATION MISUSE"),
        "loop-sdk-no-sdk-cancel": Evidence(verdicts: ["failed"], detail: "never called the SDK's cancel"),
        "loop-sdk-cancel-after-value": Evidence(
            verdicts: ["failed"],
            detail: "the call ended with the SDK's own outcome, yet the adapter called the SDK's cancel"
        ),
        "loop-sdk-retry-cancel": Evidence(verdicts: ["failed"], detail: "called the SDK's cancel 2 times for one call"),
        "loop-sdk-semaphore-caller": Evidence(
            verdicts: ["failed"], detail: "the caller's actor could not run anything"),
        "loop-sdk-off-thread-start": Evidence(
            verdicts: ["failed"], detail: "started the SDK call off the SDK's thread"),
        "loop-sdk-leaks-context": Evidence(verdicts: ["failed"], detail: "the SDK still held 1 resource(s) more"),
        "loop-sdk-handle-as-value": Evidence(verdicts: ["failed"], detail: "but the SDK delivered 7"),
        "loop-sdk-cancel-races-start": Evidence(verdicts: ["failed"], detail: "never reached the SDK's cancel"),
        "loop-sdk-stream-unbounded": Evidence(verdicts: ["failed"], detail: "were held for a stalled consumer"),
        "loop-sdk-stream-no-unsubscribe": Evidence(verdicts: ["failed"], detail: "never called the SDK's cancel"),
        "loop-sdk-stream-retry-cancel": Evidence(
            verdicts: ["failed"], detail: "called the SDK's cancel 2 times for one subscription"),
        "loop-sdk-query-on-pool": Evidence(
            verdicts: ["failed"], detail: "the caller's thread ran nothing else", "was not resumed within"),
        "loop-sdk-backoff-on-loop": Evidence(
            verdicts: ["failed"], detail: "after the SDK failed a call, the next call did not return"),
        "loop-sdk-query-abandoned": Evidence(verdicts: ["failed"], detail: "the probe saw it begin and never end"),
        "shared-double-listener-per-consumer": Evidence(
            verdicts: ["failed"], detail: "share one listener among the consumers"),
        "shared-double-never-stops": Evidence(
            verdicts: ["failed"], detail: "stop the SDK's listener when the last consumer leaves"),
        "shared-double-removes-ended-listener": Evidence(
            verdicts: ["failed"], detail: "after the SDK itself had ended it"),
        "loop-sdk-stream-cancel-does-nothing": Evidence(
            verdicts: ["failed"], detail: "the SDK kept delivering events after the adapter's cancel returned"),
        "loop-sdk-stream-backoff-on-loop": Evidence(
            verdicts: ["failed"], detail: "a job posted to the SDK's thread at the end of the scenario did not run"),
        "latest-double-delivers-to-newest": Evidence(
            verdicts: ["failed"], detail: "got the answer of the call it superseded"),
        "latest-double-never-cancels": Evidence(verdicts: ["failed"], detail: "still held call 1's resources"),
        "latest-double-superseded-waits": Evidence(
            verdicts: ["failed"], detail: "caller of the superseded call (key 2097153) was not resumed"),
        "coalesced-double-call-per-caller": Evidence(verdicts: ["failed"], detail: "made 3 SDK calls, expected 1"),
        "coalesced-double-first-leaver-cancels": Evidence(
            verdicts: ["failed"],
            detail: "one of 2 callers sharing an SDK call left, and the adapter called the SDK's cancel"),
        "coalesced-double-never-cancels": Evidence(
            verdicts: ["failed"], detail: "after both callers left, the SDK still held"),
        "coalesced-double-keeps-failure": Evidence(
            verdicts: ["failed"], detail: "the adapter kept the ended call's outcome for the key"),
        "keyed-double-frees-id-early": Evidence(
            verdicts: ["failed"], detail: "the late reply of the request whose caller left completed the newer request"),
        "keyed-double-keeps-unmatched-reply": Evidence(
            verdicts: ["failed"], detail: "(a duplicate of an earlier request's reply)"),
        "shared-double-replays-last-event": Evidence(
            verdicts: ["failed"], detail: "got an event published before it joined"),
        "loop-sdk-cancel-does-nothing": Evidence(
            verdicts: ["failed"], detail: "after the adapter's cancel had returned: the cancel did not stop it"),
        "loop-sdk-timer-never-cancelled": Evidence(
            verdicts: ["failed"], detail: "a timer of the adapter's own outlived the call"),
        "mailbox-sdk-handler-waits-for-all": Evidence(
            verdicts: ["failed"], detail: "a job posted to the SDK's thread did not run"),
        "socket-sdk-closes-under-watch": Evidence(
            verdicts: ["failed", "crashed"], detail: "closed under them", "watch(es) more than before",
            "already watched"),
        "mailbox-sdk-level-triggered": Evidence(
            verdicts: ["hung"], detail: "watched without the SDK's readiness query"),
        "keyed-double-late-cancel": Evidence(
            verdicts: ["failed"], detail: "the SDK's cancel for the request whose caller left reached the newer request"
        ),
    ]

    @Test(
        "every gallery adapter has evidence to check (the data race is checked under ThreadSanitizer in CI, the use of freed memory under AddressSanitizer)"
    )
    func everyAdapterHasEvidence() {
        let gallery = AdapterCatalog.all.filter(\.isGallery)
        #expect(Set(gallery.filter { $0.flaggedOnlyUnder == nil }.map(\.name)) == Set(Self.evidence.keys))
        #expect(gallery.filter { $0.flaggedOnlyUnder == .thread }.map(\.name) == ["plain-bool-gate"])
        #expect(
            gallery.filter { $0.flaggedOnlyUnder == .address }.map(\.name)
                == Array(AddressSanitizerGalleryTests.evidence.keys))
    }

    /// Not under ThreadSanitizer: four seeds of every adapter beside the rest of this test process
    /// slowed the SDK side past what a late mistake (a retried cancel) needs to show before the
    /// verdict. The flagging is the same code either way; CI's TSan step runs the library's adapters
    /// crash-isolated, and the data-race adapter that only ThreadSanitizer flags.
    @Test(
        "flagged on every seed",
        .disabled(if: threadSanitizerIsActive, "the gallery's flagging is proven by the plain run"),
        arguments: AdapterCatalog.all.filter { $0.isGallery && $0.flaggedOnlyUnder == nil }.map(\.name))
    func flaggedOnEverySeed(adapter name: String) async throws {
        let entry = try #require(AdapterCatalog.entry(named: name))
        let evidence = try #require(Self.evidence[name])
        for seed in Self.seeds {
            let scenarios = try await CLI.runFlaggingScenarios(
                of: name, flaggedBy: entry.flaggedBy, seed: seed, watchdog: threadSanitizerIsActive ? "10" : "3")
            for scenario in scenarios {
                #expect(
                    evidence.verdicts.contains(scenario.verdict),
                    "\(name) seed \(seed) \(scenario.name): \(scenario.verdict): \(scenario.detail)")
                #expect(
                    evidence.details.contains { scenario.detail.contains($0) },
                    "\(name) seed \(seed) \(scenario.name): \(scenario.detail)")
            }
        }
    }
}
