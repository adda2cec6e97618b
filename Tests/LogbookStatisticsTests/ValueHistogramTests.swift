import Foundation
import LogbookTestKit
import XCTest
@testable import LogbookStatistics

/// The shared SplitMix64 (TestSupport.swift), with what the histogram tests draw from it.
extension SplitMix64 {
    init(seed: UInt64) { self.init(state: seed) }

    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / 9_007_199_254_740_992 }

    /// Uniform in (0, 1].
    mutating func positiveUnit() -> Double { 1 - unit() }

    /// Exponentially distributed with the given mean.
    mutating func exponential(mean: Double) -> Double { -mean * log(positiveUnit()) }

    /// Standard normal (Box–Muller).
    mutating func normal() -> Double {
        (-2 * log(positiveUnit())).squareRoot() * cos(2 * Double.pi * unit())
    }

    /// Log-uniform between `low` and `high` (both > 0).
    mutating func logUniform(_ low: Double, _ high: Double) -> Double {
        exp(log(low) + (log(high) - log(low)) * unit())
    }
}

/// The percentiles checked, with their exact rational value (numerator / denominator), so the
/// expected nearest rank is computed in integer arithmetic, independently of the implementation.
let checkedPercentiles: [(percentile: Double, numerator: Int, denominator: Int)] = [
    (0, 0, 1), (1, 1, 100), (10, 10, 100), (25, 25, 100), (50, 50, 100), (75, 75, 100),
    (90, 90, 100), (99, 99, 100), (99.9, 999, 1000), (99.99, 9999, 10000), (100, 1, 1),
]

/// Nearest rank: rank = max(1, ceil(numerator / denominator × n)), 1-based.
func exactRank(numerator: Int, denominator: Int, count: Int) -> Int {
    max(1, (numerator * count + denominator - 1) / denominator)
}

/// Neumaier-compensated sum: a reference accurate to about one rounding.
func accurateSum(_ values: [Double]) -> Double {
    var sum = 0.0
    var compensation = 0.0
    for value in values {
        let next = sum + value
        compensation += abs(sum) >= abs(value) ? (sum - next) + value : (value - next) + sum
        sum = next
    }
    return sum + compensation
}

final class ValueHistogramTests: XCTestCase {

    // MARK: Helpers

    func histogram(_ values: [Double]) -> ValueHistogram {
        var histogram = ValueHistogram()
        for value in values { histogram.record(value) }
        return histogram
    }

    /// Checks every percentile of `histogram` against the exact nearest-rank value of `values`
    /// (NaN excluded), and returns the largest relative error seen.
    @discardableResult
    func assertPercentiles(
        _ histogram: ValueHistogram, exactValues values: [Double], _ message: String,
        file: StaticString = #filePath, line: UInt = #line
    ) -> Double {
        let sorted = values.filter { !$0.isNaN }.sorted()
        XCTAssertEqual(histogram.count, UInt64(sorted.count), "count, \(message)", file: file, line: line)
        XCTAssertEqual(histogram.nanCount, UInt64(values.count - sorted.count), "nanCount, \(message)",
                       file: file, line: line)
        guard !sorted.isEmpty else {
            for (percentile, _, _) in checkedPercentiles {
                XCTAssertNil(histogram.value(atPercentile: percentile), message, file: file, line: line)
            }
            return 0
        }
        XCTAssertEqual(histogram.minimum, sorted.first, "minimum, \(message)", file: file, line: line)
        XCTAssertEqual(histogram.maximum, sorted.last, "maximum, \(message)", file: file, line: line)
        var largestError = 0.0
        for (percentile, numerator, denominator) in checkedPercentiles {
            let exact = sorted[exactRank(numerator: numerator, denominator: denominator, count: sorted.count) - 1]
            guard let reported = histogram.value(atPercentile: percentile) else {
                XCTFail("p\(percentile) is nil, \(message)", file: file, line: line)
                continue
            }
            if percentile == 0 || percentile == 100 || exact.isInfinite {
                XCTAssertEqual(reported, exact, "p\(percentile), \(message)", file: file, line: line)
            } else {
                let error = abs(reported - exact)
                XCTAssertLessThanOrEqual(
                    error, ValueHistogram.relativeAccuracy * abs(exact),
                    "p\(percentile): reported \(reported), exact \(exact), \(message)", file: file, line: line)
                if exact != 0 { largestError = max(largestError, error / abs(exact)) }
            }
        }
        return largestError
    }

    func assertPercentiles(_ values: [Double], _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        assertPercentiles(histogram(values), exactValues: values, message, file: file, line: line)
    }

