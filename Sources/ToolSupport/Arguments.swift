// A small argument parser for both executables: flags with values, boolean switches, --help.
// Bad input is reported as a UsageError (exit code 2) with a message that says what to do.

/// Bad usage of a command: what was wrong, and the command it concerns ("" for a tool's own
/// options), for the message and the pointer to its help.
package struct UsageError: Error, CustomStringConvertible {
    package let message: String
    package let command: String
    /// For an unknown option: every option the command's parser accepts (without `--`), so a
    /// test can check that each of them is in the command's help.
    package var acceptedOptions: [String] = []
    package var description: String { message }

    package init(message: String, command: String, acceptedOptions: [String] = []) {
        self.message = message
        self.command = command
        self.acceptedOptions = acceptedOptions
    }
}

/// The options a command accepts, parsed from `--name value`, `--name=value` and `--switch`.
package struct ParsedArguments {
    private(set) var values: [String: String] = [:]
    private(set) var switches: Set<String> = []
    private(set) var positionals: [String] = []
    package let command: String

    package init(
        command: String, arguments: [String], valueOptions: Set<String>, switchOptions: Set<String>,
        allowPositionals: Bool = false
    ) throws(UsageError) {
        self.command = command
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "-h" { switches.insert("help"); continue }
            guard argument.hasPrefix("--") else {
                guard allowPositionals else {
                    throw UsageError(message: "unexpected argument '\(argument)'", command: command)
                }
                positionals.append(argument)
                continue
            }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if switchOptions.contains(name) || name == "help" {
                guard inlineValue == nil else {
                    throw UsageError(message: "--\(name) takes no value", command: command)
                }
                switches.insert(name)
            } else if valueOptions.contains(name) {
                if let inlineValue {
                    values[name] = inlineValue
                } else {
                    guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                        throw UsageError(message: "--\(name) needs a value", command: command)
                    }
                    values[name] = arguments[index]
                    index += 1
                }
            } else {
                throw UsageError(
                    message: "unknown option '--\(name)'", command: command,
                    acceptedOptions: valueOptions.union(switchOptions).sorted())
            }
        }
    }

    package var wantsHelp: Bool { switches.contains("help") }

    package func flag(_ name: String) -> Bool { switches.contains(name) }

    package func string(_ name: String) -> String? { values[name] }

    /// An integer option within `range`, or `defaultValue` when absent.
    package func integer(
        _ name: String, default defaultValue: Int, in range: ClosedRange<Int>
    ) throws(UsageError) -> Int {
        guard let text = values[name] else { return defaultValue }
        guard let value = Int(text.replacingUnderscores()), range.contains(value) else {
            throw UsageError(
                message:
                    "--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'",
                command: command)
        }
        return value
    }

    /// A non-negative decimal number of seconds within `range`, or `defaultValue` when absent.
    package func seconds(
        _ name: String, default defaultValue: Double, in range: ClosedRange<Double>
    ) throws(UsageError) -> Double {
        guard let text = values[name] else { return defaultValue }
        guard let value = Double(text), value.isFinite, range.contains(value) else {
            throw UsageError(
                message:
                    "--\(name) must be a number of seconds from \(range.lowerBound) to \(range.upperBound), not '\(text)'",
                command: command)
        }
        return value
    }

    /// An unsigned 64-bit option (decimal or 0x-hex), or `defaultValue` when absent.
    package func unsigned(_ name: String, default defaultValue: UInt64) throws(UsageError) -> UInt64 {
        guard let text = values[name] else { return defaultValue }
        let cleaned = text.replacingUnderscores()
        let parsed = cleaned.hasPrefix("0x") ? UInt64(cleaned.dropFirst(2), radix: 16) : UInt64(cleaned)
        guard let value = parsed else {
            throw UsageError(message: "--\(name) must be an unsigned 64-bit number, not '\(text)'", command: command)
        }
        return value
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String { String(filter { $0 != "_" }) }
}
