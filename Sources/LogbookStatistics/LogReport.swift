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

// MARK: - Escaping

extension LogReport {
    /// `text` made safe as HTML text or as a double- or single-quoted attribute value: markup
    /// characters become references; control characters other than tab and line breaks become a
    /// visible `\x1B` (in a highlighted span when `markup`, which is only for element content;
    /// plain text otherwise), noncharacters U+FFFD. Cut to `limit` grapheme clusters (with "…")
    /// when given, so that no emoji or combined character is split.
    static func escape(_ text: String, limit: Int? = nil, markup: Bool = true) -> String {
        var source = Substring(text)
        var truncated = false
        if let limit, let end = text.index(text.startIndex, offsetBy: limit, limitedBy: text.endIndex),
            end != text.endIndex
        {
            source = text[..<end]
            truncated = true
        }
        var out = ""
        out.reserveCapacity(source.utf8.count + 16)
        for scalar in source.unicodeScalars {
            switch scalar.value {
            case 0x26: out += "&amp;"
            case 0x3C: out += "&lt;"
            case 0x3E: out += "&gt;"
            case 0x22: out += "&quot;"
            case 0x27: out += "&#39;"
            case 0x09, 0x0A, 0x0D: out.unicodeScalars.append(scalar)
            case 0x00...0x1F, 0x7F...0x9F:
                let digits = String(scalar.value, radix: 16, uppercase: true)
                let code = "\\x" + (digits.count < 2 ? "0" : "") + digits
                out += markup ? "<span class=\"ctl\">\(code)</span>" : code
            case 0xFDD0...0xFDEF: out += "\u{FFFD}"
            case let value where value & 0xFFFE == 0xFFFE: out += "\u{FFFD}"  // U+xFFFE, U+xFFFF
            default: out.unicodeScalars.append(scalar)
            }
        }
        if truncated { out += "…" }
        return out
    }

    /// User text for an HTML cell: escaped, isolated from the surrounding text's direction
    /// (right-to-left names or stray bidi controls cannot reorder the page around them).
    static func userText(_ text: String, limit: Int = Limits.nameCharacters) -> String {
        "<bdi>\(escape(text, limit: limit))</bdi>"
    }

    /// A template with its `{}` placeholders highlighted (after escaping, which leaves braces
    /// alone, so the markup added cannot come from the text).
    static func templateText(_ template: String) -> String {
        let escaped = escape(template, limit: Limits.nameCharacters)
        return "<bdi>" + escaped.replacingOccurrences(of: "{}", with: "<span class=\"ph\">{}</span>") + "</bdi>"
    }
}

// MARK: - Number, time and duration formatting

