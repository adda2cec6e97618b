// ValueHistogram.swift — LogbookStatistics
//
// A histogram of numeric values (Int64, UInt64 and Double, of any sign and magnitude) with a
// bounded *relative* error, used to report min/p50/p90/p99/p99.9/max of the numeric arguments of
// log records. Standard library only.

/// A histogram of numeric values with bounded relative error.
///
/// ## Bucket scheme
///
/// This is HdrHistogram's idea (a fixed number of linear sub-buckets per power of two) applied
/// directly to the bits of an IEEE-754 double. A finite non-zero double is
///
///     value = ±1.f × 2^e        (f: 52 fraction bits, e: the unbiased exponent)
///
/// and the bucket of a value is identified by its sign, its exponent and the top `K` = 10 bits of
/// `f`. Every power-of-two interval `[2^e, 2^(e+1))` is therefore split into 2^K = 1024 buckets of
/// equal width `2^(e−K)`, so a bucket's width relative to any value inside it is at most 2^−K.
/// Reporting the bucket's midpoint is then off by at most half a width:
///
///     |midpoint − v| ≤ 2^(e−K−1) ≤ 2^(−K−1) × |v|      ⇒  relativeAccuracy = 2^−11 ≈ 0.049 %
///
/// which is better than HdrHistogram's "3 significant digits" (0.1 %). Reported values are also
/// clamped to `[minimum, maximum]`, which can only move them closer to the exact value.
///
/// Subnormal doubles (below 2^−1022) are normalised first (their exponent is extended below
/// −1022), so they get the same relative accuracy as normal numbers. Zero (either sign), +∞ and
/// −∞ have counters of their own; NaN is counted apart in `nanCount` and takes part in nothing
/// else.
///
/// ## Storage
///
/// Buckets are grouped in *pages*: one page per (sign, exponent), holding the 1024 bucket counters
/// of that power-of-two interval plus a two-word header (the exact sum of its values, see below).
/// A page is allocated the first time a value falls into it, so a
/// histogram of values spanning a few octaves holds a few pages (8,208 bytes each), and values
/// spanning 1e−300…1e300 never need more than one page per (sign, exponent): at most 2 × 2,098
/// pages in total, whatever the number of values recorded.
///
/// All pages live in one flat `[UInt64]` buffer, in allocation order. Two indexes point into it:
///
/// - a directory sorted in value order (page key → offset), used to walk the buckets in order
///   and to find a page on the slow path (binary search);
/// - a direct-mapped *page table* for the fast path, indexed by the top 12 bits of the double
///   (sign and biased exponent) minus a base, and covering only the range of those 12-bit values
///   seen so far (one `UInt16` each: a few bytes for values of one sign spanning a few octaves,
///   at most 8 KiB). Recording a normal value whose page exists is then a range check, a table
///   load, two additions into one buffer, a count and the min/max updates — a few nanoseconds
///   whether consecutive values hit the same page or jump between pages (a single-entry "last
///   page" cache is faster when they all hit one page, but a mispredicted branch makes it twice
///   as slow when they alternate between a few). Only page creation, zero, subnormals,
///   infinities and NaN take the slow path.
///
/// ## Exact, order-independent sum
///
/// Every value in a page is an integer multiple of the same power of two: `v = m × 2^(e−52)` with
/// a 53-bit integer significand `m`. Each page keeps the exact 128-bit sum of its `m`s, so the
/// histogram's sum (and `mean`) is a function of the multiset of recorded values only — not of
/// the order they were recorded or merged in — and it is computed once, at query time, with a
/// compensated summation over the pages. This is what lets `==` compare the full logical
/// contents, mean included.
///
/// ## Value semantics
///
/// `ValueHistogram` is a copy-on-write value type. It is not internally synchronised: share it
/// between tasks or threads the usual way (behind a lock or inside an actor), or give each
/// producer its own histogram and `merge` them.
public struct ValueHistogram: Sendable, Equatable {

    // MARK: Layout

    // (Computed properties returning literals, not stored `static let`s: those are lazily
    // initialised globals, and reading one on the fast path costs an accessor call.)