    // MARK: Accuracy constant

    func testRelativeAccuracyIsWithinThreeSignificantDigits() {
        XCTAssertEqual(ValueHistogram.relativeAccuracy, 1.0 / 2048)
        XCTAssertLessThanOrEqual(ValueHistogram.relativeAccuracy, 0.001)
    }

    // MARK: Percentiles against exact values

    func testUniformIntegers() {
        var random = SplitMix64(seed: 1)
        let values = (0..<100_000).map { _ in Int64(random.next() % 1_000_000) }
        var histogram = ValueHistogram()
        for value in values { histogram.record(value) }
        let error = assertPercentiles(histogram, exactValues: values.map { Double($0) }, "uniform integers")
        // The histogram is not trivially exact: the error is there, just bounded.
        XCTAssertGreaterThan(error, 0)
    }

    func testSmallIntegersAreDistinguished() {
        // Consecutive integers 1...1000: the percentile must pick the right rank, and 999 vs 1000
        // differ by 0.1 %, more than the accuracy.
        var random = SplitMix64(seed: 2)
        var values = (1...1000).map(Int64.init)
        values.shuffle(using: &random)
        var histogram = ValueHistogram()
        for value in values { histogram.record(value) }
        assertPercentiles(histogram, exactValues: values.map { Double($0) }, "1...1000")
        XCTAssertEqual(histogram.value(atPercentile: 99.9)!, 999, accuracy: 999 * ValueHistogram.relativeAccuracy)
    }

    func testNegativeAndExtremeIntegers() {
        var random = SplitMix64(seed: 3)
        var values = (0..<50_000).map { _ in Int64(bitPattern: random.next()) >> (random.next() % 63) }
        values += [.min, .max, 0, -1, 1]
        var histogram = ValueHistogram()
        for value in values { histogram.record(value) }
        assertPercentiles(histogram, exactValues: values.map { Double($0) }, "Int64 full range")
        XCTAssertEqual(histogram.minimum, Double(Int64.min))
        XCTAssertEqual(histogram.maximum, Double(Int64.max))
    }

    func testHugeUnsignedIntegers() {
        var random = SplitMix64(seed: 4)
        var values = (0..<20_000).map { _ in UInt64.max - random.next() % 1_000_000_000_000 }
        values += [UInt64.max, UInt64.max - 1, 1 << 63, (1 << 53) + 1, 0]
        var histogram = ValueHistogram()
        for value in values { histogram.record(value) }
        assertPercentiles(histogram, exactValues: values.map { Double($0) }, "UInt64 near max")
        XCTAssertEqual(histogram.maximum, Double(UInt64.max))
        XCTAssertEqual(histogram.minimum, 0)
    }

    func testExponentialLatencies() {
        var random = SplitMix64(seed: 5)
        let values = (0..<100_000).map { _ in random.exponential(mean: 0.000_250) }
        assertPercentiles(values, "exponential latencies")
    }

    func testLogNormalLatencies() {
        var random = SplitMix64(seed: 6)
        let values = (0..<100_000).map { _ in exp(-7 + 1.5 * random.normal()) }
        assertPercentiles(values, "log-normal latencies")
    }

    func testNegativeValues() {
        var random = SplitMix64(seed: 7)
        let values = (0..<50_000).map { _ in -random.exponential(mean: 1_000) }
        assertPercentiles(values, "negative values")
    }

    func testMixedSignValues() {
        var random = SplitMix64(seed: 8)
        let values = (0..<50_000).map { _ in 123.4 * random.normal() }
        assertPercentiles(values, "mixed-sign normal values")
        let logValues = (0..<50_000).map { _ in
            (random.next() & 1 == 0 ? 1.0 : -1.0) * random.logUniform(1e-9, 1e9)
        }
        assertPercentiles(logValues, "mixed-sign log-uniform values")
    }

    func testManyZeros() {
        var random = SplitMix64(seed: 9)
        var values = [Double](repeating: 0, count: 40_000)
        values += [Double](repeating: -0.0, count: 5_000)
        values += (0..<3_000).map { _ in random.exponential(mean: 10) }
        values += (0..<2_000).map { _ in -random.exponential(mean: 10) }
        values.shuffle(using: &random)
        assertPercentiles(values, "mostly zeros")
        assertPercentiles([Double](repeating: 0, count: 10), "only zeros")
    }

    func testSingleValue() {
        for value in [42.5, -42.5, 0, 1e-300, -1e300, .infinity, -.infinity, .leastNonzeroMagnitude] {
            assertPercentiles([value], "single value \(value)")
            let histogram = histogram([value])
            for percentile in stride(from: 0.0, through: 100, by: 0.5) {
                XCTAssertEqual(histogram.value(atPercentile: percentile), value, "single \(value) at \(percentile)")
            }
        }
    }

