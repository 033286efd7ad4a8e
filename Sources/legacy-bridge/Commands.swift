// Placeholder command table; each command lives in its own file once its library pieces exist.
enum DefaultCommand { static func run(_ arguments: [String]) async throws -> ExitCode { print(toolHelp); return .clean } }
enum DemoCommand { static func run(_ arguments: [String]) async throws -> ExitCode { .clean } }
enum ConformanceCommand { static func run(_ arguments: [String]) async throws -> ExitCode { .clean } }
enum StressCommand { static func run(_ arguments: [String]) async throws -> ExitCode { .clean } }
enum BenchCommand { static func run(_ arguments: [String]) async throws -> ExitCode { .clean } }