    /// K: the number of fraction bits that select a bucket inside a page.
    @inlinable static var precisionBits: Int { 10 }
    /// Buckets per page: 2^K.
    @inlinable static var bucketsPerPage: Int { 1 << precisionBits }
    /// Page header words: `[0]` and `[1]`, the low and high words of the 128-bit sum of the
    /// integer significands of the page's values. (A page's total count is not kept: it would cost
    /// one more memory update per record, and only percentile queries need it.)
    @inlinable static var headerWords: Int { 2 }
    /// Words per page in `words`: the header, then the bucket counters.
    @inlinable static var pageStride: Int { headerWords + bucketsPerPage }
    /// Mask of the 52 fraction bits of a double.
    @inlinable static var fractionMask: UInt64 { (1 << 52) - 1 }
    /// The implicit leading 1 of a normal double's significand.
    @inlinable static var implicitBit: UInt64 { 1 << 52 }
    /// Shift that brings the top K fraction bits of a significand down to bit 0.
    @inlinable static var bucketShift: UInt64 { 52 - UInt64(precisionBits) }
    /// Page keys are `±(exponent + keyBias)`: positive for positive values, negative for negative
    /// ones, never 0. With exponents in −1074...1023 a key's magnitude is in 1...2098, and sorting
    /// keys ascending sorts pages in value order.
    @inlinable static var keyBias: Int { 1075 }

    /// Bound of the relative error of percentile values: |reported − exact| ≤ relativeAccuracy × |exact|.
    ///
    /// 2^−(K+1) = 2^−11 ≈ 0.000488 (0.049 %).
    public static let relativeAccuracy: Double = 1.0 / Double(1 << (precisionBits + 1))

    // MARK: Logical state

    /// Values recorded, NaN excluded.
    @usableFromInline var totalCount: UInt64 = 0
    @usableFromInline var nans: UInt64 = 0
    @usableFromInline var zeros: UInt64 = 0
    @usableFromInline var positiveInfinities: UInt64 = 0
    @usableFromInline var negativeInfinities: UInt64 = 0
    /// Smallest and largest *finite* values recorded (zero is stored as +0.0); +∞ and −∞ while
    /// no finite value has been recorded. The infinities are accounted for by their counters.
    @usableFromInline var finiteMinimum: Double = .infinity
    @usableFromInline var finiteMaximum: Double = -.infinity
    /// Page keys (see `keyBias`), sorted ascending, i.e. in value order.
    @usableFromInline var pageKeys: [Int16] = []
    /// `pageOffsets[i]` is the offset in `words` of the page whose key is `pageKeys[i]`.
    @usableFromInline var pageOffsets: [Int] = []
    /// All pages, `pageStride` words each, in allocation order (a page never moves).
    @usableFromInline var words: [UInt64] = []

    // MARK: Page table (an index for the fast path, not part of the logical state)

    /// `pageTable[i]` is 1 + the slot (offset / `pageStride`) of the page of the normal doubles
    /// whose `bitPattern >> 52` (sign and biased exponent) is `pageTableBase + i`, or 0 when that
    /// page does not exist. Zero, subnormals, infinities and NaN never have an entry, so they
    /// always take the slow path.
    @usableFromInline var pageTable: [UInt16] = []
    /// The `bitPattern >> 52` of `pageTable[0]`.
    @usableFromInline var pageTableBase: Int = 0

    public init() {}

    // MARK: Recording

    /// Records `value`. NaN only counts in `nanCount`; −0.0 is recorded as 0.
    ///
    /// Inlinable: the fast path (a normal double whose page exists) is a handful of instructions
    /// and a uniqueness check of the page buffer; everything else calls `recordUncached(_:)`.
    @inlinable
    public mutating func record(_ value: Double) {
        let bits = value.bitPattern
        let position = Int(truncatingIfNeeded: bits &>> 52) &- pageTableBase
        let slot = pageTable.withUnsafeBufferPointer { table in
            UInt(bitPattern: position) < UInt(bitPattern: table.count) ? Int(table[position]) : 0
        }
        guard slot != 0 else {
            recordUncached(value)
            return
        }
        let offset = (slot &- 1) &* Self.pageStride
        let significand = (bits & Self.fractionMask) | Self.implicitBit
        let bucket = offset &+ Self.headerWords
            &+ (Int(truncatingIfNeeded: significand &>> Self.bucketShift) & (Self.bucketsPerPage &- 1))
        words.withUnsafeMutableBufferPointer { page in
            page[bucket] &+= 1
            let (low, carry) = page[offset].addingReportingOverflow(significand)
            page[offset] = low
            if _slowPath(carry) { page[offset &+ 1] &+= 1 }  // once per ~2^11 values at most
        }
        totalCount &+= 1
        if value < finiteMinimum { finiteMinimum = value }
        if value > finiteMaximum { finiteMaximum = value }
    }