    func testTwoValues() {
        assertPercentiles([3, 1e6], "two values")
        assertPercentiles([1e6, 3], "two values, reversed")
        assertPercentiles([-5, 5], "two values of opposite sign")
        let histogram = histogram([3, 1e6])
        XCTAssertEqual(histogram.value(atPercentile: 50), 3)  // rank 1 of 2
        XCTAssertEqual(histogram.value(atPercentile: 50.1), 1e6)  // rank 2
    }

    func testPowersOfTwoCatchOffByOneRanks() {
        // Adjacent ranks differ by a factor 2, so any rank error is far outside the accuracy.
        var random = SplitMix64(seed: 10)
        for count in [1, 2, 3, 7, 10, 99, 100, 101, 999, 1000, 1001, 2000] {
            var values = (0..<count).map { Double(sign: .plus, exponent: $0 - 1000, significand: 1.5) }
            values.shuffle(using: &random)
            assertPercentiles(values, "\(count) powers of two")
        }
    }

    func testTinyDoubles() {
        var random = SplitMix64(seed: 11)
        let values = (0..<20_000).map { _ in 1e-300 * (1 + 99 * random.unit()) }
        assertPercentiles(values, "tiny doubles")
    }

    func testSubnormals() {
        var random = SplitMix64(seed: 12)
        // Every subnormal k × 2^−1074 for k in 1...5000 (this covers the pages where buckets are
        // narrower than the spacing of doubles), plus random subnormals and the largest ones.
        var values = (1...5000).map { Double.leastNonzeroMagnitude * Double($0) }
        values += (0..<5000).map { _ in Double(bitPattern: random.next() & ((1 << 52) - 1)) }
        values += [Double.leastNormalMagnitude, Double.leastNormalMagnitude.nextDown, -Double.leastNonzeroMagnitude]
        values.shuffle(using: &random)
        assertPercentiles(values, "subnormals")
        // Each of the smallest subnormals alone in a histogram of two values.
        for k: Double in [1, 2, 3, 1023, 1024, 1025, 2047, 2048, 4095, 1_048_576] {
            let value = Double.leastNonzeroMagnitude * k
            assertPercentiles([value, value, value, 1], "subnormal \(k) × 2^-1074")
        }
    }

    func testWholeDoubleRange() {
        var random = SplitMix64(seed: 13)
        var values = (0..<50_000).map { _ in Double(bitPattern: random.next()) }.filter { !$0.isNaN }
        values += [.greatestFiniteMagnitude, -.greatestFiniteMagnitude]
        assertPercentiles(values, "random bit patterns")
    }

    func testInfinities() {
        var random = SplitMix64(seed: 14)
        var values = (0..<1_000).map { _ in random.normal() }
        values += [Double](repeating: .infinity, count: 30)
        values += [Double](repeating: -.infinity, count: 20)
        values.shuffle(using: &random)
        assertPercentiles(values, "with infinities")
        let histogram = histogram(values)
        XCTAssertEqual(histogram.minimum, -.infinity)
        XCTAssertEqual(histogram.maximum, .infinity)
        XCTAssertEqual(histogram.value(atPercentile: 1), -.infinity)   // rank 11 of 1050
        XCTAssertEqual(histogram.value(atPercentile: 98), .infinity)   // rank 1029 > 1020
        assertPercentiles([.infinity, .infinity], "only +inf")
        assertPercentiles([-.infinity, .infinity], "only infinities")
    }

    func testNaNIsCountedApart() {
        var random = SplitMix64(seed: 15)
        var values = (0..<1_000).map { _ in random.exponential(mean: 5) }
        values += [Double](repeating: .nan, count: 77)
        values.shuffle(using: &random)
        assertPercentiles(values, "with NaN")
        let histogram = histogram(values)
        XCTAssertEqual(histogram.nanCount, 77)
        XCTAssertEqual(histogram.count, 1_000)
        XCTAssertEqual(histogram.mean!, values.filter { !$0.isNaN }.reduce(0, +) / 1000, accuracy: 1e-12)

        let onlyNaN = self.histogram([.nan, -.nan, .signalingNaN])
        XCTAssertEqual(onlyNaN.count, 0)
        XCTAssertEqual(onlyNaN.nanCount, 3)
        XCTAssertNil(onlyNaN.minimum)
        XCTAssertNil(onlyNaN.maximum)
        XCTAssertNil(onlyNaN.mean)
        XCTAssertNil(onlyNaN.value(atPercentile: 50))
        XCTAssertEqual(onlyNaN.bins(maximum: 10).bins, [])
        XCTAssertNotEqual(onlyNaN, ValueHistogram())
    }

