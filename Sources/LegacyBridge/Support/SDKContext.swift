/// The `void *context` of a C API, holding a Swift value: retained for the SDK, recovered in its
/// callbacks, released once.
///
/// Two shapes, as C SDKs come:
/// - With a release callback (the SDK says when it is done with the context, after its last
///   callback): read the value with ``value(of:as:)`` in every callback, and call
///   ``release(_:as:)`` in the release callback only. A repeated or late callback then still
///   finds the value.
/// - Without one, for a callback the SDK documents as its single last use of the context: take the
///   value and release the context together with ``take(_:as:)``.
///
/// ```swift
/// let context = SDKContext.retain(completion)                           // in start
/// SDKContext.value(of: context, as: Completion<Page>.self).succeed(page)  // in the callback
/// SDKContext.release(context, as: Completion<Page>.self)                 // in the release callback
/// ```
///
/// To know how many contexts an SDK still holds (a conformance fixture's `liveResources`, a leak
/// check), retain them with ``retain(_:countedIn:)`` and read the ``SDKContextCount``.
///
/// Contract:
/// - ``retain(_:)`` makes one reference for the SDK; ``release(_:as:)`` or ``take(_:as:)`` ends it,
///   exactly once. If the C call fails and will never call back, release the context yourself.
/// - The type given when reading must be the type retained.
/// - Debug builds check every use: a nil context, a use after the release, a second release or
///   a wrong type stops the process with a message naming the mistake, instead of touching freed
///   memory. Release builds do no checking and cost what `Unmanaged` costs.
public enum SDKContext {
    /// Retains `value` for the SDK.
    ///
    /// - Parameter value: What the callbacks need, typically a ``Completion`` or an ``EventSink``.
    /// - Returns: The pointer to pass as the C call's context.
    public static func retain<Value: Sendable>(_ value: Value) -> UnsafeMutableRawPointer {
        retain(value, count: nil)
    }

    /// Retains `value` for the SDK, counted in `count` until it is released: `count.live` is then
    /// how many of these contexts the SDK still holds, ready for a fixture's `liveResources`.
    ///
    /// - Parameters:
    ///   - value: What the callbacks need.
    ///   - count: The count this context is part of until ``release(_:as:)`` or ``take(_:as:)``.
    /// - Returns: The pointer to pass as the C call's context.
    public static func retain<Value: Sendable>(
        _ value: Value, countedIn count: SDKContextCount
    )
        -> UnsafeMutableRawPointer
    {
        count.opened()
        return retain(value, count: count)
    }

    private static func retain<Value: Sendable>(_ value: Value, count: SDKContextCount?) -> UnsafeMutableRawPointer {
        let context = Unmanaged.passRetained(SDKContextBox(value, count: count)).toOpaque()
        #if DEBUG
        SDKContextRegistry.opened(context, type: Value.self)
        #endif
        return context
    }

    /// The value of a context the SDK still holds, without releasing it.
    ///
    /// - Parameters:
    ///   - context: The context pointer the SDK passed to the callback.
    ///   - type: The type given to ``retain(_:)``.
    /// - Returns: The value.
    public static func value<Value: Sendable>(of context: UnsafeRawPointer?, as type: Value.Type = Value.self) -> Value
    {
        box(context, type, "read").value
    }

    /// Releases the SDK's reference: call it in the SDK's release callback, once.
    ///
    /// - Parameters:
    ///   - context: The context pointer the SDK passed to the release callback.
    ///   - type: The type given to ``retain(_:)``.
    public static func release<Value: Sendable>(_ context: UnsafeRawPointer?, as type: Value.Type = Value.self) {
        let box = box(context, type, "released")
        #if DEBUG
        SDKContextRegistry.closed(UnsafeRawPointer(Unmanaged.passUnretained(box).toOpaque()))
        #endif
        box.count?.closed()
        Unmanaged.passUnretained(box).release()
    }

