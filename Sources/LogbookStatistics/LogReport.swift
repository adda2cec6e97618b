import Logbook
import Foundation

/// Renders ``LogStatistics`` as the single HTML page of `logbook report`.
///
/// The page is self-contained: its styles, charts (inline SVG) and scripts are all inline, and a
/// Content-Security-Policy forbids any network access when it is viewed. Every piece of text that
/// comes from the logs (templates, logger names, messages, issues) and the title are escaped;
/// the only scripts are the report's own, and they never insert text as HTML. The output only
/// depends on its arguments, and its size is bounded whatever the input (see `Limits`).
public enum LogReport {
    /// One self-contained HTML page (no network at view time: no external scripts, styles, fonts
    /// or images).
    ///
    /// - Parameters:
    ///   - statistics: what to show.
    ///   - title: the page's title (escaped; "Logbook report" when empty).
    ///   - generatedNanoseconds: when the report was made (nanoseconds since the Unix epoch),
    ///     shown in the footer; the page has no other notion of "now".
    public static func html(_ statistics: LogStatistics, title: String, generatedNanoseconds: Int64) -> String {
        render(statistics, title: title, generatedNanoseconds: generatedNanoseconds, extraScript: nil)
    }

    /// ``html(_:title:generatedNanoseconds:)`` with, for tests only, one more script run after the
    /// error trap and before the report's own script (to prove that the trap reports errors).
    static func render(
        _ statistics: LogStatistics, title: String, generatedNanoseconds: Int64, extraScript: String?
    ) -> String {
        var renderer = Renderer(statistics: statistics, title: title, generatedNanoseconds: generatedNanoseconds)
        renderer.renderPage(extraScript: extraScript)
        return renderer.out
    }

    /// What keeps the page's size bounded.
    enum Limits {
        /// Rows of the groups table.
        static let groups = 50
        /// Call sites whose arguments get percentiles and histograms.
        static let argumentSites = 20
        /// Argument positions shown per call site.
        static let argumentsPerSite = 8
        /// Columns of the timeline charts (adjacent buckets are summed beyond).
        static let timelineColumns = 600
        /// Histogram bins asked of ``ValueHistogram/bins(maximum:)``.
        static let histogramBins = 40
        static let errors = 100
        static let issues = 100
        /// Loggers listed per call site.
        static let loggersPerGroup = 5
        /// Characters (grapheme clusters) kept of a template, name, location or issue.
        static let nameCharacters = 400
        /// Characters kept of an error's first message.
        static let messageCharacters = 1_500
    }

    /// Fill colors per level, indexed like ``LogStatistics/levelNames`` (CSS custom properties
    /// `--trace` … `--critical`; the same everywhere on the page).
    static let levelColors = ["#a1a7b0", "#64809b", "#2f7de1", "#0f9f90", "#f0a000", "#e03b3b", "#7b2fbf"]
    static let otherLevelColor = "#c4c8ce"
}

// MARK: - Timeline downsampling

extension LogReport {
    /// Adjacent timeline buckets summed into one chart column.
    struct TimelineColumn: Equatable {
        /// The column's time range (nanoseconds since the epoch), a multiple of its width: the
        /// buckets in it may cover less of it (first and last column).
        var startNanoseconds: Int64
        var endNanoseconds: Int64
        /// Records per level (always 7 entries, indexed like ``LogStatistics/levelNames``).
        var levelCounts: [UInt64]

        var total: UInt64 { levelCounts.reduce(0, saturatingAdd) }
    }

    /// A timeline as drawn: consecutive columns of `bucketsPerColumn` buckets each.
    struct DownsampledTimeline: Equatable {
        var columns: [TimelineColumn]
        var bucketsPerColumn: Int64
        var columnNanoseconds: Int64
        /// Start of the first bucket and end of the last one.
        var firstNanoseconds: Int64
        var endNanoseconds: Int64
    }

    /// Buckets per column tried in turn (then doubling): with 1 s or 60 s buckets, columns of
    /// round durations (5 min, 20 min, 1 h, 6 h, 1 d …).
    static let columnFactors: [Int64] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 120, 180, 240, 360, 720, 1_440]

    /// Sums adjacent buckets into at most `maxColumns` columns: the fewest buckets per column
    /// among ``columnFactors``, the columns aligned on multiples of their width (so that they
    /// start on round UTC times). Buckets are placed by their start time, so gaps stay gaps and
    /// the column count is bounded even if buckets are not consecutive. Nil when empty.
    static func downsample(
        _ timeline: [LogStatistics.TimeBucket], bucketNanoseconds: Int64, maxColumns: Int
    ) -> DownsampledTimeline? {
        guard !timeline.isEmpty else { return nil }
        let width = max(1, bucketNanoseconds)
        let maxColumns = Int64(max(1, maxColumns))
        let indices = timeline.map { floorDivide($0.startNanoseconds, width) }
        let low = indices.min()!, high = indices.max()!
        func columnsNeeded(_ factor: Int64) -> Int64 {
            let (difference, overflow) = floorDivide(high, factor).subtractingReportingOverflow(floorDivide(low, factor))
            return overflow ? .max : saturatingAdd(difference, 1)
        }
        var factors = columnFactors.makeIterator()
        var factor: Int64 = 1
        while columnsNeeded(factor) > maxColumns, factor < .max {
            factor = factors.next() ?? (factor > .max / 2 ? .max : factor * 2)
        }
        let columnWidth = saturatingMultiply(width, factor)
        let firstColumn = floorDivide(low, factor)
        let count = Int(min(columnsNeeded(factor), maxColumns))
        var counts = [[UInt64]](repeating: [UInt64](repeating: 0, count: LogStatistics.levelNames.count), count: count)
        for (bucket, index) in zip(timeline, indices) {
            let column = min(Int(floorDivide(index, factor) - firstColumn), count - 1)
            for (level, value) in bucket.levelCounts.prefix(LogStatistics.levelNames.count).enumerated() {
                counts[column][level] = saturatingAdd(counts[column][level], value)
            }
        }
        let base = saturatingMultiply(firstColumn, columnWidth)
        let columns = counts.enumerated().map { column, levelCounts in
            let start = saturatingAdd(base, saturatingMultiply(Int64(column), columnWidth))
            return TimelineColumn(
                startNanoseconds: start, endNanoseconds: saturatingAdd(start, columnWidth), levelCounts: levelCounts)
        }
        return DownsampledTimeline(
            columns: columns, bucketsPerColumn: factor, columnNanoseconds: columnWidth,
            firstNanoseconds: saturatingMultiply(low, width),
            endNanoseconds: saturatingAdd(saturatingMultiply(high, width), width))
    }

    /// Division rounding toward minus infinity (`divisor` > 0).
    static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? quotient - 1 : quotient
    }

    static func saturatingSubtract(_ a: Int64, _ b: Int64) -> Int64 {
        let (difference, overflow) = a.subtractingReportingOverflow(b)
        return overflow ? (b < 0 ? .max : .min) : difference
    }

    static func saturatingMultiply(_ a: Int64, _ b: Int64) -> Int64 {
        let (product, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? ((a < 0) == (b < 0) ? .max : .min) : product
    }

    static func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    static func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }
}