    func testEmptyHistogram() {
        let histogram = ValueHistogram()
        XCTAssertEqual(histogram.count, 0)
        XCTAssertEqual(histogram.nanCount, 0)
        XCTAssertNil(histogram.minimum)
        XCTAssertNil(histogram.maximum)
        XCTAssertNil(histogram.mean)
        for (percentile, _, _) in checkedPercentiles {
            XCTAssertNil(histogram.value(atPercentile: percentile))
        }
        XCTAssertEqual(histogram.bins(maximum: 10), ValueHistogram.Bins(bins: [], logarithmic: false))
        XCTAssertEqual(histogram.pageCount, 0)
    }

    func testPercentileArgumentEdges() {
        let histogram = histogram([1, 2, 3, 4])
        XCTAssertEqual(histogram.value(atPercentile: -5), 1)
        XCTAssertEqual(histogram.value(atPercentile: 250), 4)
        XCTAssertEqual(histogram.value(atPercentile: .leastNonzeroMagnitude), 1)
        XCTAssertEqual(histogram.value(atPercentile: 100.0.nextDown), 4)
        XCTAssertNil(histogram.value(atPercentile: .nan))
    }

    func testRankMatchesIntegerArithmetic() {
        let percentiles: [(Double, Int, Int)] = checkedPercentiles.filter { $0.percentile > 0 && $0.percentile < 100 }
            + [(0.1, 1, 1000), (33.3, 333, 1000), (66.7, 667, 1000), (99.5, 995, 1000), (99.999, 99999, 100000),
               (12.5, 125, 1000), (0.01, 1, 10000),
               // p × count / 100 lands just above the exact integer rank for some counts
               // (1.1 % of 3,000 computes as 33.00000000000001): that must not round up to 34.
               (1.1, 11, 1000), (2.2, 22, 1000), (0.07, 7, 10000), (0.17, 17, 10000), (2.3, 23, 1000)]
        for count in Array(1...3000) + [9_999, 10_000, 10_001, 99_999, 100_000, 1_000_000, 123_456_789] {
            for (percentile, numerator, denominator) in percentiles {
                XCTAssertEqual(
                    ValueHistogram.rank(ofPercentile: percentile, count: UInt64(count)),
                    UInt64(exactRank(numerator: numerator, denominator: denominator, count: count)),
                    "p\(percentile) of \(count)")
            }
        }
    }

    func testNegativeZeroIsZero() {
        let negative = histogram([-0.0, 1])
        let positive = histogram([0.0, 1])
        XCTAssertEqual(negative, positive)
        XCTAssertEqual(negative.minimum, 0)
        XCTAssertEqual(negative.minimum?.sign, .plus)
        XCTAssertEqual(negative.value(atPercentile: 50), 0)
    }

    // MARK: Count, minimum, maximum, mean

    func testCountMinimumMaximumMeanAreExact() {
        var random = SplitMix64(seed: 20)
        let integers = (0..<100_000).map { _ in Int64(random.next() % 2_000_001) - 1_000_000 }
        var histogram = ValueHistogram()
        for value in integers { histogram.record(value) }
        XCTAssertEqual(histogram.count, 100_000)
        XCTAssertEqual(histogram.minimum, Double(integers.min()!))
        XCTAssertEqual(histogram.maximum, Double(integers.max()!))
        // The sum is below 2^53, so the mean is the correctly rounded quotient of exact integers.
        XCTAssertEqual(histogram.mean, Double(integers.reduce(0, +)) / 100_000)

        let doubles = (0..<100_000).map { _ in random.logUniform(1e-6, 1e6) }
        let doubleHistogram = self.histogram(doubles)
        XCTAssertEqual(doubleHistogram.minimum, doubles.min())
        XCTAssertEqual(doubleHistogram.maximum, doubles.max())
        let reference = accurateSum(doubles) / 100_000
        XCTAssertEqual(doubleHistogram.mean!, reference, accuracy: abs(reference) * 1e-15)
    }

