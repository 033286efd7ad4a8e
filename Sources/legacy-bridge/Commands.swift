// Placeholder command table; each command lives in its own file once its library pieces exist.
enum BenchCommand { static func run(_ arguments: [String]) async throws -> ExitCode { .clean } }