    /// Records `value` as `Double(value)` (exact below 2^53, correctly rounded above; the
    /// conversion is monotonic, so `minimum` and `maximum` are exactly `Double` of the extreme
    /// integers). Callers passing a bare literal must say which overload they mean
    /// (`record(2.0)`, `record(Int64(2))`): `record(2)` is ambiguous.
    @inlinable
    public mutating func record(_ value: Int64) {
        record(Double(value))
    }

    /// Records `value` as `Double(value)` (exact below 2^53, correctly rounded above; see
    /// `record(_: Int64)`).
    @inlinable
    public mutating func record(_ value: UInt64) {
        record(Double(value))
    }

    /// The slow path of `record(_:)`: special values, subnormals and values whose page does not
    /// exist yet.
    @usableFromInline
    mutating func recordUncached(_ value: Double) {
        if value.isNaN {
            nans &+= 1
            return
        }
        totalCount &+= 1
        if value.isInfinite {
            if value > 0 { positiveInfinities &+= 1 } else { negativeInfinities &+= 1 }
            return
        }
        if value == 0 {
            zeros &+= 1
            updateFiniteBounds(0.0)  // +0.0, so that −0.0 and 0.0 leave the same state
            return
        }
        let (key, significand) = Self.decompose(value)
        let offset = pageOffset(forKey: key)
        let bucket = offset + Self.headerWords
            + (Int(truncatingIfNeeded: significand &>> Self.bucketShift) & (Self.bucketsPerPage - 1))
        words.withUnsafeMutableBufferPointer { page in
            page[bucket] &+= 1
            let (low, carry) = page[offset].addingReportingOverflow(significand)
            page[offset] = low
            if carry { page[offset + 1] &+= 1 }
        }
        updateFiniteBounds(value)
    }

    @inline(__always)
    mutating func updateFiniteBounds(_ value: Double) {
        if value < finiteMinimum { finiteMinimum = value }
        if value > finiteMaximum { finiteMaximum = value }
    }

    /// Adds every value recorded in `other` to this histogram, exactly as if they had been
    /// recorded here.
    public mutating func merge(_ other: ValueHistogram) {
        totalCount &+= other.totalCount
        nans &+= other.nans
        zeros &+= other.zeros
        positiveInfinities &+= other.positiveInfinities
        negativeInfinities &+= other.negativeInfinities
        finiteMinimum = Swift.min(finiteMinimum, other.finiteMinimum)
        finiteMaximum = Swift.max(finiteMaximum, other.finiteMaximum)
        for (index, key) in other.pageKeys.enumerated() {
            let offset = pageOffset(forKey: key)
            let otherOffset = other.pageOffsets[index]
            words.withUnsafeMutableBufferPointer { page in
                other.words.withUnsafeBufferPointer { otherPage in
                    let (low, carry) = page[offset].addingReportingOverflow(otherPage[otherOffset])
                    page[offset] = low
                    page[offset + 1] &+= otherPage[otherOffset + 1] &+ (carry ? 1 : 0)
                    for bucket in Self.headerWords..<Self.pageStride {
                        page[offset + bucket] &+= otherPage[otherOffset + bucket]
                    }
                }
            }
        }
    }

    // MARK: Summary

    /// Values recorded, NaN excluded (±∞ included).
    public var count: UInt64 { totalCount }

    /// NaN values recorded (they are not part of `count` nor of any other statistic).
    public var nanCount: UInt64 { nans }