    func testMeanWithInfinitiesAndOverflow() {
        XCTAssertEqual(histogram([1, .infinity]).mean, .infinity)
        XCTAssertEqual(histogram([1, -.infinity]).mean, -.infinity)
        XCTAssertTrue(histogram([1, .infinity, -.infinity]).mean!.isNaN)
        XCTAssertEqual(histogram([.greatestFiniteMagnitude, .greatestFiniteMagnitude]).mean, .infinity)
        // The exact sum is finite although a running sum in this order would overflow.
        let big = 1.5e308
        XCTAssertEqual(histogram([big, big, -big]).mean!, big / 3, accuracy: big * 1e-15)
        XCTAssertEqual(histogram([big, -big]).mean, 0)
        // Values whose exact sum needs more than a Double: no catastrophic cancellation.
        XCTAssertEqual(histogram([1e20, 1, -1e20]).mean, 1.0 / 3)
    }

    // MARK: Merge and equality

    func testMergeEqualsRecordingEverything() {
        var random = SplitMix64(seed: 30)
        let first = (0..<20_000).map { _ in random.exponential(mean: 3) }
            + [0, -0.0, .infinity, .nan, -7, .leastNonzeroMagnitude]
        let second = (0..<30_000).map { _ in -random.logUniform(1e-3, 1e9) }
            + [-.infinity, .nan, 1e300]
        let all = histogram(first + second)

        var merged = histogram(first)
        merged.merge(histogram(second))
        XCTAssertEqual(merged, all)
        XCTAssertTrue(merged.mean!.isNaN)  // +∞ and −∞
        XCTAssertEqual(merged.nanCount, 2)

        var reversed = histogram(second)
        reversed.merge(histogram(first))
        XCTAssertEqual(reversed, all)

        var intoEmpty = ValueHistogram()
        intoEmpty.merge(all)
        XCTAssertEqual(intoEmpty, all)

        var withEmpty = all
        withEmpty.merge(ValueHistogram())
        XCTAssertEqual(withEmpty, all)

        // Merging a histogram into itself doubles it.
        var doubled = histogram(first)
        doubled.merge(doubled)
        XCTAssertEqual(doubled, histogram(first + first))

        // The merged histogram keeps recording correctly (pages created by merge are indexed).
        merged.record(12.5)
        var allPlus = all
        allPlus.record(12.5)
        XCTAssertEqual(merged, allPlus)
        assertPercentiles(merged, exactValues: first + second + [12.5], "merged, then recorded")
    }

    func testMergeManyParts() {
        var random = SplitMix64(seed: 31)
        let values = (0..<40_000).map { _ in exp(3 * random.normal()) * (random.next() % 5 == 0 ? -1 : 1) }
        var merged = ValueHistogram()
        for start in stride(from: 0, to: values.count, by: 997) {
            merged.merge(histogram(Array(values[start..<min(start + 997, values.count)])))
        }
        XCTAssertEqual(merged, histogram(values))
        assertPercentiles(merged, exactValues: values, "merged parts")
    }

    func testOrderIndependence() {
        var random = SplitMix64(seed: 32)
        var values = (0..<30_000).map { _ in random.normal() * random.logUniform(1e-30, 1e30) }
        values += [0, .infinity, -.infinity, .nan, .leastNonzeroMagnitude]
        let original = histogram(values)
        for _ in 0..<3 {
            values.shuffle(using: &random)
            let shuffled = histogram(values)
            XCTAssertEqual(shuffled, original)
            XCTAssertEqual(shuffled.count, original.count)
            XCTAssertEqual(shuffled.minimum, original.minimum)
            XCTAssertEqual(shuffled.maximum, original.maximum)
            // Bit for bit, although the values are added in a different order.
            XCTAssertEqual(shuffled.mean?.bitPattern, original.mean?.bitPattern)
            for (percentile, _, _) in checkedPercentiles {
                XCTAssertEqual(shuffled.value(atPercentile: percentile), original.value(atPercentile: percentile))
            }
            XCTAssertEqual(shuffled.bins(maximum: 50), original.bins(maximum: 50))
        }
        let finite = values.filter { $0.isFinite }
        let finiteHistogram = histogram(finite)
        var reversedHistogram = ValueHistogram()
        for value in finite.reversed() { reversedHistogram.record(value) }
        XCTAssertEqual(reversedHistogram.mean?.bitPattern, finiteHistogram.mean?.bitPattern)
    }