extension LogReport {
    /// Whether an argument's stored type name denotes an integer type ("int", "int64", "uint8",
    /// "UInt32" …), whose values are shown without decimals.
    static func isIntegerType(_ type: String) -> Bool {
        var name = Substring(type.lowercased())
        if name.hasPrefix("u") { name = name.dropFirst() }
        guard name.hasPrefix("int") else { return false }
        return name.dropFirst(3).allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// `digits` (ASCII digits only) with a comma every three digits from the right.
    static func grouped(_ digits: String) -> String {
        let characters = Array(digits)
        var out = ""
        out.reserveCapacity(characters.count + characters.count / 3)
        for (index, character) in characters.enumerated() {
            if index > 0, (characters.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return out
    }

    /// A count with thousands separators: "1,234,567".
    static func count(_ value: UInt64) -> String { grouped(String(value)) }

    static func count(_ value: Int) -> String {
        value < 0 ? "-" + grouped(String(value.magnitude)) : grouped(String(value))
    }

    /// `value` rounded to `fractionDigits` decimals (0...9), trailing zeros dropped; locale
    /// independent. Falls back to ``scientific(_:)`` beyond 9e18 after scaling.
    static func fixed(_ value: Double, fractionDigits: Int, grouping: Bool = true) -> String {
        guard value.isFinite else { return special(value) }
        let digits = min(max(fractionDigits, 0), 9)
        var power: UInt64 = 1
        for _ in 0..<digits { power *= 10 }
        let scaled = (abs(value) * Double(power)).rounded()
        guard scaled < 9e18 else { return scientific(value) }
        let units = UInt64(scaled)
        let integerPart = String(units / power)
        var text = grouping ? grouped(integerPart) : integerPart
        if digits > 0 {
            var fraction = String(units % power)
            fraction = String(repeating: "0", count: digits - fraction.count) + fraction
            while fraction.last == "0" { fraction.removeLast() }
            if !fraction.isEmpty { text += "." + fraction }
        }
        return (value < 0 && units != 0 ? "-" : "") + text
    }

    /// "1.235e-7": four significant digits and a decimal exponent.
    static func scientific(_ value: Double) -> String {
        guard value.isFinite else { return special(value) }
        guard value != 0 else { return "0" }
        let magnitude = abs(value)
        var exponent = Int(log10(magnitude).rounded(.down))
        var mantissa = magnitude / pow(10, Double(exponent))
        if (mantissa * 1000).rounded() >= 10_000 {
            exponent += 1
            mantissa = magnitude / pow(10, Double(exponent))
        } else if mantissa < 1 {
            exponent -= 1
            mantissa = magnitude / pow(10, Double(exponent))
        }
        guard mantissa.isFinite else { return "\(value)" }
        return (value < 0 ? "-" : "") + fixed(mantissa, fractionDigits: 3, grouping: false) + "e" + String(exponent)
    }

    /// Infinities and NaN as text.
    static func special(_ value: Double) -> String {
        value.isNaN ? "NaN" : (value < 0 ? "-∞" : "∞")
    }

    /// A real number with about four significant digits: "0.01235", "12.35", "1,235", "123,457";
    /// scientific beyond 1e15 and below 1e-4.
    static func real(_ value: Double) -> String {
        guard value.isFinite else { return special(value) }
        guard value != 0 else { return "0" }
        let magnitude = abs(value)
        if magnitude >= 1e15 || magnitude < 1e-4 { return scientific(value) }
        if magnitude >= 1000 { return fixed(value, fractionDigits: 0) }
        let exponent = Int(log10(magnitude).rounded(.down))
        return fixed(value, fractionDigits: max(0, 3 - exponent))
    }

    /// An argument's value: integer types without decimals (values of the histogram are
    /// approximations, rounded here), others with about four significant digits.
    static func value(_ value: Double, integer: Bool) -> String {
        guard value.isFinite else { return special(value) }
        guard integer else { return real(value) }
        return abs(value) < 1e15 ? fixed(value, fractionDigits: 0) : scientific(value)
    }

    /// A short axis label: "0.5", "250", "1.5k", "20M".
    static func compact(_ value: Double, integer: Bool) -> String {
        guard value.isFinite else { return special(value) }
        let magnitude = abs(value)
        for (size, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] where magnitude >= size {
            let scaled = value / size
            if abs(scaled) >= 1000 { return scientific(value) }
            return fixed(scaled, fractionDigits: abs(scaled) >= 100 ? 0 : abs(scaled) >= 10 ? 1 : 2, grouping: false)
                + suffix
        }
        return integer ? fixed(value, fractionDigits: 0) : real(value)
    }

    /// A share in percent: "12.3%", "<0.1%".
    static func percent(_ part: UInt64, of whole: UInt64) -> String {
        guard whole > 0 else { return "–" }
        let share = Double(part) / Double(whole) * 100
        if part > 0, share < 0.1 { return "<0.1%" }
        return fixed(share, fractionDigits: 1) + "%"
    }

    /// A duration for people: "350 ms", "12.5 s", "4 min 10 s", "3 h 0 min", "2 d 4 h".
    static func duration(nanoseconds: Int64) -> String {
        let ns = nanoseconds.magnitude
        if ns < 1_000 { return "\(ns) ns" }
        if ns < 1_000_000 { return real(Double(ns) / 1e3) + " µs" }
        if ns < 1_000_000_000 { return real(Double(ns) / 1e6) + " ms" }
        if ns < 60_000_000_000 { return real(Double(ns) / 1e9) + " s" }
        let seconds = ns / 1_000_000_000
        func join(_ major: String, _ minor: UInt64, _ unit: String) -> String {
            minor == 0 ? major : "\(major) \(minor) \(unit)"
        }
        if seconds < 3_600 { return join("\(seconds / 60) min", seconds % 60, "s") }
        if seconds < 86_400 { return join("\(seconds / 3_600) h", seconds % 3_600 / 60, "min") }
        return join("\(count(seconds / 86_400)) d", seconds % 86_400 / 3_600, "h")
    }

    /// A bucket width after "per": "minute", "5 minutes", "30 seconds", "hour", "250 ms".
    static func perWidth(nanoseconds: Int64) -> String {
        guard nanoseconds > 0 else { return "bucket" }
        let units: [(Int64, String, String)] = [
            (86_400_000_000_000, "day", "days"), (3_600_000_000_000, "hour", "hours"),
            (60_000_000_000, "minute", "minutes"), (1_000_000_000, "second", "seconds"),
            (1_000_000, "millisecond", "milliseconds"), (1_000, "microsecond", "microseconds"),
            (1, "nanosecond", "nanoseconds"),
        ]
        for (size, one, many) in units where nanoseconds % size == 0 {
            let amount = nanoseconds / size
            return amount == 1 ? one : "\(count(Int(amount))) \(many)"
        }
        return "\(nanoseconds) nanoseconds"
    }

    /// A UTC calendar time, computed without Foundation's calendars (no locale or time zone).
    struct UTCTime {
        var year: Int64, month: Int, day: Int, hour: Int, minute: Int, second: Int, nanosecond: Int

        init(nanoseconds: Int64) {
            var (seconds, nanos) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
            if nanos < 0 { seconds -= 1; nanos += 1_000_000_000 }
            var (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
            if secondOfDay < 0 { days -= 1; secondOfDay += 86_400 }
            // Days since 1970-01-01 to a proleptic Gregorian date: the one calendar of Logbook.
            let date = CivilDate.date(days: days)
            (year, month, day) = (date.year, Int(date.month), Int(date.day))
            hour = Int(secondOfDay / 3_600)
            minute = Int(secondOfDay % 3_600 / 60)
            second = Int(secondOfDay % 60)
            nanosecond = Int(nanos)
        }

        /// "2024-05-01"
        var date: String {
            let yearText = year < 0 ? "-" + pad(Int(year.magnitude), 4) : pad(Int(year), 4)
            return "\(yearText)-\(pad(month, 2))-\(pad(day, 2))"
        }

        /// "12:34", "12:34:56" or "12:34:56.789" (the fraction truncated, never rounded up).
        func clock(seconds: Bool = true, fractionDigits: Int = 0) -> String {
            var text = "\(pad(hour, 2)):\(pad(minute, 2))"
            if seconds { text += ":\(pad(second, 2))" }
            if seconds, fractionDigits > 0 {
                let digits = min(fractionDigits, 9)
                var divisor = 1
                for _ in digits..<9 { divisor *= 10 }
                text += "." + pad(nanosecond / divisor, digits)
            }
            return text
        }

        /// RFC 3339 in UTC: "2024-05-01T12:34:56.789Z".
        func rfc3339(fractionDigits: Int = 3) -> String {
            "\(date)T\(clock(fractionDigits: fractionDigits))Z"
        }

        private func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
    }

    static func rfc3339(_ nanoseconds: Int64, fractionDigits: Int = 3) -> String {
        UTCTime(nanoseconds: nanoseconds).rfc3339(fractionDigits: fractionDigits)
    }

    /// 1, 2 or 5 times a power of ten, at least `raw` (and at least 1 when `integral`).
    static func niceStep(_ raw: Double, integral: Bool) -> Double {
        guard raw.isFinite, raw > 0 else { return 1 }
        let power = pow(10, log10(raw).rounded(.down))
        let fraction = raw / power
        let step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power
        return integral ? max(1, step.rounded(.up)) : step
    }
}

// MARK: - Page rendering

extension LogReport {
    /// Builds the page into `out`, one section after the other.
    struct Renderer {
        let statistics: LogStatistics
        let title: String
        let generatedNanoseconds: Int64
        /// Whether every record is of the same UTC day: tables then show times of day only.
        let sameDay: Bool
        /// The timeline as drawn (nil when it has no buckets).
        let timeline: DownsampledTimeline?
        var out = ""

        init(statistics: LogStatistics, title: String, generatedNanoseconds: Int64) {
            self.statistics = statistics
            let trimmed = title.trimmingCharacters(in: .whitespacesAndNewlines)
            self.title = trimmed.isEmpty ? "Logbook report" : trimmed
            self.generatedNanoseconds = generatedNanoseconds
            if let first = statistics.firstNanoseconds, let last = statistics.lastNanoseconds {
                sameDay = UTCTime(nanoseconds: first).date == UTCTime(nanoseconds: last).date
            } else {
                sameDay = true
            }
            timeline = downsample(
                statistics.timeline, bucketNanoseconds: statistics.bucketNanoseconds, maxColumns: Limits.timelineColumns)
            out.reserveCapacity(256 * 1024)
        }

        mutating func renderPage(extraScript: String?) {
            out += """
                <!DOCTYPE html>
                <html lang="en">
                <head>
                <meta charset="utf-8">
                <meta name="viewport" content="width=device-width, initial-scale=1">
                <meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
                <meta name="generator" content="Logbook">
                <title>\(escape(title, limit: 200, markup: false)) · Logbook report</title>
                <script>\(errorTrapScript)</script>
                <style>\(styleSheet)</style>
                </head>
                <body>

                """
            renderHeader()
            out += "<main class=\"wrap\">\n"
            renderIssues()
            renderTimeline()
            renderGroups()
            renderArguments()
            renderErrors()
            out += "</main>\n"
            out += """
                <footer class="wrap">Generated by Logbook at \(rfc3339(generatedNanoseconds)) · all times are UTC</footer>
                <pre id="script-errors"></pre>

                """
            if let extraScript { out += "<script>\(extraScript)</script>\n" }
            out += "<script>\n\(timelineDataScript())\n\(mainScript)</script>\n</body>\n</html>\n"
        }

        // MARK: Header

        mutating func renderHeader() {
            let s = statistics
            out += "<header class=\"top\"><div class=\"wrap\">\n"
            out += "<div class=\"eyebrow\">Logbook report</div>\n<h1>\(userText(title, limit: 200))</h1>\n"
            if let first = s.firstNanoseconds, let last = s.lastNanoseconds {
                out += """
                    <p class="span"><time>\(rfc3339(first))</time> <span class="arrow">→</span> \
                    <time>\(rfc3339(last))</time> <span class="muted">(\(duration(nanoseconds: LogReport.saturatingSubtract(last, first))))</span></p>

                    """
            } else {
                out += "<p class=\"span muted\">No records</p>\n"
            }
            // Summary cards.
            let errorRecords = s.levelCounts.dropFirst(5).prefix(2).reduce(0, saturatingAdd)
            let groupNoun = switch s.grouping {
            case .site: "Call sites"
            case .logger: "Loggers"
            case .level: "Levels"
            }
            var cards: [(String, String, String)] = [
                ("Records", count(s.records), ""),
                ("Average rate", s.records == 0 ? "–" : real(averageRate) + "/s", ""),
                (groupNoun, count(s.groups.count), ""),
                ("Errors + critical", count(errorRecords), errorRecords > 0 ? " bad" : ""),
            ]
            if !s.issues.isEmpty { cards.append(("Issues", count(s.issues.count), " warn")) }
            out += "<div class=\"cards\">"
            for (label, value, modifier) in cards {
                out += "<div class=\"card\(modifier)\"><div class=\"card-label\">\(label)</div><div class=\"card-value\">\(value)</div></div>"
            }
            out += "</div>\n<div class=\"chips\" aria-label=\"Records per level\">"
            for (index, name) in LogStatistics.levelNames.enumerated() {
                let value = index < s.levelCounts.count ? s.levelCounts[index] : 0
                out += "<span class=\"chip lv-\(name)\(value == 0 ? " zero" : "")\"><i></i>\(name) <b>\(count(value))</b></span>"
            }
            if s.otherLevels > 0 {
                out += "<span class=\"chip lv-other\"><i></i>other <b>\(count(s.otherLevels))</b></span>"
            }
            out += "</div>\n</div></header>\n"
            out += """
                <nav class="wrap toc"><a href="#timeline">Timeline</a><a href="#groups">\(groupsHeading)</a>\
                \(showsArguments ? "<a href=\"#arguments\">Arguments</a>" : "")<a href="#errors">Errors</a></nav>

                """
        }

        /// Records per second over the whole span.
        var averageRate: Double { ratePerSecond(statistics.records) }

        /// ``LogStatistics/Group/rate(over:)``, computed in floating point so that extreme
        /// timestamps cannot overflow.
        func rate(of group: LogStatistics.Group) -> Double { ratePerSecond(group.count) }

        /// `count` per second between the first and the last record (`count` when no time passed).
        func ratePerSecond(_ count: UInt64) -> Double {
            guard let first = statistics.firstNanoseconds, let last = statistics.lastNanoseconds, last > first
            else { return Double(count) }
            return Double(count) / ((Double(last) - Double(first)) / 1e9)
        }

        /// Whether the page has an arguments section: always for call sites, otherwise only
        /// when some group has arguments (loggers and levels have none).
        var showsArguments: Bool {
            statistics.grouping == .site || statistics.groups.contains { !$0.arguments.isEmpty }
        }

        var groupsHeading: String {
            switch statistics.grouping {
            case .site: "Top call sites"
            case .logger: "Top loggers"
            case .level: "Records by level"
            }
        }

        // MARK: Issues

        mutating func renderIssues() {
            let issues = statistics.issues
            guard !issues.isEmpty else { return }
            out += """
                <section class="issues" role="alert">
                <h2>\(warningIcon)\(issues.count == 1 ? "1 issue" : "\(count(issues.count)) issues") while reading the logs</h2>
                <p>The numbers below leave out what could not be read.</p>
                <ul>
                """
            for issue in issues.prefix(Limits.issues) {
                out += "<li>\(userText(issue))</li>"
            }
            out += "</ul>\n"
            if issues.count > Limits.issues {
                out += "<p class=\"more\">\(count(issues.count - Limits.issues)) more not shown.</p>\n"
            }
            out += "</section>\n"
        }

        // MARK: Timeline

        mutating func renderTimeline() {
            let width = max(1, statistics.bucketNanoseconds)
            guard let timeline else {
                out += "<section id=\"timeline\">\n<h2>Records per \(perWidth(nanoseconds: width)) by level</h2>\n"
                out += "<p class=\"empty\">No records in the timeline.</p>\n</section>\n"
                return
            }
            let columns = timeline.columns, perColumn = timeline.bucketsPerColumn
            out += "<section id=\"timeline\">\n<h2>Records per \(perWidth(nanoseconds: timeline.columnNanoseconds)) by level</h2>\n"
            let buckets = statistics.timeline.count
            var note = "\(count(buckets)) bucket\(buckets == 1 ? "" : "s") of \(duration(nanoseconds: width))"
            if perColumn > 1 {
                let factor = count(Int(perColumn))
                note += ", summed \(factor) by \(factor) into \(count(columns.count)) bars"
            }
            out += "<p class=\"note\">\(note); times in UTC. Hover a bar for its counts.</p>\n"
            // Legend: the levels that occur (all of them when none does).
            let present = (0..<LogStatistics.levelNames.count).filter { level in columns.contains { $0.levelCounts[level] > 0 } }
            out += "<div class=\"legend\">"
            for level in present.isEmpty ? Array(0..<7) : present {
                out += "<span class=\"key\"><i style=\"background:var(--\(LogStatistics.levelNames[level]))\"></i>\(LogStatistics.levelNames[level])</span>"
            }
            out += "</div>\n"
            let span = TimeSpan(start: columns[0].startNanoseconds, columnNanoseconds: timeline.columnNanoseconds, columns: columns.count)
            out += "<div class=\"chart-box\">"
            out += timelineSVG(columns: columns, levels: [6, 5, 4, 3, 2, 1, 0], height: 300, span: span, label: "All levels")
            out += "</div>\n"
            // Errors are easily lost under the other levels: the severe ones again, on their own scale.
            let severe = [6, 5, 4].filter { level in columns.contains { $0.levelCounts[level] > 0 } }
            if !severe.isEmpty, severe.count < present.count {
                let names = severe.reversed().map { LogStatistics.levelNames[$0] }
                let joined = names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " and " + names.last!
                out += "<h3>Only \(joined), on their own scale</h3>\n"
                out += "<div class=\"chart-box\">"
                out += timelineSVG(columns: columns, levels: severe, height: 150, span: span, label: joined)
                out += "</div>\n"
            }
            out += "</section>\n"
        }

        /// The time range covered by the chart's columns (all `columnNanoseconds` wide).
        struct TimeSpan {
            var start: Int64
            var columnNanoseconds: Int64
            var columns: Int
            var end: Int64 {
                let (product, overflow) = columnNanoseconds.multipliedReportingOverflow(by: Int64(columns))
                return overflow ? .max : LogReport.saturatingAdd(start, product)
            }
        }

        /// A stacked bar chart of `levels` (bottom first) per column, with count and UTC time axes.
        func timelineSVG(columns: [TimelineColumn], levels: [Int], height: Int, span: TimeSpan, label: String) -> String {
            let width = 1200.0, left = 64.0, right = 30.0, top = 12.0, bottom = 44.0
            let plotWidth = width - left - right, plotHeight = Double(height) - top - bottom
            let baseline = top + plotHeight
            let maxTotal = columns.map { column in levels.reduce(0) { saturatingAdd($0, column.levelCounts[$1]) } }.max() ?? 0
            let step = niceStep(Double(max(maxTotal, 1)) / 4, integral: true)
            let axisTop = max(step, (Double(maxTotal) / step).rounded(.up) * step)
            let scale = plotHeight / axisTop
            let columnWidth = plotWidth / Double(columns.count)
            let gap = columnWidth >= 4 ? min(2, columnWidth * 0.2) : 0

            var svg = """
                <svg class="chart timeline" viewBox="0 0 \(Int(width)) \(height)" role="img" aria-label="\(label) per bar" \
                data-plot-left="\(left)" data-plot-width="\(plotWidth)" data-columns="\(columns.count)" \
                data-levels="\(levels.map(String.init).joined(separator: " "))">

                """
            // Count axis: grid lines and labels.
            var tick = 0.0
            while tick <= axisTop + step / 2 {
                let y = baseline - tick * scale
                svg += "<line class=\"grid\" x1=\"\(n(left))\" x2=\"\(n(left + plotWidth))\" y1=\"\(n(y))\" y2=\"\(n(y))\"/>"
                svg += "<text class=\"ylabel\" x=\"\(n(left - 8))\" y=\"\(n(y + 4))\">\(countLabel(tick))</text>\n"
                tick += step
            }
            svg += "<rect class=\"hover\" x=\"0\" y=\"\(n(top))\" width=\"0\" height=\"\(n(plotHeight))\" visibility=\"hidden\"/>\n"
            // One path per level: a rectangle per column, stacked on the levels below. A non-zero
            // count is at least one pixel tall, so that a single error stays visible.
            var stackTops = [Double](repeating: baseline, count: columns.count)
            for level in levels {
                var path = ""
                for (index, column) in columns.enumerated() {
                    let value = column.levelCounts[level]
                    guard value > 0 else { continue }
                    let bottomY = stackTops[index]
                    let heightY = min(max(Double(value) * scale, 1), bottomY - top)
                    guard heightY > 0 else { continue }
                    let x = left + Double(index) * columnWidth + gap / 2
                    path += "M\(n(x)) \(n(bottomY - heightY))h\(n(columnWidth - gap))V\(n(bottomY))H\(n(x))z"
                    stackTops[index] = bottomY - heightY
                }
                if !path.isEmpty {
                    svg += "<path class=\"bars\" fill=\"var(--\(LogStatistics.levelNames[level]))\" d=\"\(path)\"/>\n"
                }
            }
            svg += "<line class=\"axis\" x1=\"\(n(left))\" x2=\"\(n(left + plotWidth))\" y1=\"\(n(baseline))\" y2=\"\(n(baseline))\"/>\n"
            svg += timeAxis(span: span, left: left, plotWidth: plotWidth, baseline: baseline)
            svg += "</svg>\n"
            return svg
        }

        /// Ticks at round UTC times (the interval chosen so that labels are ~100 px apart), each
        /// labelled with its time of day, and its date under it when the date changes.
        func timeAxis(span: TimeSpan, left: Double, plotWidth: Double, baseline: Double) -> String {
            let start = span.start, end = span.end
            guard end > start else { return "" }
            let total = Double(end) - Double(start)
            let second: Int64 = 1_000_000_000
            let candidates: [Int64] = [
                1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1_800, 3_600, 7_200, 10_800, 21_600, 43_200,
                86_400, 172_800, 604_800, 1_209_600, 2_592_000, 7_776_000, 31_536_000,
            ]
            let maxLabels = max(2.0, (plotWidth / 100).rounded(.down))
            // Sub-second buckets: plain nanosecond steps.
            var interval = candidates.map { $0 * second }.first { total / Double($0) <= maxLabels }
                ?? Int64(min((total / maxLabels).rounded(.up), 9e18))
            if total / Double(second) < maxLabels, total / Double(second) < 2 {
                interval = Int64(max(1, niceStep(total / maxLabels, integral: true)))
            }
            guard interval > 0 else { return "" }
            let days = interval >= 86_400 * second
            var svg = ""
            // First tick: the first multiple of the interval at or after the start.
            var (quotient, remainder) = start.quotientAndRemainder(dividingBy: interval)
            if remainder > 0 { quotient += 1 }
            var tick = quotient.multipliedReportingOverflow(by: interval).partialValue
            var previousDate = ""
            var ticksDrawn = 0
            while tick <= end, ticksDrawn < 200 {
                let x = left + (Double(tick) - Double(start)) / total * plotWidth
                let time = UTCTime(nanoseconds: tick)
                let line1: String
                let line2: String
                if days {
                    line1 = String(time.date.dropFirst(5))
                    let year = String(time.year)
                    line2 = year == previousDate ? "" : year
                    previousDate = year
                } else {
                    line1 = interval < 60 * second
                        ? time.clock(seconds: true, fractionDigits: interval < second ? 3 : 0)
                        : time.clock(seconds: false)
                    line2 = time.date == previousDate ? "" : time.date
                    previousDate = time.date
                }
                svg += "<line class=\"tick\" x1=\"\(n(x))\" x2=\"\(n(x))\" y1=\"\(n(baseline))\" y2=\"\(n(baseline + 5))\"/>"
                svg += "<text class=\"xlabel\" x=\"\(n(x))\" y=\"\(n(baseline + 18))\">\(line1)</text>"
                if !line2.isEmpty {
                    svg += "<text class=\"xlabel date\" x=\"\(n(x))\" y=\"\(n(baseline + 35))\">\(line2)</text>"
                }
                svg += "\n"
                let (next, overflow) = tick.addingReportingOverflow(interval)
                if overflow { break }
                tick = next
                ticksDrawn += 1
            }
            return svg
        }

        /// For the tooltips (times in milliseconds): the first column's start and the columns'
        /// width, the first bucket's start and the last one's end, the counts per column.
        func timelineDataScript() -> String {
            guard let timeline, let first = timeline.columns.first else { return "var LOGBOOK_TIMELINE = null;" }
            var script = "var LOGBOOK_TIMELINE = {start: \(jsNumber(Double(first.startNanoseconds) / 1e6)), "
            script += "step: \(jsNumber(Double(timeline.columnNanoseconds) / 1e6)), "
            script += "first: \(jsNumber(Double(timeline.firstNanoseconds) / 1e6)), "
            script += "end: \(jsNumber(Double(timeline.endNanoseconds) / 1e6)), counts: ["
            for (index, column) in timeline.columns.enumerated() {
                if index > 0 { script += "," }
                script += column.total == 0 ? "0" : "[" + column.levelCounts.map(String.init).joined(separator: ",") + "]"
            }
            return script + "]};"
        }

        // MARK: Groups

        mutating func renderGroups() {
            let s = statistics
            let grouping = s.grouping
            out += "<section id=\"groups\">\n<h2>\(groupsHeading)</h2>\n"
            guard !s.groups.isEmpty else {
                out += "<p class=\"empty\">No records.</p>\n</section>\n"
                return
            }
            let shown = rankedGroups.prefix(Limits.groups)
            let showLevel = grouping != .level && shown.contains { $0.group.level != nil }
            out += "<p class=\"note\">Click a column heading to sort. Rates are per second over the whole span.</p>\n"
            out += "<div class=\"scroll\"><table class=\"data sortable wide\">\n<thead><tr>"
            out += "<th data-type=\"num\" class=\"num\">#</th>"
            switch grouping {
            case .site: out += "<th>Template</th><th>Location</th><th>Loggers</th>"
            case .logger: out += "<th>Logger</th>"
            case .level: out += "<th>Level</th>"
            }
            if showLevel { out += "<th>\(grouping == .site ? "Level" : "Most severe")</th>" }
            out += """
                <th data-type="num" class="num">Count</th><th data-type="num" class="num">Share</th>\
                <th data-type="num" class="num">Rate/s</th><th data-type="num">First</th><th data-type="num">Last</th></tr></thead>
                <tbody>

                """
            for (rank, group) in shown {
                out += "<tr><td class=\"num muted\" data-v=\"\(rank)\">\(rank)</td>"
                switch grouping {
                case .site:
                    out += "<td class=\"template\">\(templateText(group.name))</td>"
                    out += "<td class=\"location\">\(locationText(group.location, function: group.function))</td>"
                    out += "<td class=\"loggers\">\(loggersText(group.loggers))</td>"
                case .logger:
                    out += "<td class=\"template\">\(userText(group.name))</td>"
                case .level:
                    out += "<td data-v=\"\(levelRank(group.name))\">\(levelChip(group.name))</td>"
                }
                if showLevel {
                    out += group.level.map { "<td data-v=\"\(levelRank($0))\">\(levelChip($0))</td>" } ?? "<td data-v=\"-1\"></td>"
                }
                let share = s.records > 0 ? Double(group.count) / Double(s.records) * 100 : 0
                let rate = rate(of: group)
                out += """
                    <td class="num" data-v="\(group.count)">\(count(group.count))</td>\
                    <td class="num" data-v="\(jsNumber(share))"><span class="share-bar"><i style="width:\(n(min(100, share)))%"></i></span>\
                    \(percent(group.count, of: s.records))</td>\
                    <td class="num" data-v="\(jsNumber(rate))">\(real(rate))</td>\
                    \(timeCell(group.firstNanoseconds))\(timeCell(group.lastNanoseconds))</tr>

                    """
            }
            out += "</tbody></table></div>\n"
            if s.groups.count > Limits.groups {
                out += "<p class=\"more\">\(count(s.groups.count - Limits.groups)) more not shown.</p>\n"
            }
            out += "</section>\n"
        }

        /// The groups, most records first (ties in the model's order), with their 1-based rank.
        var rankedGroups: [(rank: Int, group: LogStatistics.Group)] {
            statistics.groups.enumerated()
                .sorted { $0.element.count != $1.element.count ? $0.element.count > $1.element.count : $0.offset < $1.offset }
                .enumerated().map { (rank: $0.offset + 1, group: $0.element.element) }
        }

        /// `file:line`, breakable after its slashes, and the function under it.
        func locationText(_ location: String?, function: String?) -> String {
            var text = location.map { location in
                let breakable = escape(location, limit: Limits.nameCharacters).replacingOccurrences(of: "/", with: "/<wbr>")
                return "<code><bdi>\(breakable)</bdi></code>"
            } ?? "<span class=\"muted\">–</span>"
            if let function, !function.isEmpty { text += "<div class=\"function\">\(userText(function))</div>" }
            return text
        }

        func loggersText(_ loggers: [String]) -> String {
            guard !loggers.isEmpty else { return "<span class=\"muted\">–</span>" }
            var text = loggers.prefix(Limits.loggersPerGroup).map { "<span class=\"logger\">\(userText($0, limit: 120))</span>" }
                .joined(separator: " ")
            if loggers.count > Limits.loggersPerGroup {
                text += " <span class=\"muted\">+\(count(loggers.count - Limits.loggersPerGroup)) more</span>"
            }
            return text
        }

        /// A table cell with a time: of day only when all records are of one day; in full in its
        /// tooltip; sorted by its nanoseconds.
        func timeCell(_ nanoseconds: Int64) -> String {
            let time = UTCTime(nanoseconds: nanoseconds)
            let text = sameDay ? time.clock(fractionDigits: 3) : "\(time.date) \(time.clock())"
            return "<td class=\"time\" data-v=\"\(nanoseconds)\" title=\"\(time.rfc3339(fractionDigits: 9))\">\(text)</td>"
        }

        /// 0 (trace) … 6 (critical), 7 for other level names.
        func levelRank(_ name: String) -> Int {
            LogStatistics.levelNames.firstIndex(of: name.lowercased()) ?? 7
        }

        func levelChip(_ name: String) -> String {
            let known = LogStatistics.levelNames.firstIndex(of: name.lowercased()).map { LogStatistics.levelNames[$0] }
            return "<span class=\"chip small lv-\(known ?? "other")\"><i></i>\(userText(name, limit: 40))</span>"
        }

        // MARK: Arguments

        mutating func renderArguments() {
            guard showsArguments else { return }
            let sites = rankedGroups.filter { !$0.group.arguments.isEmpty }
            out += "<section id=\"arguments\">\n<h2>Numeric arguments</h2>\n"
            guard !sites.isEmpty else {
                out += "<p class=\"empty\">No call site logged numeric arguments.</p>\n</section>\n"
                return
            }
            out += """
                <p class="note">Percentiles per argument position of the \(sites.count > Limits.argumentSites ? "top \(Limits.argumentSites) " : "")\
                call sites with numeric arguments, most records first (values within \
                \(real(ValueHistogram.relativeAccuracy * 100))% relative error). Histograms mark the median (p50) and p99.</p>

                """
            for (rank, site) in sites.prefix(Limits.argumentSites) {
                out += """
                    <article class="site">
                    <header><span class="rank">#\(rank)</span> \(site.level.map(levelChip) ?? "") \
                    <span class="template">\(templateText(site.name))</span>
                    <div class="site-meta">\(count(site.count)) records\
                    \(site.location.map { " · <code>\(userText($0))</code>" } ?? "")\
                    \(site.function.map { " · \(userText($0))" } ?? "")</div></header>
                    <div class="scroll"><table class="data args">
                    <thead><tr><th>Argument</th><th>Type</th><th class="num">Count</th><th class="num">Min</th>\
                    <th class="num">p50</th><th class="num">p90</th><th class="num">p99</th><th class="num">p99.9</th>\
                    <th class="num">Max</th><th class="num">Mean</th></tr></thead>
                    <tbody>

                    """
                let arguments = site.arguments.sorted { $0.position < $1.position }.prefix(Limits.argumentsPerSite)
                for argument in arguments {
                    let histogram = argument.histogram
                    let integer = isIntegerType(argument.type)
                    func cell(_ value: Double?) -> String {
                        "<td class=\"num\">\(value.map { LogReport.value($0, integer: integer) } ?? "<span class=\"muted\">–</span>")</td>"
                    }
                    let nan = histogram.nanCount > 0 ? "<div class=\"muted small\">NaN: \(count(histogram.nanCount))</div>" : ""
                    out += "<tr><td>\(argumentName(argument))</td><td><code>\(userText(argument.type, limit: 40))</code></td>"
                    out += "<td class=\"num\">\(count(histogram.count))\(nan)</td>"
                    out += cell(histogram.minimum)
                    for percentile in [50, 90, 99, 99.9] { out += cell(histogram.value(atPercentile: percentile)) }
                    out += cell(histogram.maximum)
                    // A mean is a real number even for integer arguments.
                    out += "<td class=\"num\">\(histogram.mean.map(real) ?? "<span class=\"muted\">–</span>")</td></tr>\n"
                }
                out += "</tbody></table></div>\n"
                if site.arguments.count > Limits.argumentsPerSite {
                    out += "<p class=\"more\">\(count(site.arguments.count - Limits.argumentsPerSite)) more arguments not shown.</p>\n"
                }
                out += "<div class=\"histograms\">\n"
                for argument in arguments { out += histogramFigure(argument) }
                out += "</div>\n</article>\n"
            }
            if sites.count > Limits.argumentSites {
                out += "<p class=\"more\">\(count(sites.count - Limits.argumentSites)) more call sites with numeric arguments not shown.</p>\n"
            }
            out += "</section>\n"
        }

        /// "took #1": the label the template gives the placeholder, and its position.
        func argumentName(_ argument: LogStatistics.ArgumentStatistics) -> String {
            let label = argument.label.trimmingCharacters(in: .whitespacesAndNewlines)
            let name = label.isEmpty ? "<span class=\"muted\">(no label)</span>" : "<b>\(userText(label, limit: 60))</b>"
            return "\(name) <span class=\"position\">#\(argument.position)</span>"
        }

        /// A histogram of one argument, captioned: bars per bin on the axis its bins ask for (log
        /// or linear; by bin index when the bounds do not fit it), count axis, p50 and p99 markers.
        func histogramFigure(_ argument: LogStatistics.ArgumentStatistics) -> String {
            let histogram = argument.histogram
            let integer = isIntegerType(argument.type)
            let bins = histogram.bins(maximum: Limits.histogramBins)
            let width = 560.0, height = 200.0, left = 56.0, right = 22.0, top = 34.0, bottom = 26.0
            let plotWidth = width - left - right, plotHeight = height - top - bottom
            let baseline = top + plotHeight
            let scale = HistogramScale(bins: bins, left: left, width: plotWidth)
            let axis = [HistogramScale.Mode.logarithmic: ", log scale", .index: ", by bin"][scale.mode] ?? ""
            let caption = "<figcaption>\(argumentName(argument)) <span class=\"muted\">· distribution\(axis)</span></figcaption>"
            guard !bins.bins.isEmpty else {
                return "<figure>\(caption)<p class=\"empty small\">No finite values to plot.</p></figure>\n"
            }

            let maxCount = bins.bins.map(\.count).max() ?? 0
            let step = niceStep(Double(max(maxCount, 1)) / 3, integral: true)
            let axisTop = max(step, (Double(maxCount) / step).rounded(.up) * step)
            var svg = "<svg class=\"chart histogram\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"Histogram\">\n"
            var tick = 0.0
            while tick <= axisTop + step / 2 {
                let y = baseline - tick / axisTop * plotHeight
                svg += "<line class=\"grid\" x1=\"\(n(left))\" x2=\"\(n(left + plotWidth))\" y1=\"\(n(y))\" y2=\"\(n(y))\"/>"
                svg += "<text class=\"ylabel\" x=\"\(n(left - 6))\" y=\"\(n(y + 4))\">\(countLabel(tick))</text>\n"
                tick += step
            }
            for (index, bin) in bins.bins.enumerated() {
                let (x0, x1) = scale.span(ofBin: index)
                let gap = x1 - x0 > 4 ? 1.0 : 0
                let barHeight = bin.count == 0 ? 0 : max(1, Double(bin.count) / axisTop * plotHeight)
                let tip = "\(value(bin.lowerBound, integer: integer)) – \(value(bin.upperBound, integer: integer)): \(count(bin.count)) values"
                // An invisible full-height target per bin so that even empty bins show their range.
                svg += "<g data-tip=\"\(escape(tip, markup: false))\"><rect class=\"hit\" x=\"\(n(x0))\" y=\"\(n(top))\" width=\"\(n(max(0.5, x1 - x0)))\" height=\"\(n(plotHeight))\"/>"
                if barHeight > 0 {
                    svg += "<rect class=\"hbar\" x=\"\(n(x0 + gap / 2))\" y=\"\(n(baseline - barHeight))\" width=\"\(n(max(0.5, x1 - x0 - gap)))\" height=\"\(n(barHeight))\"/>"
                }
                svg += "</g>\n"
            }
            svg += "<line class=\"axis\" x1=\"\(n(left))\" x2=\"\(n(left + plotWidth))\" y1=\"\(n(baseline))\" y2=\"\(n(baseline))\"/>\n"
            // Value axis; labels closer than 40 px to the previous one are left out.
            var lastLabel = -Double.infinity
            for value in scale.ticks(integer: integer) {
                guard let x = scale.x(value), x >= left - 0.5, x <= left + plotWidth + 0.5 else { continue }
                svg += "<line class=\"tick\" x1=\"\(n(x))\" x2=\"\(n(x))\" y1=\"\(n(baseline))\" y2=\"\(n(baseline + 4))\"/>"
                if x - lastLabel >= 40 {
                    svg += "<text class=\"xlabel\" x=\"\(n(x))\" y=\"\(n(baseline + 17))\">\(compact(value, integer: integer))</text>"
                    lastLabel = x
                }
                svg += "\n"
            }
            // Percentile markers, p50 on the first label row and p99 on the second.
            let markers: [(String, Double, String)] = [(50.0, "p50", "p50"), (99.0, "p99", "p99")].compactMap { percentile, name, cls in
                histogram.value(atPercentile: percentile).map { (name, $0, cls) }
            }
            for (row, (name, markerValue, cls)) in markers.enumerated() {
                guard let rawX = scale.x(markerValue) else { continue }
                let x = min(max(rawX, left), left + plotWidth)
                let y = top - 20 + Double(row) * 13
                let anchor = x > left + plotWidth * 0.6 ? "end" : "start"
                let dx = anchor == "end" ? -4.0 : 4.0
                svg += "<line class=\"marker \(cls)\" x1=\"\(n(x))\" x2=\"\(n(x))\" y1=\"\(n(y + 3))\" y2=\"\(n(baseline))\"/>"
                svg += "<text class=\"marker-label \(cls)\" text-anchor=\"\(anchor)\" x=\"\(n(x + dx))\" y=\"\(n(y + 4))\">\(name) \(value(markerValue, integer: integer))</text>\n"
            }
            svg += "</svg>"
            return "<figure>\(caption)\(svg)</figure>\n"
        }
    }
}

// MARK: - Histogram axis

extension LogReport {
    /// Maps values to x for a histogram: linear or log10 as the bins say, or evenly by bin index
    /// when their bounds cannot be placed on that axis (not finite, not positive on a log axis,
    /// or all equal).
    struct HistogramScale {
        enum Mode { case linear, logarithmic, index }

        let bins: [ValueHistogram.Bin]
        /// The axis used: as the bins ask when their bounds allow it.
        let mode: Mode
        let left: Double
        let width: Double
        /// Transformed ends of the axis.
        let low: Double
        let high: Double

        init(bins: ValueHistogram.Bins, left: Double, width: Double) {
            self.bins = bins.bins
            self.left = left
            self.width = width
            let bounds = bins.bins.flatMap { [$0.lowerBound, $0.upperBound] }
            let finite = bounds.allSatisfy(\.isFinite)
            let lower = bounds.min() ?? 0, upper = bounds.max() ?? 0
            if finite, bins.logarithmic, lower > 0, upper > lower {
                mode = .logarithmic
                (low, high) = (log10(lower), log10(upper))
            } else if finite, upper > lower {
                mode = .linear
                (low, high) = (lower, upper)
            } else {
                mode = .index
                (low, high) = (0, Double(bins.bins.count))
            }
        }

        private func transformed(_ value: Double) -> Double? {
            switch mode {
            case .linear: return value
            case .logarithmic: return value > 0 ? log10(value) : nil
            case .index:
                // Position within the bin holding the value (or the nearest end).
                guard !value.isNaN, let first = bins.first, let last = bins.last else { return nil }
                if value <= first.lowerBound { return 0 }
                if value >= last.upperBound { return Double(bins.count) }
                for (index, bin) in bins.enumerated() where value <= bin.upperBound {
                    let span = bin.upperBound - bin.lowerBound
                    let fraction = span.isFinite && span > 0 ? (value - bin.lowerBound) / span : 0.5
                    return Double(index) + min(max(fraction, 0), 1)
                }
                return Double(bins.count)
            }
        }

        /// The x of `value`, nil when it has none (NaN, or not positive on a log axis).
        func x(_ value: Double) -> Double? {
            guard value.isFinite || mode == .index, let t = transformed(value), t.isFinite else { return nil }
            return left + (t - low) / (high - low) * width
        }

        /// The x range of bin `index`.
        func span(ofBin index: Int) -> (Double, Double) {
            if mode == .index {
                let step = width / Double(max(1, bins.count))
                return (left + Double(index) * step, left + Double(index + 1) * step)
            }
            let bin = bins[index]
            let x0 = x(bin.lowerBound) ?? left, x1 = x(bin.upperBound) ?? left + width
            return (min(x0, x1), max(x0, x1))
        }

        /// Values to label: round numbers on a linear axis, powers of ten (with 2 and 5 times them
        /// over fewer than three decades) on a log axis, the ends and middle on an index axis.
        func ticks(integer: Bool) -> [Double] {
            switch mode {
            case .linear:
                let step = niceStep((high - low) / 5, integral: integer && high - low >= 5)
                var values: [Double] = []
                var value = (low / step).rounded(.up) * step
                while value <= high + step * 1e-9, values.count < 50 {
                    values.append(abs(value) < step * 1e-9 ? 0 : value)
                    value += step
                }
                return values
            case .logarithmic:
                let firstDecade = Int(low.rounded(.down)), lastDecade = Int(high.rounded(.up))
                let decades = lastDecade - firstDecade
                let stride = max(1, (decades + 5) / 6)
                let multiples: [Double] = decades < 3 ? [1, 2, 5] : [1]
                var values: [Double] = []
                for decade in Swift.stride(from: firstDecade, through: lastDecade, by: stride) {
                    for multiple in multiples {
                        let value = multiple * pow(10, Double(decade))
                        if log10(value) >= low - 1e-9, log10(value) <= high + 1e-9 { values.append(value) }
                    }
                }
                return values
            case .index:
                guard let first = bins.first, let last = bins.last else { return [] }
                let middle = bins[bins.count / 2].lowerBound
                return [first.lowerBound, middle, last.upperBound].filter(\.isFinite)
            }
        }
    }
}

// MARK: - Errors

extension LogReport.Renderer {
    mutating func renderErrors() {
        let errors = statistics.errors
        out += "<section id=\"errors\">\n<h2>Errors</h2>\n"
        guard !errors.isEmpty else {
            out += "<p class=\"empty ok\">No errors.</p>\n</section>\n"
            return
        }
        out += """
            <p class="note">Call sites that logged at error or critical level or attached an error, first occurrence first.</p>
            <div class="scroll"><table class="data sortable wide">
            <thead><tr><th>Level</th><th>Template</th><th>Location</th><th>Logger</th><th data-type="num" class="num">Count</th>\
            <th data-type="num">First</th><th>First message</th></tr></thead>
            <tbody>

            """
        for error in errors.prefix(LogReport.Limits.errors) {
            out += """
                <tr><td data-v="\(levelRank(error.level))">\(levelChip(error.level))</td>\
                <td class="template">\(LogReport.templateText(error.template))</td>\
                <td class="location">\(locationText(error.location, function: nil))</td>\
                <td class="loggers"><span class="logger">\(LogReport.userText(error.logger, limit: 120))</span></td>\
                <td class="num" data-v="\(error.count)">\(LogReport.count(error.count))</td>\(timeCell(error.firstNanoseconds))\
                <td class="message"><div>\(LogReport.userText(error.firstMessage, limit: LogReport.Limits.messageCharacters))</div></td></tr>

                """
        }
        out += "</tbody></table></div>\n"
        if errors.count > LogReport.Limits.errors {
            out += "<p class=\"more\">\(LogReport.count(errors.count - LogReport.Limits.errors)) more not shown.</p>\n"
        }
        out += "</section>\n"
    }
}

// MARK: - Small helpers

extension LogReport.Renderer {
    /// An SVG coordinate with at most one decimal.
    func n(_ value: Double) -> String { LogReport.fixed(value, fractionDigits: 1, grouping: false) }

    /// A number for a script or a `data-v` sort key ("Infinity", "NaN" included).
    func jsNumber(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return value == value.rounded() && abs(value) < 9e15 ? String(Int64(value)) : "\(value)"
    }

    func count(_ value: UInt64) -> String { LogReport.count(value) }
    /// A count axis label: "2,500", "25k".
    func countLabel(_ value: Double) -> String {
        value < 10_000 ? LogReport.fixed(value, fractionDigits: 0) : LogReport.compact(value, integer: true)
    }
    func count(_ value: Int) -> String { LogReport.count(value) }
    func real(_ value: Double) -> String { LogReport.real(value) }
    func value(_ value: Double, integer: Bool) -> String { LogReport.value(value, integer: integer) }
    func compact(_ value: Double, integer: Bool) -> String { LogReport.compact(value, integer: integer) }
    func percent(_ part: UInt64, of whole: UInt64) -> String { LogReport.percent(part, of: whole) }
    func duration(nanoseconds: Int64) -> String { LogReport.duration(nanoseconds: nanoseconds) }
    func perWidth(nanoseconds: Int64) -> String { LogReport.perWidth(nanoseconds: nanoseconds) }
    func rfc3339(_ nanoseconds: Int64) -> String { LogReport.rfc3339(nanoseconds) }
    func escape(_ text: String, limit: Int? = nil, markup: Bool = true) -> String {
        LogReport.escape(text, limit: limit, markup: markup)
    }
    func userText(_ text: String, limit: Int = LogReport.Limits.nameCharacters) -> String {
        LogReport.userText(text, limit: limit)
    }
    func templateText(_ template: String) -> String { LogReport.templateText(template) }
    func niceStep(_ raw: Double, integral: Bool) -> Double { LogReport.niceStep(raw, integral: integral) }
    func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 { LogReport.saturatingAdd(a, b) }
    func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 { LogReport.saturatingAdd(a, b) }

    /// A warning triangle, inline so that it needs no font.
    var warningIcon: String {
        ##"<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path d="M12 2 1 21h22L12 2z" fill="#d97706"/><path d="M11 9h2v6h-2zm0 8h2v2h-2z" fill="#fff"/></svg>"##
    }
}

// MARK: - Style sheet and scripts

extension LogReport.Renderer {
    /// Light theme, system fonts; the level colors as custom properties.
    var styleSheet: String {
        let levels = zip(LogStatistics.levelNames, LogReport.levelColors).map { "--\($0): \($1);" }.joined(separator: " ")
        return """

            :root { \(levels) --other: \(LogReport.otherLevelColor);
              --fg: #1d232b; --muted: #5e6773; --faint: #8a929c; --line: #dfe3e8; --panel: #ffffff; --page: #f4f6f8;
              --accent: #2563eb; --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace; }
            * { box-sizing: border-box; }
            html { -webkit-text-size-adjust: 100%; }
            body { margin: 0; background: var(--page); color: var(--fg);
              font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Liberation Sans", Arial, sans-serif; }
            .wrap { max-width: 1240px; margin: 0 auto; padding: 0 24px; }
            header.top { background: var(--panel); border-bottom: 1px solid var(--line); padding: 22px 0 18px; }
            .eyebrow { font-size: 12px; font-weight: 600; letter-spacing: .06em; text-transform: uppercase; color: var(--accent); }
            h1 { font-size: 26px; line-height: 1.2; margin: 4px 0 6px; overflow-wrap: anywhere; }
            h2 { font-size: 18px; margin: 0 0 4px; display: flex; align-items: center; gap: 8px; }
            h3 { font-size: 14px; margin: 18px 0 4px; color: var(--muted); font-weight: 600; }
            .span { margin: 0 0 14px; font-variant-numeric: tabular-nums; }
            .span time { font-family: var(--mono); font-size: 13px; }
            .arrow, .muted { color: var(--muted); }
            .small { font-size: 12px; }
            .cards { display: flex; flex-wrap: wrap; gap: 10px; margin-bottom: 14px; }
            .card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 150px; background: #fafbfc; }
            .card-label { font-size: 12px; color: var(--muted); }
            .card-value { font-size: 20px; font-weight: 650; font-variant-numeric: tabular-nums; }
            .card.bad .card-value { color: #c81e1e; }
            .card.warn { border-color: #f3c36b; background: #fffaeb; }
            .chips { display: flex; flex-wrap: wrap; gap: 6px; }
            .chip { --c: var(--other); display: inline-flex; align-items: center; gap: 6px; padding: 2px 10px 2px 8px;
              border-radius: 999px; border: 1px solid color-mix(in srgb, var(--c) 45%, white);
              background: color-mix(in srgb, var(--c) 10%, white); font-size: 13px; white-space: nowrap; }
            .chip i { width: 9px; height: 9px; border-radius: 50%; background: var(--c); display: inline-block; }
            .chip b { font-variant-numeric: tabular-nums; }
            .chip.zero { opacity: .55; }
            .chip.small { font-size: 12px; padding: 0 8px 0 6px; }
            \(LogStatistics.levelNames.map { ".lv-\($0) { --c: var(--\($0)); }" }.joined(separator: " ")) .lv-other { --c: var(--other); }
            nav.toc { display: flex; gap: 18px; padding-top: 12px; padding-bottom: 4px; font-size: 13px; }
            nav.toc a { color: var(--accent); text-decoration: none; }
            nav.toc a:hover { text-decoration: underline; }
            main section { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 18px 20px; margin: 14px 0; }
            section.issues { border-color: #f0b429; background: #fff8e6; }
            section.issues h2 { color: #8a4b00; }
            section.issues p { margin: 2px 0 8px; color: #6b4a12; }
            section.issues ul { margin: 0; padding-left: 20px; font-family: var(--mono); font-size: 12.5px; white-space: pre-wrap; overflow-wrap: anywhere; }
            .icon { width: 20px; height: 20px; flex: none; }
            .note { margin: 0 0 10px; color: var(--muted); font-size: 13px; }
            .more { margin: 8px 0 0; color: var(--muted); font-size: 13px; font-style: italic; }
            .empty { color: var(--muted); margin: 6px 0; }
            .empty.ok { color: #137333; font-weight: 600; }
            .legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12.5px; margin: 0 0 4px; }
            .legend .key { display: inline-flex; align-items: center; gap: 5px; }
            .legend i { width: 12px; height: 12px; border-radius: 2px; display: inline-block; }
            svg.chart { display: block; width: 100%; height: auto; overflow: visible; }
            .chart-box, figure { overflow-x: auto; overflow-y: hidden; }
            svg.timeline { min-width: 720px; }
            svg.histogram { min-width: 400px; }
            svg.chart text { font-size: 11px; fill: var(--muted); font-variant-numeric: tabular-nums; }
            svg.chart .ylabel { text-anchor: end; }
            svg.chart .xlabel { text-anchor: middle; }
            svg.chart .xlabel.date { fill: var(--faint); font-size: 10.5px; }
            svg.chart .grid { stroke: #eceff2; stroke-width: 1; }
            svg.chart .axis, svg.chart .tick { stroke: #9aa3ad; stroke-width: 1; }
            svg.chart .bars { shape-rendering: crispEdges; }
            svg.chart .hover { fill: rgba(37, 99, 235, .10); }
            svg.chart .hit { fill: transparent; }
            svg.chart .hbar { fill: #6277d6; }
            svg.chart g[data-tip]:hover .hbar { fill: #3a4fb8; }
            svg.chart .marker { stroke-width: 1.5; stroke-dasharray: 4 3; }
            svg.chart .marker.p50 { stroke: #1d232b; }
            svg.chart .marker.p99 { stroke: #d32f2f; }
            svg.chart text.marker-label { font-weight: 600; font-size: 11.5px; }
            svg.chart text.marker-label.p50 { fill: #1d232b; }
            svg.chart text.marker-label.p99 { fill: #d32f2f; }
            .scroll { overflow-x: auto; }
            table.data { width: 100%; border-collapse: collapse; font-size: 13px; }
            table.data.wide { min-width: 940px; }
            table.data.args { min-width: 680px; }
            table.data th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; padding: 6px 8px;
              border-bottom: 2px solid var(--line); white-space: nowrap; position: relative; }
            table.data td { padding: 6px 8px; border-bottom: 1px solid #eef0f3; vertical-align: top; }
            table.data tbody tr:hover td { background: #f7f9fc; }
            table.data .num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
            table.sortable th[tabindex] { cursor: pointer; user-select: none; }
            table.sortable th[tabindex]:hover { color: var(--fg); }
            table.sortable th[aria-sort="ascending"]::after { content: " ▲"; font-size: 9px; }
            table.sortable th[aria-sort="descending"]::after { content: " ▼"; font-size: 9px; }
            td.template { min-width: 220px; max-width: 420px; overflow-wrap: anywhere; font-family: var(--mono); font-size: 12.5px; }
            .ph { color: var(--accent); background: #eaf1fe; border-radius: 3px; padding: 0 1px; }
            td.location { max-width: 260px; overflow-wrap: break-word; }
            code { font-family: var(--mono); font-size: 12px; }
            .function { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
            td.loggers { max-width: 200px; }
            .logger { display: inline-block; background: #f0f2f5; border-radius: 4px; padding: 0 5px; margin: 1px 0;
              font-size: 12px; overflow-wrap: break-word; max-width: 100%; }
            td.time { font-family: var(--mono); font-size: 12px; white-space: nowrap; color: #39414b; }
            .share-bar { display: inline-block; width: 44px; height: 6px; margin-right: 8px; vertical-align: middle;
              background: #e6ebf2; border-radius: 3px; overflow: hidden; }
            .share-bar i { display: block; height: 100%; min-width: 1px; background: #5b8def; }
            .ctl { color: #b42318; background: #fdecea; border-radius: 3px; padding: 0 2px; font-family: var(--mono); font-size: .9em; }
            td.message div { font-family: var(--mono); font-size: 12px; line-height: 1.4; white-space: pre-wrap; overflow-wrap: anywhere;
              max-height: 8.4em; overflow: auto; max-width: 440px; }
            article.site { border-top: 1px solid var(--line); padding-top: 14px; margin-top: 14px; }
            article.site header { margin-bottom: 8px; }
            article.site .rank { color: var(--faint); font-weight: 600; }
            article.site header .template { font-family: var(--mono); font-size: 13.5px; font-weight: 600; overflow-wrap: anywhere; }
            .site-meta { color: var(--muted); font-size: 12.5px; margin-top: 2px; overflow-wrap: anywhere; }
            .position { color: var(--faint); font-size: 12px; }
            .histograms { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 420px), 1fr)); gap: 12px 28px; margin-top: 12px; }
            figure { margin: 0; }
            figcaption { font-size: 12.5px; margin-bottom: 2px; }
            footer { color: var(--muted); font-size: 12px; padding-top: 6px; padding-bottom: 28px; }
            #script-errors { margin: 0 24px 24px; padding: 10px; border: 2px solid #d32f2f; background: #fff0f0; color: #8b0000; white-space: pre-wrap; }
            #script-errors:empty { display: none; }
            #tooltip { position: fixed; z-index: 10; pointer-events: none; background: #1f2630; color: #fff; border-radius: 6px;
              padding: 7px 10px; font-size: 12px; line-height: 1.5; box-shadow: 0 4px 14px rgba(0,0,0,.25); max-width: 340px; }
            #tooltip .tip-head { font-weight: 600; margin-bottom: 2px; }
            #tooltip .tip-row { display: flex; align-items: center; gap: 6px; }
            #tooltip .tip-row i { width: 9px; height: 9px; border-radius: 2px; display: inline-block; }
            #tooltip .tip-row b { margin-left: auto; padding-left: 14px; font-variant-numeric: tabular-nums; }
            #tooltip .tip-total { border-top: 1px solid rgba(255,255,255,.25); margin-top: 3px; padding-top: 2px; }
            @media (max-width: 1000px) { svg.timeline text { font-size: 15px; } svg.timeline .xlabel.date { font-size: 14px; } }
            @media (max-width: 720px) { .wrap { padding: 0 12px; } main section { padding: 14px 12px; } h1 { font-size: 21px; } }

            """
    }

    /// The first script of the page: every later script error (or unhandled rejection) is
    /// appended to `<pre id="script-errors">`, held back until that element exists.
    var errorTrapScript: String {
        #"""

        (function () {
          "use strict";
          var pending = [];
          function record(text) {
            var box = document.getElementById("script-errors");
            if (box) { box.textContent += text + "\n"; } else { pending.push(text); }
          }
          window.onerror = function (message, source, line, column, error) {
            var where = line ? " (line " + line + (column ? ":" + column : "") + ")" : "";
            record(String(message) + where + (error && error.stack ? "\n" + error.stack : ""));
            return false;
          };
          window.addEventListener("unhandledrejection", function (event) {
            record("Unhandled rejection: " + String(event.reason));
          });
          document.addEventListener("DOMContentLoaded", function () { pending.splice(0).forEach(record); });
        })();

        """#
    }

    /// Sorting of `table.sortable` by a click on a heading, and tooltips: per column of the
    /// timeline charts, per bin of the histograms. Text only ever goes in through `textContent`.
    /// Marks the page ready (`data-ready="1"` on the body) as its last statement.
    var mainScript: String {
        let names = LogStatistics.levelNames.map { "\"\($0)\"" }.joined(separator: ",")
        return #"""
        (function () {
          "use strict";
          var LEVELS = [\#(names)];

          // Sortable tables: numbers by their data-v, text case-insensitively; first click on a
          // number sorts descending, on text ascending; the rank column restores the order.
          function sortKey(cell, numeric) {
            var value = cell ? cell.getAttribute("data-v") : null;
            if (numeric) { var number = parseFloat(value !== null ? value : cell ? cell.textContent : ""); return isNaN(number) ? -Infinity : number; }
            return (value !== null ? value : cell ? cell.textContent : "").trim().toLowerCase();
          }
          function sortTable(table, column, heading) {
            var numeric = heading.getAttribute("data-type") === "num";
            var current = heading.getAttribute("aria-sort");
            var ascending = current ? current === "descending" : !numeric || column === 0;
            var body = table.tBodies[0];
            var rows = Array.prototype.map.call(body.rows, function (row, index) {
              return { row: row, key: sortKey(row.cells[column], numeric), index: index };
            });
            rows.sort(function (a, b) {
              if (a.key < b.key) return ascending ? -1 : 1;
              if (a.key > b.key) return ascending ? 1 : -1;
              return a.index - b.index;
            });
            rows.forEach(function (entry) { body.appendChild(entry.row); });
            Array.prototype.forEach.call(heading.parentNode.cells, function (cell) { cell.removeAttribute("aria-sort"); });
            heading.setAttribute("aria-sort", ascending ? "ascending" : "descending");
          }
          Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
            if (!table.tHead || !table.tBodies.length) return;
            Array.prototype.forEach.call(table.tHead.rows[0].cells, function (heading, column) {
              heading.tabIndex = 0;
              heading.title = "Sort";
              heading.addEventListener("click", function () { sortTable(table, column, heading); });
              heading.addEventListener("keydown", function (event) {
                if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(table, column, heading); }
              });
            });
          });

          // Tooltip.
          var tip = document.createElement("div");
          tip.id = "tooltip";
          tip.setAttribute("role", "tooltip");
          tip.hidden = true;
          document.body.appendChild(tip);
          function element(tag, className, text) {
            var node = document.createElement(tag);
            if (className) node.className = className;
            if (text !== undefined) node.textContent = text;
            tip.appendChild(node);
            return node;
          }
          function place(event) {
            tip.hidden = false;
            var x = event.clientX + 14, y = event.clientY + 14;
            if (x + tip.offsetWidth > window.innerWidth - 4) x = event.clientX - 14 - tip.offsetWidth;
            if (y + tip.offsetHeight > window.innerHeight - 4) y = event.clientY - 14 - tip.offsetHeight;
            tip.style.left = Math.max(4, x) + "px";
            tip.style.top = Math.max(4, y) + "px";
          }
          function utc(ms) { return new Date(ms).toISOString().replace("T", " ").replace(/\.000Z$|Z$/, ""); }
          function formatCount(n) { return n.toLocaleString("en-US"); }

          // Timeline: the column under the pointer, its time range and counts per level.
          var hovered = null;
          function clearHover() { if (hovered) { hovered.setAttribute("visibility", "hidden"); hovered = null; } }
          function timelineTip(svg, event) {
            var data = window.LOGBOOK_TIMELINE;
            var matrix = svg.getScreenCTM();
            if (!data || !matrix) return false;
            var point = svg.createSVGPoint();
            point.x = event.clientX; point.y = event.clientY;
            point = point.matrixTransform(matrix.inverse());
            var left = parseFloat(svg.getAttribute("data-plot-left")), width = parseFloat(svg.getAttribute("data-plot-width"));
            var columns = parseInt(svg.getAttribute("data-columns"), 10);
            var index = Math.floor((point.x - left) / width * columns);
            if (!(index >= 0 && index < columns)) return false;
            var hover = svg.querySelector(".hover");
            if (hover) {
              hover.setAttribute("x", String(left + index * width / columns));
              hover.setAttribute("width", String(width / columns));
              hover.setAttribute("visibility", "visible");
              if (hovered !== hover) clearHover();
              hovered = hover;
            }
            var start = data.start + index * data.step, end = Math.min(start + data.step, data.end);
            start = Math.max(start, data.first);
            var counts = data.counts[index] || [0, 0, 0, 0, 0, 0, 0];
            var levels = svg.getAttribute("data-levels").split(" ").map(Number).sort(function (a, b) { return b - a; });
            tip.textContent = "";
            element("div", "tip-head", utc(start) + " – " + utc(end).slice(11) + " UTC");
            var total = 0;
            levels.forEach(function (level) {
              total += counts[level];
              if (!counts[level]) return;
              var row = element("div", "tip-row");
              var swatch = document.createElement("i");
              swatch.style.background = "var(--" + LEVELS[level] + ")";
              row.appendChild(swatch);
              row.appendChild(document.createTextNode(LEVELS[level]));
              var value = document.createElement("b");
              value.textContent = formatCount(counts[level]);
              row.appendChild(value);
            });
            var totalRow = element("div", "tip-row tip-total", "total");
            var totalValue = document.createElement("b");
            totalValue.textContent = formatCount(total);
            totalRow.appendChild(totalValue);
            place(event);
            return true;
          }

          document.addEventListener("mousemove", function (event) {
            var target = event.target instanceof Element ? event.target : null;
            var chart = target && target.closest("svg.timeline");
            if (chart && timelineTip(chart, event)) return;
            clearHover();
            var tipped = target && target.closest("[data-tip]");
            if (tipped) {
              tip.textContent = tipped.getAttribute("data-tip");
              place(event);
              return;
            }
            tip.hidden = true;
          });
          document.addEventListener("mouseleave", function () { clearHover(); tip.hidden = true; });

          document.body.dataset.ready = "1";
        })();

        """#
    }
}