    /// The smallest value recorded, exactly; nil when `count == 0`.
    public var minimum: Double? {
        guard totalCount > 0 else { return nil }
        return negativeInfinities > 0 ? -.infinity : finiteMinimum
    }

    /// The largest value recorded, exactly; nil when `count == 0`.
    public var maximum: Double? {
        guard totalCount > 0 else { return nil }
        return positiveInfinities > 0 ? .infinity : finiteMaximum
    }

    /// The sum of the values divided by `count`; nil when `count == 0`. The sum is computed from
    /// exact per-page sums (see the type's documentation), so it does not depend on the order the
    /// values were recorded in; infinities give what Double arithmetic gives (∞, or NaN when both
    /// +∞ and −∞ were recorded), and so does a sum beyond the range of Double.
    public var mean: Double? {
        guard totalCount > 0 else { return nil }
        return sum / Double(totalCount)
    }

    /// The sum of the recorded values (NaN excluded), correctly rounded per page and added with
    /// compensated summation.
    var sum: Double {
        if positiveInfinities > 0 && negativeInfinities > 0 { return .nan }
        if positiveInfinities > 0 { return .infinity }
        if negativeInfinities > 0 { return -.infinity }
        guard let firstKey = pageKeys.first, let lastKey = pageKeys.last else { return 0 }
        // A page's sum is below 2^64 × 2^(e+1); scale everything down when that could overflow
        // a partial sum, and back up at the end (where overflowing to ±∞ is then legitimate).
        // The largest magnitude is that of the first (most negative) or the last key.
        let largestExponent = Swift.max(Swift.abs(Int(firstKey)), Swift.abs(Int(lastKey))) - Self.keyBias
        let scale = Swift.max(0, largestExponent + 66 - 1000)
        var total = 0.0
        var compensation = 0.0
        words.withUnsafeBufferPointer { page in
            for (index, key) in pageKeys.enumerated() {
                let offset = pageOffsets[index]
                let magnitude = Self.roundedToDouble(high: page[offset + 1], low: page[offset])
                let exponent = Swift.abs(Int(key)) - Self.keyBias
                let term = Double(
                    sign: key < 0 ? .minus : .plus, exponent: exponent - 52 - scale, significand: magnitude)
                // Neumaier's variant of Kahan summation.
                let next = total + term
                if Swift.abs(total) >= Swift.abs(term) {
                    compensation += (total - next) + term
                } else {
                    compensation += (term - next) + total
                }
                total = next
            }
        }
        return Double(sign: .plus, exponent: scale, significand: total + compensation)
    }

    // MARK: Percentiles

    /// Nearest-rank percentile (0...100): the smallest recorded value v such that at least
    /// `percentile`% of the values are ≤ v (rank = max(1, ceil(p/100 × count))), within
    /// `relativeAccuracy`; exactly `minimum` for 0 and exactly `maximum` for 100. nil when empty
    /// (or when `percentile` is NaN). Percentiles outside 0...100 are clamped.
    ///
    /// The rank is computed so that decimal percentiles behave as written: 1.1 % of 3,000 values is
    /// rank 33, although `1.1 × 3000 / 100` is 33.00000000000001 in binary floating point.
    public func value(atPercentile percentile: Double) -> Double? {
        guard totalCount > 0, !percentile.isNaN else { return nil }
        if percentile <= 0 { return minimum }
        if percentile >= 100 { return maximum }
        let rank = Self.rank(ofPercentile: percentile, count: totalCount)
        if rank <= 1 { return minimum }
        if rank >= totalCount { return maximum }

        // Walk the buckets in value order: −∞, negative pages, zero, positive pages, +∞.
        var remaining = rank
        if remaining <= negativeInfinities { return -.infinity }
        remaining -= negativeInfinities
        var zerosVisited = false
        return words.withUnsafeBufferPointer { page -> Double in
            for (index, key) in pageKeys.enumerated() {
                if key > 0 && !zerosVisited {
                    zerosVisited = true
                    if remaining <= zeros { return 0 }
                    remaining -= zeros
                }
                let offset = pageOffsets[index]
                let pageCount = Self.total(of: page, at: offset)
                if remaining > pageCount {
                    remaining -= pageCount
                    continue
                }
                // Inside a negative page, larger bucket indices hold smaller (more negative) values.
                for step in 0..<Self.bucketsPerPage {
                    let bucket = key < 0 ? Self.bucketsPerPage - 1 - step : step
                    let bucketCount = page[offset + Self.headerWords + bucket]
                    if remaining <= bucketCount {
                        return representative(key: key, bucket: bucket)
                    }
                    remaining -= bucketCount
                }
                preconditionFailure("ValueHistogram: page total does not match its buckets")
            }
            if !zerosVisited {
                if remaining <= zeros { return 0 }
                remaining -= zeros
            }
            // Whatever is left is +∞ (the rank never exceeds the count).
            return .infinity
        }
    }

