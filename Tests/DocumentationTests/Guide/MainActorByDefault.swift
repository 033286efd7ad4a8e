// swift-format-ignore-file
// (The snippet below is the documentation's text, kept byte for byte: not reformatted.)
import DocumentationSDK
import LegacyBridge

// snippet: Sources/LegacyBridge/LegacyBridge.docc/WrappingACallbackSDK.md
nonisolated struct Reading: Sendable {   // built on the SDK's thread
    var value: Int32
}

func readSensor(_ id: Int32) async throws -> Reading {
    try await withCallback { completion in
        sensor_read(id, { @Sendable context, value in   // the SDK's thread, not the main actor
            SDKContext.take(context, as: Completion<Reading>.self).succeed(Reading(value: value))
        }, SDKContext.retain(completion))
        return nil
    }
}
// end snippet

/// The same adapter without `@Sendable`: its callback is isolated to the main actor (this module's
/// default), and the SDK calls it from its own thread. QuickStartRunTests proves that it traps.
func readSensorWithoutSendable(_ id: Int32) async throws -> Reading {
    try await withCallback { completion in
        sensor_read(id, { context, value in
            SDKContext.take(context, as: Completion<Reading>.self).succeed(Reading(value: value))
        }, SDKContext.retain(completion))
        return nil
    }
}
