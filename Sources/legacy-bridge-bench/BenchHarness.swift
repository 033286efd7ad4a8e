import ToolSupport

// Timing machinery of `legacy-bridge-bench`: calibrated batches timed with ContinuousClock,
// variants interleaved round by round, medians, and a sink that keeps results alive.

/// Where every measured result ends up, so the optimizer cannot drop the work that made it.
let benchSink = AtomicCell<Int>(0)

/// Consumes a batch's combined result (one relaxed atomic add per batch, not per operation).
@inline(never)
func benchConsume(_ value: Int) {
    benchSink.add(value, ordering: .relaxed)
}

extension Duration {
    /// The duration in nanoseconds, as a Double.
    var benchNanoseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    }
}

/// Times `operations` calls made by `body` and returns nanoseconds per operation. Runs on the
/// caller's isolation (no hop), so a @MainActor batch stays on the main actor.
@inline(__always)
func benchTimePerOperation(
    _ operations: Int,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Void
) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return elapsed.benchNanoseconds / Double(max(operations, 1))
}

/// One thing being measured: `sample(n)` runs `n` operations and returns ns per operation.
struct BenchBatchVariant: Sendable {
    let name: String
    let sample: @Sendable (Int) async throws -> Double
}

/// Samples of one variant, one per round.
struct BenchSeries: Sendable {
    var samples: [Double] = []

    var median: Double { benchMedian(samples) }

    /// Interquartile spread relative to the median, in percent (noise indicator).
    var spreadPercent: Double {
        guard samples.count >= 4, median > 0 else { return 0 }
        let sorted = samples.sorted()
        let low = sorted[sorted.count / 4]
        let high = sorted[(sorted.count * 3) / 4]
        return (high - low) / median * 100
    }
}

func benchMedian(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The value below which `fraction` of `values` lie (nearest rank).
func benchPercentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

/// The median of the per-round ratios `numerator[i] / denominator[i]`: the two samples of a round
/// were taken back to back, so machine drift between rounds cancels out of each ratio.
func benchRatio(_ numerator: BenchSeries, _ denominator: BenchSeries) -> Double {
    let ratios = zip(numerator.samples, denominator.samples).compactMap { $1 > 0 ? $0 / $1 : nil }
    return benchMedian(ratios)
}

/// Batch sizing and round counts.
struct BenchTiming: Sendable {
    /// How long one batch should take.
    var batchTarget: Duration
    /// Rounds of interleaved batches.
    var rounds: Int
    /// Largest batch, whatever the calibration says.
    var maximumBatch: Int
}

/// Finds, per variant, how many operations fill `timing.batchTarget` (this also warms each
/// variant up), then runs `timing.rounds` rounds, each one batch of every variant in turn
/// (A B C, A B C, ...). Returns one series per variant, in order.
func benchInterleaved(_ variants: [BenchBatchVariant], timing: BenchTiming) async throws -> [BenchSeries] {
    let target = timing.batchTarget.benchNanoseconds
    var sizes: [Int] = []
    for variant in variants {
        var size = 4
        while true {
            let perOperation = try await variant.sample(size)
            if perOperation * Double(size) >= target / 4 || size >= timing.maximumBatch {
                let fitted = perOperation > 0 ? Int(target / perOperation) : timing.maximumBatch
                sizes.append(min(max(fitted, 1), timing.maximumBatch))
                break
            }
            size *= 4
        }
        _ = try await variant.sample(sizes[sizes.count - 1])  // one full-size warm-up batch
    }
    var series = Array(repeating: BenchSeries(), count: variants.count)
    for _ in 0..<timing.rounds {
        for (index, variant) in variants.enumerated() {
            series[index].samples.append(try await variant.sample(sizes[index]))
        }
    }
    return series
}