    func testEqualityDetectsDifferences() {
        let base: [Double] = [1, 1.0001, 1.0009, 5]
        XCTAssertEqual(histogram(base), histogram(base.reversed()))
        // Same buckets, same minimum and maximum, but a different sum (so a different mean).
        XCTAssertNotEqual(histogram(base), histogram([1, 1.0005, 1.0009, 5]))
        // Same sum, different buckets.
        XCTAssertNotEqual(histogram([1, 3]), histogram([2, 2]))
        // Different minimum within the same bucket.
        XCTAssertNotEqual(histogram([1, 2]), histogram([1.0001, 2]))
        XCTAssertNotEqual(histogram([1]), histogram([1, 1]))
        XCTAssertNotEqual(histogram([1]), histogram([-1]))
        // Same extremes, counts and bucket contents, but one value in a page of the other sign.
        XCTAssertNotEqual(histogram([-4, 1.5, 4]), histogram([-4, -1.5, 4]))
        XCTAssertNotEqual(histogram([1, .nan]), histogram([1]))
        XCTAssertNotEqual(histogram([1, .infinity]), histogram([1, -.infinity]))
        XCTAssertNotEqual(histogram([0]), ValueHistogram())
        // Copies are independent values.
        let original = histogram(base)
        var copy = original
        copy.record(2.0)  // (a bare integer literal is ambiguous between the three overloads)
        XCTAssertNotEqual(copy, original)
        XCTAssertEqual(original, histogram(base))
    }

    // MARK: Bins

    func assertBinsInvariants(
        _ histogram: ValueHistogram, maximum: Int, _ message: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let result = histogram.bins(maximum: maximum)
        let bins = result.bins
        XCTAssertFalse(bins.isEmpty, message, file: file, line: line)
        XCTAssertLessThanOrEqual(bins.count, maximum, message, file: file, line: line)
        XCTAssertEqual(bins.reduce(0) { $0 + $1.count }, histogram.count, "counts add up, \(message)",
                       file: file, line: line)
        XCTAssertEqual(bins.first?.lowerBound, histogram.minimum, "covers minimum, \(message)", file: file, line: line)
        XCTAssertEqual(bins.last?.upperBound, histogram.maximum, "covers maximum, \(message)", file: file, line: line)
        for (bin, next) in zip(bins, bins.dropFirst()) {
            XCTAssertEqual(bin.upperBound, next.lowerBound, "adjacent, \(message)", file: file, line: line)
        }
        for bin in bins {
            XCTAssertLessThanOrEqual(bin.lowerBound, bin.upperBound, "ordered, \(message)", file: file, line: line)
        }
    }

    func testLinearBinsOfUniformValues() {
        var random = SplitMix64(seed: 40)
        let values = (0..<100_000).map { _ in 100 + 900 * random.unit() }  // ratio 10: linear
        let histogram = histogram(values)
        for maximum in [1, 2, 3, 7, 10, 100, 1000] {
            assertBinsInvariants(histogram, maximum: maximum, "uniform, \(maximum)")
        }
        let result = histogram.bins(maximum: 10)
        XCTAssertFalse(result.logarithmic)
        XCTAssertEqual(result.bins.count, 10)
        let width = (histogram.maximum! - histogram.minimum!) / 10
        for bin in result.bins {
            XCTAssertEqual(bin.upperBound - bin.lowerBound, width, accuracy: width * 1e-9)
            // Exact count of the values in the bin, give or take the values near its edges.
            let exact = values.filter { $0 >= bin.lowerBound && $0 < bin.upperBound }.count
            XCTAssertEqual(Double(bin.count), Double(exact), accuracy: 200)
            XCTAssertEqual(Double(bin.count), 10_000, accuracy: 1_000)
        }
    }

    func testLogarithmicBinsOfLogUniformValues() {
        var random = SplitMix64(seed: 41)
        let values = (0..<100_000).map { _ in random.logUniform(1e-6, 1e2) }
        let histogram = histogram(values)
        for maximum in [1, 2, 5, 16, 64, 500] {
            assertBinsInvariants(histogram, maximum: maximum, "log-uniform, \(maximum)")
        }
        let result = histogram.bins(maximum: 16)
        XCTAssertTrue(result.logarithmic)
        XCTAssertEqual(result.bins.count, 16)
        let ratio = pow(histogram.maximum! / histogram.minimum!, 1.0 / 16)
        for bin in result.bins {
            XCTAssertEqual(bin.upperBound / bin.lowerBound, ratio, accuracy: ratio * 1e-9)
            XCTAssertEqual(Double(bin.count), 100_000.0 / 16, accuracy: 100_000.0 / 16 * 0.1)
        }
    }