    /// The nearest rank, in 1...count, of `percentile` (in 0 < percentile < 100).
    static func rank(ofPercentile percentile: Double, count: UInt64) -> UInt64 {
        let exact = percentile * Double(count) / 100  // in (0, count]
        guard exact < Double(count) else { return count }
        // ceil(exact), except that `percentile` is usually a decimal literal that binary floating
        // point cannot represent (99.9, 99.99): a product that is an integer up to rounding noise
        // is snapped down to that integer instead of being rounded up to the next rank.
        // (Integer conversions rather than `rounded`, which needs libm: see `roundedUp`.)
        let whole = UInt64(exact)
        let fraction = exact - Double(whole)
        let rank = fraction <= 8 * exact.ulp ? whole : whole + 1
        return Swift.min(Swift.max(rank, 1), count)
    }

    /// The total count of the page at `offset`.
    static func total(of page: UnsafeBufferPointer<UInt64>, at offset: Int) -> UInt64 {
        var total: UInt64 = 0
        for bucket in offset + headerWords..<offset + pageStride {
            total &+= page[bucket]
        }
        return total
    }

    // MARK: Bins

    /// One bin of `bins(maximum:)`: `count` values (or rather buckets' worth of values, see
    /// `bins(maximum:)`) in `lowerBound..<upperBound`, or `lowerBound...upperBound` for the last bin.
    public struct Bin: Sendable, Equatable {
        public var lowerBound: Double
        public var upperBound: Double
        public var count: UInt64

        public init(lowerBound: Double, upperBound: Double, count: UInt64) {
            self.lowerBound = lowerBound
            self.upperBound = upperBound
            self.count = count
        }
    }

    /// The result of `bins(maximum:)`.
    public struct Bins: Sendable, Equatable {
        /// Adjacent bins in ascending order.
        public var bins: [Bin]
        /// Whether the bins have equal widths on a logarithmic scale (else on a linear one).
        public var logarithmic: Bool

        public init(bins: [Bin], logarithmic: Bool) {
            self.bins = bins
            self.logarithmic = logarithmic
        }
    }