    /// The value, releasing the SDK's reference: for the one callback that is the SDK's last use
    /// of the context, when it has no release callback.
    ///
    /// - Parameters:
    ///   - context: The context pointer the SDK passed to the callback.
    ///   - type: The type given to ``retain(_:)``.
    /// - Returns: The value.
    public static func take<Value: Sendable>(_ context: UnsafeRawPointer?, as type: Value.Type = Value.self) -> Value {
        let value = box(context, type, "taken").value
        release(context, as: type)
        return value
    }

    private static func box<Value>(
        _ context: UnsafeRawPointer?, _ type: Value.Type, _ use: String
    ) -> SDKContextBox<Value> {
        guard let context else {
            preconditionFailure(
                "SDKContext: a nil context was \(use). Pass the pointer SDKContext.retain returned as the C call's context."
            )
        }
        #if DEBUG
        SDKContextRegistry.check(context, type: Value.self, use: use)
        #endif
        return Unmanaged<SDKContextBox<Value>>.fromOpaque(context).takeUnretainedValue()
    }
}

/// What a context points to.
final class SDKContextBox<Value: Sendable>: Sendable {
    let value: Value
    let count: SDKContextCount?
    init(_ value: Value, count: SDKContextCount?) {
        self.value = value
        self.count = count
    }
}

/// How many contexts retained with ``SDKContext/retain(_:countedIn:)`` the SDK still holds: one
/// count per SDK client (or per fixture), so that a leak check sees that SDK's contexts only, not
/// every context of the process.
///
/// ```swift
/// let contexts = SDKContextCount()
/// let context = SDKContext.retain(completion, countedIn: contexts)   // in start
/// // ... the conformance fixture: liveResources: { contexts.live }
/// ```
public final class SDKContextCount: Sendable {
    private let state = LockedBox(0)

    /// Creates a count at zero.
    public init() {}

    /// Contexts retained with this count and not yet released.
    public var live: Int { state.withLock { $0 } }

    func opened() { state.withLock { $0 += 1 } }

    func closed() { state.withLock { $0 -= 1 } }
}

#if DEBUG
/// The contexts retained and not yet released, with their types (debug builds only).
///
/// A released context's address stays recorded as released until a new context reuses it, so a
/// late use of it is reported rather than read.
enum SDKContextRegistry {
    private struct Entry {
        let type: ObjectIdentifier
        let typeName: String
        var live: Bool
    }

    private static let entries = LockedBox([UInt: Entry]())

    static func opened<Value>(_ context: UnsafeMutableRawPointer, type: Value.Type) {
        entries.withLock {
            $0[UInt(bitPattern: context)] = Entry(type: ObjectIdentifier(type), typeName: "\(type)", live: true)
        }
    }

    static func closed(_ context: UnsafeRawPointer) {
        entries.withLock { $0[UInt(bitPattern: context)]?.live = false }
    }

    static func check<Value>(_ context: UnsafeRawPointer, type: Value.Type, use: String) {
        let entry = entries.withLock { $0[UInt(bitPattern: context)] }
        guard let entry else {
            preconditionFailure(
                "SDKContext: a context was \(use) that SDKContext.retain never made (a wrong pointer, or one retained another way)."
            )
        }
        precondition(
            entry.live,
            "SDKContext: a context was \(use) after the SDK released it: a callback after the release callback, or a second release. Release only in the SDK's release callback, or use take(_:as:) in the one last callback."
        )
        precondition(
            entry.type == ObjectIdentifier(type),
            "SDKContext: a context retained as \(entry.typeName) was \(use) as \(type). Read it as the type you retained."
        )
    }

    /// Whether `context` was retained and not released yet (tests: other tests retain and release
    /// their own contexts at the same time, so a count of every context says nothing of one).
    static func isLive(_ context: UnsafeRawPointer) -> Bool {
        entries.withLock { $0[UInt(bitPattern: context)]?.live == true }
    }
}
#endif