    func testBinScaleRule() {
        XCTAssertTrue(histogram([1, 10.5]).bins(maximum: 4).logarithmic)
        XCTAssertFalse(histogram([1, 10]).bins(maximum: 4).logarithmic)        // ratio not > 10
        XCTAssertFalse(histogram([0, 1, 1000]).bins(maximum: 4).logarithmic)   // a zero
        XCTAssertFalse(histogram([-1, 1, 1000]).bins(maximum: 4).logarithmic)  // a negative value
        XCTAssertFalse(histogram([-1000, -1]).bins(maximum: 4).logarithmic)
        XCTAssertTrue(histogram([1e-300, 1e300]).bins(maximum: 4).logarithmic)
        XCTAssertTrue(histogram([1, 2, .infinity]).bins(maximum: 4).logarithmic)
        for values: [Double] in [[1, 10.5], [1, 10], [0, 1, 1000], [-1, 1, 1000], [-1000, -1], [1e-300, 1e300],
                                 [-.greatestFiniteMagnitude, .greatestFiniteMagnitude], [.leastNonzeroMagnitude, 1]] {
            assertBinsInvariants(histogram(values), maximum: 4, "\(values)")
        }
    }

    func testBinsOfSingleValueAndEdgeCases() {
        let single = histogram([7, 7, 7])
        XCTAssertEqual(single.bins(maximum: 10),
                       ValueHistogram.Bins(bins: [.init(lowerBound: 7, upperBound: 7, count: 3)], logarithmic: false))
        XCTAssertEqual(histogram([1, 2]).bins(maximum: 0).bins, [])
        XCTAssertEqual(histogram([1, 2]).bins(maximum: -3).bins, [])
        let one = histogram([1, 2, 3]).bins(maximum: 1).bins
        XCTAssertEqual(one, [.init(lowerBound: 1, upperBound: 3, count: 3)])
        XCTAssertEqual(histogram([-.infinity, .infinity]).bins(maximum: 5).bins,
                       [.init(lowerBound: -.infinity, upperBound: .infinity, count: 2)])
        XCTAssertEqual(histogram([-.infinity, 2, .infinity]).bins(maximum: 5).bins,
                       [.init(lowerBound: -.infinity, upperBound: .infinity, count: 3)])
        XCTAssertEqual(ValueHistogram().bins(maximum: 5).bins, [])
        // A huge request is capped rather than allocating Int.max bins.
        XCTAssertLessThanOrEqual(histogram([1, 2]).bins(maximum: .max).bins.count, ValueHistogram.maximumBinCount)
    }

    func testInfinitiesGoToTheOuterBins() {
        var values: [Double] = (1...100).map { Double($0) }
        values += [.infinity, .infinity, -.infinity]
        let histogram = histogram(values)
        let bins = histogram.bins(maximum: 10).bins
        assertBinsInvariants(histogram, maximum: 10, "with infinities")
        XCTAssertEqual(bins.first?.lowerBound, -.infinity)
        XCTAssertEqual(bins.last?.upperBound, .infinity)
        XCTAssertEqual(bins.first?.count, 10 + 1)
        XCTAssertEqual(bins.last?.count, 10 + 2)
        XCTAssertEqual(bins[1].lowerBound, 1 + 9.9, accuracy: 1e-9)  // finite edges over [1, 100]
    }

    func testBinsWithZerosAndNegatives() {
        var random = SplitMix64(seed: 42)
        var values = (0..<10_000).map { _ in random.normal() }
        values += [Double](repeating: 0, count: 5_000)
        let histogram = histogram(values)
        for maximum in [1, 2, 9, 40] {
            assertBinsInvariants(histogram, maximum: maximum, "normal and zeros, \(maximum)")
        }
        let bins = histogram.bins(maximum: 9).bins
        let zeroBin = bins.firstIndex { $0.lowerBound <= 0 && 0 <= $0.upperBound }!
        XCTAssertGreaterThanOrEqual(bins[zeroBin].count, 5_000)
    }

    // MARK: Memory

    func testPagesStayBoundedOverTheWholeRange() {
        var random = SplitMix64(seed: 50)
        var histogram = ValueHistogram()
        for _ in 0..<1_000_000 {
            histogram.record(random.logUniform(1e-300, 1e300))
        }
        XCTAssertEqual(histogram.count, 1_000_000)
        // One page per binary exponent in the range, never more: 2^-997 ... 2^996.
        XCTAssertLessThanOrEqual(histogram.pageCount, 1_994)
        XCTAssertGreaterThan(histogram.pageCount, 1_900)
        let pageBytes = ValueHistogram.pageStride * MemoryLayout<UInt64>.stride
        // Pages grow by a quarter at a time; the directory and the page table are small.
        XCTAssertLessThanOrEqual(histogram.storageBytes, histogram.pageCount * pageBytes * 5 / 4 + 64 * 1024)
        print("1e6 values over 1e-300...1e300: \(histogram.pageCount) pages, \(histogram.storageBytes) bytes")
        // Recording the same values again allocates nothing more.
        let pages = histogram.pageCount
        for _ in 0..<100_000 { histogram.record(random.logUniform(1e-300, 1e300)) }
        XCTAssertEqual(histogram.pageCount, pages)
        // Negative values get their own pages, at most as many again.
        for _ in 0..<100_000 { histogram.record(-random.logUniform(1e-300, 1e300)) }
        XCTAssertLessThanOrEqual(histogram.pageCount, 2 * 1_994)
    }