    /// For plotting: at most `maximum` bins covering [minimum, maximum], of equal width on a log
    /// scale when every value is > 0 and maximum/minimum > 10, else linear; each bucket's count goes
    /// to the bin holding the bucket's midpoint, so the counts add up to `count` (infinities go to
    /// the first/last bin). Empty when count == 0; one bin when minimum == maximum.
    ///
    /// Bin edges are computed over the range of the *finite* values; when there are infinities
    /// the first bin's lower bound is −∞ or the last bin's upper bound is +∞. When the finite
    /// values are all equal (or there are none), a single bin covers [minimum, maximum]. At most
    /// 65,536 bins are made, whatever `maximum` asks.
    public func bins(maximum: Int) -> Bins {
        guard totalCount > 0, maximum > 0,
              let lowest = self.minimum, let highest = self.maximum
        else { return Bins(bins: [], logarithmic: false) }
        let logarithmic = lowest > 0 && highest / lowest > 10
        let low = finiteMinimum
        let high = finiteMaximum
        let hasFiniteRange = totalCount > positiveInfinities + negativeInfinities && low < high
        guard maximum > 1, hasFiniteRange else {
            return Bins(bins: [Bin(lowerBound: lowest, upperBound: highest, count: totalCount)],
                        logarithmic: logarithmic)
        }

        // Edges: edges[0] = low, edges[binCount] = high, equal steps in between.
        let binCount = Swift.min(maximum, Self.maximumBinCount)
        var edges = [Double](repeating: 0, count: binCount + 1)
        edges[0] = low
        edges[binCount] = high
        if logarithmic {
            let logLow = Self.binaryLogarithm(low)
            let logHigh = Self.binaryLogarithm(high)
            for index in 1..<binCount {
                let fraction = Double(index) / Double(binCount)
                edges[index] = Self.binaryExponential(logLow + (logHigh - logLow) * fraction)
            }
        } else {
            for index in 1..<binCount {
                let fraction = Double(index) / Double(binCount)
                // low × (1 − t) + high × t cannot overflow, unlike low + (high − low) × t.
                edges[index] = low * (1 - fraction) + high * fraction
            }
        }
        // Keep the edges monotone and inside [low, high] despite rounding.
        for index in 1..<binCount {
            edges[index] = Swift.min(Swift.max(edges[index], edges[index - 1]), high)
        }

        var counts = [UInt64](repeating: 0, count: binCount)
        counts[0] &+= negativeInfinities
        counts[binCount - 1] &+= positiveInfinities
        forEachFiniteBucket { value, bucketCount in
            // The last bin j with edges[j] <= value (bins are closed on the right at the end).
            var lower = 0
            var upper = binCount - 1
            while lower < upper {
                let middle = (lower + upper + 1) / 2
                if edges[middle] <= value { lower = middle } else { upper = middle - 1 }
            }
            counts[lower] &+= bucketCount
        }

        var bins: [Bin] = []
        bins.reserveCapacity(binCount)
        for index in 0..<binCount {
            bins.append(Bin(lowerBound: edges[index], upperBound: edges[index + 1], count: counts[index]))
        }
        bins[0].lowerBound = lowest
        bins[binCount - 1].upperBound = highest
        return Bins(bins: bins, logarithmic: logarithmic)
    }

    /// Upper limit of the number of bins `bins(maximum:)` makes, whatever `maximum` asks.
    static let maximumBinCount = 1 << 16

    /// Calls `body` with the representative value (clamped midpoint) and count of every non-empty
    /// finite bucket, zero included.
    func forEachFiniteBucket(_ body: (Double, UInt64) -> Void) {
        if zeros > 0 { body(0, zeros) }
        words.withUnsafeBufferPointer { page in
            for (index, key) in pageKeys.enumerated() {
                let offset = pageOffsets[index]
                for bucket in 0..<Self.bucketsPerPage {
                    let bucketCount = page[offset + Self.headerWords + bucket]
                    if bucketCount > 0 {
                        body(representative(key: key, bucket: bucket), bucketCount)
                    }
                }
            }
        }
    }

    // MARK: Bucket arithmetic

    /// The page key and the normalised 53-bit integer significand of a finite non-zero value:
    /// `|value| = significand × 2^(exponent − 52)` with `significand` in [2^52, 2^53).
    static func decompose(_ value: Double) -> (key: Int16, significand: UInt64) {
        let bits = value.bitPattern
        let biasedExponent = Int((bits &>> 52) & 0x7FF)
        let fraction = bits & fractionMask
        let exponent: Int
        let significand: UInt64
        if biasedExponent != 0 {
            exponent = biasedExponent - 1023
            significand = fraction | implicitBit
        } else {
            // Subnormal: |value| = fraction × 2^−1074. Shift the leading 1 up to bit 52 and
            // lower the exponent accordingly (down to −1074 for the smallest subnormal).
            let shift = fraction.leadingZeroBitCount - 11
            exponent = -1022 - shift
            significand = fraction << UInt64(shift)
        }
        let magnitude = Int16(exponent + keyBias)
        return (value.sign == .minus ? -magnitude : magnitude, significand)
    }

