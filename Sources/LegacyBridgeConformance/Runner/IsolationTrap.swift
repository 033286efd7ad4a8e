// Names one crash for what it is: Swift's runtime check that a callback runs on its actor's
// executor, failing because an SDK called a callback isolated to an actor (the main actor, in an
// app target that is MainActor by default) from its own thread. Without this the runner can only
// say that a scenario's process died of SIGILL or SIGTRAP.
//
// How: a scenario's child process installs handlers for the two signals a failed check raises.
// The handler walks its own stack with the C library's `backtrace` and `dladdr`, and when a frame
// belongs to the runtime's isolation check it prints one line (`isolationTrapLinePrefix`, then
// the mangled name of the frame that was checked, when the loader knows it) and dies of the same
// signal. The parent finds that line in the child's standard error (`ChildOutcome.isolationTrap`).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts the line a scenario's child prints when it dies in the runtime's isolation check.
let isolationTrapLinePrefix = "ISOLATION-TRAP "

/// What `dladdr` fills in: the same four pointers on Linux and Darwin.
private struct LoaderSymbolInfo {
    var fileName: UnsafePointer<CChar>? = nil
    var fileBase: UnsafeMutableRawPointer? = nil
    var symbolName: UnsafePointer<CChar>? = nil
    var symbolAddress: UnsafeMutableRawPointer? = nil
}

private typealias BacktraceFunction = @convention(c) (UnsafeMutablePointer<UnsafeMutableRawPointer?>?, Int32) -> Int32
private typealias DladdrFunction = @convention(c) (UnsafeRawPointer?, UnsafeMutableRawPointer?) -> Int32

/// Everything the handler uses, prepared before any signal: a handler may not allocate or look up
/// symbols itself.
private struct IsolationTrapTools {
    var backtrace: BacktraceFunction
    var dladdr: DladdrFunction
    var frames: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    var frameCapacity: Int32
}

// nonisolated(unsafe): written once by `installIsolationTrapReporter`, before the handlers that
// read it are installed, and never again.
nonisolated(unsafe) private var isolationTrapTools: IsolationTrapTools?

/// Names of the runtime's and libdispatch's functions that make up the isolation check: a frame
/// whose symbol contains one of them is the check itself.
private let isolationCheckSymbols: [StaticString] = [
    "isCurrentExecutor", "reportUnexpectedExecutor", "checkExpectedExecutor", "checkIsolated",
    "dispatch_assert_queue", "assumeIsolated", "preconditionIsolated", "assertIsolated",
]

/// Whether a C symbol name belongs to the isolation check.
private func isIsolationCheck(_ name: UnsafePointer<CChar>) -> Bool {
    // A string literal's StaticString is NUL-terminated.
    isolationCheckSymbols.contains { marker in
        strstr(name, UnsafeRawPointer(marker.utf8Start).assumingMemoryBound(to: CChar.self)) != nil
    }
}

/// Writes text to standard error, without allocating.
private func writeToStandardError(_ text: StaticString) {
    _ = write(2, text.utf8Start, text.utf8CodeUnitCount)
}

/// The handler for SIGILL and SIGTRAP in a scenario's child.
private func isolationTrapHandler(_ signalNumber: Int32) {
    if let tools = isolationTrapTools {
        let count = tools.backtrace(tools.frames, tools.frameCapacity)
        var sawCheck = false
        var checked: UnsafePointer<CChar>?
        for index in 0..<Int(max(count, 0)) {
            var info = LoaderSymbolInfo()
            guard withUnsafeMutableBytes(of: &info, { tools.dladdr(tools.frames[index], $0.baseAddress) }) != 0,
                let name = info.symbolName
            else { continue }
            if isIsolationCheck(name) {
                sawCheck = true
            } else if sawCheck {
                checked = name
                break
            }
        }
        if sawCheck {
            writeToStandardError("\nISOLATION-TRAP ")  // isolationTrapLinePrefix
            if let checked { _ = write(2, checked, strlen(checked)) }
            writeToStandardError("\n")
        }
    }
    // Die of the same signal: the trapping instruction runs again with the default action.
    _ = signal(signalNumber, SIG_DFL)
}

/// Installs the isolation-trap handlers in this process (a scenario's child). Does nothing where
/// the C library's `backtrace` or `dladdr` cannot be found.
func installIsolationTrapReporter() {
    guard isolationTrapTools == nil, let process = dlopen(nil, RTLD_NOW),
        let backtraceSymbol = dlsym(process, "backtrace"), let dladdrSymbol = dlsym(process, "dladdr")
    else { return }
    let capacity: Int32 = 128
    let tools = IsolationTrapTools(
        backtrace: unsafeBitCast(backtraceSymbol, to: BacktraceFunction.self),
        dladdr: unsafeBitCast(dladdrSymbol, to: DladdrFunction.self),
        frames: .allocate(capacity: Int(capacity)), frameCapacity: capacity)
    // The first call may load what `backtrace` needs (an unwinder library): not in a handler.
    _ = tools.backtrace(tools.frames, tools.frameCapacity)
    isolationTrapTools = tools
    _ = signal(SIGILL, isolationTrapHandler)
    _ = signal(SIGTRAP, isolationTrapHandler)
}

/// Demangles a Swift symbol with the runtime's own demangler, or returns it unchanged.
func demangledSymbol(_ name: String) -> String {
    typealias Demangle =
        @convention(c) (
            UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UInt32
        ) -> UnsafeMutablePointer<CChar>?
    guard let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "swift_demangle") else { return name }
    let demangle = unsafeBitCast(symbol, to: Demangle.self)
    guard let result = name.withCString({ demangle($0, strlen($0), nil, nil, 0) }) else { return name }
    defer { free(result) }
    return String(cString: result)
}