    func testFewOctavesUseFewPages() {
        var random = SplitMix64(seed: 51)
        var histogram = ValueHistogram()
        for _ in 0..<200_000 { histogram.record(random.logUniform(1e-6, 1)) }  // 1 µs ... 1 s
        XCTAssertLessThanOrEqual(histogram.pageCount, 21)
        XCTAssertLessThan(histogram.storageBytes, 26 * 8_208)
        print("200,000 values over 1e-6...1: \(histogram.pageCount) pages, \(histogram.storageBytes) bytes")

        var narrow = ValueHistogram()
        for _ in 0..<200_000 { narrow.record(1 + random.unit()) }
        XCTAssertEqual(narrow.pageCount, 1)
        for _ in 0..<1_000 { narrow.record(0.0); narrow.record(Double.infinity); narrow.record(Double.nan) }
        XCTAssertEqual(narrow.pageCount, 1)  // special values have no pages
    }

    // MARK: Internals

    func testRoundedToDoubleIsCorrectlyRounded() {
        var random = SplitMix64(seed: 60)
        for _ in 0..<100_000 {
            let high = random.next() >> (random.next() % 64)
            let low = random.next()
            let exact = UInt128(high) << 64 | UInt128(low)
            XCTAssertEqual(ValueHistogram.roundedToDouble(high: high, low: low), Double(exact), "\(high) \(low)")
        }
        // Ties and near-ties around the rounding point of a 2^64-scaled value.
        let high: UInt64 = 1 << 52
        for low: UInt64 in [0, 1, 1 << 63, (1 << 63) + 1, (1 << 63) - 1, .max] {
            for h in [high, high + 1, (high << 1) - 1, .max] {
                XCTAssertEqual(ValueHistogram.roundedToDouble(high: h, low: low),
                               Double(UInt128(h) << 64 | UInt128(low)))
            }
        }
    }

    func testLogarithmHelpers() {
        var random = SplitMix64(seed: 61)
        for _ in 0..<10_000 {
            let x = Double(bitPattern: random.next() >> 1)  // positive, any magnitude
            guard x.isFinite, x > 0 else { continue }
            XCTAssertEqual(ValueHistogram.binaryLogarithm(x), log2(x), accuracy: 1e-12 * max(1, abs(log2(x))))
            let y = -1074 + 2098 * random.unit()
            let expected = exp2(y)
            XCTAssertEqual(ValueHistogram.binaryExponential(y), expected,
                           accuracy: expected * 1e-13 + Double.leastNonzeroMagnitude * 2)
        }
        XCTAssertEqual(ValueHistogram.binaryLogarithm(1), 0)
        XCTAssertEqual(ValueHistogram.binaryExponential(10), 1024)
        XCTAssertEqual(ValueHistogram.roundedUp(-2.5), -2)
        XCTAssertEqual(ValueHistogram.roundedUp(2.5), 3)
        XCTAssertEqual(ValueHistogram.roundedUp(3), 3)
    }

    func testRepresentativeValuesAreWithinTheirBuckets() {
        // Every bucket's reported value lies inside the bucket and within the relative accuracy
        // of every value of the bucket, from the deepest subnormals to the largest finite values.
        var random = SplitMix64(seed: 62)
        var histogram = ValueHistogram()
        histogram.record(-Double.greatestFiniteMagnitude)  // so that no representative is clamped
        histogram.record(Double.greatestFiniteMagnitude)
        var values = (0..<50_000).map { _ in Double(bitPattern: random.next()) }
        values += (0..<50_000).map { _ in Double(bitPattern: random.next() & ((1 << 52) - 1)) }  // subnormals
        values += (1...4096).map { Double.leastNonzeroMagnitude * Double($0) }
        values += [Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude, Double.leastNormalMagnitude]
        for value in values {
            guard value.isFinite, value != 0 else { continue }
            let (key, significand) = ValueHistogram.decompose(value)
            let bucket = Int(significand >> 42) & 1023
            let reported = histogram.representative(key: key, bucket: bucket)
            XCTAssertLessThanOrEqual(abs(reported - value), ValueHistogram.relativeAccuracy * abs(value), "\(value)")
            XCTAssertEqual(ValueHistogram.decompose(reported).key, key, "\(value)")
        }
    }
}