    /// The offset in `words` of the page with `key`, allocated (zeroed) if needed.
    mutating func pageOffset(forKey key: Int16) -> Int {
        var lower = 0
        var upper = pageKeys.count
        while lower < upper {
            let middle = (lower + upper) / 2
            if pageKeys[middle] < key { lower = middle + 1 } else { upper = middle }
        }
        if lower < pageKeys.count && pageKeys[lower] == key {
            return pageOffsets[lower]
        }
        let offset = words.count
        if words.capacity < offset + Self.pageStride {
            // Grow by a quarter (at least one page) rather than doubling: pages are big, and a
            // histogram of a few octaves should not carry that many unused ones.
            let pages = offset / Self.pageStride + 1
            words.reserveCapacity((pages + pages / 4) * Self.pageStride)
        }
        words.append(contentsOf: repeatElement(0, count: Self.pageStride))
        pageKeys.insert(key, at: lower)
        pageOffsets.insert(offset, at: lower)
        let exponent = Swift.abs(Int(key)) - Self.keyBias
        if exponent >= -1022 {
            // A page of normal doubles: enter it in the page table.
            let biasedExponent = exponent + 1023
            addToPageTable(signAndExponent: key < 0 ? 0x800 | biasedExponent : biasedExponent,
                           slot: offset / Self.pageStride)
        }
        return offset
    }

    /// Makes `pageTable` cover `signAndExponent` and points that entry at `slot`.
    mutating func addToPageTable(signAndExponent: Int, slot: Int) {
        if pageTable.isEmpty {
            pageTable = [0]
            pageTableBase = signAndExponent
        } else if signAndExponent < pageTableBase {
            pageTable.insert(contentsOf: repeatElement(0, count: pageTableBase - signAndExponent), at: 0)
            pageTableBase = signAndExponent
        } else if signAndExponent >= pageTableBase + pageTable.count {
            let missing = signAndExponent - pageTableBase - pageTable.count + 1
            pageTable.append(contentsOf: repeatElement(0, count: missing))
        }
        pageTable[signAndExponent - pageTableBase] = UInt16(slot + 1)
    }

    /// The value reported for `bucket` of the page with `key`: the bucket's midpoint, clamped to
    /// the range of the finite values recorded.
    func representative(key: Int16, bucket: Int) -> Double {
        let exponent = Swift.abs(Int(key)) - Self.keyBias
        let magnitude: Double
        if exponent >= -1063 {
            // (1 + (bucket + ½) / 2^K) × 2^e, exact: it needs K + 2 significant bits and, down to
            // e = −1063, is a multiple of the smallest subnormal.
            magnitude = Double(
                sign: .plus, exponent: exponent - Self.precisionBits - 1,
                significand: Double(2 * (Self.bucketsPerPage + bucket) + 1))
        } else {
            // Deep subnormals: the bucket is at most as wide as the spacing of doubles there, so
            // it holds at most one representable value — the first multiple of 2^−1074 at or
            // above the bucket's lower bound. Report that rather than a rounded midpoint.
            // Lower bound (1 + bucket / 2^K) × 2^e, in units of 2^−1074: an exact Double below 2^11.
            let lowerBoundInUnits = Double(
                sign: .plus, exponent: exponent - Self.precisionBits + 1074,
                significand: Double(Self.bucketsPerPage + bucket))
            magnitude = Double(sign: .plus, exponent: -1074, significand: Self.roundedUp(lowerBoundInUnits))
        }
        let value = key < 0 ? -magnitude : magnitude
        return Swift.min(Swift.max(value, finiteMinimum), finiteMaximum)
    }

    /// `high × 2^64 + low`, correctly rounded to a Double.
    static func roundedToDouble(high: UInt64, low: UInt64) -> Double {
        guard high != 0 else { return Double(low) }
        // Keep the top 64 bits and fold the discarded ones into a sticky bit: 64 bits leave
        // enough room below the 53 significant ones for the rounding to be correct.
        let excess = 64 - high.leadingZeroBitCount  // 1...64
        var top = (high << UInt64(64 - excess)) | (low >> UInt64(excess))
        let discarded = excess == 64 ? low : low & ((1 << UInt64(excess)) - 1)
        if discarded != 0 { top |= 1 }
        return Double(sign: .plus, exponent: excess, significand: Double(top))
    }

    // MARK: Logarithms for log-scale bins (the standard library has none)

    /// log2(x) for a finite x > 0, to within a few ulps.
    static func binaryLogarithm(_ x: Double) -> Double {
        // x = m × 2^k with m in [√½, √2): log2(x) = k + ln(m) / ln 2, and
        // ln(m) = 2 atanh(z) = 2 (z + z³/3 + z⁵/5 + …) with z = (m − 1)/(m + 1), |z| < 0.172.
        var k = Double(x.exponent)
        var m = x.significand
        if m > 1.414_213_562_373_095_1 {  // √2 (a literal: `squareRoot()` calls libm in debug builds)
            m /= 2
            k += 1
        }
        let z = (m - 1) / (m + 1)
        let zSquared = z * z
        var power = z
        var series = 0.0
        var denominator = 1.0
        while true {
            let next = series + power / denominator
            if next == series { break }
            series = next
            power *= zSquared
            denominator += 2
        }
        return k + 2 * series / naturalLogarithmOf2
    }

    /// 2^y for a finite y, to within a few ulps (0 or ∞ beyond the range of Double).
    static func binaryExponential(_ y: Double) -> Double {
        if y < -1100 { return 0 }
        if y > 1100 { return .infinity }
        // 2^y = 2^k × e^(f ln 2) with k = ⌊y⌋ and f in [0, 1), the exponential by its Taylor series.
        let k = -roundedUp(-y)
        let t = (y - k) * naturalLogarithmOf2
        var term = 1.0
        var series = 1.0
        var n = 1.0
        while true {
            term *= t / n
            let next = series + term
            if next == series { break }
            series = next
            n += 1
        }
        return Double(sign: .plus, exponent: Int(k), significand: series)
    }

    static let naturalLogarithmOf2 = 0.693_147_180_559_945_309_417_232_121_458

    /// ⌈x⌉ for |x| < 2^62. `Double.rounded(_:)` calls libm's `ceil`/`floor`, which a module that
    /// imports neither Foundation nor Glibc does not link against on Linux; an integer
    /// conversion (which truncates toward zero) needs no library.
    static func roundedUp(_ x: Double) -> Double {
        let truncated = Double(Int64(x))
        return truncated < x ? truncated + 1 : truncated
    }

    // MARK: Introspection (for tests and diagnostics)

    /// Pages allocated (one per sign and binary exponent seen).
    var pageCount: Int { pageKeys.count }

    /// Bytes allocated for the pages, the directory and the page table (capacity, not count).
    var storageBytes: Int {
        words.capacity * MemoryLayout<UInt64>.stride
            + pageKeys.capacity * MemoryLayout<Int16>.stride
            + pageOffsets.capacity * MemoryLayout<Int>.stride
            + pageTable.capacity * MemoryLayout<UInt16>.stride
    }

    // MARK: Equatable

    /// Two histograms are equal when they hold the same logical contents: the same counts in the
    /// same buckets, the same exact minimum, maximum and sum. Histograms that recorded the same
    /// multiset of values compare equal whatever the order of recording or merging; the
    /// allocation order of pages and the page table play no part.
    public static func == (lhs: ValueHistogram, rhs: ValueHistogram) -> Bool {
        guard lhs.totalCount == rhs.totalCount,
              lhs.nans == rhs.nans,
              lhs.zeros == rhs.zeros,
              lhs.positiveInfinities == rhs.positiveInfinities,
              lhs.negativeInfinities == rhs.negativeInfinities,
              lhs.finiteMinimum == rhs.finiteMinimum,
              lhs.finiteMaximum == rhs.finiteMaximum,
              lhs.pageKeys == rhs.pageKeys
        else { return false }
        return lhs.words.withUnsafeBufferPointer { left in
            rhs.words.withUnsafeBufferPointer { right in
                for index in lhs.pageKeys.indices {
                    let leftPage = left[lhs.pageOffsets[index]..<lhs.pageOffsets[index] + pageStride]
                    let rightPage = right[rhs.pageOffsets[index]..<rhs.pageOffsets[index] + pageStride]
                    if !leftPage.elementsEqual(rightPage) { return false }
                }
                return true
            }
        }
    }
}
